"""The budget planner: how many queries, judgments and hours an evaluation needs to tell two systems apart.

From the campaign's own per-query scores of one measure (the leaderboard's, human labels): the variance of a
paired difference between two systems, 2 V_E (metrics.power.paired_variance), and Sakai's topic set size
design (Information Retrieval Journal, 2016) with the power of a two-sided paired t-test (noncentral t):
the number of queries n that detects a true mean difference ``delta`` with probability ``power`` at level
``alpha``. A query costs the campaign's mean pooled pairs per query times the redundancy in judgments, and a
judgment the team's median seconds (selectors.pace). For each pair of systems adjacent on the leaderboard,
the power the campaign has now: its scored queries, that pair's own standard deviation of the differences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.core.exceptions import ValidationError
from django.db.models import Count, Sum
from django.utils.translation import gettext as _

from judging.models import Campaign, Pair
from judging.scoring.cache import Params, leaderboard
from judging.scoring.presenters import system_order
from metrics import measures
from metrics.power import paired_power, paired_variance, topic_set_size

# Measures the planner takes: these at a cutoff ("nDCG@10"), and those of the whole run.
AT_K = measures.AT_K
WHOLE = measures.WHOLE_RUN_ORDER
# A standard deviation of paired differences below this is float noise of identical per-query scores.
SPREAD_EPS = 1e-12
DEFAULTS: dict[str, str] = {"measure": "nDCG@10", "delta": "0.05", "power": "0.8", "alpha": "0.05"}


@dataclass(frozen=True)
class PlanParams:
    measure: str
    k: int
    delta: float
    power: float
    alpha: float


def _number(raw: str, field: str) -> float:
    text = raw.strip()
    if not text or not all(c in "0123456789.eE+-" for c in text):  # ASCII only, as every parameter
        raise ValidationError({field: _("must be a number, not %(value)s") % {"value": repr(raw[:40])}})
    try:
        value = float(text)
    except ValueError:
        raise ValidationError({field: _("must be a number, not %(value)s") % {"value": repr(raw[:40])}}) from None
    if not math.isfinite(value):
        raise ValidationError({field: _("must be a finite number")})
    return value


def plan_params(data: Any) -> PlanParams:
    """The planner's parameters from a query string (missing ones take DEFAULTS), or a ValidationError
    naming every field out of range: measure, delta (0 to 1), power (above alpha, below 1), alpha (0 to 0.5)."""
    raw = {name: (data.get(name) or "") for name in DEFAULTS}
    errors: dict[str, str] = {}
    measure = raw["measure"].strip() or str(DEFAULTS["measure"])
    base, at, cutoff = measure.partition("@")
    k = 10
    if base in WHOLE and not at:
        pass
    elif base in AT_K and at and cutoff.isascii() and cutoff.isdigit() and 1 <= int(cutoff) <= 1000:
        k = int(cutoff)
    else:
        errors["measure"] = _("must be one of %(names)s (k from 1 to 1000), not %(value)s") % {
            "names": ", ".join([f"{b}@k" for b in AT_K] + list(WHOLE)),
            "value": repr(measure[:40]),
        }
    values: dict[str, float] = {}
    for name in ("delta", "power", "alpha"):
        try:
            values[name] = _number(raw[name], name) if raw[name].strip() else float(DEFAULTS[name])
        except ValidationError as exc:
            errors[name] = exc.message_dict[name][0]
    if "delta" in values and not 0 < values["delta"] <= 1:
        errors["delta"] = _("must be greater than 0 and at most 1 (a difference in the measure)")
    if "alpha" in values and not 0 < values["alpha"] <= 0.5:
        errors["alpha"] = _("must be greater than 0 and at most 0.5")
    alpha = values["alpha"] if "alpha" in values and "alpha" not in errors else float(DEFAULTS["alpha"])
    if "power" in values and not alpha < values["power"] < 1:
        errors["power"] = _("must be greater than alpha and less than 1 (0.8 is usual)")
    if errors:
        raise ValidationError(errors)
    return PlanParams(measure, k, values["delta"], values["power"], values["alpha"])


def _per_query_cost(campaign: Campaign) -> tuple[float, int, int]:
    """Mean pooled pairs per query that has any, those queries, and the judgments made: one aggregate."""
    row = Pair.objects.filter(campaign_id=campaign.id, pooled=True).aggregate(
        pairs=Count("id"), queries=Count("query_id", distinct=True), judgments=Sum("judgment_count")
    )
    per_query = row["pairs"] / row["queries"] if row["queries"] else 0.0
    return per_query, int(row["queries"]), int(row["judgments"] or 0)


def campaign_plan(*, campaign: Campaign, params: PlanParams, seconds_per_judgment: float | None) -> dict[str, Any]:
    """The plan as the page and the API show it (see the module). ``status`` "needs_labels" (and nothing
    else computed) until at least two systems are scored on at least two labelled queries; "no_spread" when
    the systems' per-query scores do not vary against each other at all (nothing to estimate from)."""
    lb = leaderboard(campaign, Params(k=params.k))
    scores = lb.per_query(params.measure)
    systems, n_now = scores.shape
    base: dict[str, Any] = {
        "campaign": campaign.slug,
        "measure": params.measure,
        "delta": params.delta,
        "power": params.power,
        "alpha": params.alpha,
        "queries_scored": n_now,
        "systems": systems,
        "seconds_per_judgment": seconds_per_judgment,
    }
    if systems < 2 or n_now < 2:
        return {**base, "status": "needs_labels"}
    sd = math.sqrt(paired_variance(scores))
    if sd < SPREAD_EPS:
        # Every system scores the same on every query (or differs by a constant): a t-test has no spread to
        # work from, and "2 queries" would be an answer the data cannot support.
        return {**base, "status": "no_spread"}
    n = topic_set_size(params.delta, sd, power=params.power, alpha=params.alpha)
    per_query, pooled_queries, made = _per_query_cost(campaign)
    judgments = None if n is None else int(math.ceil(n * per_query * campaign.redundancy))
    hours = None if judgments is None or seconds_per_judgment is None else judgments * seconds_per_judgment / 3600
    order = system_order(lb, params.measure)
    diffs = scores[order[:-1]] - scores[order[1:]]
    pair_sd = diffs.std(axis=1, ddof=1)
    spread = pair_sd >= SPREAD_EPS
    power_now = paired_power(n_now, params.delta, np.where(spread, pair_sd, 1.0), params.alpha)
    names = lb.cube.system_names
    adjacent = [
        {
            "better": names[int(a)],
            "worse": names[int(b)],
            "difference": float(d),
            "sd": float(s),
            # None for two systems with the same score on every query: nothing to estimate from
            "power": float(p) if ok else None,
            "queries_needed": topic_set_size(params.delta, float(s), power=params.power, alpha=params.alpha)
            if ok
            else None,
        }
        for a, b, d, s, p, ok in zip(
            order[:-1].tolist(), order[1:].tolist(), diffs.mean(axis=1), pair_sd, power_now, spread, strict=True
        )
    ]
    return {
        **base,
        "status": "ok",
        "sd": sd,
        "queries_needed": n,
        "pairs_per_query": per_query,
        "redundancy": campaign.redundancy,
        "judgments_needed": judgments,
        "queries_in_pool": pooled_queries,
        "queries_more": None if n is None else max(0, n - pooled_queries),
        "judgments_made": made,
        "judgments_more": None if judgments is None else max(0, judgments - made),
        "hours_needed": hours,
        "seconds_needed": None if hours is None else hours * 3600,
        "hours_more": None
        if judgments is None or seconds_per_judgment is None
        else max(0, judgments - made) * seconds_per_judgment / 3600,
        "power_now": float(paired_power(n_now, params.delta, sd, params.alpha)),
        "adjacent": adjacent,
    }
