"""Score bounds over the unjudged documents, and which adjacent systems of a ranking they settle."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import metrics
from judging.scoring.cache import Leaderboard
from judging.scoring.trust.arrays import cutoff_of, ranking_order, top_grade, trust_arrays
from judging.scoring.trust.store import cached

# An open comparison names this many of the queries that hold most of its unjudged pairs.
TOP_OPEN_QUERIES = 5


@dataclass
class Bounds:
    """Per-query and mean bounds of every measure but Judged@k over the leaderboard's scored queries."""

    low: dict[str, np.ndarray]  # measure -> (S, Qs)
    high: dict[str, np.ndarray]
    mean_low: dict[str, np.ndarray]  # measure -> (S,)
    mean_high: dict[str, np.ndarray]


def bounds(lb: Leaderboard) -> Bounds:
    def compute():
        arrays = trust_arrays(lb)
        p = lb.params
        got = metrics.score_bounds(
            arrays.labels,
            arrays.qrels,
            k=p.k,
            top_grade=top_grade(lb.campaign, arrays.qrels),
            threshold=p.threshold,
            gain=p.gain,
        )
        low = {m: v[0] for m, v in got.items()}
        high = {m: v[1] for m, v in got.items()}
        n = max(arrays.positions.size, 1)
        return Bounds(
            low,
            high,
            {m: v.sum(axis=1) / n for m, v in low.items()},
            {m: v.sum(axis=1) / n for m, v in high.items()},
        )

    return cached(lb, ("bounds",), compute)


@dataclass
class Verdicts:
    """Which adjacent systems of the ranking by one measure keep their order whatever is left to judge."""

    measure: str
    order: np.ndarray  # (S,) systems best first
    # {"systems": [a, b], "settled": bool, "open_pairs": n, "open_queries": n, "top_queries": [{"qid", "pairs"}]},
    # a above b
    adjacent: list[dict]
    pairs_left: int  # distinct unjudged pairs that can still change an open comparison
    priority: metrics.PairPriority | None  # those pairs, most urgent first (cube query positions)


def verdicts(lb: Leaderboard, measure: str) -> Verdicts:
    """Settled or open for every adjacent pair, and the unjudged pairs that can still change the ranking.

    "Settled" compares the per-system bounds of :func:`metrics.settled`: exact for P@k, Hit@k and MRR;
    for the measures normalised by the query's relevant documents (R, F1, MAP, nDCG, bpref) it is
    settled against each system's own unjudged documents only.
    """

    def compute():
        order = ranking_order(lb, measure)
        names = lb.cube.system_names
        b = bounds(lb)
        if measure not in b.low or len(order) < 2:
            return Verdicts(measure, order, [], 0, None)
        arrays = trust_arrays(lb)
        verdict = metrics.settled(b.low[measure], b.high[measure])
        cutoff = cutoff_of(measure, lb.params.k)
        n_open = metrics.open_pairs(arrays.labels, arrays.doc_ids, verdict.order, cutoff=cutoff)
        priority = metrics.pair_priority(arrays.labels, arrays.doc_ids, verdict.order, cutoff=cutoff)
        above, below = order[:-1], order[1:]
        settled_ = verdict.order[above, below] != 0
        # where the open comparisons' unjudged pairs are: their number per query, the busiest queries first
        where = np.zeros((above.size, arrays.positions.size), dtype=np.int64)
        is_open = np.flatnonzero(~settled_)
        if is_open.size:
            pairs = np.stack([above[is_open], below[is_open]], axis=1)
            where[is_open] = metrics.open_pairs_by_query(arrays.labels, arrays.doc_ids, pairs, cutoff=cutoff)
        busiest = np.argsort(-where, axis=1, kind="stable")[:, :TOP_OPEN_QUERIES]
        qids = lb.cube.qids
        adjacent = []
        for i, (a, c, s, n) in enumerate(
            zip(above.tolist(), below.tolist(), settled_.tolist(), n_open[above, below].tolist(), strict=True)
        ):  # over adjacent systems, not queries
            top = [(int(q), int(where[i, q])) for q in busiest[i].tolist() if where[i, q] > 0]
            adjacent.append(
                {
                    "systems": [names[a], names[c]],
                    "settled": bool(s),
                    "open_pairs": int(n),
                    "open_queries": int(np.count_nonzero(where[i])),
                    "top_queries": [{"qid": qids[arrays.positions[q]], "pairs": m} for q, m in top],
                }
            )
        # priority.query indexes the arrays' queries: back to cube positions
        priority = priority._replace(query=arrays.positions[priority.query])
        return Verdicts(measure, order, adjacent, int(priority.query.size), priority)

    return cached(lb, ("verdicts", measure), compute)
