"""What the trust measures add to the leaderboard's JSON: bounds, settled verdicts, diversity, micro averages."""

from __future__ import annotations

from typing import Any

import numpy as np

from judging.scoring.cache import Leaderboard
from judging.scoring.trust.arrays import resolve_measure
from judging.scoring.trust.bounds import Verdicts, bounds, judgments_left, verdicts
from judging.scoring.trust.curves import MICRO_NOTE, micro
from judging.scoring.trust.diversity import diversity
from judging.scoring.trust.final import TOP_K_DEFAULT, stop_signal


def _float(v: float) -> float:
    return float(v)


def leaderboard_data_extend(
    lb: Leaderboard,
    data: dict[str, Any],
    *,
    measure: str | None,
    with_bounds: bool,
    attribute: str | None,
    with_micro: bool,
    per_query: bool,
    top_k: int = TOP_K_DEFAULT,
) -> None:
    """Add bounds, settled verdicts, diversity and micro averages to ``leaderboard_data``'s JSON in place."""
    systems = data["systems"]
    if with_bounds:
        measure = resolve_measure(measure, lb.params.k)
        b = bounds(lb)
        for s, entry in enumerate(systems):
            entry["bounds"] = {m: [_float(b.mean_low[m][s]), _float(b.mean_high[m][s])] for m in b.mean_low}
        v = verdicts(lb, measure)
        data["ranked_by"] = measure
        data["settled"] = v.adjacent
        data["pairs_left"] = v.pairs_left
        if v.adjacent:
            data["stop"] = stop_of(lb, v, top_k)
        # the verdicts are on the final means: every query with a label, and every query with pooled pairs left
        data["verdict_queries"] = v.final_queries
        data["queries_without_labels"] = v.without_labels
    if attribute:
        d = diversity(lb, attribute)
        ild_name, cov_name = d.names
        ild, cov = d.means()
        data["attribute"] = d.attribute
        qids = lb.scored_qids()
        for s, entry in enumerate(systems):
            entry["measures"][ild_name] = _float(ild[s])
            entry["measures"][cov_name] = _float(cov[s])
            if per_query:
                for q, i_, c_ in zip(qids, d.ild[s].tolist(), d.coverage[s].tolist(), strict=True):
                    entry["per_query"][q][ild_name] = i_
                    entry["per_query"][q][cov_name] = c_
    if with_micro:
        m = micro(lb)
        for s, entry in enumerate(systems):
            entry["micro"] = {name: _float(values[s]) for name, values in m.items()}
        data["micro_note"] = str(MICRO_NOTE)


def stop_of(lb: Leaderboard, v: Verdicts, top_k: int) -> dict[str, Any]:
    """The stop signal of the ranking ``v`` for its top ``top_k`` systems (final.stop_signal)."""
    p = np.array([a["p_holds"] for a in v.adjacent], dtype=np.float64)
    return stop_signal(p, top_k, judgments_left(lb, v, top_k))
