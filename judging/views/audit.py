"""The audit page: a lead draws queries at random for the prediction-powered leaderboard and follows the audit."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import ngettext

from judging import selectors
from judging.access import Member, campaign_view
from judging.forms import AuditDrawForm
from judging.models import Campaign
from judging.selectors.calibration import model_judges
from judging.services import audit_draw


@campaign_view(lead=True)
def campaign_audit(request: HttpRequest, member: Member) -> HttpResponse:
    """GET: the audit's progress, its draws and drawn queries; POST: draw more queries (leads only)."""
    campaign = member.campaign
    form = AuditDrawForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            draw = audit_draw(
                campaign=campaign, size=form.cleaned_data["queries"], user=request.user, seed=form.cleaned_data["seed"]
            )
        except ValidationError as exc:
            form.add_error("queries", exc.messages)
        else:
            messages.success(
                request,
                ngettext("%(n)d query drawn for the audit.", "%(n)d queries drawn for the audit.", draw.size)
                % {"n": draw.size},
            )
            return redirect("judging:campaign_audit", slug=campaign.slug)
    state = selectors.audit_state(campaign=campaign)
    context = member.context(
        nav="audit",
        form=form,
        state=state,
        draws=selectors.audit_draws(campaign=campaign),
        queries=selectors.audit_queries(campaign=campaign),
        judges=[j["name"] for j in model_judges(campaign=campaign)],
        queue_audit=campaign.queue_mode == Campaign.QueueMode.AUDIT,
        left=state.total - state.drawn.size,
    )
    return render(request, "judging/campaign_audit.html", context, status=422 if request.method == "POST" else 200)
