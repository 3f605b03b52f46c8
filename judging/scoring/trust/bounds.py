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
import metrics.final_order
import metrics.selection
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
from judging.scoring.trust.final import final_parts, final_verdicts, universe
from judging.scoring.trust.store import cached, per_query, query_chunks
from metrics import Measure
from metrics.measures import JUDGED

# An open comparison names this many of the queries that hold most of its unjudged pairs.
TOP_OPEN_QUERIES = 5


class _Scored(Mapping[str, np.ndarray]):
    """measure -> (S, Qs) per-query values over the scored queries, taken out of the campaign's (S, Q)
    arrays when asked for (most callers want one measure, or only the means)."""

    def __init__(self, every: dict[str, np.ndarray], scored: np.ndarray) -> None:
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
    """metrics.pool_bounds of some queries (every query with None): the lowest and highest final score over every
    grading of the pooled unjudged documents, the system's own and the other systems' (issue 39: the per-run hull
    of metrics.score_bounds let R, F1, MAP, nDCG and bpref end below their low bound)."""
    labels, qrels, doc_ids = arrays.labels, arrays.qrels, arrays.doc_ids
    if queries is not None:
        labels, qrels, doc_ids = labels[:, queries], qrels[queries], doc_ids[:, queries]
    p = lb.params
    return metrics.pool_bounds(
        labels,
        doc_ids,
        qrels,
        pool_depth=int(lb.campaign.pool_depth),
        k=p.k,
        top_grade=grade,
        threshold=p.threshold,
        gain=p.gain,
        judged_only=p.judged_only,
    )


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

    def build() -> dict[str, tuple[np.ndarray, np.ndarray]]:
        n_s, n_q, depth = arrays.labels.shape
        chunks = query_chunks(n_q, n_s * depth)
        if len(chunks) == 1:
            return _score_bounds(lb, arrays, grade, None)
        out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for queries in chunks:  # over blocks of queries, each query's bounds its own
            for m, (low, high) in _score_bounds(lb, arrays, grade, queries).items():
                if m not in out:
                    out[m] = (np.empty((n_s, n_q), low.dtype), np.empty((n_s, n_q), high.dtype))
                out[m][0][:, queries], out[m][1][:, queries] = low, high
        return out

    return per_query(
        lb,
        ("bounds",),
        token=(grade, int(lb.campaign.pool_depth)),  # the top grade completes the high bounds; the pool's depth
        build=build,
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


def pairs_left_by_query(
    lb: Leaderboard, cutoff: int | None, open_systems: np.ndarray, what: str = "left"
) -> np.ndarray:
    """(Q,) per query, the unjudged pairs within ``cutoff`` of some system in ``open_systems`` (S,) bool
    (kept under ``what``: one set of systems each)."""
    arrays = campaign_arrays(lb)
    n_q = arrays.positions.size

    def patch(old: np.ndarray, dirty: np.ndarray) -> np.ndarray:
        out = old.copy()
        out[dirty] = _left_by_query(_pairs_of(arrays, cutoff, dirty), open_systems, n_q)[dirty]
        return out

    return per_query(
        lb,
        (what, cutoff),
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
    """How each adjacent order of the ranking by one measure stands against the rest of the pool."""

    measure: str
    order: np.ndarray  # (S,) systems best first
    # {"systems": [a, b], "settled": bool, "verdict": "settled" | "tied" | "likely" | "open", "p_holds": p,
    #  "open_pairs": n, "open_queries": n, "top_queries": [{"qid", "pairs"}]}, a above b
    adjacent: list[dict[str, Any]]
    pairs_left: int  # distinct unjudged pairs that can still change an open comparison
    settled: np.ndarray | None = None  # (S, S) metrics.settled(...).order; None without bounds for the measure
    final_queries: int = 0  # queries the final means will hold: those with a label, and those with pooled pairs
    without_labels: int = 0  # of those, queries with no label yet
    cutoff: int | None = None


def verdicts(lb: Leaderboard, measure: str) -> Verdicts:
    """Settled, tied, likely or open for every adjacent pair, and the unjudged pairs that can still change
    the ranking.

    The verdicts are on the final means, once every pooled pair is judged (judging.scoring.trust.final):
    "settled" when no grading of the pooled unjudged documents, queries without a label yet included, can
    flip the order (sound for every measure: the bounds of metrics.verdicts count the documents other
    systems found, which move num_rel and the ideal ranking); "tied" when no grading can part the two;
    "likely" when p_holds >= final.CONFIDENCE. The (S, S) matrix ``settled`` (for the queue's priority)
    compares the systems' own sound bounds. The counts are those of metrics.open_pairs and
    metrics.open_pairs_by_query, summed from per-query parts over the final queries.
    """

    def compute() -> Verdicts:
        order = ranking_order(lb, measure)
        names = lb.cube.system_names
        if Measure.parse(measure).base == JUDGED or len(order) < 2:
            return Verdicts(measure, order, [], 0)
        above, below = order[:-1], order[1:]
        fv = final_verdicts(lb, measure, above, below)
        parts = final_parts(lb, measure)
        cols = np.flatnonzero(fv.final_queries)
        verdict = metrics.settled(parts.low[:, cols], parts.high[:, cols]) if cols.size else None
        matrix = verdict.order.copy() if verdict is not None else np.zeros((len(names),) * 2, dtype=np.int8)
        # the adjacent bounds are the finer ones (a shared denominator): a settled adjacent order is settled
        done = np.array([w in ("settled", "tied") for w in fv.verdict], dtype=bool)
        settled_adj = np.array([w == "settled" for w in fv.verdict], dtype=bool)
        matrix[above[settled_adj], below[settled_adj]] = 1
        matrix[below[settled_adj], above[settled_adj]] = -1
        matrix[above[done & ~settled_adj], below[done & ~settled_adj]] = 1  # tied: nothing left to judge there
        matrix[below[done & ~settled_adj], above[done & ~settled_adj]] = -1
        cutoff = cutoff_of(measure, lb.params.k)
        is_open_pair = matrix == 0
        np.fill_diagonal(is_open_pair, False)
        left = pairs_left_by_query(lb, cutoff, is_open_pair.any(axis=1))
        # where the open comparisons' unjudged pairs are: their number per query, the busiest queries first
        where = np.zeros((above.size, cols.size), dtype=np.int64)
        is_open = np.flatnonzero(~done)
        if is_open.size:
            pairs = np.stack([above[is_open], below[is_open]], axis=1)
            where[is_open] = comparison_pairs_by_query(lb, cutoff, pairs)[:, cols]
        n_open = where.sum(axis=1)
        busiest = _busiest(where, TOP_OPEN_QUERIES)
        qids = lb.cube.qids
        adjacent = []
        for i, (a, c, word, p, n) in enumerate(
            zip(above.tolist(), below.tolist(), fv.verdict, fv.p_holds.tolist(), n_open.tolist(), strict=True)
        ):  # over adjacent systems, not queries
            top = [(int(q), int(where[i, q])) for q in busiest[i].tolist()]
            adjacent.append(
                {
                    "systems": [names[a], names[c]],
                    "settled": word == "settled",
                    "verdict": word,
                    "p_holds": round(float(p), 4),
                    "open_pairs": int(n),
                    "open_queries": int(np.count_nonzero(where[i])),
                    "top_queries": [{"qid": qids[cols[q]], "pairs": m} for q, m in top],
                }
            )
        return Verdicts(
            measure, order, adjacent, int(left[cols].sum()), matrix, int(cols.size), fv.without_labels, cutoff
        )

    return cached(lb, ("verdicts", measure), compute)


def _busiest(where: np.ndarray, n: int) -> list[np.ndarray]:
    """Per row, the columns of the n largest positive values, largest first (ties by column), without sorting
    whole rows: the row's n-th largest value is found by np.partition, then only columns at or above it sort."""
    if where.shape[1] > n:
        nth = np.partition(where, where.shape[1] - n, axis=1)[:, where.shape[1] - n]
    else:
        nth = np.zeros(where.shape[0], dtype=where.dtype)
    out = []
    for i in range(where.shape[0]):  # over adjacent comparisons, not queries
        chosen = np.flatnonzero(where[i] >= max(int(nth[i]), 1))
        out.append(chosen[np.lexsort((chosen, -where[i, chosen]))][:n])
    return out


def judgments_left(lb: Leaderboard, v: Verdicts, top_k: int) -> int:
    """About how many judgments would settle the order of the top ``top_k`` systems and the border with the
    next: the distinct unjudged pairs within the measure's cutoff of the systems in a comparison among them
    that is neither settled nor tied, over the final queries, times the campaign's annotators per pair."""
    head = v.adjacent[:top_k]
    systems = np.zeros(len(lb.cube.system_ids), dtype=bool)
    for i, entry in enumerate(head):  # over at most top_k comparisons
        if entry["verdict"] not in ("settled", "tied"):
            systems[v.order[i]] = systems[v.order[i + 1]] = True
    if not systems.any():
        return 0
    left = pairs_left_by_query(lb, v.cutoff, systems, what="stop-left")
    final = final_verdicts_queries(lb, v.measure)
    return int(left[final].sum()) * int(lb.campaign.redundancy)


# The stop's estimate of a campaign in queue mode ``mtc`` follows MTC's schedule up to this many ranked entries in the
# campaign's arrays (systems x queries x depth): MTC's order costs about 0.2 us an entry (180-230 ms at 20 systems x
# 5,000 queries x depth 10, bench/verdicts_bench.py), computed once per labels state on the leaderboard's request
# after a judgment. Past it the estimate keeps the even pace.
STOP_SCHEDULE_ENTRIES = 100_000


def judgments_to_stop(lb: Leaderboard, v: Verdicts, top_k: int) -> int:
    """About how many more judgments until the stop on the top ``top_k`` systems is reached
    (metrics.final_order.judgments_to_stop on the final parts: the median over draws of the judging to come),
    times the campaign's annotators per pair; 0 once reached.

    The pending pairs are judged at one even pace across the queries, but in queue mode ``mtc`` on a campaign of
    up to STOP_SCHEDULE_ENTRIES ranked entries, where they come in MTC's order (metrics.selection.mtc_schedule:
    the queue's order, each pair weighed by its coefficients in the open top comparisons; Carterette, Allan &
    Sitaraman, SIGIR 2006): on MTC's path that estimate is within 1.5 times of what the stop took at 72% of the
    steps against 64% at an even pace (48 systems; 60% against 18% where the stop came early,
    tests/metrics/test_stop_estimate.py). The other modes have no schedule to give: ``shuffled`` and ``audit``
    serve query by query, ``bandit`` the systems finding relevant documents, ``matter``, ``doubtful`` and
    ``hybrid`` the whole ranking or the model's doubts, none the top comparisons first."""
    head = v.adjacent[:top_k]
    if not head:
        return 0
    n = len(head)
    certain = np.array([entry["verdict"] in ("settled", "tied") for entry in head])
    above, below = v.order[:n], v.order[1 : n + 1]
    schedule = _mtc_schedule(lb, above[~certain], below[~certain])
    estimate = metrics.final_order.judgments_to_stop(
        final_parts(lb, v.measure),
        final_verdicts_queries(lb, v.measure),
        above,
        below,
        certain=certain,
        queue=None if schedule is None else schedule[0],
        queue_weights=None if schedule is None else schedule[1],
    )
    return int(np.ceil(estimate)) * int(lb.campaign.redundancy)


def _mtc_schedule(lb: Leaderboard, above: np.ndarray, below: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(queries as cube positions, weights) of the pending pairs in the order the ``mtc`` queue serves them
    (nDCG at the campaign's k, as judging.scoring.selection.mtc_pairs orders them), or None: another queue mode,
    no open comparison, or a campaign past STOP_SCHEDULE_ENTRIES."""
    if lb.campaign.queue_mode != "mtc" or not above.size:
        return None
    n_systems, n_queries, n_ranks = lb.cube.doc_ids.shape
    depth = max(1, min(int(lb.campaign.pool_depth), int(n_ranks)))  # the pooled ranks: what the queue serves
    if int(n_systems) * int(n_queries) * depth > STOP_SCHEDULE_ENTRIES:
        return None  # sized from the cube before any array is read: a large campaign's arrays may not be built yet
    arrays = campaign_arrays(lb)
    p = lb.params
    got = metrics.selection.mtc_schedule(
        arrays.labels[..., :depth],
        arrays.qrels,
        arrays.doc_ids[..., :depth],
        above,
        below,
        measure="nDCG",
        k=p.k,
        top_grade=max(top_grade(lb.campaign, arrays.qrels), 1),
        gain=p.gain,
        threshold=p.threshold,
    )
    return arrays.positions[got.query], got.weight


def final_verdicts_queries(lb: Leaderboard, measure: str) -> np.ndarray:
    """(Q,) bool: the queries the final means will hold (a label now, or pooled pairs left)."""
    parts = final_parts(lb, measure)
    return universe(lb) & (lb.table.labelled | (parts.pending > 0))


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
