"""The job page: live progress of a background job (htmx polls a partial), its outcome, and Retry."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from judging import selectors
from judging.access import Member, campaign_view
from judging.jobs import JobError, job_get, job_retry
from judging.models import Job
from judging.views.http import HtmxHttpRequest
from judging.views.job_presenters import job_context


def job_nav(job: Job, member: Member) -> str:
    """The tab a job's page belongs under: an import under Upload, other work under Jobs (a lead's), and an
    annotator's significance test under the Leaderboard it came from."""
    if job.is_import:
        return "upload"
    return "jobs" if member.is_lead else "leaderboard"


@campaign_view
@require_http_methods(["GET", "POST"])
def job_detail(request: HtmxHttpRequest, member: Member, job_id: int) -> HttpResponse:
    """Shown to whom access.job_access lets read the job, Retry to whom it lets retry it; 404 for anyone else."""
    action = "retry" if request.method == "POST" else "read"
    try:
        job = job_get(job_id=job_id, user=request.user, action=action)
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
    context = member.context(nav=job_nav(job, member), **job_context(job, request.user))
    template = "judging/_job_status.html" if request.htmx else "judging/job.html"
    return render(request, template, context)
