"""Leads' pages for resolving and measuring judgments: the review queue, agreement and annotator quality."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_http_methods, require_POST

from judging import charts
from judging.access import Member, campaign_pair, campaign_view, signed_in
from judging.formats import DOCID_MAX_LENGTH, QID_MAX_LENGTH
from judging.forms import AsciiIntegerField
from judging.jobs import JobError, policy_job_start
from judging.models import Adjudication, AnnotatorProfile, Campaign, Judgment, Pair
from judging.scoring import LEADERBOARD_MEASURES, measure_names
from judging.selectors.agreement import (
    agreement_cached,
    annotator_quality,
    gold_pair_list,
    gold_pair_search,
    policy_stability,
    review_counts,
    review_pair_get,
    review_pair_list,
    review_reasons,
)
from judging.selectors.campaigns import grade_list
from judging.services import (
    adjudication_remove,
    adjudication_set,
    campaign_policy_set,
    gold_label_set,
    policy_switch_needs_job,
)
from judging.views.http import HtmxHttpRequest
from judging.views.job_presenters import policy_job_context
from judging.views.paging import page_of
from metrics import Measure
from metrics.measures import JUDGED

PAGE_SIZE = 50
KINDS = {
    "all": gettext_lazy("Unsure or disputed"),
    "unsure": gettext_lazy("Unsure"),
    "disputed": gettext_lazy("Disputed"),
    "model": gettext_lazy("Model judge disagrees"),
    "decided": gettext_lazy("Decided"),
}
STABILITY_K = 10
STABILITY_MEASURE = Measure("nDCG", STABILITY_K)
GOLD_SEARCH_LIMIT = 50


# --------------------------------------------------------------------------- helpers


def _back(request: HtmxHttpRequest, default: str) -> str:
    back = request.POST.get("back", "")
    if back and url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return back
    return default


def _without_page(request: HtmxHttpRequest) -> str:
    """The request's query string without ``page``, for the links of a paginator."""
    query = request.GET.copy()
    query.pop("page", None)
    return query.urlencode()


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _ci(pair: tuple[float, float]) -> str:
    low, high = pair
    return "" if not (math.isfinite(low) and math.isfinite(high)) else f"[{low:.2f}, {high:.2f}]"


def _pct(value: float | None) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.0%}"


# --------------------------------------------------------------------------- review queue


class ReviewFilter(forms.Form):
    kind = forms.ChoiceField(choices=list(KINDS.items()), required=False)
    q = forms.CharField(
        label=gettext_lazy("Query"),
        required=False,
        max_length=200,
        widget=forms.TextInput(attrs={"type": "search", "placeholder": gettext_lazy("qid or words of the query")}),
    )

    def values(self) -> tuple[str, str]:
        if not self.is_valid():
            return "all", ""
        return self.cleaned_data["kind"] or "all", self.cleaned_data["q"].strip()


class DecisionForm(forms.Form):
    grade = AsciiIntegerField()
    note = forms.CharField(required=False, max_length=5000)


@dataclass
class ReviewRow:
    """One pair of the review page with everything its card shows."""

    pair: Pair
    judgments: list[Judgment]
    adjudication: Adjudication | None
    reasons: list[str] = field(default_factory=list)
    badges: list[tuple[str, str]] = field(default_factory=list)  # (kind, reason): kind picks the colour

    @property
    def url_is_link(self) -> bool:
        return self.pair.document.url.lower().startswith(("http://", "https://"))

    @property
    def looks_like_html(self) -> bool:
        return "<" in self.pair.document.text


def _row(pair: Pair) -> ReviewRow:
    try:
        adjudication = pair.adjudication
    except Adjudication.DoesNotExist:
        adjudication = None
    judgments = pair.judgment_list  # type: ignore[attr-defined]  # prefetched with to_attr
    reasons = review_reasons(judgments)
    return ReviewRow(pair, judgments, adjudication, [text for kind, text in reasons], reasons)


@campaign_view(lead=True)
@require_http_methods(["GET", "HEAD"])
def review(request: HtmxHttpRequest, member: Member) -> HttpResponse:
    """Unsure and disputed pairs with every judgment side by side, and a decision form for each."""
    campaign = member.campaign
    filters = ReviewFilter(request.GET or None)
    kind, q = filters.values()
    model_ids = AnnotatorProfile.model_user_ids()
    counts = review_counts(campaign=campaign, model_ids=model_ids)
    page = page_of(request, review_pair_list(campaign=campaign, kind=kind, search=q, model_ids=model_ids), PAGE_SIZE)
    return render(
        request,
        "judging/review.html",
        member.context(
            nav="review",
            filters=filters,
            kind=kind,
            q=q,
            kind_label=KINDS[kind],
            tabs=[{"key": key, "label": label, "count": counts[key]} for key, label in KINDS.items() if key in counts],
            page=page,
            rows=[_row(p) for p in page],
            grades=grade_list(campaign=campaign),
            query_string=_without_page(request),
            back=request.get_full_path(),
        ),
    )


def _row_response(
    request: HtmxHttpRequest, member: Member, pair: Pair, *, status: int = 200, **extra: Any
) -> HttpResponse:
    campaign = member.campaign
    fresh = review_pair_get(pair_id=pair.id)
    response = render(
        request,
        "judging/_review_row.html",
        member.context(
            nav="review",
            row=_row(fresh),
            grades=grade_list(campaign=campaign),
            swapped=True,
            back=_back(request, reverse("judging:review", args=[campaign.slug])),
            # The queue's tab counters change with the decision: sent along as out-of-band swaps.
            counts=review_counts(campaign=campaign),
            **extra,
        ),
        status=status,
    )
    patch_vary_headers(response, ("HX-Request",))
    return response


@campaign_view(lead=True)
@require_POST
def review_decide(request: HtmxHttpRequest, member: Member, pair_id: int) -> HttpResponse:
    """A lead's decision on one pair: it becomes the pair's label (recorded with who and when)."""
    campaign = member.campaign
    pair = campaign_pair(campaign, pair_id, pooled_only=False)
    form = DecisionForm(request.POST)
    error = None
    if form.is_valid():
        try:
            adjudication = adjudication_set(
                pair=pair, lead=request.user, grade=form.cleaned_data["grade"], note=form.cleaned_data["note"]
            )
        except ValidationError as exc:
            error = "; ".join(exc.messages)
    else:
        error = "; ".join(str(e) for errs in form.errors.values() for e in errs)
    if not request.htmx:
        if error:
            messages.error(request, _("Not decided: %(error)s") % {"error": error})
        else:
            messages.success(
                request,
                _("Decided %(qid)s / %(docid)s: %(grade)s – %(name)s.")
                % {
                    "qid": pair.query.qid,
                    "docid": pair.document.docid,
                    "grade": adjudication.grade.value,
                    "name": adjudication.grade.name,
                },
            )
        return redirect(_back(request, reverse("judging:review", args=[campaign.slug])))
    if error:
        return _row_response(request, member, pair, status=422, error=_("Not decided: %(error)s") % {"error": error})
    return _row_response(request, member, pair, flash="decided")


@campaign_view(lead=True)
@require_POST
def review_withdraw(request: HtmxHttpRequest, member: Member, pair_id: int) -> HttpResponse:
    """Withdraw a decision: the label goes back to the aggregated judgments."""
    campaign = member.campaign
    pair = campaign_pair(campaign, pair_id, pooled_only=False)
    removed = adjudication_remove(pair=pair, lead=request.user)
    if not request.htmx:
        if removed:
            messages.success(
                request,
                _("Withdrew the decision on %(qid)s / %(docid)s.")
                % {"qid": pair.query.qid, "docid": pair.document.docid},
            )
        return redirect(_back(request, reverse("judging:review", args=[campaign.slug])))
    return _row_response(request, member, pair, flash="withdrawn" if removed else None)


# --------------------------------------------------------------------------- agreement


def _alpha_reading(alpha: float) -> str:
    """Krippendorff's (2004) advice on how far an alpha can be relied on."""
    if not math.isfinite(alpha):
        return _("undefined on these judgments")
    if alpha >= 0.8:
        return _("reliable (α ≥ 0.800)")
    if alpha >= 0.667:
        return _("tentative conclusions only (0.667 ≤ α < 0.800)")
    return _("too low to rely on the labels (α < 0.667): tighten the guidelines and review disputes")


def _stability_rows(campaign: Campaign, measure: str) -> list[dict]:
    """policy_stability with each system's move against the current policy's ranking (+2: two places up)."""
    labels = dict(Campaign.Aggregation.choices)
    rows = policy_stability(campaign=campaign, k=STABILITY_K, measure=measure)
    base = next((r["ranking"] for r in rows if r["current"]), rows[0]["ranking"] if rows else [])
    place = {name: i for i, name in enumerate(base)}

    def moves(ranking: list[str]) -> list[dict]:
        return [
            {"name": name, "move": place.get(name, i) - i, "steps": abs(place.get(name, i) - i)}
            for i, name in enumerate(ranking)
        ]

    return [
        {
            "policy": r["policy"],
            "label": labels.get(r["policy"], r["policy"]),
            "tau": _fmt(r["tau"]),
            "current": r["current"],
            "moved": math.isfinite(r["tau"]) and r["tau"] < 1 - 1e-9,
            "ranking": moves(r["ranking"]),
        }
        for r in rows
    ]


class PolicyForm(forms.Form):
    policy = forms.ChoiceField(choices=Campaign.Aggregation.choices, widget=forms.RadioSelect)


@campaign_view(lead=True)
@require_http_methods(["GET", "HEAD"])
def agreement(request: HtmxHttpRequest, member: Member) -> HttpResponse:
    """Agreement overall, per annotator pair (with confusion matrices) and per query; aggregation policy."""
    campaign = member.campaign
    data = agreement_cached(campaign=campaign)
    grades = grade_list(campaign=campaign)
    names = {g.value: g.name for g in grades}
    overall = None
    if data["overall"] is not None:
        o = data["overall"]
        overall = {
            "alpha": _fmt(o["alpha"]),
            "alpha_ci": _ci(o["alpha_ci"]),
            "alpha_reading": _alpha_reading(o["alpha"]),
            "fleiss": _fmt(o["fleiss"]),
            "fleiss_ci": _ci(o["fleiss_ci"]),
            "raw": _fmt(o["raw"]),
            "raw_ci": _ci(o["raw_ci"]),
        }
    pairs = [
        {
            "a": p["a"],
            "b": p["b"],
            "n": p["n"],
            "raw": _fmt(p["raw"]),
            "kappa": _fmt(p["kappa"]),
            "kappa_ci": _ci(p["kappa_ci"]),
            "qwk": _fmt(p["qwk"]),
            "qwk_ci": _ci(p["qwk_ci"]),
            "svg": charts.confusion_svg(
                p["confusion"], data["categories"], row_name=p["a"], col_name=p["b"], grade_names=names
            )
            if p["n"]
            else None,
        }
        for p in data["pairs"]
    ]
    queries = page_of(request, data["queries"], PAGE_SIZE)
    query_rows = [
        {
            "qid": q["qid"],
            "items": q["items"],
            "alpha": _fmt(q["alpha"]),
            "raw": _pct(q["raw"]),
            "low": math.isfinite(q["alpha"]) and q["alpha"] < 0.667,
        }
        for q in queries
    ]

    measures = [str(Measure(base).at(STABILITY_K)) for base in LEADERBOARD_MEASURES if base != JUDGED]
    measure = request.GET.get("measure", "")
    if measure not in measures:
        measure = str(STABILITY_MEASURE)
    stability = _stability_rows(campaign, measure)
    return render(
        request,
        "judging/agreement.html",
        member.context(
            nav="agreement",
            data=data,
            overall=overall,
            pairs=pairs,
            queries=queries,
            query_rows=query_rows,
            stability=stability,
            measure=measure,
            measures=measures,
            **policy_job_context(campaign),
            policy_form=PolicyForm(initial={"policy": campaign.aggregation}),
            policy_label=campaign.get_aggregation_display(),
            query_string=_without_page(request),
        ),
    )


@campaign_view(lead=True)
@require_POST
def agreement_policy(request: HtmxHttpRequest, member: Member) -> HttpResponse:
    """Switch the aggregation policy: every label is recomputed and the leaderboard follows."""
    campaign = member.campaign
    form = PolicyForm(request.POST)
    measure = request.POST.get("measure", "")
    keep = f"?{urlencode({'measure': measure})}" if measure in measure_names(STABILITY_K) else ""
    target = reverse("judging:agreement", args=[campaign.slug]) + keep + "#policy"
    if not form.is_valid():
        messages.error(request, _("Choose one of the aggregation policies."))
        return redirect(target)
    old = campaign.get_aggregation_display()
    policy = form.cleaned_data["policy"]
    if policy != campaign.aggregation and policy_switch_needs_job(campaign=campaign):
        try:
            job = policy_job_start(campaign=campaign, user=signed_in(request.user), policy=policy)
        except JobError as exc:
            messages.error(request, str(exc))
        else:
            messages.info(
                request,
                _(
                    "The switch to the %(policy)s aggregation policy recomputes %(n)s labels in the background; "
                    "the leaderboard keeps the old policy until it is done."
                )
                % {"policy": policy, "n": job.total},
            )
        return redirect(target)
    changed = campaign_policy_set(campaign=campaign, lead=signed_in(request.user), policy=policy)
    new = campaign.get_aggregation_display()
    if old == new:
        messages.info(request, _("The policy already was %(policy)s: nothing changed.") % {"policy": new})
    else:
        messages.success(
            request,
            ngettext(
                "Aggregation is now %(new)s (was %(old)s): %(n)d label changed. Adjudicated pairs keep the lead's "
                "decision; the leaderboard follows.",
                "Aggregation is now %(new)s (was %(old)s): %(n)d labels changed. Adjudicated pairs keep the lead's "
                "decision; the leaderboard follows.",
                changed,
            )
            % {"new": new, "old": old, "n": changed},
        )
    return redirect(target)


# --------------------------------------------------------------------------- annotator quality and gold pairs


class GoldSearch(forms.Form):
    qid = forms.CharField(label="qid", required=False, max_length=QID_MAX_LENGTH)
    docid = forms.CharField(label="docid", required=False, max_length=DOCID_MAX_LENGTH)


@campaign_view(lead=True)
@require_http_methods(["GET", "HEAD"])
def quality(request: HtmxHttpRequest, member: Member) -> HttpResponse:
    """Per annotator figures, and the gold pairs a lead labels in advance to measure accuracy."""
    campaign = member.campaign
    rows = [
        {
            **r,
            "median_seconds": _fmt(r["median_seconds"], 1),
            "unsure_rate": _pct(r["unsure_rate"]),
            "adjudicated_agreement": _pct(r["adjudicated_agreement"]) if r["adjudicated_n"] else "–",
            "gold_accuracy": _pct(r["gold_accuracy"]) if r["gold_n"] else "–",
            "gold_low": r["gold_n"] > 0 and r["gold_accuracy"] < 0.7,
        }
        for r in annotator_quality(campaign=campaign)
    ]
    search = GoldSearch(request.GET or None)
    results = None
    if search.is_valid() and (search.cleaned_data["qid"] or search.cleaned_data["docid"]):
        results = gold_pair_search(
            campaign=campaign,
            qid=search.cleaned_data["qid"],
            docid=search.cleaned_data["docid"],
            limit=GOLD_SEARCH_LIMIT,
        )
    gold = page_of(request, gold_pair_list(campaign=campaign), PAGE_SIZE)
    return render(
        request,
        "judging/quality.html",
        member.context(
            nav="quality",
            rows=rows,
            search=search,
            results=(results or [])[:GOLD_SEARCH_LIMIT],
            searched=results is not None,
            more=results is not None and len(results) > GOLD_SEARCH_LIMIT,
            gold=gold,
            grades=grade_list(campaign=campaign),
            query_string=_without_page(request),
        ),
    )


@campaign_view(lead=True)
@require_POST
def quality_gold(request: HtmxHttpRequest, member: Member, pair_id: int) -> HttpResponse:
    """Set, change or (with an empty grade) remove one pair's gold label."""
    campaign = member.campaign
    pair = campaign_pair(campaign, pair_id, pooled_only=False)
    raw = (request.POST.get("grade") or "").strip()
    error = None
    try:
        # the service reads the posted text as a grade of the scale (a clear error if it is none)
        gold_label_set(pair=pair, lead=request.user, grade=None if raw == "" else raw)  # type: ignore[arg-type]
    except ValidationError as exc:
        error = "; ".join(exc.messages)
    if request.htmx and request.POST.get("row") == "review":
        if error:
            message = _("Gold label not set: %(error)s") % {"error": error}
            return _row_response(request, member, pair, status=422, error=message)
        return _row_response(request, member, pair, flash="gold")
    where = f"{pair.query.qid} / {pair.document.docid}"
    if error:
        messages.error(request, _("Gold label of %(pair)s not set: %(error)s") % {"pair": where, "error": error})
    elif pair.gold_label is None:
        messages.success(request, _("%(pair)s is no longer a gold pair.") % {"pair": where})
    else:
        messages.success(
            request, _("%(pair)s is a gold pair with grade %(grade)s.") % {"pair": where, "grade": pair.gold_label}
        )
    return redirect(_back(request, reverse("judging:quality", args=[campaign.slug])))
