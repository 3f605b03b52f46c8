"""The job page: live progress of a background import (htmx polls a partial) and its outcome."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from judging import selectors
from judging.access import Member, campaign_view
from judging.jobs import JobError, job_can_retry, job_get, job_retry
from judging.models import Job


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
    if job.status == Job.Status.DONE:
        # This process may hold the campaign's old pool size; the import ran in the worker.
        selectors.pool_size_forget(campaign=job.campaign)
    context = member.context(
        nav="upload",
        job=job,
        percent=int(100 * job.done / job.total) if job.total and job.status != Job.Status.DONE else 100,
        can_retry=job_can_retry(job),
    )
    template = "judging/_job_status.html" if request.htmx else "judging/job.html"
    return render(request, template, context)
