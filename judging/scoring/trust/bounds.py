"""Score bounds over the unjudged documents, and which adjacent systems of a ranking they settle.

Both are sums over queries of parts that depend on one query's labels only: each query's best and worst
case scores per system, and each query's unjudged pairs within the cutoff with the systems that retrieved
them. Those parts are kept for every query of the campaign (``store.per_query``) and, after a judgment,
computed again for the queries whose labels moved only; the means, the verdicts and the counts are then
taken over the leaderboard's scored queries. The result is the one a computation from scratch gives, value
for value (tests/judging/test_trust.py checks it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

import metrics
from judging.scoring.cache import Leaderboard
from judging.scoring.trust.arrays import (
    PATCH_QUERIES,
    TrustArrays,
    campaign_arrays,
    cutoff_of,
    ranking_order,
    top_grade,
    trust_arrays,
)
from judging.scoring.trust.store import cached, per_query

# An open comparison names this many of the queries that hold most of its unjudged pairs.
TOP_OPEN_QUERIES = 5


class _Scored(Mapping[str, np.ndarray]):
    """measure -> (S, Qs) per-query values over the scored queries, taken out of the campaign's (S, Q)
    arrays when asked for (most callers want one measure, or only the means)."""

    def __init__(self, every: dict[str, np.ndarray], scored: np.ndarray):
        self._every, self._scored = every, scored
        self._taken: dict[str, np.ndarray] = {}

    def __getitem__(self, measure: str) -> np.ndarray:
        got = self._taken.get(measure)
        if got is None:
            every = self._every[measure]
            got = self._taken[measure] = every if self._scored.all() else every[:, self._scored]
        return got

    def __contains__(self, measure: object) -> bool:
        return measure in self._every

    def __iter__(self) -> Iterator[str]:
        return iter(self._every)

    def __len__(self) -> int:
        return len(self._every)


@dataclass
class Bounds:
    """Per-query and mean bounds of every measure but Judged@k over the leaderboard's scored queries."""

    low: Mapping[str, np.ndarray]  # measure -> (S, Qs)
    high: Mapping[str, np.ndarray]
    mean_low: dict[str, np.ndarray]  # measure -> (S,)
    mean_high: dict[str, np.ndarray]


def _score_bounds(
    lb: Leaderboard, arrays: TrustArrays, grade: int, queries: np.ndarray | None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    labels, qrels = arrays.labels, arrays.qrels
    if queries is not None:
        labels, qrels = labels[:, queries], qrels[queries]
    p = lb.params
    return metrics.score_bounds(labels, qrels, k=p.k, top_grade=grade, threshold=p.threshold, gain=p.gain)


def query_bounds(lb: Leaderboard) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """measure -> (low, high), (S, Q) each: metrics.score_bounds of every query of the campaign, computed
    again after a judgment for the queries whose labels moved only."""
    arrays = campaign_arrays(lb)
    grade = top_grade(lb.campaign, arrays.qrels)

    def patch(
        old: dict[str, tuple[np.ndarray, np.ndarray]], dirty: np.ndarray
    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        got = _score_bounds(lb, arrays, grade, dirty)
        out = {}
        for m, (low, high) in old.items():
            low, high = low.copy(), high.copy()
            low[:, dirty], high[:, dirty] = got[m]
            out[m] = (low, high)
        return out

    return per_query(
        lb,
        ("bounds",),
        token=grade,  # the top grade of the scale is every high bound's completion
        build=lambda: _score_bounds(lb, arrays, grade, None),
        patch=patch,
        patch_queries=PATCH_QUERIES,
    )


def bounds(lb: Leaderboard) -> Bounds:
    def compute() -> Bounds:
        every = query_bounds(lb)
        scored = lb.table.labelled
        low = _Scored({m: v[0] for m, v in every.items()}, scored)
        high = _Scored({m: v[1] for m, v in every.items()}, scored)
        n = max(int(scored.sum()), 1)
        return Bounds(
            low,
            high,
            {m: low[m].sum(axis=1) / n for m in low},
            {m: high[m].sum(axis=1) / n for m in high},
        )

    return cached(lb, ("bounds",), compute)


# --------------------------------------------------------------------------- the unjudged pairs per query


_NO_DOCS = np.zeros(0, dtype=np.int64)


def _pairs_of(arrays: TrustArrays, cutoff: int | None, queries: np.ndarray | None) -> metrics.UnjudgedPairs:
    """The unjudged pairs of some queries (all with None), their query as a cube position. Their documents
    are left out (an empty ``doc``): the counts need the systems only, and 10M ranked entries can hold
    millions of pairs."""
    if queries is None:
        got = metrics.unjudged_pairs(arrays.labels, arrays.doc_ids, cutoff=cutoff)
        return got._replace(doc=_NO_DOCS)
    got = metrics.unjudged_pairs(arrays.labels[:, queries], arrays.doc_ids[:, queries], cutoff=cutoff)
    return got._replace(query=queries[got.query], doc=_NO_DOCS)


def unjudged(lb: Leaderboard, cutoff: int | None) -> metrics.UnjudgedPairs:
    """Every query's unjudged pairs within ``cutoff`` (metrics.unjudged_pairs, without their documents) with
    their systems, in query order; after a judgment only the moved queries' pairs are grouped again."""
    arrays = campaign_arrays(lb)

    def patch(old: metrics.UnjudgedPairs, dirty: np.ndarray) -> metrics.UnjudgedPairs:
        new = _pairs_of(arrays, cutoff, dirty)
        keep = ~np.isin(old.query, dirty)
        query = np.concatenate([old.query[keep], new.query])
        order = np.argsort(query, kind="stable")
        return metrics.UnjudgedPairs(query[order], _NO_DOCS, np.concatenate([old.members[keep], new.members])[order])

    return per_query(
        lb,
        ("unjudged", cutoff),
        token=None,
        build=lambda: _pairs_of(arrays, cutoff, None),
        patch=patch,
        patch_queries=PATCH_QUERIES,
    )


def _open_words(open_systems: np.ndarray, n_words: int) -> np.ndarray:
    words = np.zeros(n_words, dtype=np.uint64)
    for s in np.flatnonzero(open_systems).tolist():  # over systems
        words[s // 64] |= np.uint64(1) << np.uint64(s % 64)
    return words


def _left_by_query(pairs: metrics.UnjudgedPairs, open_systems: np.ndarray, n_queries: int) -> np.ndarray:
    touched = (pairs.members & _open_words(open_systems, pairs.members.shape[1])).any(axis=1)
    return np.bincount(pairs.query[touched], minlength=n_queries)


def pairs_left_by_query(lb: Leaderboard, cutoff: int | None, open_systems: np.ndarray) -> np.ndarray:
    """(Q,) per query, the unjudged pairs within ``cutoff`` of some system in ``open_systems`` (S,) bool."""
    arrays = campaign_arrays(lb)
    n_q = arrays.positions.size

    def patch(old: np.ndarray, dirty: np.ndarray) -> np.ndarray:
        out = old.copy()
        out[dirty] = _left_by_query(_pairs_of(arrays, cutoff, dirty), open_systems, n_q)[dirty]
        return out

    return per_query(
        lb,
        ("left", cutoff),
        token=open_systems.tobytes(),
        build=lambda: _left_by_query(unjudged(lb, cutoff), open_systems, n_q),
        patch=patch,
        patch_queries=PATCH_QUERIES,
    )


def comparison_pairs_by_query(lb: Leaderboard, cutoff: int | None, comparisons: np.ndarray) -> np.ndarray:
    """(C, Q) per comparison (a, b) of ``comparisons`` (C, 2) and query: the unjudged pairs within
    ``cutoff`` of a's run or of b's (metrics.pairs_by_query)."""
    arrays = campaign_arrays(lb)
    n_q = arrays.positions.size

    def patch(old: np.ndarray, dirty: np.ndarray) -> np.ndarray:
        out = old.copy()
        out[:, dirty] = metrics.pairs_by_query(_pairs_of(arrays, cutoff, dirty), comparisons, n_q)[:, dirty]
        return out

    return per_query(
        lb,
        ("by-query", cutoff),
        token=comparisons.tobytes(),
        build=lambda: metrics.pairs_by_query(unjudged(lb, cutoff), comparisons, n_q),
        patch=patch,
        patch_queries=PATCH_QUERIES,
    )


# --------------------------------------------------------------------------- settled comparisons


@dataclass
class Verdicts:
    """Which adjacent systems of the ranking by one measure keep their order whatever is left to judge."""

    measure: str
    order: np.ndarray  # (S,) systems best first
    # {"systems": [a, b], "settled": bool, "open_pairs": n, "open_queries": n, "top_queries": [{"qid", "pairs"}]},
    # a above b
    adjacent: list[dict[str, Any]]
    pairs_left: int  # distinct unjudged pairs that can still change an open comparison
    settled: np.ndarray | None = None  # (S, S) metrics.settled(...).order; None without bounds for the measure


def verdicts(lb: Leaderboard, measure: str) -> Verdicts:
    """Settled or open for every adjacent pair, and the unjudged pairs that can still change the ranking.

    "Settled" compares the per-system bounds of :func:`metrics.settled`: exact for P@k, Hit@k and MRR;
    for the measures normalised by the query's relevant documents (R, F1, MAP, nDCG, bpref) it is
    settled against each system's own unjudged documents only. The counts are those of
    metrics.open_pairs and metrics.open_pairs_by_query, summed from per-query parts.
    """

    def compute() -> Verdicts:
        order = ranking_order(lb, measure)
        names = lb.cube.system_names
        b = bounds(lb)
        if measure not in b.low or len(order) < 2:
            return Verdicts(measure, order, [], 0)
        verdict = metrics.settled(b.low[measure], b.high[measure])
        cutoff = cutoff_of(measure, lb.params.k)
        scored = lb.table.labelled
        positions = np.flatnonzero(scored)
        is_open_pair = verdict.order == 0
        np.fill_diagonal(is_open_pair, False)
        left = pairs_left_by_query(lb, cutoff, is_open_pair.any(axis=1))
        above, below = order[:-1], order[1:]
        settled_ = verdict.order[above, below] != 0
        # where the open comparisons' unjudged pairs are: their number per query, the busiest queries first
        where = np.zeros((above.size, positions.size), dtype=np.int64)
        is_open = np.flatnonzero(~settled_)
        if is_open.size:
            pairs = np.stack([above[is_open], below[is_open]], axis=1)
            where[is_open] = comparison_pairs_by_query(lb, cutoff, pairs)[:, scored]
        n_open = where.sum(axis=1)
        busiest = np.argsort(-where, axis=1, kind="stable")[:, :TOP_OPEN_QUERIES]
        qids = lb.cube.qids
        adjacent = []
        for i, (a, c, s, n) in enumerate(
            zip(above.tolist(), below.tolist(), settled_.tolist(), n_open.tolist(), strict=True)
        ):  # over adjacent systems, not queries
            top = [(int(q), int(where[i, q])) for q in busiest[i].tolist() if where[i, q] > 0]
            adjacent.append(
                {
                    "systems": [names[a], names[c]],
                    "settled": bool(s),
                    "open_pairs": int(n),
                    "open_queries": int(np.count_nonzero(where[i])),
                    "top_queries": [{"qid": qids[positions[q]], "pairs": m} for q, m in top],
                }
            )
        return Verdicts(measure, order, adjacent, int(left[scored].sum()), verdict.order)

    return cached(lb, ("verdicts", measure), compute)


def pair_priority(lb: Leaderboard, measure: str) -> metrics.PairPriority | None:
    """The unjudged pairs that can still change the ranking by ``measure``, most urgent first
    (metrics.pair_priority; query as cube positions), or None without bounds for the measure."""

    def compute() -> metrics.PairPriority | None:
        v = verdicts(lb, measure)
        if v.settled is None:
            return None
        arrays = trust_arrays(lb)
        got = metrics.pair_priority(arrays.labels, arrays.doc_ids, v.settled, cutoff=cutoff_of(measure, lb.params.k))
        # got.query indexes the arrays' queries: back to cube positions
        return got._replace(query=arrays.positions[got.query])

    return cached(lb, ("priority", measure), compute)
