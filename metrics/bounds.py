"""How far to trust a leaderboard: score bounds over unjudged documents, settled comparisons, open pairs."""

import numbers
from typing import NamedTuple, cast

import numpy as np
import numpy.typing as npt

from metrics._types import BoolArray, FloatArray, IntArray
from metrics.numbers import MEASURE_RANGE, TOLERANCE, ordered_bounds
from metrics.ranking import (
    UNJUDGED,
    bpref_from_counts,
    check_gain,
    check_k,
    check_labels,
    check_qrels,
    check_threshold,
    count_nonrelevant,
    count_relevant,
    cumulative_counts,
    dcg_at_k,
    from_counts,
    gain_values,
    idcg_at_k,
    int_array,
    rank_discounts,
    safe_divide,
    weighted_sum,
)

__all__ = [
    "PairPriority",
    "Settled",
    "UnjudgedPairs",
    "open_pairs",
    "open_pairs_by_query",
    "pair_priority",
    "pairs_by_query",
    "score_bounds",
    "settled",
    "unjudged_pairs",
]


# --------------------------------------------------------------------------------------------------------
# Shared with metrics.pool


def _check_top_grade(top_grade: object, qrels: IntArray) -> int:
    if isinstance(top_grade, bool) or not isinstance(top_grade, numbers.Integral) or top_grade < 0:
        raise ValueError(f"top_grade must be an integer >= 0, got {top_grade!r}")
    if qrels.size and int(qrels.max()) > top_grade:
        raise ValueError(f"top_grade {top_grade} is below the largest label in qrels ({int(qrels.max())})")
    return int(top_grade)


def grade_counts(qrels: IntArray, n_grades: int) -> IntArray:
    """(Q, n_grades) number of labels of each grade per query (the UNJUDGED padding left out)."""
    n_queries = qrels.shape[0]
    row, _ = np.nonzero(qrels >= 0)
    values = qrels[qrels >= 0].astype(np.int64)
    counts: IntArray = np.bincount(row * n_grades + values, minlength=n_queries * n_grades)
    return counts.reshape(n_queries, n_grades)


def idcg_from_counts(counts: IntArray, k: int, gain: str) -> FloatArray:
    """IDCG@k from label histograms (..., G): the ideal ranking is every grade's labels, best grade first.

    Grade g fills the ranks from the number of better labels on, so its share of IDCG is gain(g) times
    the discounts of those ranks below k: one cumulative sum of discounts serves every histogram, which
    is how one qrels row gets a different IDCG per system without sorting (S, Q) rows.
    """
    descending = counts[..., ::-1]
    end = np.cumsum(descending, axis=-1)
    start = end - descending
    cumulative = np.concatenate([[0.0], np.cumsum(rank_discounts(k))])
    share = cumulative[np.minimum(end, k)] - cumulative[np.minimum(start, k)]
    idcg: FloatArray = weighted_sum(share, gain_values(np.arange(counts.shape[-1])[::-1], gain))
    return idcg


def check_doc_ids(doc_ids: npt.ArrayLike, labels: IntArray) -> IntArray:
    doc_ids = int_array(doc_ids, "doc_ids (systems, queries, depth)", 3, -1)
    if doc_ids.shape[:2] == labels.shape[:2] and doc_ids.shape[2] == 0:
        doc_ids = np.full(labels.shape, -1, dtype=np.int64)  # labels padded a depth-0 array to one column
    if doc_ids.shape != labels.shape:
        raise ValueError(f"doc_ids has shape {doc_ids.shape} but labels has shape {labels.shape}")
    if ((doc_ids < 0) != (labels == -2)).any():
        raise ValueError("doc_ids must be -1 exactly where labels is PAD (-2)")
    return doc_ids.astype(np.int64, copy=False)


def group_entries(mask: BoolArray, doc_ids: IntArray) -> tuple[IntArray, IntArray, IntArray, IntArray, BoolArray]:
    """Group the masked (system, query, rank) entries by (query, document).

    Returns per entry, in group order: system, query, rank (0-based) and a flag opening each group.
    Within a query the entries of all systems are one row of (S x depth) keys ``doc * S * depth + j``
    (j = system * depth + rank), sorted row by row: sorting many short rows is several times faster
    than one sort of every key, and the key carries the system and rank along.
    """
    n_systems, n_queries, depth = mask.shape
    width = n_systems * depth
    sentinel = np.iinfo(np.int64).max
    top = int(doc_ids.max()) if doc_ids.size else 0
    if (top + 1) * width >= sentinel:
        raise ValueError(f"document ids up to {top} are too large to group ({width} entries per query)")
    j = np.arange(width, dtype=np.int64).reshape(n_systems, 1, depth)
    keys = np.where(mask, doc_ids * width + j, sentinel)
    keys = np.sort(keys.transpose(1, 0, 2).reshape(n_queries, width), axis=1).reshape(-1)
    valid = np.flatnonzero(keys != sentinel)
    query = valid // width
    flat = keys[valid]
    doc, j = np.divmod(flat, width)
    system, rank = np.divmod(j, depth)
    opens = np.ones(flat.size, dtype=bool)
    opens[1:] = (doc[1:] != doc[:-1]) | (query[1:] != query[:-1])
    return system, query, rank, doc, opens


def _unjudged_groups(
    labels: IntArray, doc_ids: IntArray, cutoff: int | None, systems: BoolArray
) -> tuple[IntArray, IntArray, IntArray, IntArray, npt.NDArray[np.uint64]]:
    """Distinct unjudged (query, document) pairs in the top ``cutoff`` of the chosen systems.

    Returns query, document, best (smallest) 0-based rank, number of systems, and membership as an
    (P, W) array of uint64 words (system s is bit s % 64 of word s // 64).
    """
    depth = labels.shape[2] if cutoff is None else min(cutoff, labels.shape[2])
    mask = labels[..., :depth] == UNJUDGED
    mask &= systems[:, None, None]
    system, query, rank, doc, opens = group_entries(mask, doc_ids[..., :depth])
    starts = np.flatnonzero(opens)
    n_words = max((labels.shape[0] + 63) // 64, 1)
    members = np.zeros((starts.size, n_words), dtype=np.uint64)
    if starts.size:
        bit = np.left_shift(np.uint64(1), (system % 64).astype(np.uint64))
        for word in range(n_words):  # one pass per 64 systems
            members[:, word] = np.bitwise_or.reduceat(np.where(system // 64 == word, bit, np.uint64(0)), starts)
        best = np.minimum.reduceat(rank, starts)
        count = np.diff(np.append(starts, system.size))
    else:
        best = count = np.zeros(0, dtype=np.int64)
    return query[starts], doc[starts], best, count, members


def _check_cutoff(cutoff: object) -> int | None:
    return None if cutoff is None else check_k(cutoff)


# --------------------------------------------------------------------------------------------------------
# Bounds


def score_bounds(
    labels: npt.ArrayLike,
    qrels: npt.ArrayLike,
    *,
    k: int = 10,
    top_grade: int,
    threshold: float = 1,
    gain: str = "linear",
) -> dict[str, tuple[FloatArray, FloatArray]]:
    r"""Lowest and highest score of every measure over the gradings of each run's unjudged documents.

    Two completions of the qrels bound the score of system s:

    * **low**: every unjudged document counts as non-relevant. That is today's score for every
      measure but bpref, which skips unjudged documents; its low completion judges each unjudged
      retrieved document non-relevant (label 0; nothing changes when ``threshold`` is 0).
    * **high**: every unjudged document that s retrieved within the measure's cutoff (the top k for
      P, R, F1, Hit and nDCG; the whole run for MRR, MAP and bpref) gets ``top_grade``, and joins the
      qrels: num_rel and the ideal ranking grow with it, as they would if an assessor had judged so.

    The returned interval is the hull of today's score and the two completions. For P@k, R@k, F1@k,
    Hit@k and RR a score only grows as labels rise, so the interval is exactly the smallest and largest
    score any grading of those documents gives. AP, nDCG and bpref are not monotone in one label (a
    relevant document found at rank 100 adds more to num_rel than to the sum of precisions), so a
    grading in between can fall outside; the interval then says how far the two extreme readings apart.

    Each run is completed on its own (a per-system bound): documents that only other systems retrieved
    stay as they are, even though judging them relevant would lower this system's recall.

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Ranked labels, see :func:`metrics.precision`; ``UNJUDGED`` entries are the documents to grade.
    qrels : int array, shape (Q, M)
        Labels of every labelled document of each query, see :func:`metrics.recall`.
    k : int, default 10
        Cutoff of the @k measures.
    top_grade : int
        The best grade of the campaign's scale, >= every label in ``qrels``.
    threshold : int, default 1
        Relevance threshold of the binary measures (not of nDCG).
    gain : {"linear", "exponential"}, default "linear"
        nDCG gain.

    Returns
    -------
    dict of str to (low, high) pairs of float64 arrays of shape (S, Q)
        The keys of :func:`metrics.evaluate` without ``Judged@k`` (which has nothing to bound), in the
        same order. Average each side with :func:`metrics.mean` for the bounds of the mean.

    Notes
    -----
    Rankings are scored as retrieved: the bounds are those of the default scoring, not of
    ``judged_only`` (condensed) scoring.
    """
    labels = check_labels(labels)
    qrels = check_qrels(qrels, labels)
    k = check_k(k)
    threshold = check_threshold(threshold)
    gain = check_gain(gain)
    top_grade = _check_top_grade(top_grade, qrels)

    num_rel, num_nonrel = count_relevant(qrels, threshold), count_nonrelevant(qrels, threshold)
    n_systems, n_queries, depth = labels.shape
    # Three cumulative counts along the ranking serve today's scores and both completions: the
    # completions only move unjudged documents into the relevant or the judged non-relevant ones.
    relevant = labels >= threshold
    unjudged = labels == UNJUDGED
    c_rel, c_unj, c_non = cumulative_counts(relevant, unjudged, (labels >= 0) & (labels < threshold))
    at_k = min(k, depth) - 1
    u_all, u_k = c_unj[..., -1].astype(np.int64), c_unj[..., at_k].astype(np.int64)
    top_relevant = top_grade >= threshold

    discounts = rank_discounts(min(k, depth))
    top_gain = gain_values(np.array(top_grade), gain)
    dcg = dcg_at_k(labels, k, gain)
    ndcg = safe_divide(dcg, idcg_at_k(qrels, k, gain))
    counts = np.broadcast_to(grade_counts(qrels, top_grade + 1), (n_systems, n_queries, top_grade + 1)).copy()
    counts[..., top_grade] += u_k
    high_dcg = dcg + top_gain * weighted_sum(unjudged[..., :k], discounts)
    high_ndcg = safe_divide(high_dcg, idcg_from_counts(counts, k, gain))

    today = from_counts(relevant, c_rel, c_non, num_rel, num_rel, num_nonrel, k, at_k, ndcg)
    if top_relevant:
        high_relevant = relevant | unjudged
        high = from_counts(
            high_relevant, c_rel + c_unj, c_non, num_rel + u_k, num_rel + u_all, num_nonrel, k, at_k, high_ndcg
        )
    else:
        # The top grade is below the threshold: the completion adds judged non-relevant documents.
        high = dict(today)
        high["bpref"] = bpref_from_counts(relevant, c_non + c_unj, num_rel, num_nonrel + u_all)
        high[f"nDCG@{k}"] = high_ndcg
    low_bpref = today["bpref"]
    if threshold > 0:
        # Judged non-relevant, the unjudged documents join the ones counted above each relevant one.
        low_bpref = bpref_from_counts(relevant, c_non + c_unj, num_rel, num_nonrel + u_all)

    bounds: dict[str, tuple[FloatArray, FloatArray]] = {}
    for name in today:
        candidates = [today[name], high[name]] + ([low_bpref] if name == "bpref" else [])
        # an nDCG of a DCG over an ideal DCG summed in another order can be 1 + 2e-16: clipped (metrics.numbers)
        bounds[name] = ordered_bounds(
            np.minimum.reduce(candidates), np.maximum.reduce(candidates), *MEASURE_RANGE, what=f"{name} bounds"
        )
    return bounds


# --------------------------------------------------------------------------------------------------------
# Which comparisons are settled, and which unjudged pairs could still change the others


class Settled(NamedTuple):
    """Pairwise verdicts on the mean order of systems (row a against column b)."""

    #: (S, S) int8: 1 when a's mean is above b's under every grading, -1 when below, 0 when open.
    order: npt.NDArray[np.int8]
    #: (S, S) smallest possible mean difference a - b: mean over queries of low[a] - high[b].
    diff_low: FloatArray
    #: (S, S) largest possible mean difference a - b: mean over queries of high[a] - low[b].
    diff_high: FloatArray


def settled(low: npt.ArrayLike, high: npt.ArrayLike) -> Settled:
    r"""Whether each pair of systems keeps its mean order whatever the unjudged documents turn out to be.

    Per query, a - b lies between low[a] - high[b] and high[a] - low[b]; the mean difference therefore
    lies between

    .. math:: \Delta^- = \overline{\mathrm{low}_a} - \overline{\mathrm{high}_b}, \qquad
              \Delta^+ = \overline{\mathrm{high}_a} - \overline{\mathrm{low}_b}

    and the order is settled when the interval excludes 0: a ahead when :math:`\Delta^- > 0`, behind
    when :math:`\Delta^+ < 0`. Ties that no label can break (both sides exact and equal) count as open.

    The verdict is as sound as the bounds: with :func:`score_bounds` it is exact for P@k, Hit@k and
    MRR. For measures whose denominator holds num_rel (R, F1, MAP, nDCG, bpref) a document only the
    other system retrieved can lower a score below its per-system low bound, so "settled" there means
    settled against each system's own unjudged documents.

    Parameters
    ----------
    low, high : float arrays, shape (S, Q)
        Per-query bounds of one measure, e.g. ``score_bounds(...)[name]``, over the query set of the mean.

    Returns
    -------
    Settled

    Raises
    ------
    ValueError
        On shapes that differ or are not 2-D, NaN, or a low bound above its high bound by more than rounding
        (:data:`metrics.numbers.TOLERANCE`; within it the two are taken as one value).
    """
    low = np.asarray(low, dtype=np.float64)
    high = np.asarray(high, dtype=np.float64)
    if low.ndim != 2 or low.shape != high.shape:
        raise ValueError(
            f"low and high must be (systems, queries) arrays of one shape, got {low.shape} and {high.shape}"
        )
    if np.isnan(low).any() or np.isnan(high).any():
        raise ValueError("low and high must not contain NaN")
    above = low > high + TOLERANCE
    if above.any():
        s, q = np.argwhere(above)[0]
        raise ValueError(f"low bound above high bound for system {s}, query {q}: {low[s, q]} > {high[s, q]}")
    low_a: FloatArray = np.minimum(low, high)  # a low bound a rounding step above its high one is the same value
    if low_a.shape[1] == 0:
        zeros = np.zeros((low_a.shape[0],) * 2)
        return Settled(np.zeros(zeros.shape, dtype=np.int8), zeros, zeros.copy())
    mean_low, mean_high = low_a.mean(axis=1), high.mean(axis=1)
    diff_low = mean_low[:, None] - mean_high[None, :]
    diff_high = mean_high[:, None] - mean_low[None, :]
    order = np.where(diff_low > 0, 1, np.where(diff_high < 0, -1, 0)).astype(np.int8)
    np.fill_diagonal(order, 0)
    return Settled(order, diff_low, diff_high)


def _check_order(order: npt.ArrayLike, n_systems: int) -> IntArray:
    array: IntArray = np.asarray(order)
    if array.shape != (n_systems, n_systems):
        raise ValueError(f"order must have shape ({n_systems}, {n_systems}), got {array.shape}")
    return array


def _open_comparisons(order: IntArray) -> BoolArray:
    open_: BoolArray = order == 0
    np.fill_diagonal(open_, False)
    return open_


def _systems_with_open(open_: BoolArray) -> BoolArray:
    # numpy types a reduction along an axis as "scalar or array"; along one axis of a 2-D array it is 1-D.
    return cast(BoolArray, open_.any(axis=1))


def open_pairs(
    labels: npt.ArrayLike, doc_ids: npt.ArrayLike, order: npt.ArrayLike, *, cutoff: int | None = None
) -> IntArray:
    """How many unjudged pairs could still change each open comparison.

    For an open comparison of systems a and b (``order[a, b] == 0``, see :func:`settled`): the number
    of distinct (query, document) pairs that are unjudged and within the top ``cutoff`` of a's run or
    of b's (counted once when both retrieved them). Settled comparisons and the diagonal get 0: no
    label can change them.

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Ranked labels, see :func:`metrics.precision`.
    doc_ids : int array, shape (S, Q, D)
        Document id at each rank (any non-negative integer key unique per document), -1 exactly where
        labels is ``PAD``: the same documents under different systems share an id.
    order : int array, shape (S, S)
        ``settled(...).order``.
    cutoff : int or None
        The measure's cutoff: k for the @k measures, None (whole run) for MRR, MAP and bpref.

    Returns
    -------
    ndarray of int64, shape (S, S), symmetric
    """
    labels = check_labels(labels)
    doc_ids = check_doc_ids(doc_ids, labels)
    n_systems = labels.shape[0]
    open_ = _open_comparisons(_check_order(order, n_systems))
    cutoff = _check_cutoff(cutoff)
    _, _, _, _, members = _unjudged_groups(labels, doc_ids, cutoff, _systems_with_open(open_))
    result = np.zeros((n_systems, n_systems), dtype=np.int64)
    if not members.size:
        return result
    # Pairs with the same set of systems count alike: a few distinct sets, however many pairs.
    if members.shape[1] == 1:  # up to 64 systems: one word per pair, and the fast 1-D unique
        sets, n_pairs = np.unique(members[:, 0], return_counts=True)
        sets = sets[:, None]
    else:
        sets, n_pairs = np.unique(members, axis=0, return_counts=True)
    systems = np.arange(n_systems)
    inside = (sets[:, systems // 64] >> (systems % 64).astype(np.uint64)) & np.uint64(1)
    inside = inside.astype(np.int64)  # (sets, S)
    per_system = n_pairs @ inside
    both = inside.T @ (inside * n_pairs[:, None])
    union = per_system[:, None] + per_system[None, :] - both
    counts: IntArray = np.where(open_, union, 0)
    return counts


def open_pairs_by_query(
    labels: npt.ArrayLike, doc_ids: npt.ArrayLike, comparisons: npt.ArrayLike, *, cutoff: int | None = None
) -> IntArray:
    """Where the unjudged pairs that could change some comparisons are: their number in each query.

    For each comparison (a, b): per query, the number of distinct unjudged documents within the top
    ``cutoff`` of a's run or of b's (counted once when both retrieved them). Summed over the queries it
    is :func:`open_pairs`'s count for an open comparison; the caller picks which comparisons to ask
    about (typically the open ones: no label can change a settled one).

    Parameters
    ----------
    labels, doc_ids, cutoff
        As for :func:`open_pairs`.
    comparisons : int array, shape (C, 2)
        Pairs of system indices.

    Returns
    -------
    ndarray of int64, shape (C, Q)
    """
    labels = check_labels(labels)
    doc_ids = check_doc_ids(doc_ids, labels)
    n_systems, n_queries = labels.shape[:2]
    comparisons = _check_comparisons(comparisons, n_systems)
    cutoff = _check_cutoff(cutoff)
    wanted = np.zeros(n_systems, dtype=bool)
    wanted[comparisons.reshape(-1)] = True
    query, doc, _, _, members = _unjudged_groups(labels, doc_ids, cutoff, wanted)
    return pairs_by_query(UnjudgedPairs(query, doc, members), comparisons, n_queries)


def _check_comparisons(comparisons: npt.ArrayLike, n_systems: int) -> IntArray:
    checked: IntArray = np.asarray(comparisons, dtype=np.int64).reshape(-1, 2)
    if checked.size and (checked.min() < 0 or checked.max() >= n_systems):
        raise ValueError(f"comparisons must hold system indices from 0 to {n_systems - 1}")
    return checked


class UnjudgedPairs(NamedTuple):
    """Distinct unjudged (query, document) pairs and the systems that retrieved each, in query order."""

    #: (P,) query index (position on the Q axis), ascending.
    query: np.ndarray
    #: (P,) document id.
    doc: np.ndarray
    #: (P, W) uint64 words: system s retrieved the pair within the cutoff when bit s % 64 of word s // 64 is set.
    members: np.ndarray


def unjudged_pairs(labels: npt.ArrayLike, doc_ids: npt.ArrayLike, *, cutoff: int | None = None) -> UnjudgedPairs:
    """Every distinct unjudged (query, document) pair within the top ``cutoff`` of some run, with its systems.

    The per-query material of :func:`open_pairs` and :func:`open_pairs_by_query`: each query's pairs
    depend on that query's labels only, so a caller that keeps them can replace one query's pairs after
    a new label instead of grouping every ranked document again (see :func:`pairs_by_query`).

    Parameters
    ----------
    labels, doc_ids, cutoff
        As for :func:`open_pairs`.

    Returns
    -------
    UnjudgedPairs
    """
    labels = check_labels(labels)
    doc_ids = check_doc_ids(doc_ids, labels)
    cutoff = _check_cutoff(cutoff)
    query, doc, _, _, members = _unjudged_groups(labels, doc_ids, cutoff, np.ones(labels.shape[0], dtype=bool))
    return UnjudgedPairs(query, doc, members)


def pairs_by_query(pairs: UnjudgedPairs, comparisons: npt.ArrayLike, n_queries: int) -> np.ndarray:
    """(C, n_queries) int64: per comparison (a, b), the number of ``pairs`` in each query that a or b
    retrieved (:func:`open_pairs_by_query` from pairs already grouped, e.g. by :func:`unjudged_pairs`)."""
    comparisons = np.asarray(comparisons, dtype=np.int64).reshape(-1, 2)
    members = pairs.members
    if comparisons.size and (comparisons.min() < 0 or comparisons.max() >= 64 * members.shape[1]):
        raise ValueError(f"comparisons must hold system indices from 0 to {64 * members.shape[1] - 1}")
    out = np.zeros((comparisons.shape[0], n_queries), dtype=np.int64)
    for c, (a, b) in enumerate(comparisons.tolist()):  # over comparisons (at most S - 1 adjacent ones)
        either = ((members[:, a // 64] >> np.uint64(a % 64)) | (members[:, b // 64] >> np.uint64(b % 64))) & np.uint64(
            1
        )
        out[c] = np.bincount(pairs.query[either.astype(bool)], minlength=n_queries)
    return out


class PairPriority(NamedTuple):
    """Unjudged (query, document) pairs in the order they should be judged, most urgent first."""

    #: (P,) query index (position on the Q axis).
    query: IntArray
    #: (P,) document id.
    doc: IntArray
    #: (P,) the best (smallest) 1-based rank any system with an open comparison gives the document.
    best_rank: IntArray
    #: (P,) how many systems with an open comparison have it within the cutoff.
    systems: IntArray


def pair_priority(
    labels: npt.ArrayLike, doc_ids: npt.ArrayLike, order: npt.ArrayLike, *, cutoff: int | None = None
) -> PairPriority:
    """Unjudged pairs that matter most for the comparisons still open, most urgent first.

    Rule: only systems that still have an open comparison (a 0 off the diagonal of ``order``) count,
    since no label can change a settled one. A pair matters when one of them retrieved it unjudged
    within ``cutoff``, and the higher it is ranked, the more its label moves the scores (every measure
    here discounts by rank): pairs are ordered by the best rank any of those systems gives them, then
    by how many of them retrieved it (one label moves several scores), then by query and document for
    a stable order. Pairs that only settled systems retrieved are left out.

    Parameters
    ----------
    labels, doc_ids, order, cutoff
        As for :func:`open_pairs`.

    Returns
    -------
    PairPriority
    """
    labels = check_labels(labels)
    doc_ids = check_doc_ids(doc_ids, labels)
    open_ = _open_comparisons(_check_order(order, labels.shape[0]))
    cutoff = _check_cutoff(cutoff)
    query, doc, best, count, _ = _unjudged_groups(labels, doc_ids, cutoff, _systems_with_open(open_))
    ranked = np.lexsort((doc, query, -count, best))
    return PairPriority(query[ranked], doc[ranked], best[ranked] + 1, count[ranked])
