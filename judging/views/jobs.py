"""The job page: live progress of a background import (htmx polls a partial) and its outcome."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from judging import selectors
from judging.access import Member, campaign_view
from judging.jobs import JobError, job_can_retry, job_get, job_percent, job_refresh, job_retry, policy_job_pending
from judging.models import Job
from judging.services import ImportSummary


@campaign_view
@require_http_methods(["GET", "POST"])
def job_detail(request, member: Member, job_id: int):
    """The lead who started the job and the campaign's leads see it; anyone else gets 404."""
    try:
        job = job_get(job_id=job_id, user=request.user)
    except Job.DoesNotExist:
        raise Http404(_("No such job.")) from None
    if job.campaign_id != member.campaign.pk:
        raise Http404(_("No such job."))
    if request.method == "POST":
        try:
            job_retry(job=job)
        except JobError as exc:
            messages.error(request, str(exc))
        return redirect("judging:job_detail", slug=member.campaign.slug, job_id=job.pk)
    if job.status == Job.Status.DONE and job.is_import:
        # This process may hold the campaign's old pool size; the import ran in the worker.
        selectors.pool_size_forget(campaign=job.campaign)
    context = member.context(
        nav="upload",
        job=job,
        percent=job_percent(job),
        can_retry=job_can_retry(job),
        summary_lines=import_summary_lines(job),
    )
    template = "judging/_job_status.html" if request.htmx else "judging/job.html"
    return render(request, template, context)


def import_summary_lines(job: Job) -> list[str]:
    """A finished import's summary in the reader's language: the lines the upload page shows for a file
    imported at once (what was added, the source account created, labels left alone, stubs, pairs)."""
    if job.status != Job.Status.DONE or not job.is_import or not isinstance(job.result, dict):
        return []
    return ImportSummary.from_dict(job.result).lines()


def policy_job_context(campaign) -> dict:
    """The policy switch under way, if any, for a page to show (its status partial polls the job)."""
    job = policy_job_pending(campaign=campaign)
    if job is None:
        return {"policy_job": None}
    job = job_refresh(job)
    return {"policy_job": job, "percent": job_percent(job), "can_retry": False}
