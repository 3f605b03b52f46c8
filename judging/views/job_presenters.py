"""How a job is shown on the pages: its progress, what Retry offers, a finished import's summary."""

from __future__ import annotations

from django.utils.formats import number_format

from judging.access import job_access
from judging.jobs import job_can_retry, job_rate, job_refresh, policy_job_pending
from judging.models import Campaign, Job, User
from judging.services import ImportSummary


def job_percent(job: Job) -> int:
    """How far the job is, for its progress bar."""
    if job.status == Job.Status.DONE or not job.total:
        return 100 if job.status == Job.Status.DONE else 0
    return min(100, int(100 * job.done / job.total))


def job_rate_shown(job: Job) -> str:
    """A running job's pace for its page (lines a second for an import), grouped by thousands; empty before it
    has done anything."""
    rate = job_rate(job)
    return "" if rate is None else number_format(round(rate), force_grouping=True)


def job_retry_offered(job: Job, user: User) -> bool:
    """Whether the page shows Retry: the job can run again and this user may ask for it."""
    return job_can_retry(job) and job_access(job=job, user=user, action="retry")


def import_summary_lines(job: Job) -> list[str]:
    """A finished import's summary in the reader's language: the lines the upload page shows for a file
    imported at once (what was added, the source account created, labels left alone, stubs, pairs)."""
    if job.status != Job.Status.DONE or not job.is_import or not isinstance(job.result, dict):
        return []
    return ImportSummary.from_dict(job.result).lines()


def job_context(job: Job, user: User) -> dict:
    """What the job's status partial (judging/_job_status.html) needs."""
    return {
        "job": job,
        "percent": job_percent(job),
        "rate": job_rate_shown(job),
        "can_retry": job_retry_offered(job, user),
        "summary_lines": import_summary_lines(job),
    }


def policy_job_context(campaign: Campaign) -> dict:
    """The policy switch under way, if any, for a page to show (its status partial polls the job)."""
    job = policy_job_pending(campaign=campaign)
    if job is None:
        return {"policy_job": None}
    job = job_refresh(job)
    return {"policy_job": job, "percent": job_percent(job), "can_retry": False}
