"""A campaign's jobs as its jobs list shows them: newest first, with who started them and how long they took."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from judging.models import Campaign, Job


def campaign_jobs(*, campaign: Campaign) -> QuerySet[Job]:
    """The campaign's jobs, newest first, without their uploads (one query a page)."""
    return (
        Job.objects.filter(campaign=campaign)
        .select_related("started_by")
        .defer("upload", "options", "result", "started_by__password")
        .order_by("-created_at", "-id")
    )


def job_seconds(job: Job) -> float | None:
    """How long a job ran (started to finished), or has been running; None before it starts."""
    if job.started_at is None:
        return None
    end = job.finished_at
    if end is None:
        end = timezone.now()
    return max(0.0, (end - job.started_at).total_seconds())


def job_row(job: Job) -> dict[str, Any]:
    """A job as the list shows it, for the API."""
    return {
        "id": job.pk,
        "kind": job.kind,
        "status": job.status,
        "filename": job.filename,
        "started_by": job.started_by.get_username() if job.started_by else None,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "seconds": job_seconds(job),
        "error": (job.error or {}).get("detail") if job.status == Job.Status.FAILED else None,
    }
