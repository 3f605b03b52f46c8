"""Measures over other cutoffs and averages: curves of a measure at every cutoff, micro-averaged P@k and R@k."""

from __future__ import annotations

import numpy as np
from django.utils.translation import gettext, gettext_lazy

import metrics
from judging.errors import RequestError
from judging.scoring.cache import Leaderboard
from judging.scoring.trust.arrays import scored_labels, trust_arrays
from judging.scoring.trust.store import cached
from metrics import Measure

# Curves go up to this cutoff unless asked for more (the issue: "K up to the pool depth or 100").
CURVE_K_DEFAULT = 100
CURVE_K_MAX = 1000


def curves(lb: Leaderboard, measure_base: str, k_max: int) -> np.ndarray:
    """(S, k_max) mean of ``measure_base`` (one of metrics.CURVE_MEASURES) at every cutoff 1..k_max."""
    if measure_base not in metrics.CURVE_MEASURES:
        raise RequestError(
            "measure",
            gettext("measure must be one of %(choices)s, not %(measure)r")
            % {"choices": ", ".join(metrics.CURVE_MEASURES), "measure": measure_base[:40]},
        )
    if not 1 <= k_max <= CURVE_K_MAX:
        raise RequestError("k_max", gettext("k_max must be between 1 and %(top)d") % {"top": CURVE_K_MAX})

    def compute() -> np.ndarray:
        arrays = trust_arrays(lb)
        if arrays.positions.size == 0:
            return np.zeros((len(lb.cube.system_ids), k_max))
        p = lb.params
        got = metrics.curves(
            scored_labels(lb, arrays),
            arrays.qrels,
            k_max,
            threshold=p.threshold,
            gain=p.gain,
            measures=[measure_base],
        )
        return got[measure_base]

    return cached(lb, ("curves", measure_base, k_max), compute)


def curve_k_default(lb: Leaderboard) -> int:
    return int(min(CURVE_K_DEFAULT, max(lb.cube.doc_ids.shape[2], lb.campaign.pool_depth, 1)))


def micro(lb: Leaderboard) -> dict[str, np.ndarray]:
    """Micro-averaged P@k and R@k, (S,) each, over the leaderboard's scored queries."""

    def compute() -> dict[str, np.ndarray]:
        arrays = trust_arrays(lb)
        k, t = lb.params.k, lb.params.threshold
        labels = scored_labels(lb, arrays)
        return {
            str(Measure("P", k)): metrics.micro_precision(labels, k=k, threshold=t),
            str(Measure("R", k)): metrics.micro_recall(labels, arrays.qrels, k=k, threshold=t),
        }

    return cached(lb, ("micro",), compute)


MICRO_NOTE = gettext_lazy(
    "Macro averages give every query the same weight; micro averages pool the documents of all queries, "
    "so queries with long runs (P) or many relevant documents (R) weigh more."
)
