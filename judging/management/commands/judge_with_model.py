"""Grade a campaign's pooled pairs with an automatic judge behind an OpenAI-compatible endpoint."""

import os
import re
from typing import Any, TextIO, cast

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError, CommandParser
from django.urls import reverse
from tqdm import tqdm

from judging.jobs import job_run, model_judge_job_start
from judging.management.commands._base import CampaignCommand, site_link
from judging.models import Campaign, Job
from judging.services.judge_templates import (
    judge_template_current,
    judge_template_save,
    template_is_automatic,
    thresholds_parse,
)
from judging.services.model_client import API_KEY_ENV, ENDPOINT_ENV
from judging.services.model_judge import PAIR_MODES, model_judge_get_or_create


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

    def add_arguments(self, parser: CommandParser) -> None:
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
            "--repeat",
            type=int,
            default=1,
            help="ask each pair N times (self-consistency): the judgment is the majority grade, the N answers are "
            "kept and the calibration page shows how often the model agrees with itself (default 1)",
        )
        parser.add_argument(
            "--temperature",
            type=float,
            default=0.0,
            help="the sampling temperature sent to the endpoint (default 0; --repeat shows its effect)",
        )
        parser.add_argument(
            "--canary",
            type=int,
            nargs="?",
            const=10,
            default=0,
            metavar="N",
            help="after the pairs, ask about N (default 10) documents people graded not relevant, as they are and "
            "with the query's words inserted, and report how often the grade rises (never stored as documents); "
            "with --pairs none, only this",
        )
        parser.add_argument(
            "--scale",
            metavar="LOW-HIGH",
            help="the model answers on its own scale (e.g. 0-100): saved with --thresholds as a new version of the "
            "judge's prompt template before the run; answers off the scale leave their pairs unjudged",
        )
        parser.add_argument(
            "--thresholds",
            metavar="T1,T2,...",
            help="with --scale: one threshold per campaign grade above the lowest, ascending (0-100 onto 0/1/2: 34,67)",
        )
        parser.add_argument(
            "--background",
            action="store_true",
            help="queue the run for the task worker (manage.py db_worker) and return; its page shows the progress",
        )

    def handle(
        self,
        *args: object,
        slug: str,
        endpoint: str | None,
        model: str,
        name: str | None,
        description: str,
        pairs: str,
        seed: int,
        concurrency: int,
        timeout: float,
        retries: int,
        **opts: Any,
    ) -> None:
        """Run (or queue) the model judge on the campaign's pairs and print what it did.

        One function: a command's steps printed in the order they run (checks, the job, its outcome).
        """
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
        if opts.get("scale") or opts.get("thresholds"):
            self._mapping_save(campaign, name or model, description, opts.get("scale"), opts.get("thresholds"))
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
                repeat=opts["repeat"],
                temperature=opts["temperature"],
                canary=opts["canary"] or 0,
            )
        except (ValueError, ValidationError) as exc:
            raise CommandError(exc.messages[0] if isinstance(exc, ValidationError) else str(exc)) from None
        page = site_link(reverse("judging:job_detail", args=[campaign.slug, job.pk]))
        judge = job.options["judge"]
        if background:
            self.stdout.write(f"job {job.pk} queued: {job.total} pairs for {judge}; follow it at {page}")
            if os.environ.get(API_KEY_ENV):
                self.stdout.write(
                    f"  the worker calls the endpoint with the {API_KEY_ENV} of its own environment: a key is "
                    "never kept in a job, so set it where the worker runs"
                )
            return
        if not job.total and not job.options.get("canary"):
            Job.objects.filter(pk=job.pk).delete()
            self.stdout.write(f"{judge}: no pairs to judge ({pairs})")
            return
        # Run now, as every import command does, through the same job the worker would run (its page
        # shows the progress too, and a failed run can be retried there).
        stream = cast(TextIO, self.stderr._out)  # the command's stderr file, which tqdm writes to
        bar = tqdm(total=job.total, unit="pairs", file=stream, disable=job.total < 20)
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
        if r.get("off_scale"):
            self.stdout.write(f"  {r['off_scale']} answers off the model's scale: those pairs were left unjudged")
        if r.get("template"):
            self.stdout.write(f"  prompt template version {r['template']}")
        if r.get("repeat", 1) > 1:
            self.stdout.write(f"  each pair asked {r['repeat']} times: see the calibration page for self-consistency")
        c = r.get("canary")
        if c:
            could_rise = c.get("could_rise", c["compared"])  # a job finished before could_rise was counted
            self.stdout.write(
                f"  canary: the grade rose on {c['rose']} of {could_rise} non-relevant documents stuffed with "
                f"the query's words ({c['compared'] - could_rise} already at the top grade, {c['failed']} failed)"
            )
        for e in r.get("errors", []):
            self.stdout.write(f"  failed: {e}")
        if outcome["status"] == "failed":
            detail = (job.error or {}).get("detail", "the job failed")
            raise CommandError(f"{detail} (job {job.pk}: {page}); is the endpoint answering?")
        if r.get("failed"):
            self.stdout.write("  failed pairs got no judgment: run again with --pairs unjudged to retry them")

    def _mapping_save(
        self, campaign: Campaign, name: str, description: str, scale: str | None, thresholds: str | None
    ) -> None:
        """Save the model's scale and thresholds as a new template version (the text rebuilt when it was the
        automatic one, so that it asks for a number on the model's scale)."""
        found = re.fullmatch(r"(-?[0-9]{1,7})-(-?[0-9]{1,7})", (scale or "").strip())
        if not found:
            raise CommandError("--scale must be LOW-HIGH in whole numbers, e.g. 0-100 (and --thresholds needs it)")
        low, high = int(found.group(1)), int(found.group(2))
        try:
            values = thresholds_parse(thresholds or "")
            judge = model_judge_get_or_create(name=name, description=description, campaign=campaign)
            current = judge_template_current(campaign=campaign, judge=judge)
            saved, _created = judge_template_save(
                campaign=campaign,
                judge=judge,
                text=current.text if current else None,
                rebuild=current is None or template_is_automatic(campaign=campaign, template=current),
                scale_low=low,
                scale_high=high,
                thresholds=values,
                user=None,
            )
        except ValidationError as exc:
            if hasattr(exc, "error_dict"):
                option = {"scale_low": "--scale", "scale_high": "--scale", "thresholds": "--thresholds"}
                field, errors = next(iter(exc.message_dict.items()))
                raise CommandError(f"{option.get(field, '--' + field)}: {errors[0]}") from None
            raise CommandError(exc.messages[0]) from None
        self.stdout.write(f"{judge.get_username()}: prompt template version {saved.version}, scale {low}-{high}")
