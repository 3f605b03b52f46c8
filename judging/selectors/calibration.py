"""A model judge against the people: agreement (with a plain verdict), leniency, per-query agreement, the system
ranking it gives (Kendall's tau, tau_AP, the top-5 overlap), per-system bias, and what its own runs measured:
self-consistency and the query-word-stuffing canary."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

import numpy as np
from django.db.models import Count
from django.utils.translation import gettext, gettext_lazy

import metrics
from judging.endpoints import urls_display
from judging.models import AnnotatorProfile, Campaign, JudgeTemplate, Judgment, Membership
from judging.scoring import Params, leaderboard
from judging.selectors import judges as judge_reads

DISAGREEMENTS = 50  # rows of the "biggest disagreements" table
TOP = 5  # the top of the ranking whose overlap is shown

# Landis & Koch's names of the kappa bands (metrics.calibration.BAND_CODES), as the page says them.
BAND_NAMES = {
    "chance": gettext_lazy("no better than chance"),
    "slight": gettext_lazy("slight"),
    "fair": gettext_lazy("fair"),
    "moderate": gettext_lazy("moderate"),
    "substantial": gettext_lazy("substantial"),
    "almost_perfect": gettext_lazy("almost perfect"),
}


def kappa_verdict_json(value: float, low: float, high: float) -> dict[str, Any] | None:
    """metrics.kappa_verdict with its words: "moderate", "at least fair", "no better than chance"."""
    verdict = metrics.kappa_verdict(value, low, high)
    if verdict is None:
        return None
    name = str(BAND_NAMES[verdict.band])
    text = gettext("at least %(band)s") % {"band": name} if verdict.at_least else name
    return {"band": verdict.band, "at_least": verdict.at_least, "point_band": verdict.point_band, "text": text}


class UnknownJudge(LookupError):
    """No model judge of that name."""


def model_judges(*, campaign: Campaign) -> list[dict[str, Any]]:
    """The model judges of this campaign (its members of kind "model"): name, this campaign's description of
    it (endpoint URLs without credentials), judgments."""
    members = list(
        Membership.objects.filter(campaign=campaign, user__annotator_profile__kind=AnnotatorProfile.Kind.MODEL)
        .select_related("user")
        .order_by("user__username")
    )
    if not members:
        return []
    counts = dict(
        Judgment.objects.filter(pair__campaign=campaign, annotator_id__in=[m.user_id for m in members])
        .order_by()
        .values("annotator_id")
        .annotate(n=Count("id"))
        .values_list("annotator_id", "n")
    )
    return [
        {"name": m.user.username, "description": urls_display(m.description), "judgments": counts.get(m.user_id, 0)}
        for m in members
    ]


def label_source_choices(*, campaign: Campaign) -> list[tuple[str, str]]:
    """The leaderboard's label sources: the humans, and each model judge alone or filling the humans' gaps.
    One small query (the campaign's model members): the leaderboard asks on every request."""
    choices = [("humans", gettext("human judgments"))]
    names = (
        AnnotatorProfile.objects.filter(kind=AnnotatorProfile.Kind.MODEL, user__memberships__campaign=campaign)
        .order_by("user__username")
        .values_list("user__username", flat=True)
    )
    for name in names:
        choices += [
            (f"model:{name}", gettext("model %(name)s only") % {"name": name}),
            (f"hybrid:{name}", gettext("humans, else model %(name)s") % {"name": name}),
            (f"ppi:{name}", gettext("model %(name)s corrected by the audit (PPI)") % {"name": name}),
        ]
    return choices


def model_judge_profile(*, name: str, campaign: Campaign) -> AnnotatorProfile:
    """The campaign's model judge ``name``; UnknownJudge for a judge of other campaigns as for a name nobody has."""
    profile = (
        AnnotatorProfile.objects.filter(
            kind=AnnotatorProfile.Kind.MODEL, user__username=name, user__memberships__campaign=campaign
        )
        .select_related("user")
        .first()
    )
    if profile is None:
        raise UnknownJudge(gettext("no model judge named %(name)r") % {"name": name})
    return profile


def judge_calibration(
    *, campaign: Campaign, name: str, params: Params | None = None, n_resamples: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """How far a model judge's grades can stand in for the human labels of this campaign.

    Compared on the pairs both judged: the model graded them confidently and they have a human label
    (aggregated, or a lead's adjudication). Cohen's kappa plain and quadratic-weighted with percentile
    bootstrap intervals over pairs; the confusion matrix (rows humans, columns the model); leniency (mean
    of model minus human grade, and the shares graded above and below); agreement per query; and the
    system ranking under the model's labels against the humans' (Kendall's tau per measure, and the pairs
    of systems that swap on the main measure, nDCG@k).
    """
    profile = model_judge_profile(name=name, campaign=campaign)
    params = params or Params()
    categories = list(campaign.grades.order_by("value").values_list("value", flat=True))
    grade_names = dict(campaign.grades.values_list("value", "name"))
    rows, examples = _judge_rows(campaign, profile)
    both = [r for r in rows if not r[3] and r[5] is not None and r[0] not in examples]
    human = np.array([r[5] for r in both], dtype=np.int64)
    model = np.array([r[4] for r in both], dtype=np.int64)
    n = len(both)
    out: dict[str, Any] = {
        "campaign": campaign.slug,
        "judge": profile.user.username,
        "description": urls_display(
            Membership.objects.filter(campaign=campaign, user=profile.user)
            .values_list("description", flat=True)
            .first()
            or ""
        ),
        "categories": categories,
        "grade_names": {str(k): v for k, v in grade_names.items()},
        "judged": len(rows),
        "unsure": sum(1 for r in rows if r[3]),
        "compared": n,
        "examples_left_out": sum(1 for r in rows if not r[3] and r[5] is not None and r[0] in examples),
    }
    out["agreement"] = _agreement(human, model, categories, n_resamples=n_resamples, seed=seed)
    # The headline: Cohen's kappa (every different grade a disagreement), as the LLMJudge figures are given.
    out["verdict"] = out["agreement"]["kappa"]["verdict"]
    out["confusion"] = (
        metrics.confusion_matrix(human, model, categories).tolist()
        if n
        else [[0] * len(categories) for _ in categories]
    )
    diff = model - human
    out["leniency"] = {
        "mean_difference": _num(float(diff.mean())) if n else None,
        "share_over": _num(float(np.mean(diff > 0))) if n else None,
        "share_under": _num(float(np.mean(diff < 0))) if n else None,
    }
    out["per_query"] = _per_query_agreement(both, diff)
    out["ranking"], out["bias"] = _ranking(campaign, params, profile.user.username)
    out["self_consistency"] = judge_reads.self_consistency(campaign=campaign, judge=profile.user)
    out["canary"] = judge_reads.canary(campaign=campaign, judge=profile.user)
    current = JudgeTemplate.objects.filter(campaign=campaign, judge=profile.user).order_by("-version").first()
    out["template_version"] = current.version if current else None
    out["disagreements"] = _disagreements(both, human, model)
    return out


def _judge_rows(campaign: Campaign, profile: AnnotatorProfile) -> tuple[list[tuple[Any, ...]], set[int]]:
    """The model judge's judgments on the campaign, (pair id, qid, docid, unsure, grade, human label, note) by
    qid and docid, and the pairs quoted as few-shot examples in its prompts (left out of the comparison: the
    model saw their human grade)."""
    rows = list(
        Judgment.objects.filter(pair__campaign=campaign, annotator_id=profile.user_id)
        .order_by("pair__query__qid", "pair__document__docid")
        .values_list(
            "pair_id", "pair__query__qid", "pair__document__docid", "unsure", "grade__value", "pair__label", "note"
        )
    )
    examples = {
        int(p)
        for ps in JudgeTemplate.objects.filter(campaign=campaign, judge_id=profile.user_id).values_list(
            "example_pairs", flat=True
        )
        for p in ps
    }
    return rows, examples


def _agreement(
    human: np.ndarray, model: np.ndarray, categories: list[int], *, n_resamples: int, seed: int
) -> dict[str, Any]:
    """Cohen's kappa plain and quadratic-weighted with percentile bootstrap intervals over pairs, each with its
    verdict, and the raw agreement."""
    n = human.size
    ratings = np.column_stack([human, model]) if n else np.empty((0, 2), np.int64)
    agreement: dict[str, Any] = {}
    for key, weights in (("kappa", None), ("kappa_quadratic", "quadratic")):
        if n >= 2:
            value = metrics.cohen_kappa(human, model, categories, weights=weights)
            low, high = metrics.bootstrap_agreement(
                functools.partial(metrics.cohen_kappa, categories=categories, weights=weights),
                ratings,
                n_resamples=n_resamples,
                seed=seed,
            )
        else:
            value, low, high = float("nan"), float("nan"), float("nan")
        agreement[key] = {
            "value": _num(value),
            "ci": [_num(low), _num(high)],
            "verdict": kappa_verdict_json(value, low, high),
        }
    agreement["raw"] = _num(float(np.mean(human == model))) if n else None
    return agreement


def _per_query_agreement(both: list[tuple[Any, ...]], diff: np.ndarray) -> list[dict[str, Any]]:
    """Per query: how many pairs, exact agreement, mean difference (kappa is rarely defined on one query), the
    queries of least agreement first."""
    per_query: dict[str, list[int]] = {}
    for (_, qid, *_rest), d in zip(both, diff.tolist(), strict=True):
        per_query.setdefault(qid, []).append(d)
    return sorted(
        (
            {
                "qid": qid,
                "pairs": len(ds),
                "agreement": sum(1 for d in ds if d == 0) / len(ds),
                "mean_difference": sum(ds) / len(ds),
            }
            for qid, ds in per_query.items()
        ),
        key=lambda r: (r["agreement"], r["qid"]),
    )


def _disagreements(both: list[tuple[Any, ...]], human: np.ndarray, model: np.ndarray) -> list[dict[str, Any]]:
    """The DISAGREEMENTS pairs where the model's grade is furthest from the human label."""
    diff = model - human
    order = np.lexsort((np.arange(diff.size), -np.abs(diff))) if diff.size else np.empty(0, np.int64)
    return [
        {
            "pair": both[i][0],
            "qid": both[i][1],
            "docid": both[i][2],
            "human": int(human[i]),
            "model": int(model[i]),
            "difference": int(diff[i]),
            "note": both[i][6],
        }
        for i in order[:DISAGREEMENTS].tolist()
        if diff[i] != 0
    ]


def _ranking(campaign: Campaign, params: Params, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ranking of the systems under the model's labels against the humans' (Kendall's tau-b, tau_AP with
    the humans' ranking as the reference, the top-5 overlap) and the per-system bias: the model's measure
    minus the humans', averaged over the queries both label sources scored, with a 95% t interval."""
    humans = leaderboard(campaign, replace(params, labels="humans"))
    model = leaderboard(campaign, replace(params, labels=f"model:{name}"))
    names = humans.cube.system_names
    h, m = humans.means(), model.means()
    several = len(names) >= 2
    per_measure = []
    for i, measure in enumerate(humans.measures):
        tau = metrics.kendall_tau(h[i], m[i]) if several else float("nan")
        # undefined, as Kendall's tau is, when one side ranks every system alike (e.g. no label at all)
        ap = metrics.tau_ap(m[i], h[i]) if several and np.ptp(m[i]) > 0 and np.ptp(h[i]) > 0 else float("nan")
        per_measure.append({"measure": measure, "kendall_tau": _num(tau), "tau_ap": _num(ap)})
    ndcg = str(metrics.Measure("nDCG", params.k))
    main = humans.measures.index(ndcg)
    swaps = metrics.discordant_pairs(h[main], m[main]).tolist()
    overlap, k = metrics.top_k_overlap(m[main], h[main], TOP) if names else (0, 0)
    top_h = np.argsort(-h[main], kind="stable")[:k].tolist()
    top_m = np.argsort(-m[main], kind="stable")[:k].tolist()
    ranking = {
        "measure": ndcg,
        "systems": [{"name": s, "humans": float(h[main, i]), "model": float(m[main, i])} for i, s in enumerate(names)],
        "kendall_tau": per_measure[main]["kendall_tau"],
        "tau_ap": per_measure[main]["tau_ap"],
        "top": {
            "k": k,
            "overlap": overlap,
            "humans": [names[i] for i in top_h],
            "model": [names[i] for i in top_m],
        },
        "swapped_pairs": [[names[i], names[j]] for i, j in swaps],
        "per_measure": per_measure,
    }
    both = humans.table.labelled & model.table.labelled
    hs, ms = humans.table.scores[:, :, both], model.table.scores[:, :, both]  # (M, S, Q_both)
    per: dict[str, dict[str, float | None]] = {}
    main_bias = None
    for i, measure in enumerate(humans.measures):
        b = metrics.paired_bias(ms[i], hs[i])
        per[measure] = {s: _num(float(b.mean[j])) for j, s in enumerate(names)}
        if i == main:
            main_bias = b
    assert main_bias is not None
    bias = {
        "measure": ndcg,
        "queries": int(both.sum()),
        "systems": [
            {
                "name": s,
                "humans": _num(float(hs[main, j].mean())) if both.any() else None,
                "model": _num(float(ms[main, j].mean())) if both.any() else None,
                "bias": _num(float(main_bias.mean[j])),
                "ci": [_num(float(main_bias.low[j])), _num(float(main_bias.high[j]))],
            }
            for j, s in enumerate(names)
        ],
        "per_measure": per,
    }
    return ranking, bias


def _num(x: float | None) -> float | None:
    return None if x is None or np.isnan(x) else float(x)
