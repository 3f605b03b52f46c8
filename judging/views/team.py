"""A lead's team pages: who is given which queries (assignments), the campaign's jobs, and the budget planner."""

from __future__ import annotations

import re

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_http_methods

from judging.access import Member, campaign_view, may_manage_assignments, signed_in
from judging.models import Membership, QueryTag
from judging.scoring.plan import DEFAULTS, campaign_plan, plan_params
from judging.selectors.assignments import assignments_list
from judging.selectors.jobs_list import campaign_jobs, job_row
from judging.selectors.pace import pace_medians
from judging.services.assignments import assignments_add, assignments_remove, queries_of_batch
from judging.views.paging import page_of

JOBS_PER_PAGE = 50


def _errors(exc: ValidationError) -> list[str]:
    if hasattr(exc, "error_dict"):
        return [f"{field}: {m}" if field != "__all__" else m for field, ms in exc.message_dict.items() for m in ms]
    return list(exc.messages)


def _batch(post: QueryDict) -> dict:
    """The batch a posted form names: qids (space or comma separated), a tag, or a range."""
    kind = post.get("batch", "qids")
    if kind == "tag":
        return {"tag": post.get("tag", "").strip()}
    if kind == "range":
        return {"qid_from": post.get("from", "").strip(), "qid_to": post.get("to", "").strip()}
    return {"qids": [q for q in re.split(r"[\s,]+", post.get("qids", "")) if q]}


ID_MAX = 2**63 - 1  # the largest id a 64-bit key holds (SQLite raised OverflowError past it: a 500)


def _ids(values: list[str]) -> list[int]:
    """The assignment ids a remove form posts (its checkboxes), or a ValidationError on ``ids`` for one that is
    not a whole number of the 64-bit range: the page never posts such a value, a hand-made request does."""
    bad = [v for v in values if not (v.isascii() and v.isdigit() and len(v) <= 19) or not 1 <= int(v) <= ID_MAX]
    if bad:
        raise ValidationError({"ids": _("%(value)s is not an assignment id") % {"value": repr(bad[0][:30])}})
    return [int(v) for v in values]


@campaign_view
@require_http_methods(["GET", "POST"])
def assignments(request: HttpRequest, member: Member) -> HttpResponse:
    """Leads give queries (a list, a tag, a range of qids) to annotators and take them back; an annotator
    sees the queries given to them."""
    campaign = member.campaign
    manage = may_manage_assignments(role=member.role)
    errors: list[str] = []
    status = 200
    if request.method == "POST":
        if not manage:
            raise PermissionDenied(_("Only the campaign's leads can give queries to annotators."))
        try:
            if request.POST.get("action") == "remove":
                ids = _ids(request.POST.getlist("ids"))
                removed = assignments_remove(campaign=campaign, ids=ids)
                messages.success(
                    request,
                    ngettext("%(n)d assignment taken back.", "%(n)d assignments taken back.", removed) % {"n": removed},
                )
            else:
                queries = queries_of_batch(campaign=campaign, **_batch(request.POST))
                added = assignments_add(
                    campaign=campaign,
                    by=signed_in(request.user),
                    annotator=request.POST.get("annotator", ""),
                    queries=queries,
                )
                messages.success(request, added.summary())
            return redirect("judging:assignments", slug=campaign.slug)
        except ValidationError as exc:
            errors = _errors(exc)
            status = 400 if "ids" in getattr(exc, "error_dict", {}) else 422
    rows = assignments_list(campaign=campaign, annotator_id=None if manage else request.user.pk)
    annotators = list(
        campaign.memberships.filter(role=Membership.Role.ANNOTATOR)
        .exclude(user__annotator_profile__kind="model")
        .order_by("user__username")
        .values_list("user__username", flat=True)
    )
    tags = list(
        QueryTag.objects.filter(query__campaign=campaign).order_by("tag").values_list("tag", flat=True).distinct()
    )
    return render(
        request,
        "judging/assignments.html",
        member.context(
            nav="assignments",
            rows=rows,
            manage=manage,
            annotators=annotators,
            tags=tags,
            errors=errors,
            posted=request.POST if errors else {},
        ),
        status=status,
    )


@campaign_view(lead=True)
@require_http_methods(["GET", "HEAD"])
def jobs_list(request: HttpRequest, member: Member) -> HttpResponse:
    """The campaign's jobs, newest first: imports, model runs, policy switches, significance tests."""
    page = page_of(request, campaign_jobs(campaign=member.campaign), JOBS_PER_PAGE)
    rows = [job_row(job) for job in page]
    return render(request, "judging/jobs.html", member.context(nav="jobs", page=page, rows=rows))


@campaign_view(lead=True)
@require_http_methods(["GET", "HEAD"])
def plan(request: HttpRequest, member: Member) -> HttpResponse:
    """The budget planner (judging.scoring.plan): queries, judgments and hours to tell two systems apart."""
    campaign = member.campaign
    errors: dict[str, list[str]] = {}
    result = None
    try:
        params = plan_params(request.GET)
    except ValidationError as exc:
        errors = exc.message_dict
    else:
        _medians, team = pace_medians(campaign)
        result = campaign_plan(campaign=campaign, params=params, seconds_per_judgment=team)
    values = {name: request.GET.get(name, "") or str(DEFAULTS[name]) for name in DEFAULTS}
    return render(
        request,
        "judging/plan.html",
        member.context(nav="progress", plan=result, errors=errors, values=values),
        status=400 if errors else 200,
    )
