"""Reads for the agreement, annotator-quality and review pages: judgments -> ratings matrix -> metrics.agreement."""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db.models import Count, Exists, Max, OuterRef, Prefetch, Q, QuerySet
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

import metrics
from judging.aggregation import POLICIES
from judging.models import Adjudication, AnnotatorProfile, Campaign, Judgment, Pair, Query
from judging.scoring import Params, leaderboard
from metrics.agreement import (
    agreement_by_group,
    bootstrap_agreement,
    confusion_matrix,
    krippendorff_alpha,
    observed_agreement,
)

AGREEMENT_RESAMPLES = 1000
AGREEMENT_CACHE_SECONDS = 7 * 24 * 3600  # keys change with the judgments, so old entries only expire


@dataclass
class Ratings:
    """Confident grades as an (items x annotators) matrix, NaN where an annotator did not grade the pair."""

    pair_ids: np.ndarray  # (n_items,)
    query_ids: np.ndarray  # (n_items,)
    annotator_ids: np.ndarray  # (n_annotators,)
    usernames: list[str]
    values: np.ndarray  # (n_items, n_annotators) float
    categories: list[int]


def ratings_matrix(*, campaign: Campaign) -> Ratings:
    # Agreement among people: a model judge is compared with them on its own calibration page.
    rows = np.array(
        list(
            Judgment.objects.filter(pair__campaign=campaign, unsure=False)
            .exclude(annotator_id__in=AnnotatorProfile.model_user_ids())
            .values_list("pair_id", "pair__query_id", "annotator_id", "grade__value")
            .iterator(chunk_size=20000)
        ),
        dtype=np.int64,
    ).reshape(-1, 4)
    pair_ids, item = np.unique(rows[:, 0], return_inverse=True)
    annotator_ids, rater = np.unique(rows[:, 2], return_inverse=True)
    values = np.full((pair_ids.size, annotator_ids.size), np.nan)
    values[item, rater] = rows[:, 3]
    query_ids = np.zeros(pair_ids.size, np.int64)
    query_ids[item] = rows[:, 1]
    names = dict(get_user_model().objects.filter(id__in=annotator_ids.tolist()).values_list("id", "username"))
    categories = list(campaign.grades.values_list("value", flat=True))
    return Ratings(pair_ids, query_ids, annotator_ids, [names[i] for i in annotator_ids.tolist()], values, categories)


def _partial(stat: Callable[..., float], categories: list[int], **kw: str) -> functools.partial[float]:
    return functools.partial(stat, categories=categories, **kw)


def campaign_agreement(*, campaign: Campaign, n_resamples: int = 1000) -> dict[str, Any]:
    """Agreement figures of a campaign: overall, per annotator pair (with confusion matrices), per query."""
    r = ratings_matrix(campaign=campaign)
    cats = r.categories
    rated_twice = (~np.isnan(r.values)).sum(axis=1) >= 2 if r.values.size else np.zeros(0, bool)
    result: dict[str, Any] = {
        "annotators": r.usernames,
        "categories": cats,
        "items": int(r.values.shape[0]),
        "items_rated_twice": int(rated_twice.sum()),
    }
    if r.values.shape[1] < 2 or not rated_twice.any() or len(cats) < 2:
        result.update(overall=None, pairs=[], queries=[])
        return result
    values = r.values[rated_twice]
    result["overall"] = _overall(values, cats, n_resamples)
    result["pairs"] = _by_pair(r.values, r.usernames, cats, n_resamples)
    q_ids, group = np.unique(r.query_ids[rated_twice], return_inverse=True)
    q_alpha, q_raw, q_n = agreement_by_group(values, group, cats, level="ordinal")
    texts = dict(Query.objects.filter(id__in=q_ids.tolist()).values_list("id", "qid"))
    result["queries"] = sorted(
        (
            {"qid": texts[q], "items": int(n), "alpha": float(al), "raw": float(rw)}
            for q, al, rw, n in zip(q_ids.tolist(), q_alpha, q_raw, q_n, strict=True)
        ),
        key=lambda d: (np.nan_to_num(d["alpha"], nan=2.0), d["qid"]),
    )
    return result


def _overall(values: np.ndarray, cats: list[int], n_resamples: int) -> dict[str, Any]:
    """Krippendorff's ordinal alpha, Fleiss' kappa and the raw agreement over the items rated twice or more, each
    with its bootstrap interval."""
    alpha_ci = bootstrap_agreement(
        _partial(krippendorff_alpha, cats, level="ordinal"), values, n_resamples=n_resamples, seed=0
    )
    fleiss_ci = bootstrap_agreement(
        _partial(metrics.agreement.fleiss_kappa, cats), values, n_resamples=n_resamples, seed=0
    )
    raw_ci = bootstrap_agreement(observed_agreement, values, n_resamples=n_resamples, seed=0)
    return {
        "alpha": krippendorff_alpha(values, cats, level="ordinal"),
        "alpha_ci": tuple(map(float, alpha_ci)),
        "fleiss": metrics.agreement.fleiss_kappa(values, cats),
        "fleiss_ci": tuple(map(float, fleiss_ci)),
        "raw": observed_agreement(values),
        "raw_ci": tuple(map(float, raw_ci)),
    }


def _by_pair(values: np.ndarray, usernames: list[str], cats: list[int], n_resamples: int) -> list[dict[str, Any]]:
    """Per pair of annotators: the items both rated, raw agreement, Cohen's kappa plain and quadratic-weighted
    with bootstrap intervals (with 2 items or more), and their confusion matrix."""
    by_pair = metrics.agreement.pairwise_agreement(values, cats)
    pairs = []
    for a, b, n, raw_ab, kappa, qwk in zip(
        by_pair.rater_a,
        by_pair.rater_b,
        by_pair.n_common,
        by_pair.raw,
        by_pair.kappa,
        by_pair.quadratic_kappa,
        strict=True,
    ):
        both = ~np.isnan(values[:, a]) & ~np.isnan(values[:, b])
        ab = values[both][:, [a, b]]
        entry = {
            "a": usernames[a],
            "b": usernames[b],
            "n": int(n),
            "raw": float(raw_ab),
            "kappa": float(kappa),
            "qwk": float(qwk),
            "kappa_ci": (np.nan, np.nan),
            "qwk_ci": (np.nan, np.nan),
            "confusion": confusion_matrix(ab[:, 0], ab[:, 1], cats).tolist() if n else [],
        }
        if n >= 2:
            for key, weights in (("kappa_ci", {}), ("qwk_ci", {"weights": "quadratic"})):
                entry[key] = tuple(
                    map(
                        float,
                        bootstrap_agreement(
                            _partial(metrics.agreement.cohen_kappa, cats, **weights),
                            ab,
                            n_resamples=n_resamples,
                            seed=0,
                        ),
                    )
                )
        pairs.append(entry)
    return pairs


def agreement_cached(*, campaign: Campaign, n_resamples: int = AGREEMENT_RESAMPLES) -> dict[str, Any]:
    """campaign_agreement, cached until a judgment of the campaign changes.

    The key hashes the judgments' count and latest updated_at, as well as the latest revision id: bulk
    writes (a qrels re-import) change grades without touching updated_at, but always add a revision."""
    stamp = Judgment.objects.filter(pair__campaign=campaign).aggregate(
        n=Count("id", distinct=True),
        last=Max("updated_at"),
        rev=Max("revisions__id"),
    )
    raw = repr((stamp["n"], stamp["last"].isoformat() if stamp["last"] else "", stamp["rev"], n_resamples))
    key = f"reljudge:agreement:{campaign.pk}:{hashlib.sha256(raw.encode()).hexdigest()[:24]}"
    data: dict[str, Any] | None = cache.get(key)
    if data is None:
        data = campaign_agreement(campaign=campaign, n_resamples=n_resamples)
        cache.set(key, data, AGREEMENT_CACHE_SECONDS)
    return data


def annotator_quality(*, campaign: Campaign) -> list[dict[str, Any]]:
    """Per annotator: judgments, median seconds, unsure rate, agreement with adjudicated labels, gold accuracy."""
    rows = list(
        Judgment.objects.filter(pair__campaign=campaign)
        .values_list(
            "annotator__username",
            "seconds_spent",
            "unsure",
            "grade__value",
            "pair__adjudicated",
            "pair__label",
            "pair__gold_label",
        )
        .iterator(chunk_size=20000)
    )
    if not rows:
        return []
    names = np.array([r[0] for r in rows])
    seconds = np.array([r[1] for r in rows], dtype=float)
    unsure = np.array([r[2] for r in rows], dtype=bool)
    grade = np.array([-1 if r[3] is None else r[3] for r in rows])
    adjudicated = np.array([r[4] for r in rows], dtype=bool)
    label = np.array([-1 if r[5] is None else r[5] for r in rows])
    gold = np.array([-1 if r[6] is None else r[6] for r in rows])
    users, idx = np.unique(names, return_inverse=True)
    n = np.bincount(idx, minlength=users.size)

    def share(
        mask: npt.NDArray[np.bool_], hit: npt.NDArray[np.bool_]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int_]]:
        total = np.bincount(idx, weights=mask, minlength=users.size)
        good = np.bincount(idx, weights=mask & hit, minlength=users.size)
        return np.divide(good, total, out=np.full(users.size, np.nan), where=total > 0), total.astype(int)

    adj_rate, adj_n = share(adjudicated & ~unsure, grade == label)
    gold_rate, gold_n = share((gold >= 0) & ~unsure, grade == gold)
    order = np.argsort(idx, kind="stable")
    starts = np.r_[0, np.cumsum(n)[:-1]]
    sorted_seconds = seconds[order]
    medians = [float(np.median(sorted_seconds[s : s + c])) for s, c in zip(starts, n, strict=True)]
    unsure_rate = np.bincount(idx, weights=unsure, minlength=users.size) / n
    return [
        {
            "annotator": str(u),
            "judgments": int(c),
            "median_seconds": m,
            "unsure_rate": float(ur),
            "adjudicated_n": int(an),
            "adjudicated_agreement": float(ar),
            "gold_n": int(gn),
            "gold_accuracy": float(gr),
        }
        for u, c, m, ur, an, ar, gn, gr in zip(
            users, n, medians, unsure_rate, adj_n, adj_rate, gold_n, gold_rate, strict=True
        )
    ]


def review_queue(*, campaign: Campaign, kind: str = "all", model_ids: list[int] | None = None) -> QuerySet[Pair]:
    """Pairs a lead should look at: any unsure judgment, or a dispute (grades two apart, or no majority
    among three or more confident judgments). Adjudicated pairs drop out.

    Only people's judgments make a pair unsure or disputed (a model judge's unreadable answers would
    flood the queue); ``kind="model"`` lists the pairs where a model judge's grade differs from the human
    label, for a lead checking a model judge's calibration."""
    models_ = AnnotatorProfile.model_user_ids() if model_ids is None else model_ids
    human = ~Q(judgments__annotator_id__in=models_)
    pairs = Pair.objects.filter(campaign=campaign, adjudicated=False).annotate(
        n_unsure=Count("judgments", filter=Q(judgments__unsure=True) & human),
        n_confident=Count("judgments", filter=Q(judgments__unsure=False) & human),
    )
    unsure = pairs.filter(n_unsure__gt=0)
    if kind == "model":
        differs = (
            Judgment.objects.filter(pair=OuterRef("pk"), annotator_id__in=models_, unsure=False)
            .exclude(grade__value=OuterRef("label"))
            .order_by()
        )
        qs = pairs.filter(label__isnull=False).filter(Exists(differs))
        return qs.select_related("query", "document").order_by("query__qid", "id")
    disputed_ids = disputed_pair_ids(campaign=campaign, model_ids=models_)
    if kind == "unsure":
        qs = unsure
    elif kind == "disputed":
        qs = pairs.filter(id__in=disputed_ids)
    else:
        qs = pairs.filter(Q(n_unsure__gt=0) | Q(id__in=disputed_ids))
    return qs.select_related("query", "document").order_by("query__qid", "id")


def _with_judgments(pairs: QuerySet[Pair]) -> QuerySet[Pair]:
    """Pairs with what a review card shows: query, document, decision, and every judgment by annotator."""
    judgments = Judgment.objects.select_related(
        "annotator__annotator_profile", "pair", "grade", "tentative_grade"
    ).order_by("annotator__username", "id")
    return pairs.select_related(
        "query", "document", "adjudication__grade", "adjudication__decided_by"
    ).prefetch_related(Prefetch("judgments", queryset=judgments, to_attr="judgment_list"))


def review_pair_list(
    *, campaign: Campaign, kind: str = "all", search: str = "", model_ids: list[int] | None = None
) -> QuerySet[Pair]:
    """The pairs of one review tab (``kind``: all, unsure, disputed, or decided, latest decision first),
    narrowed to a query id or words of the query text, each with ``judgment_list``."""
    if kind == "decided":
        pairs = Pair.objects.filter(campaign=campaign, adjudicated=True).order_by("-adjudication__decided_at", "id")
    else:
        pairs = review_queue(campaign=campaign, kind=kind, model_ids=model_ids)
    if search:
        pairs = pairs.filter(Q(query__qid=search) | Q(query__text__icontains=search))
    return _with_judgments(pairs)


def review_pair_get(*, pair_id: int) -> Pair:
    """One pair freshly read with its judgments, for redrawing its review card after a decision."""
    return _with_judgments(Pair.objects.filter(id=pair_id)).get()


def review_counts(*, campaign: Campaign, model_ids: list[int] | None = None) -> dict[str, int]:
    """How many pairs each review tab holds (the model judges' tab only where there are model judges)."""
    model_ids = AnnotatorProfile.model_user_ids() if model_ids is None else model_ids
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
        **({"model": review_queue(campaign=campaign, kind="model", model_ids=model_ids).count()} if model_ids else {}),
        "decided": Adjudication.objects.filter(pair__campaign=campaign).count(),
    }


def gold_pair_search(*, campaign: Campaign, qid: str = "", docid: str = "", limit: int = 50) -> list[Pair]:
    """Pairs a lead may make gold: an exact qid and/or a docid prefix, at most ``limit`` + 1 (so that the
    page can tell there are more), each with ``n_judgments``."""
    pairs = Pair.objects.filter(campaign=campaign)
    if qid:
        pairs = pairs.filter(query__qid=qid)
    if docid:
        pairs = pairs.filter(document__docid__startswith=docid)
    pairs = pairs.select_related("query", "document").annotate(n_judgments=Count("judgments"))
    return list(pairs.order_by("query__qid", "document__docid")[: limit + 1])


def gold_pair_list(*, campaign: Campaign) -> QuerySet[Pair]:
    """The campaign's gold pairs with ``n_judgments``, by qid and docid."""
    return (
        Pair.objects.filter(campaign=campaign, gold_label__isnull=False)
        .select_related("query", "document")
        .annotate(n_judgments=Count("judgments"))
        .order_by("query__qid", "document__docid")
    )


def review_reasons(judgments: list[Judgment]) -> list[tuple[str, str]]:
    """Why a pair with these judgments needs a lead, in words: the rule of review_queue / disputed_pair_ids.

    Each reason is ``(kind, text)``: the kind (``unsure``, ``dispute`` or ``model``) picks the badge's colour
    whatever language the text is in."""
    out = []
    models_ = [j for j in judgments if _by_model(j)]
    judgments = [j for j in judgments if not _by_model(j)]  # a model judge never makes a pair disputed
    unsure = sum(j.unsure for j in judgments)
    if unsure:
        out.append(("unsure", ngettext("%(n)d unsure", "%(n)d unsure", unsure) % {"n": unsure}))
    # A confident judgment has a grade (the judgment_grade_xor_unsure constraint).
    grades = [j.grade.value for j in judgments if not j.unsure and j.grade is not None]
    if grades and max(grades) - min(grades) >= 2:
        out.append(
            (
                "dispute",
                _("grades %(low)d and %(high)d: two or more apart") % {"low": min(grades), "high": max(grades)},
            )
        )
    elif len(grades) >= 3 and Counter(grades).most_common(1)[0][1] * 2 <= len(grades):
        out.append(("dispute", _("no majority among %(n)d grades") % {"n": len(grades)}))
    label = judgments[0].pair.label if judgments else None
    for j in models_:
        if not j.unsure and j.grade is not None and label is not None and j.grade.value != label:
            out.append(
                (
                    "model",
                    _("model %(name)s says %(grade)d") % {"name": j.annotator.get_username(), "grade": j.grade.value},
                )
            )
    return out


def _by_model(judgment: Judgment) -> bool:
    profile = getattr(judgment.annotator, "annotator_profile", None)
    return profile is not None and profile.kind == AnnotatorProfile.Kind.MODEL


def disputed_pair_ids(*, campaign: Campaign, model_ids: list[int] | None = None) -> list[int]:
    rows = np.array(
        list(
            Judgment.objects.filter(pair__campaign=campaign, unsure=False, pair__adjudicated=False)
            .exclude(annotator_id__in=AnnotatorProfile.model_user_ids() if model_ids is None else model_ids)
            .values_list("pair_id", "grade__value")
        ),
        dtype=np.int64,
    ).reshape(-1, 2)
    if not rows.size:
        return []
    pair_ids, inv = np.unique(rows[:, 0], return_inverse=True)
    lo = np.full(pair_ids.size, np.iinfo(np.int64).max)
    hi = np.full(pair_ids.size, np.iinfo(np.int64).min)
    np.minimum.at(lo, inv, rows[:, 1])
    np.maximum.at(hi, inv, rows[:, 1])
    count = np.bincount(inv)
    # majority: the most frequent grade holds more than half of the pair's confident judgments
    cells = np.unique(np.column_stack([inv, rows[:, 1]]), axis=0, return_counts=True)
    top = np.zeros(pair_ids.size, np.int64)
    np.maximum.at(top, cells[0][:, 0], cells[1])
    no_majority = (count >= 3) & (top * 2 <= count)
    disputed: list[int] = pair_ids[(hi - lo >= 2) | no_majority].tolist()
    return disputed


def policy_stability(*, campaign: Campaign, k: int = 10, measure: str | None = None) -> list[dict[str, Any]]:
    """How much the system ranking moves between aggregation policies: Kendall's tau against the campaign's
    (nothing without systems)."""
    if not campaign.systems.exists():
        return []
    measure = measure or str(metrics.Measure("nDCG", k))
    base = leaderboard(campaign, Params(k=k))
    names = base.measures
    base_means = base.means()[names.index(measure)]
    out = []
    for policy in POLICIES:
        lb = leaderboard(campaign, Params(k=k, policy=policy))
        means = lb.means()[names.index(measure)]
        tau = metrics.kendall_tau(base_means, means) if len(means) > 1 else float("nan")
        order = [lb.cube.system_names[i] for i in np.argsort(-means, kind="stable")]
        out.append({"policy": policy, "tau": float(tau), "ranking": order, "current": policy == campaign.aggregation})
    return out
