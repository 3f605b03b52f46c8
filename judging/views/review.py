"""Leads' pages for resolving and measuring judgments: the review queue, agreement and annotator quality."""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlencode

import numpy as np
from django import forms
from django.contrib import messages
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Count, Max, Prefetch, Q
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from judging import charts
from judging.access import Member, campaign_pair, campaign_view
from judging.formats import DOCID_MAX_LENGTH, QID_MAX_LENGTH
from judging.models import Adjudication, AnnotatorProfile, Campaign, Judgment, Membership, Pair
from judging.scoring import measure_names
from judging.selectors.agreement import (
    annotator_quality,
    campaign_agreement,
    disputed_pair_ids,
    policy_stability,
    ratings_matrix,
    review_queue,
)
from judging.services import (
    adjudication_remove,
    adjudication_set,
    campaign_policy_set,
    gold_label_set,
)

LEAD = Membership.Role.LEAD
PAGE_SIZE = 50
KINDS = {
    "all": "Unsure or disputed",
    "unsure": "Unsure",
    "disputed": "Disputed",
    "model": "Model judge disagrees",
    "decided": "Decided",
}
AGREEMENT_RESAMPLES = 1000
AGREEMENT_CACHE_SECONDS = 7 * 24 * 3600  # keys change with the judgments, so old entries only expire
STABILITY_K = 10
GOLD_SEARCH_LIMIT = 50


# --------------------------------------------------------------------------- helpers


def _back(request, default: str) -> str:
    back = request.POST.get("back", "")
    if back and url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return back
    return default


def _fmt(value, digits: int = 3) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _ci(pair) -> str:
    low, high = pair
    return "" if not (math.isfinite(low) and math.isfinite(high)) else f"[{low:.2f}, {high:.2f}]"


def _pct(value) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.0%}"


# --------------------------------------------------------------------------- review queue


class ReviewFilter(forms.Form):
    kind = forms.ChoiceField(choices=list(KINDS.items()), required=False)
    q = forms.CharField(
        label="Query",
        required=False,
        max_length=200,
        widget=forms.TextInput(attrs={"type": "search", "placeholder": "qid or words of the query"}),
    )

    def values(self) -> tuple[str, str]:
        if not self.is_valid():
            return "all", ""
        return self.cleaned_data["kind"] or "all", self.cleaned_data["q"].strip()


class DecisionForm(forms.Form):
    grade = forms.IntegerField()
    note = forms.CharField(required=False, max_length=5000)


@dataclass
class ReviewRow:
    """One pair of the review page with everything its card shows."""

    pair: Pair
    judgments: list[Judgment]
    adjudication: Adjudication | None
    reasons: list[str] = field(default_factory=list)

    @property
    def url_is_link(self) -> bool:
        return self.pair.document.url.lower().startswith(("http://", "https://"))

    @property
    def looks_like_html(self) -> bool:
        return "<" in self.pair.document.text


def _reasons(judgments: list[Judgment]) -> list[str]:
    """Why a pair needs a lead, in words (the queue's own rule is selectors.agreement.review_queue's)."""
    out = []
    models_ = [j for j in judgments if _by_model(j)]
    judgments = [j for j in judgments if not _by_model(j)]  # a model judge never makes a pair disputed
    unsure = sum(j.unsure for j in judgments)
    if unsure:
        out.append(f"{unsure} unsure")
    grades = [j.grade.value for j in judgments if not j.unsure]
    if grades and max(grades) - min(grades) >= 2:
        out.append(f"grades {min(grades)} and {max(grades)}: two or more apart")
    elif len(grades) >= 3 and Counter(grades).most_common(1)[0][1] * 2 <= len(grades):
        out.append(f"no majority among {len(grades)} grades")
    label = judgments[0].pair.label if judgments else None
    for j in models_:
        if not j.unsure and label is not None and j.grade.value != label:
            out.append(f"model {j.annotator.get_username()} says {j.grade.value}")
    return out


def _by_model(judgment: Judgment) -> bool:
    profile = getattr(judgment.annotator, "annotator_profile", None)
    return profile is not None and profile.kind == AnnotatorProfile.Kind.MODEL


def _with_judgments(qs):
    judgments = Judgment.objects.select_related(
        "annotator__annotator_profile", "pair", "grade", "tentative_grade"
    ).order_by("annotator__username", "id")
    return qs.select_related("query", "document", "adjudication__grade", "adjudication__decided_by").prefetch_related(
        Prefetch("judgments", queryset=judgments, to_attr="judgment_list")
    )


def _row(pair: Pair) -> ReviewRow:
    try:
        adjudication = pair.adjudication
    except Adjudication.DoesNotExist:
        adjudication = None
    return ReviewRow(pair, pair.judgment_list, adjudication, _reasons(pair.judgment_list))


def _queue_counts(campaign: Campaign, model_ids: list[int]) -> dict[str, int]:
    disputed = set(disputed_pair_ids(campaign=campaign, model_ids=model_ids))
    unsure = set(
        Judgment.objects.filter(pair__campaign=campaign, unsure=True, pair__adjudicated=False)
        .exclude(annotator_id__in=model_ids)
        .order_by()
        .values_list("pair_id", flat=True)
        .distinct()
    )
    return {
        "all": len(disputed | unsure),
        "unsure": len(unsure),
        "disputed": len(disputed),
        # the model judges' tab only where there are model judges
        **({"model": review_queue(campaign=campaign, kind="model", model_ids=model_ids).count()} if model_ids else {}),
        "decided": Adjudication.objects.filter(pair__campaign=campaign).count(),
    }


@campaign_view(lead=True)
@require_http_methods(["GET", "HEAD"])
def review(request, member: Member):
    """Unsure and disputed pairs with every judgment side by side, and a decision form for each."""
    campaign = member.campaign
    filters = ReviewFilter(request.GET or None)
    kind, q = filters.values()
    model_ids = AnnotatorProfile.model_user_ids()
    counts = _queue_counts(campaign, model_ids)
    if kind == "decided":
        qs = Pair.objects.filter(campaign=campaign, adjudicated=True).order_by("-adjudication__decided_at", "id")
    else:
        qs = review_queue(campaign=campaign, kind=kind, model_ids=model_ids)
    if q:
        qs = qs.filter(Q(query__qid=q) | Q(query__text__icontains=q))
    page = Paginator(_with_judgments(qs), PAGE_SIZE).get_page(request.GET.get("page"))
    query_string = request.GET.copy()
    query_string.pop("page", None)
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
            grades=list(campaign.grades.all()),
            query_string=query_string.urlencode(),
            back=request.get_full_path(),
        ),
    )


def _row_response(request, member: Member, pair: Pair, *, status: int = 200, **extra):
    campaign = member.campaign
    fresh = _with_judgments(Pair.objects.filter(id=pair.id)).get()
    response = render(
        request,
        "judging/_review_row.html",
        member.context(
            nav="review",
            row=_row(fresh),
            grades=list(campaign.grades.all()),
            swapped=True,
            back=_back(request, reverse("judging:review", args=[campaign.slug])),
            # The queue's tab counters change with the decision: sent along as out-of-band swaps.
            counts=_queue_counts(campaign, AnnotatorProfile.model_user_ids()),
            **extra,
        ),
        status=status,
    )
    patch_vary_headers(response, ("HX-Request",))
    return response


@campaign_view(lead=True)
@require_POST
def review_decide(request, member: Member, pair_id: int):
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
        error = "; ".join(e for errs in form.errors.values() for e in errs)
    if not request.htmx:
        if error:
            messages.error(request, f"Not decided: {error}")
        else:
            messages.success(
                request,
                f"Decided {pair.query.qid} / {pair.document.docid}: "
                f"{adjudication.grade.value} – {adjudication.grade.name}.",
            )
        return redirect(_back(request, reverse("judging:review", args=[campaign.slug])))
    if error:
        return _row_response(request, member, pair, status=422, error=f"Not decided: {error}")
    return _row_response(request, member, pair, flash="decided")


@campaign_view(lead=True)
@require_POST
def review_withdraw(request, member: Member, pair_id: int):
    """Withdraw a decision: the label goes back to the aggregated judgments."""
    campaign = member.campaign
    pair = campaign_pair(campaign, pair_id, pooled_only=False)
    removed = adjudication_remove(pair=pair, lead=request.user)
    if not request.htmx:
        if removed:
            messages.success(request, f"Withdrew the decision on {pair.query.qid} / {pair.document.docid}.")
        return redirect(_back(request, reverse("judging:review", args=[campaign.slug])))
    return _row_response(request, member, pair, flash="withdrawn" if removed else None)


# --------------------------------------------------------------------------- agreement


def _raw_agreement_ci(
    values: np.ndarray, categories: list[int], *, n_resamples: int, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the overall raw agreement, resampling items.

    Raw agreement is the share of pairable rating pairs that agree, tr(o) / sum(o) of Krippendorff's
    coincidence matrix o (what campaign_agreement reports as "raw"). Per item u with n_uc ratings of grade
    c out of m_u, o contributes sum_c n_uc (n_uc - 1) / (m_u - 1) to the trace and m_u to the total, so
    every resample is one product of the (resamples x items) draw counts with these two columns.
    """
    n_items = values.shape[0]
    if n_items == 0:
        return (math.nan, math.nan)
    counts = np.stack([(values == c).sum(axis=1) for c in categories], axis=1).astype(np.float64)
    m = counts.sum(axis=1)
    parts = np.column_stack([(counts * (counts - 1)).sum(axis=1) / (m - 1), m])
    rng = np.random.default_rng(seed)
    block = max(1, min(n_resamples, (1 << 22) // n_items))
    stats = np.empty(n_resamples)
    for start in range(0, n_resamples, block):
        size = min(block, n_resamples - start)
        drawn = rng.integers(0, n_items, size=(size, n_items))
        times = np.bincount((drawn + (np.arange(size) * n_items)[:, None]).ravel(), minlength=size * n_items).reshape(
            size, n_items
        )
        sums = times.astype(np.float64) @ parts
        stats[start : start + size] = sums[:, 0] / sums[:, 1]
    low, high = np.quantile(stats, [0.025, 0.975])
    return (float(low), float(high))


def agreement_cached(campaign: Campaign) -> dict:
    """campaign_agreement (plus the raw agreement's CI), cached until a judgment of the campaign changes.

    The key hashes the judgments' count and latest updated_at, as well as the latest revision id: bulk
    writes (a qrels re-import) change grades without touching updated_at, but always add a revision."""
    stamp = Judgment.objects.filter(pair__campaign=campaign).aggregate(
        n=Count("id", distinct=True),
        last=Max("updated_at"),
        rev=Max("revisions__id"),
    )
    raw = repr((stamp["n"], stamp["last"].isoformat() if stamp["last"] else "", stamp["rev"], AGREEMENT_RESAMPLES))
    key = f"reljudge:agreement:{campaign.pk}:{hashlib.sha256(raw.encode()).hexdigest()[:24]}"
    data = cache.get(key)
    if data is None:
        data = campaign_agreement(campaign=campaign, n_resamples=AGREEMENT_RESAMPLES)
        if data["overall"] is not None:
            r = ratings_matrix(campaign=campaign)
            rated_twice = (~np.isnan(r.values)).sum(axis=1) >= 2
            data["overall"]["raw_ci"] = _raw_agreement_ci(
                r.values[rated_twice], r.categories, n_resamples=AGREEMENT_RESAMPLES
            )
        cache.set(key, data, AGREEMENT_CACHE_SECONDS)
    return data


def _alpha_reading(alpha: float) -> str:
    """Krippendorff's (2004) advice on how far an alpha can be relied on."""
    if not math.isfinite(alpha):
        return "undefined on these judgments"
    if alpha >= 0.8:
        return "reliable (α ≥ 0.800)"
    if alpha >= 0.667:
        return "tentative conclusions only (0.667 ≤ α < 0.800)"
    return "too low to rely on the labels (α < 0.667): tighten the guidelines and review disputes"


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
def agreement(request, member: Member):
    """Agreement overall, per annotator pair (with confusion matrices) and per query; aggregation policy."""
    campaign = member.campaign
    data = agreement_cached(campaign)
    grades = list(campaign.grades.all())
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
            "raw_ci": _ci(o.get("raw_ci", (math.nan, math.nan))),
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
    queries = Paginator(data["queries"], PAGE_SIZE).get_page(request.GET.get("page"))
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

    measures = [m for m in measure_names(STABILITY_K) if not m.startswith("Judged")]
    measure = request.GET.get("measure") if request.GET.get("measure") in measures else f"nDCG@{STABILITY_K}"
    stability = _stability_rows(campaign, measure) if campaign.systems.exists() else []
    query_string = request.GET.copy()
    query_string.pop("page", None)
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
            policy_form=PolicyForm(initial={"policy": campaign.aggregation}),
            policy_label=campaign.get_aggregation_display(),
            query_string=query_string.urlencode(),
        ),
    )


@campaign_view(lead=True)
@require_POST
def agreement_policy(request, member: Member):
    """Switch the aggregation policy: every label is recomputed and the leaderboard follows."""
    campaign = member.campaign
    form = PolicyForm(request.POST)
    measure = request.POST.get("measure", "")
    keep = f"?{urlencode({'measure': measure})}" if measure in measure_names(STABILITY_K) else ""
    target = reverse("judging:agreement", args=[campaign.slug]) + keep + "#policy"
    if not form.is_valid():
        messages.error(request, "Choose one of the aggregation policies.")
        return redirect(target)
    old = campaign.get_aggregation_display()
    changed = campaign_policy_set(campaign=campaign, lead=request.user, policy=form.cleaned_data["policy"])
    new = campaign.get_aggregation_display()
    if old == new:
        messages.info(request, f"The policy already was {new}: nothing changed.")
    else:
        messages.success(
            request,
            f"Aggregation is now {new} (was {old}): {changed} label"
            f"{'s' if changed != 1 else ''} changed. Adjudicated pairs keep the lead's "
            "decision; the leaderboard follows.",
        )
    return redirect(target)


# --------------------------------------------------------------------------- annotator quality and gold pairs


class GoldSearch(forms.Form):
    qid = forms.CharField(label="qid", required=False, max_length=QID_MAX_LENGTH)
    docid = forms.CharField(label="docid", required=False, max_length=DOCID_MAX_LENGTH)


@campaign_view(lead=True)
@require_http_methods(["GET", "HEAD"])
def quality(request, member: Member):
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
    if search.is_valid() and (search.cleaned_data["qid"].strip() or search.cleaned_data["docid"].strip()):
        qs = (
            Pair.objects.filter(campaign=campaign)
            .select_related("query", "document")
            .annotate(n_judgments=Count("judgments"))
        )
        if qid := search.cleaned_data["qid"].strip():
            qs = qs.filter(query__qid=qid)
        if docid := search.cleaned_data["docid"].strip():
            qs = qs.filter(document__docid__startswith=docid)
        results = list(qs.order_by("query__qid", "document__docid")[: GOLD_SEARCH_LIMIT + 1])
    gold = Paginator(
        Pair.objects.filter(campaign=campaign, gold_label__isnull=False)
        .select_related("query", "document")
        .annotate(n_judgments=Count("judgments"))
        .order_by("query__qid", "document__docid"),
        PAGE_SIZE,
    ).get_page(request.GET.get("page"))
    query_string = request.GET.copy()
    query_string.pop("page", None)
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
            grades=list(campaign.grades.all()),
            query_string=query_string.urlencode(),
        ),
    )


@campaign_view(lead=True)
@require_POST
def quality_gold(request, member: Member, pair_id: int):
    """Set, change or (with an empty grade) remove one pair's gold label."""
    campaign = member.campaign
    pair = campaign_pair(campaign, pair_id, pooled_only=False)
    raw = (request.POST.get("grade") or "").strip()
    error = None
    try:
        gold_label_set(pair=pair, lead=request.user, grade=None if raw == "" else raw)
    except ValidationError as exc:
        error = "; ".join(exc.messages)
    if request.htmx and request.POST.get("row") == "review":
        if error:
            return _row_response(request, member, pair, status=422, error=f"Gold label not set: {error}")
        return _row_response(request, member, pair, flash="gold")
    where = f"{pair.query.qid} / {pair.document.docid}"
    if error:
        messages.error(request, f"Gold label of {where} not set: {error}")
    elif pair.gold_label is None:
        messages.success(request, f"{where} is no longer a gold pair.")
    else:
        messages.success(request, f"{where} is a gold pair with grade {pair.gold_label}.")
    return redirect(_back(request, reverse("judging:quality", args=[campaign.slug])))
