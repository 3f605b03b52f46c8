"""Pages: one model judge's configuration (its prompt template, versioned, and its scale mapping), edited by
a lead in the browser."""

from __future__ import annotations

from datetime import datetime

from django import forms
from django.contrib import messages
from django.contrib.auth.models import User as Account
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods, require_POST

from judging.access import Member, campaign_view, signed_in
from judging.forms import AsciiIntegerField
from judging.judge_models import JudgeTemplate, answer_line
from judging.models import Campaign
from judging.selectors.calibration import UnknownJudge, model_judge_profile
from judging.selectors.judges import judge_templates
from judging.services.judge_templates import (
    TEMPLATE_MAX_CHARS,
    judge_template_current,
    judge_template_draft,
    judge_template_save,
    thresholds_parse,
)
from judging.views.leaderboard import BoardRequest, board_request, leaderboard_page


class JudgeTemplateForm(forms.Form):
    """A new version of the judge's prompt and scale mapping."""

    text = forms.CharField(
        label=gettext_lazy("Prompt (system message)"),
        widget=forms.Textarea(attrs={"rows": 18, "class": "jt-text", "spellcheck": "false"}),
        required=False,
        max_length=TEMPLATE_MAX_CHARS,
        strip=False,
        help_text=gettext_lazy("Empty: built afresh from the guidelines, the scale and examples."),
    )
    rebuild = forms.BooleanField(
        label=gettext_lazy("Rebuild from the guidelines, the scale and the campaign's human judgments with notes"),
        required=False,
    )
    scale_low = AsciiIntegerField(
        label=gettext_lazy("Model's lowest answer"), required=False, min_value=-1_000_000, max_value=1_000_000
    )
    scale_high = AsciiIntegerField(
        label=gettext_lazy("Model's highest answer"), required=False, min_value=-1_000_000, max_value=1_000_000
    )
    thresholds = forms.CharField(
        label=gettext_lazy("Thresholds"),
        required=False,
        max_length=500,
        help_text=gettext_lazy(
            "One per campaign grade above the lowest, ascending, separated by commas: an answer at least the "
            "i-th threshold gets the i-th grade above the lowest. Leave the scale empty for a model that "
            "answers in the campaign's grades."
        ),
    )

    def clean_thresholds(self) -> list[float]:
        try:
            return thresholds_parse(self.cleaned_data.get("thresholds") or "")
        except ValidationError as exc:
            raise forms.ValidationError(exc.message_dict["thresholds"]) from None


def _judge(member: Member, name: str) -> Account:
    try:
        return model_judge_profile(name=name, campaign=member.campaign).user
    except UnknownJudge as exc:
        raise Http404(str(exc)) from None


def _page(
    request: HttpRequest, ctx: BoardRequest, judge: Account, form: JudgeTemplateForm, status: int = 200
) -> HttpResponse:
    campaign = ctx.campaign
    current = _current_or_draft(campaign, judge)
    context = {
        "tab": "judges",
        "judge": judge.username,
        "current": current,
        "current_answer_line": answer_line(current),
        # the saved time as a datetime, for the date filter (the API's created_at is ISO text)
        "versions": [
            v | {"created": datetime.fromisoformat(v["created_at"])}
            for v in judge_templates(campaign=campaign, judge=judge)
        ],
        "mapping": _mapping_rows(current, list(campaign.grades.order_by("value").values_list("value", "name"))),
        "form": form,
        "api_url": reverse("api:campaign-judge-template", args=[campaign.slug, judge.username]),
        "calibration_url": reverse("judging:calibration", args=[campaign.slug, judge.username]),
        "keep": [],
    }
    return render(request, "judging/judge_detail.html", ctx.base(**context), status=status)


def _mapping_rows(current: JudgeTemplate | None, grades: list[tuple[int, str]]) -> list[tuple]:
    """(from, below, grade, name) per campaign grade under the current mapping; [] without one."""
    if current is None or current.scale_low is None:
        return []
    edges = [current.scale_low, *current.thresholds]
    ups = [*(f"< {t:g}" for t in current.thresholds), f"≤ {current.scale_high}"]
    return [(f"{e:g}", up, v, n) for e, up, (v, n) in zip(edges, ups, grades, strict=True)]


def _initial(current: JudgeTemplate | None) -> dict:
    if current is None:
        return {}
    return {
        "text": current.text,
        "scale_low": current.scale_low,
        "scale_high": current.scale_high,
        "thresholds": ", ".join(f"{t:g}" for t in current.thresholds),
    }


@require_http_methods(["GET", "HEAD"])
@leaderboard_page(drill=True)
def judge_detail(request: HttpRequest, ctx: BoardRequest, name: str) -> HttpResponse:
    """A model judge's prompt template: the current version, the form that saves a new one, and the history
    (leads only)."""
    judge = _judge(ctx.member, name)
    current = _current_or_draft(ctx.campaign, judge)
    return _page(request, ctx, judge, JudgeTemplateForm(initial=_initial(current)))


def _current_or_draft(campaign: Campaign, judge: Account) -> JudgeTemplate:
    """The judge's current template version, or (none saved yet) the unsaved draft of its first: a GET writes
    nothing (services.judge_templates.judge_template_draft)."""
    current = judge_template_current(campaign=campaign, judge=judge, create=False)
    return current if current is not None else judge_template_draft(campaign=campaign, judge=judge)


@campaign_view(lead=True)
@require_POST
def judge_template(request: HttpRequest, member: Member, name: str) -> HttpResponse:
    """Save a new version of the judge's template (leads only); a bad field re-shows the form with 400."""
    judge = _judge(member, name)
    form = JudgeTemplateForm(request.POST)
    if form.is_valid():
        d = form.cleaned_data
        try:
            saved, _created = judge_template_save(
                campaign=member.campaign,
                judge=judge,
                text=d["text"],
                rebuild=d["rebuild"],
                scale_low=d["scale_low"],
                scale_high=d["scale_high"],
                thresholds=d["thresholds"],
                user=signed_in(request.user),
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                for e in errors:
                    form.add_error(field if field in form.fields else None, e)
        else:
            messages.success(request, _("Prompt template version %(v)d is the current one.") % {"v": saved.version})
            return redirect("judging:judge_detail", slug=member.campaign.slug, name=judge.username)
    return _page(request, board_request(request, member), judge, form, status=400)
