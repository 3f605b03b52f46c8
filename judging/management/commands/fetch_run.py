"""Fetch a snapshot of a system made of a live search engine: ask it every campaign query and store the run."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser
from tqdm import tqdm

from judging.engine_models import EngineSystem
from judging.jobs import JobError, engine_fetch_job_start, job_run
from judging.management.commands._base import CampaignCommand
from judging.models import Job


class Command(CampaignCommand):
    help = (
        "Ask the engine of the engine system NAME every query of the campaign (its concurrency and rate limit "
        "honoured), store the top hits as the next snapshot (the system NAME@N) and pool them. Queries that "
        "failed are listed with the reason; nothing is stored when the snapshot cannot be written whole."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the campaign's slug")
        parser.add_argument("--system", required=True, help="the engine system's name (made on the Engines page)")
        parser.add_argument("--background", action="store_true", help="queue it for the task worker instead")

    def handle(self, *args: Any, slug: str, system: str, background: bool, **options: Any) -> None:
        campaign = self.campaign(slug)
        found = EngineSystem.objects.select_related("engine").filter(campaign=campaign, name=system).first()
        if found is None:
            names = ", ".join(EngineSystem.objects.filter(campaign=campaign).values_list("name", flat=True))
            raise CommandError(f"no engine system {system!r} in campaign {slug!r} (it has: {names or 'none'})")
        try:
            job = engine_fetch_job_start(campaign=campaign, user=None, system=found, enqueue=background)
        except (ValueError, JobError) as exc:
            raise CommandError(str(exc)) from None
        if background:
            self.stdout.write(f"job {job.pk} queued: fetch of {system} ({job.total} queries)")
            return
        with tqdm(total=job.total, unit="queries", disable=options.get("verbosity", 1) < 1) as bar:
            job_run(job_id=job.pk, progress=bar.update)
        job.refresh_from_db()
        if job.status != Job.Status.DONE:
            raise CommandError((job.error or {}).get("detail", "the fetch failed"))
        r = job.result or {}
        self.stdout.write(
            f"snapshot {r['run']}: {r['ok']} of {r['queries']} queries answered, {r['failed']} failed; "
            f"{r['documents_added']} documents and {r['pairs_added']} pool pairs added "
            f"(median answer {r['answer_ms'] or 0:.1f} ms, {r['seconds']} s)"
        )
        for f in r.get("failures", []):
            self.stdout.write(f"  failed {f['qid']}: {f['reason']}")
