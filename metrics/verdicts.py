"""Verdicts on the final order of systems once every pooled pair is judged: sound bounds and their probability.

Three pieces, all vectorized over systems, queries and ranks:

* :func:`final_pool` marks the ranked entries whose label is still to come: documents in the pool (the top
  ``pool_depth`` of some run) with no label yet. Every other entry keeps its label to the end; an unjudged
  document outside the pool stays unjudged (non-relevant for every measure, skipped by bpref).
* :func:`difference_bounds` bounds, per query, the score difference of two systems over every grading of the
  pooled unjudged documents, the documents only other systems found included (they move num_rel and the
  ideal ranking that R, F1, MAP and nDCG divide by). A query without any label yet is bounded like any other:
  it joins the mean once judged. The bound of the mean difference is the sum of the per-query bounds, so an
  order whose lower bound is above zero can never flip ("settled").
* metrics.relevance_model puts a probability on the rest (``p_holds``), and metrics.final_order sums both
  over the queries into verdicts.

References
----------
Carterette, B., Allan, J. & Sitaraman, R. (2006). Minimal test collections for retrieval evaluation.
SIGIR (the distribution of a difference in a measure over unjudged documents, per-document relevance
probabilities, the probability that an order holds).
Aslam, J. A., Pavlu, V. & Yilmaz, E. (2006). A statistical method for system evaluation using incomplete
judgments. SIGIR (statAP: relevance priors from the ranks at which systems retrieve a document).
Carterette, B. (2007). Robust test collections for retrieval evaluation. SIGIR (relevance probabilities
learned from the judgments so far, confidence in an order).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import sparse

from metrics._types import BoolArray, FloatArray, IntArray
from metrics.bounds import grade_counts, idcg_from_counts
from metrics.measures import BOUNDED, WHOLE_RUN_ORDER
from metrics.numbers import MEASURE_RANGE, ordered_bounds
from metrics.ranking import (
    PAD,
    UNJUDGED,
    bpref,
    gain_values,
    rank_discounts,
    safe_divide,
)

__all__ = ["FinalPool", "difference_bounds", "final_pool", "system_bounds"]

WHOLE_RUN_BASES = WHOLE_RUN_ORDER


# ------------------------------------------------------------------------------------------ the final pool


class FinalPool(NamedTuple):
    """The entries of a ranking whose label is still to come, and the pooled documents behind them."""

    #: (S, Q, D) ranked labels as the final scoring reads them: UNJUDGED at the pooled unjudged entries
    #: and at unpooled unjudged ones (which stay so); condensed for ``judged_only``.
    labels: npt.NDArray[np.int8]
    #: (S, Q, D) index of the entry's pooled unjudged document in ``doc_query``, -1 for other entries.
    doc_index: IntArray
    #: (U,) query of each distinct pooled unjudged document, sorted.
    doc_query: IntArray
    #: (Q,) number of distinct pooled unjudged documents per query.
    distinct: IntArray
    #: (P,) every pooled document (judged or not), by query: its query, label (-1 unjudged) and number of runs
    #: that pooled it.
    pool_query: IntArray
    pool_label: IntArray
    pool_runs: IntArray
    #: (E,) the pool entries (ranks within the pool depth): their (system, rank bucket) cell and document.
    entry_cell: IntArray
    entry_doc: IntArray
    #: (U,) position of each unjudged pooled document among the pooled ones.
    unjudged_at: IntArray
    #: (U,) the document id of each unjudged pooled document (with its query, the pair it is).
    doc_id: IntArray


def rank_bucket(rank: IntArray) -> IntArray:
    """0 for rank 1, 1 for ranks 2-3, 2 for 4-7 ...: floor(log2(rank)), rank 1-based given 0-based."""
    bucket: IntArray = np.minimum(np.floor(np.log2(rank + 1.0)).astype(np.int64), N_BUCKETS - 1)
    return bucket


N_BUCKETS = 12

# Document ids up to which final_pool first tells the ranked entries whose document is pooled unjudged in some
# query by a table of one byte a document id (16 MB at most), and looks up only those among the pooled keys (one
# binary search each): at 20 systems x depth 1,000 most ranked entries are documents no run put in the pool, and
# the search of every entry took 45 ns an entry, 1.0 ms a query (0.23 ms with the table), half of what a judged
# query's bounds cost after a judgment and 270 of the 390 ms of 200 queries' bounds built at once (87 ms with it).
TABLE_DOC_IDS = 1 << 24


def _open_index(unjudged: BoolArray, docs: IntArray, open_keys: IntArray, span: int) -> IntArray:
    """(S, Q, D) int64: each unjudged entry's position among ``open_keys`` (query * span + document, sorted), -1
    elsewhere (judged entries, padding, documents outside the pool)."""
    doc_index = np.full(unjudged.shape, -1, dtype=np.int64)
    if not open_keys.size:
        return doc_index
    n_q, depth = unjudged.shape[1], unjudged.shape[2]
    if span < TABLE_DOC_IDS:
        in_pool = np.zeros(span + 1, dtype=bool)  # shifted by one: padding (-1) reads the False at 0
        in_pool[open_keys % span + 1] = True
        look = np.flatnonzero(unjudged.ravel() & in_pool[docs.ravel() + 1])
    else:
        look = np.flatnonzero(unjudged.ravel())
    keys = (look // depth) % n_q * span + docs.ravel()[look]
    at = np.minimum(np.searchsorted(open_keys, keys), open_keys.size - 1)
    found = open_keys[at] == keys
    doc_index.ravel()[look[found]] = at[found]
    return doc_index


def final_pool(
    labels: npt.ArrayLike, doc_ids: npt.ArrayLike, *, pool_depth: int, judged_only: bool = False
) -> FinalPool:
    """Which ranked entries are pooled and unjudged (:class:`FinalPool`).

    A document is in the pool when some run ranks it within ``pool_depth``; then every entry of it, at any
    rank of any run, gets its label when the pool is done. ``doc_ids`` are -1 at padding.
    """
    lab = np.asarray(labels).astype(np.int8, copy=False)
    docs = np.asarray(doc_ids, dtype=np.int64)
    n_s, n_q, depth = lab.shape
    pd = min(int(pool_depth), depth)
    span = int(docs.max()) + 1 if docs.size else 1
    q_of = np.arange(n_q, dtype=np.int64)[None, :, None]
    head = docs[..., :pd] >= 0
    head_keys = (q_of * span + docs[..., :pd])[head]
    pooled, owner, runs = np.unique(head_keys, return_inverse=True, return_counts=True)
    pool_label = np.full(pooled.size, -1, dtype=np.int64)
    np.maximum.at(pool_label, owner, lab[..., :pd][head].astype(np.int64))
    s_of = np.broadcast_to(np.arange(n_s)[:, None, None], head.shape)[head]
    r_of = np.broadcast_to(np.arange(pd)[None, None, :], head.shape)[head]
    unjudged_at = np.flatnonzero(pool_label < 0)
    open_keys = pooled[unjudged_at]
    unjudged = lab == UNJUDGED
    doc_index = _open_index(unjudged, docs, open_keys, span)
    doc_query = open_keys // span
    distinct = np.bincount(doc_query, minlength=n_q).astype(np.int64)
    if judged_only:
        keep = (lab >= 0) | (doc_index >= 0)
        lab, condensed = _condense_pair(lab, doc_index, keep)
        doc_index = condensed.astype(np.int64, copy=False)
    return FinalPool(
        lab,
        doc_index,
        doc_query,
        distinct,
        pooled // span,
        pool_label,
        runs.astype(np.int64),
        s_of * N_BUCKETS + rank_bucket(r_of),
        owner.astype(np.int64),
        unjudged_at,
        open_keys % span,
    )


def _condense_pair(lab: np.ndarray, index: IntArray, keep: BoolArray) -> tuple[np.ndarray, IntArray]:
    """Drop the entries outside ``keep`` from every ranking and close the gaps (trec_eval ``-J``)."""
    n_rows, depth = lab.shape[0] * lab.shape[1], lab.shape[2]
    flat = np.flatnonzero(keep.reshape(-1))
    row = flat // depth
    per_row = np.bincount(row, minlength=n_rows)
    new_rank = np.arange(flat.size) - (np.cumsum(per_row) - per_row)[row]
    out = np.full(lab.shape, PAD, dtype=lab.dtype)
    out_index = np.full(lab.shape, -1, dtype=np.int64)
    out.reshape(-1)[row * depth + new_rank] = lab.reshape(-1)[flat]
    out_index.reshape(-1)[row * depth + new_rank] = index.reshape(-1)[flat]
    return out, out_index


# ------------------------------------------------------------------------------------------ sound bounds


class _Parts(NamedTuple):
    low: FloatArray  # (S, Q) lowest score of each system over every grading
    high: FloatArray
    # score = numerator / denominator with a denominator shared by all systems of a query (None if none):
    num_low: FloatArray | None  # (S, Q)
    num_high: FloatArray | None
    den_low: FloatArray | None  # (Q,) smallest denominator, may be 0 (then every score of the query is 0)
    den_pos: FloatArray | None  # (Q,) smallest positive denominator
    den_high: FloatArray | None  # (Q,)
    # (Q, S, S) for numerators that add up over documents: how much the pooled unjudged documents both systems
    # hold tighten the numerator difference (each adds g * min(w_a, w_b) >= g * w_a * w_b), or None
    overlap: FloatArray | None = None


def _overlap(pool: FinalPool, depth: int, weights: FloatArray, scale: float) -> FloatArray:
    """(Q, S, S): ``scale`` times the sum over each query's pooled unjudged documents of w_a(d) * w_b(d), the
    weights of the entries within ``depth`` (1 for counts, the rank's discount for DCG); one sparse product."""
    idx = pool.doc_index[..., :depth]
    n_s, n_q, _ = idx.shape
    out = np.zeros((n_q, n_s, n_s))
    si, qi, ri = np.nonzero(idx >= 0)
    if not si.size or scale == 0:
        return out
    entries: Any = sparse.csr_matrix(
        (weights[ri].astype(np.float64), (qi * n_s + si, idx[si, qi, ri])),
        shape=(n_q * n_s, max(pool.doc_query.size, 1)),
        dtype=np.float64,
    )
    both: Any = (entries @ entries.T).tocoo()  # a document belongs to one query: only same-query blocks are filled
    q1, a = np.divmod(both.row, n_s)
    b = both.col % n_s
    np.add.at(out, (q1, a, b), both.data)
    result: FloatArray = out * scale
    return result


def _cut(pool: FinalPool, depth: int | None) -> tuple[np.ndarray, BoolArray]:
    lab = pool.labels if depth is None else pool.labels[..., :depth]
    unc = pool.doc_index >= 0 if depth is None else pool.doc_index[..., :depth] >= 0
    return lab, unc


def verdict_parts(
    base: str,
    pool: FinalPool,
    qrels: IntArray,
    *,
    k: int,
    threshold: int,
    gain: str,
    top_grade: int,
    overlap: bool = True,
) -> _Parts:
    """The sound bounds of ``base`` (see :func:`system_bounds`), each system's low and high score in [0, 1] with
    ``low <= high``: the two sides are sums of the same terms in other orders (a DCG down the ranking over an ideal
    DCG from grade counts), which can leave them a rounding step apart, 1.0000000000000002 above 1 or a low bound
    that much above its high one (metrics.numbers decides the tolerance; beyond it, a NumberError)."""
    p = _raw_parts(base, pool, qrels, k=k, threshold=threshold, gain=gain, top_grade=top_grade, overlap=overlap)
    low, high = ordered_bounds(p.low, p.high, *MEASURE_RANGE, what=f"{base} bounds")
    return p._replace(low=low, high=high)


def _raw_parts(
    base: str, pool: FinalPool, qrels: IntArray, *, k: int, threshold: int, gain: str, top_grade: int, overlap: bool
) -> _Parts:
    """Each query's bounds of measure ``base`` over the pooled unjudged documents (see :func:`verdict_parts`).

    One function: each measure's bounds are a few lines over the same cut of the pool and the same relevant
    counts; one function per measure would repeat that setup seven times.
    """
    can = top_grade >= threshold  # an unjudged document may turn out relevant
    must = threshold <= 0  # ... or must (threshold 0: every judged document is relevant)
    n_unc = pool.distinct.astype(np.float64)
    num_rel = np.count_nonzero(qrels >= threshold, axis=-1).astype(np.float64)
    r_low, r_high = num_rel + must * n_unc, num_rel + can * n_unc
    if base in ("P", "R", "F1", "Hit"):
        lab, unc = _cut(pool, k)
        r0 = np.count_nonzero(lab >= threshold, axis=-1).astype(np.float64)
        u = np.count_nonzero(unc, axis=-1).astype(np.float64)
        x_low, x_high = must * u, can * u
        shared = _overlap(pool, k, np.ones(lab.shape[-1]), float(can) - float(must)) if overlap else None
        if base == "P":
            return _Parts(
                (r0 + x_low) / k,
                (r0 + x_high) / k,
                r0 + x_low,
                r0 + x_high,
                np.full(qrels.shape[0], float(k)),
                np.full(qrels.shape[0], float(k)),
                np.full(qrels.shape[0], float(k)),
                shared,
            )
        if base == "Hit":
            return _Parts(
                (r0 + x_low > 0).astype(np.float64), (r0 + x_high > 0).astype(np.float64), None, None, None, None, None
            )
        others = np.maximum(n_unc[None, :] - u, 0.0)
        y_low, y_high = must * others, can * others
        c = 0.0 if base == "R" else float(k)
        scale = 1.0 if base == "R" else 2.0
        # (r0 + x) / (c + R0 + x + y) grows with x (the system's own documents) and falls with y (the others')
        low_r, high_r = num_rel + x_low + y_high, num_rel + x_high + y_low
        low = np.where(low_r > 0, safe_divide(scale * (r0 + x_low), c + low_r), 0.0)
        high = np.where(high_r > 0, safe_divide(scale * (r0 + x_high), c + high_r), 0.0)
        if base == "F1":
            return _Parts(low, high, None, None, None, None, None)
        return _Parts(low, high, r0 + x_low, r0 + x_high, r_low, np.maximum(r_low, 1.0), r_high, shared)
    if base == "MRR":
        lab, unc = _cut(pool, None)
        lo_rel, hi_rel = (lab >= threshold) | (unc & must), (lab >= threshold) | (unc & can)
        depth = lab.shape[-1]
        rr = 1.0 / np.arange(1, depth + 1)

        def first(rel: BoolArray) -> FloatArray:
            out: FloatArray = np.where(rel.any(axis=-1), rr[np.argmax(rel, axis=-1)], 0.0)
            return out

        return _Parts(first(lo_rel), first(hi_rel), None, None, None, None, None)
    if base == "MAP":
        lab, unc = _cut(pool, None)
        depth = lab.shape[-1]
        inv = 1.0 / np.arange(1, depth + 1)

        def precision_sum(rel: BoolArray) -> FloatArray:
            c = np.cumsum(rel, axis=-1, dtype=np.int64)
            out: FloatArray = np.sum(c * rel * inv, axis=-1)
            return out

        ps_low = precision_sum((lab >= threshold) | (unc & must))
        ps_high = precision_sum((lab >= threshold) | (unc & can))
        den_pos = np.maximum(r_low, 1.0)
        return _Parts(
            safe_divide(ps_low, r_high[None, :]),
            np.minimum(1.0, ps_high / den_pos[None, :]),
            ps_low,
            ps_high,
            r_low,
            den_pos,
            r_high,
        )
    if base == "nDCG":
        lab, unc = _cut(pool, k)
        disc = rank_discounts(lab.shape[-1])
        judged_gain = gain_values(lab, gain) * (lab >= 0)
        top_gain = float(gain_values(np.array(top_grade), gain)) if top_grade >= 1 else 0.0
        dcg_low = (judged_gain * disc).sum(axis=-1)
        dcg_high = dcg_low + top_gain * (unc * disc).sum(axis=-1)
        counts = grade_counts(qrels, top_grade + 1)
        idcg_low = idcg_from_counts(counts, k, gain)
        counts_high = counts.copy()
        if top_grade >= 1:
            counts_high[:, top_grade] += pool.distinct
        idcg_high = idcg_from_counts(counts_high, k, gain)
        den_pos = np.where(idcg_low > 0, idcg_low, 1.0)  # a grade-1 document at rank 1: gain 1, discount 1
        return _Parts(
            safe_divide(dcg_low, idcg_high[None, :]),
            np.minimum(1.0, dcg_high / den_pos[None, :]),
            dcg_low,
            dcg_high,
            idcg_low,
            den_pos,
            idcg_high,
            _overlap(pool, k, disc, top_gain) if overlap else None,
        )
    if base == "bpref":
        lab, unc = _cut(pool, None)
        exact = bpref(lab, qrels, threshold=threshold)
        # bpref moves with every label of its query (num_rel and num_nonrel both): no finer bound than [0, 1]
        # where any pooled document of the query is still unjudged
        open_q = pool.distinct > 0
        return _Parts(np.where(open_q, 0.0, exact), np.where(open_q, 1.0, exact), None, None, None, None, None)
    raise ValueError(f"no bounds for measure {base!r}")


def system_bounds(
    base: str, pool: FinalPool, qrels: npt.ArrayLike, *, k: int, threshold: int, gain: str, top_grade: int
) -> tuple[FloatArray, FloatArray]:
    """(low, high), (S, Q) each: every system's lowest and highest score per query over every grading of the
    pooled unjudged documents (theirs and the other systems')."""
    p = verdict_parts(
        base, pool, np.asarray(qrels), k=k, threshold=threshold, gain=gain, top_grade=top_grade, overlap=False
    )
    return p.low, p.high


BOUNDED_BASES = BOUNDED  # every measure of evaluate but Judged, in the leaderboard's order


def pool_bounds(
    labels: npt.ArrayLike,
    doc_ids: npt.ArrayLike,
    qrels: npt.ArrayLike,
    *,
    pool_depth: int,
    k: int,
    top_grade: int,
    threshold: int = 1,
    gain: str = "linear",
    judged_only: bool = False,
) -> dict[str, tuple[FloatArray, FloatArray]]:
    r"""Each system's lowest and highest **final** score of every measure, per query: over every grading of the
    pooled unjudged documents, the system's own and every other system's (:func:`system_bounds` on the pool of
    ``labels``). Unlike :func:`metrics.score_bounds`, which completes each run on its own, the final value always
    lies within: a document only another system found, judged relevant, raises num_rel and the ideal ranking and
    lowers R, F1, MAP, nDCG and bpref, and the low bound counts on it. Unjudged documents outside the pool stay
    unjudged (non-relevant) in the final scores, as they will.

    Parameters
    ----------
    labels, doc_ids : arrays, shape (S, Q, D)
        Ranked labels (``UNJUDGED``, ``PAD``) and document ids (-1 at padding), see :func:`final_pool`.
    qrels : int array, shape (Q, M)
        Every label of each query.
    pool_depth : int
        The pool's depth: documents some run ranks within it get a label once the pool is done.
    k, top_grade, threshold, gain, judged_only
        As in :func:`metrics.evaluate` and :func:`metrics.score_bounds` (``judged_only``: condensed lists).

    Returns
    -------
    dict of str to (low, high), float arrays (S, Q)
        Keyed by measure name at ``k`` (``P@10``, ``MRR``, ...) in :func:`metrics.evaluate`'s order, without
        ``Judged@k``; in [0, 1] with ``low <= high`` exactly (metrics.numbers).
    """
    pool = final_pool(labels, doc_ids, pool_depth=pool_depth, judged_only=judged_only)
    q = np.asarray(qrels)
    out: dict[str, tuple[FloatArray, FloatArray]] = {}
    for base in BOUNDED_BASES:
        name = base if base in WHOLE_RUN_BASES else f"{base}@{k}"
        out[name] = system_bounds(base, pool, q, k=k, threshold=threshold, gain=gain, top_grade=top_grade)
    return out


def difference_bounds(
    base: str,
    pool: FinalPool,
    qrels: npt.ArrayLike,
    comparisons: npt.ArrayLike,
    *,
    k: int,
    threshold: int,
    gain: str,
    top_grade: int,
) -> tuple[FloatArray, FloatArray]:
    r"""(low, high), (C, Q) each: the smallest and largest score difference a - b per query of each comparison
    (a, b) of ``comparisons`` (C, 2) over every grading of the pooled unjudged documents.

    Two sound bounds, intersected: the systems' own bounds (:func:`system_bounds`,
    :math:`[\mathrm{low}_a - \mathrm{high}_b, \mathrm{high}_a - \mathrm{low}_b]`), and for measures whose
    denominator is shared by the systems of a query (num_rel for R and MAP, IDCG for nDCG, k for P) the
    numerator difference over the range of the denominator: :math:`n / D` with
    :math:`n \in [n^-, n^+]` and :math:`D \in [D^-, D^+]` lies between its corner values, and is 0 when
    :math:`D` can be 0 (a query without a relevant document scores 0 for everyone).
    """
    q = np.asarray(qrels)
    pairs = np.asarray(comparisons, dtype=np.int64).reshape(-1, 2)
    p = verdict_parts(base, pool, q, k=k, threshold=threshold, gain=gain, top_grade=top_grade)
    a, b = pairs[:, 0], pairs[:, 1]
    low = p.low[a] - p.high[b]
    high = p.high[a] - p.low[b]
    if p.num_low is not None and p.num_high is not None and p.den_pos is not None and p.den_high is not None:
        assert p.den_low is not None
        n_low = p.num_low[a] - p.num_high[b]
        n_high = p.num_high[a] - p.num_low[b]
        if p.overlap is not None:
            shared = p.overlap[:, a, b].T  # (C, Q)
            n_low, n_high = n_low + shared, n_high - shared
        j_low = np.where(n_low < 0, safe_divide(n_low, p.den_pos), safe_divide(n_low, p.den_high))
        j_high = np.where(n_high > 0, safe_divide(n_high, p.den_pos), safe_divide(n_high, p.den_high))
        zero_possible = p.den_low <= 0
        j_low = np.where(zero_possible, np.minimum(j_low, 0.0), j_low)
        j_high = np.where(zero_possible, np.maximum(j_high, 0.0), j_high)
        low, high = np.maximum(low, j_low), np.minimum(high, j_high)
    return low, high
