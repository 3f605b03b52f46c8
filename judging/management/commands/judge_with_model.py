"""Grade a campaign's pooled pairs with an automatic judge behind an OpenAI-compatible endpoint."""

import os

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.urls import reverse
from tqdm import tqdm

from judging.jobs import job_run, model_judge_job_start
from judging.management.commands._base import CampaignCommand
from judging.models import Job
from judging.services.model_client import API_KEY_ENV, ENDPOINT_ENV
from judging.services.model_judge import PAIR_MODES


class Command(CampaignCommand):
    help = (
        "Ask a model (any OpenAI-compatible chat-completions endpoint) to grade the campaign's pooled pairs, "
        "with a prompt built from the guidelines, the query and its description, and the document. Its grades "
        f"are stored as the judgments of the model judge NAME, never as human labels. The endpoint comes from "
        f"--endpoint or {ENDPOINT_ENV}, the key from {API_KEY_ENV}; nothing is called unless one is set. "
        "It runs as a job (shown on the campaign's job page) right here, or in the task worker with --background: "
        "the job then carries the endpoint's address (never the key) to the worker, which sends its own "
        f"{API_KEY_ENV}."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug", help="the campaign's slug")
        parser.add_argument("--endpoint", help=f"base URL or .../chat/completions URL (default: ${ENDPOINT_ENV})")
        parser.add_argument("--model", required=True, help="the model name sent to the endpoint")
        parser.add_argument("--name", help="the judge's name as an annotator (default: the model name)")
        parser.add_argument("--description", default="", help="what to remember about this judge (prompt, model)")
        parser.add_argument("--pairs", default="unjudged", help=f"which pairs: {', '.join(PAIR_MODES)}")
        parser.add_argument("--seed", type=int, default=0, help="random seed of --pairs sample:N")
        parser.add_argument("--concurrency", type=int, default=8, help="requests in flight (default 8)")
        parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")
        parser.add_argument("--retries", type=int, default=4, help="retries of a failed request (default 4)")
        parser.add_argument(
            "--background",
            action="store_true",
            help="queue the run for the task worker (manage.py db_worker) and return; its page shows the progress",
        )

    def handle(
        self, *args, slug, endpoint, model, name, description, pairs, seed, concurrency, timeout, retries, **opts
    ):
        campaign = self.campaign(slug)
        if concurrency < 1 or retries < 0 or timeout <= 0:
            raise CommandError("--concurrency must be >= 1, --retries >= 0 and --timeout > 0")
        background = opts["background"]
        # The address this command sees: --endpoint, else its own environment's. A queued run hands it to the
        # task worker in the job (the worker's environment is not this shell's); the key never goes along.
        url = (endpoint or os.environ.get(ENDPOINT_ENV, "")).strip() or None
        if background and not url:
            raise CommandError(
                f"--background: no model endpoint to hand to the task worker. Pass --endpoint URL (the job keeps "
                f"the address, never a key) or set {ENDPOINT_ENV} for this command; the worker runs in its own "
                "environment, which this command cannot see"
            )
        try:
            job = model_judge_job_start(
                campaign=campaign,
                user=None,
                model=model,
                name=name,
                pairs=pairs,
                seed=seed,
                description=description,
                endpoint=url,
                concurrency=concurrency,
                timeout=timeout,
                retries=retries,
                enqueue=background,
            )
        except (ValueError, ValidationError) as exc:
            raise CommandError(exc.messages[0] if isinstance(exc, ValidationError) else str(exc)) from None
        page = reverse("judging:job_detail", args=[campaign.slug, job.pk])
        judge = job.options["judge"]
        if background:
            self.stdout.write(f"job {job.pk} queued: {job.total} pairs for {judge}; follow it at {page}")
            if os.environ.get(API_KEY_ENV):
                self.stdout.write(
                    f"  the worker calls the endpoint with the {API_KEY_ENV} of its own environment: a key is "
                    "never kept in a job, so set it where the worker runs"
                )
            return
        if not job.total:
            Job.objects.filter(pk=job.pk).delete()
            self.stdout.write(f"{judge}: no pairs to judge ({pairs})")
            return
        # Run now, as every import command does, through the same job the worker would run (its page
        # shows the progress too, and a failed run can be retried there).
        bar = tqdm(total=job.total, unit="pairs", file=self.stderr._out, disable=job.total < 20)
        try:
            outcome = job_run(job_id=job.pk, progress=bar.update)
        finally:
            bar.close()
        job.refresh_from_db()
        r = job.result or {}
        rate = r.get("pairs", 0) / r["seconds"] if r.get("seconds") else 0.0
        self.stdout.write(
            f"{judge}: {r.get('pairs', 0)} pairs in {r.get('seconds', 0):.1f} s ({rate:.0f} pairs/s): "
            f"{r.get('graded', 0)} graded, {r.get('unsure', 0)} unreadable answers stored as unsure, "
            f"{r.get('unchanged', 0)} unchanged, {r.get('failed', 0)} failed"
        )
        for e in r.get("errors", []):
            self.stdout.write(f"  failed: {e}")
        if outcome["status"] == "failed":
            raise CommandError(f"{job.error['detail']} (job {job.pk}: {page}); is the endpoint answering?")
        if r.get("failed"):
            self.stdout.write("  failed pairs got no judgment: run again with --pairs unjudged to retry them")
