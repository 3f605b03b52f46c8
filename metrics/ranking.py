"""Per-query ranking measures over (systems x queries x depth) label arrays, trec_eval-exact."""

import numbers
from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import cast, overload

import numpy as np
import numpy.typing as npt

from metrics._types import BoolArray, FloatArray, IdArray, IntArray, NumberArray
from metrics.measures import measure_names

__all__ = [
    "GAINS",
    "PAD",
    "UNJUDGED",
    "average_precision",
    "bpref",
    "condense",
    "evaluate",
    "f1",
    "hit",
    "judged",
    "labels_from_dicts",
    "mean",
    "micro_precision",
    "micro_recall",
    "ndcg",
    "precision",
    "recall",
    "reciprocal_rank",
    "trec_order",
    "trec_ranks",
]

#: Label of a retrieved document that has no (confident) judgment.
UNJUDGED = -1
#: Filler after the last document of a run that is shorter than the array depth.
PAD = -2
#: Gain functions accepted by :func:`ndcg` and :func:`evaluate`.
GAINS = ("linear", "exponential")


# --------------------------------------------------------------------------------------------------------
# Argument checking


def int_array(values: npt.ArrayLike, name: str, ndim: int, lowest: int) -> IntArray:
    array: IntArray = np.asarray(values)
    if array.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {array.shape}")
    if array.dtype.kind not in "iu":
        # np.empty / np.asarray([[]]) default to float; an empty array carries no values to misread.
        if array.size == 0 and array.dtype.kind in "fiub":
            return array.astype(np.int8)
        raise ValueError(f"{name} must be an integer array, got dtype {array.dtype}")
    if array.size and array.min() < lowest:
        raise ValueError(f"{name} contains values below {lowest}")
    if array.dtype.kind == "u":
        # The sentinels are negative: give them room (uint8 -> int16 ...).
        array = array.astype(np.result_type(array.dtype, np.int8))
    return array


def check_labels(labels: npt.ArrayLike, *, pad_empty: bool = True) -> IntArray:
    labels = int_array(labels, "labels (systems, queries, depth)", 3, PAD)
    if pad_empty and labels.shape[-1] == 0:
        # A depth-0 array is a campaign where no run returned anything: one column of padding scores
        # exactly the same and saves every measure a special case.
        labels = np.full(labels.shape[:-1] + (1,), PAD, dtype=np.int8)
    return labels


def check_qrels(qrels: npt.ArrayLike, labels: IntArray) -> IntArray:
    qrels = int_array(qrels, "qrels (queries, labelled documents)", 2, UNJUDGED)
    if qrels.shape[0] != labels.shape[1]:
        raise ValueError(
            f"qrels has {qrels.shape[0]} queries but labels has {labels.shape[1]} "
            f"(labels shape {labels.shape}, qrels shape {qrels.shape})"
        )
    return qrels


def check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    return int(k)


def check_threshold(threshold: object) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not float(threshold) >= 0:
        # Below 0 the UNJUDGED and PAD sentinels would count as relevant.
        raise ValueError(f"threshold must be a number >= 0, got {threshold!r}")
    # Returned as given (an int stays an int); typeshed's numbers.Real declares no comparisons, and the
    # measures only compare labels with it, as they would a float.
    return cast(float, threshold)


def check_gain(gain: str) -> str:
    if gain not in GAINS:
        raise ValueError(f"gain must be one of {GAINS}, got {gain!r}")
    return gain


def safe_divide(numerator: npt.ArrayLike, denominator: npt.ArrayLike) -> FloatArray:
    """numerator / denominator, 0 where the denominator is 0 (trec_eval's rule for empty queries)."""
    numerator, denominator = np.broadcast_arrays(
        np.asarray(numerator, dtype=np.float64), np.asarray(denominator, dtype=np.float64)
    )
    quotient: FloatArray = np.divide(numerator, denominator, out=np.zeros(numerator.shape), where=denominator > 0)
    return quotient


# --------------------------------------------------------------------------------------------------------
# Shared intermediates


def count_relevant(qrels: IntArray, threshold: float) -> IntArray:
    """(Q,) number of labelled documents with label >= threshold, retrieved or not."""
    count: IntArray = np.count_nonzero(qrels >= threshold, axis=-1)
    return count


def count_nonrelevant(qrels: IntArray, threshold: float) -> IntArray:
    """(Q,) number of judged non-relevant documents: labelled, label < threshold, retrieved or not."""
    count: IntArray = np.count_nonzero((qrels >= 0) & (qrels < threshold), axis=-1)
    return count


def _rel_in_top(labels: IntArray, k: int, threshold: float) -> IntArray:
    """(S, Q) number of relevant documents among the first k ranks."""
    count: IntArray = np.count_nonzero(labels[..., :k] >= threshold, axis=-1)
    return count


#: (row, rank, rank among the row's relevant documents) of each relevant entry, then per row: the count and
#: the index of its first entry.
RelevantRanks = tuple[IntArray, IntArray, IntArray, IntArray, IntArray]


def _relevant_ranks(labels: IntArray, threshold: float) -> RelevantRanks:
    """Relevant documents as (row, rank, rank-among-relevant) triples, rows = flattened (S, Q).

    Runs are long and relevant documents comparatively rare, so walking the relevant entries is several
    times faster than a cumulative sum over the whole (S, Q, D) array, and it sums AP in trec_eval's order.
    """
    n_rows, depth = labels.shape[0] * labels.shape[1], labels.shape[2]
    flat = np.flatnonzero(labels >= threshold)
    row, rank0 = np.divmod(flat, depth)
    per_row = np.bincount(row, minlength=n_rows)
    first_of_row = np.cumsum(per_row) - per_row
    nth = np.arange(1, flat.size + 1) - first_of_row[row]
    return row, rank0, nth, per_row, first_of_row


def _ap_from_ranks(shape: tuple[int, ...], rel_ranks: RelevantRanks, num_rel: IntArray) -> FloatArray:
    row, rank0, nth, _, _ = rel_ranks
    # P@i at each relevant rank i, summed per row in rank order (the order trec_eval adds them).
    summed = np.bincount(row, weights=nth / (rank0 + 1.0), minlength=shape[0] * shape[1])
    return safe_divide(summed.reshape(shape[:2]), num_rel)


def _rr_from_ranks(shape: tuple[int, ...], rel_ranks: RelevantRanks) -> FloatArray:
    _, rank0, _, per_row, first_of_row = rel_ranks
    rr = np.zeros(shape[0] * shape[1])
    found = per_row > 0
    rr[found] = 1.0 / (rank0[first_of_row[found]] + 1.0)
    return rr.reshape(shape[:2])


def _bpref(labels: IntArray, threshold: float, num_rel: IntArray, num_nonrel: IntArray) -> FloatArray:
    """(S, Q) bpref; num_rel and num_nonrel broadcast against (S, Q). See :func:`bpref_from_counts`."""
    (nonrel_above,) = cumulative_counts((labels >= 0) & (labels < threshold))
    return bpref_from_counts(labels >= threshold, nonrel_above, num_rel, num_nonrel)


def cumulative_counts(*masks: BoolArray) -> list[IntArray]:
    """Running counts of up to four boolean (S, Q, D) masks along the ranking, inclusive, as int16.

    numpy's cumulative sum along a short last axis costs about the same for one 16-bit lane as for
    four, so the masks go into the int16 lanes of one int32 (two masks) or int64 (three or four) per
    entry, are summed once, and come back out as strided views. A count never exceeds the depth
    (< 2^15), so no lane carries into the next. Deeper arrays, or more masks, fall back to one sum per mask.
    """
    depth = masks[0].shape[-1]
    if len(masks) == 1:
        return [np.cumsum(masks[0], axis=-1, dtype=np.int16 if depth < 2**15 else np.int32)]
    if depth >= 2**15 or len(masks) > 4:
        return [np.cumsum(mask, axis=-1, dtype=np.int32) for mask in masks]
    if len(masks) == 2:
        packed = np.zeros(masks[0].shape, dtype="<i4")
        lanes = packed.view("<i2").reshape(masks[0].shape + (2,))
        lanes[..., 0], lanes[..., 1] = masks
        np.cumsum(packed, axis=-1, out=packed)
        return [np.ascontiguousarray(lanes[..., i]) for i in range(2)]
    packed = np.zeros(masks[0].shape, dtype="<i8")
    lanes = packed.view("<i2").reshape(masks[0].shape + (4,))
    for i, mask in enumerate(masks):  # over the (at most four) masks, not over ranks
        lanes[..., i] = mask
    np.cumsum(packed, axis=-1, out=packed)
    return [np.ascontiguousarray(lanes[..., i]).astype(np.int16, copy=False) for i in range(len(masks))]


def from_counts(
    relevant: BoolArray,
    c_rel: IntArray,
    c_non: IntArray,
    num_rel_k: IntArray,
    num_rel: IntArray,
    num_nonrel: IntArray,
    k: int,
    at_k: int,
    ndcg: FloatArray,
) -> dict[str, FloatArray]:
    """Every measure of metrics.evaluate but Judged@k from cumulative counts, with the caller's nDCG."""
    depth = relevant.shape[-1]
    rel_at_k = c_rel[..., at_k].astype(np.int64)
    products = (c_rel * relevant).astype(np.float64)
    products *= 1.0 / np.arange(1, depth + 1)
    precision_sum = products.sum(axis=-1)  # not a matmul: see weighted_sum
    first = np.argmax(relevant, axis=-1)
    return {
        f"P@{k}": rel_at_k / k,
        f"R@{k}": safe_divide(rel_at_k, num_rel_k),
        f"F1@{k}": _f1(rel_at_k, k, num_rel_k),
        f"Hit@{k}": (rel_at_k > 0).astype(np.float64),
        "MRR": np.where(c_rel[..., -1] > 0, 1.0 / (first + 1.0), 0.0),
        "MAP": safe_divide(precision_sum, num_rel),
        f"nDCG@{k}": ndcg,
        "bpref": bpref_from_counts(relevant, c_non, num_rel, num_nonrel),
    }


def bpref_from_counts(
    relevant: BoolArray, nonrel_above: IntArray, num_rel: IntArray, num_nonrel: IntArray
) -> FloatArray:
    """(S, Q) bpref from the relevant mask and the judged non-relevant count above each rank.

    trec_eval sums 1 - min(n_r, R) / min(N, R) over the relevant retrieved documents r; that sum is
    (relevant retrieved) - (sum of min(n_r, R)) / min(N, R), so no per-document division is needed. At a
    relevant rank the inclusive count of non-relevant documents is the count above it. Unjudged
    documents and padding are in neither mask: bpref skips them.
    """
    depth = relevant.shape[-1]
    num_rel = np.broadcast_to(num_rel, relevant.shape[:2])
    capped = np.minimum(nonrel_above, np.minimum(num_rel, depth).astype(nonrel_above.dtype)[..., None])
    wrong = np.sum(capped * relevant, axis=-1, dtype=np.int64)
    # wrong > 0 implies N > 0; the division only guards arrays whose qrels miss labels.
    kept = np.count_nonzero(relevant, axis=-1) - safe_divide(wrong, np.minimum(num_nonrel, num_rel))
    return safe_divide(kept, num_rel)


def gain_values(values: IntArray, gain: str) -> FloatArray:
    positive = np.maximum(values, 0).astype(np.float64)
    if gain == "exponential":
        return np.exp2(positive) - 1.0
    return positive


def rank_discounts(n: int) -> FloatArray:
    return 1.0 / np.log2(np.arange(2, n + 2, dtype=np.float64))


def weighted_sum(values: NumberArray, weights: FloatArray) -> FloatArray:
    """``values @ weights`` over the last axis, summed in an order that depends on that axis's length only.

    BLAS's matrix-vector product sums a row in an order that depends on the rows around it, so a query's
    score would differ in its last bits with the queries scored along with it; a caller that rescores
    only the queries whose labels moved must get the value a computation over every query gives.
    """
    total: FloatArray = (values * weights).sum(axis=-1)
    return total


def dcg_at_k(labels: IntArray, k: int, gain: str) -> FloatArray:
    top = labels[..., :k]
    return weighted_sum(gain_values(top, gain), rank_discounts(top.shape[-1]))


def idcg_at_k(qrels: IntArray, k: int, gain: str) -> FloatArray:
    best = np.sort(qrels, axis=-1)[:, ::-1][:, :k]
    if best.shape[-1] < k:
        # always k columns: how many labels pad a qrels row must not change how the row is summed
        best = np.pad(best, ((0, 0), (0, k - best.shape[-1])), constant_values=UNJUDGED)
    return weighted_sum(gain_values(best, gain), rank_discounts(k))


# --------------------------------------------------------------------------------------------------------
# Measures


def precision(labels: npt.ArrayLike, *, k: int, threshold: float = 1) -> FloatArray:
    r"""Precision at cutoff k (trec_eval ``P.k``).

    .. math:: P@k = \frac{|\{i \le k : \mathrm{label}_i \ge \mathrm{threshold}\}|}{k}

    The denominator is always k: a run shorter than k counts as padded with non-relevant documents.

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Label of the document at each rank of each system's run, in trec_eval order; ``UNJUDGED`` (-1)
        for a retrieved document without a label, ``PAD`` (-2) after the end of a shorter run.
    k : int
        Cutoff, >= 1. May exceed D.
    threshold : int, default 1
        A document is relevant when its label >= threshold.

    Returns
    -------
    ndarray of float64, shape (S, Q)

    References
    ----------
    trec_eval 10.0, ``m_P.c``.
    """
    labels = check_labels(labels)
    k = check_k(k)
    threshold = check_threshold(threshold)
    return _rel_in_top(labels, k, threshold) / k


def recall(labels: npt.ArrayLike, qrels: npt.ArrayLike, *, k: int, threshold: float = 1) -> FloatArray:
    r"""Recall at cutoff k (trec_eval ``recall.k``).

    .. math:: R@k = \frac{|\{i \le k : \mathrm{label}_i \ge \mathrm{threshold}\}|}{\mathrm{num\_rel}}

    where num_rel counts the query's labelled documents with label >= threshold, retrieved or not.
    R@k is 0 when num_rel is 0.

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Ranked labels, see :func:`precision`.
    qrels : int array, shape (Q, M)
        Labels of every labelled document of each query, in any order, padded with ``UNJUDGED``.
    k : int
        Cutoff, >= 1.
    threshold : int, default 1
        A document is relevant when its label >= threshold.

    Returns
    -------
    ndarray of float64, shape (S, Q)

    References
    ----------
    trec_eval 10.0, ``m_recall.c``.
    """
    labels = check_labels(labels)
    qrels = check_qrels(qrels, labels)
    k = check_k(k)
    threshold = check_threshold(threshold)
    return safe_divide(_rel_in_top(labels, k, threshold), count_relevant(qrels, threshold))


def f1(labels: npt.ArrayLike, qrels: npt.ArrayLike, *, k: int, threshold: float = 1) -> FloatArray:
    r"""F1 at cutoff k: the per-query harmonic mean of P@k and R@k.

    .. math:: F_1@k = \frac{2 \, P@k \, R@k}{P@k + R@k} = \frac{2 \, \mathrm{rel}@k}{k + \mathrm{num\_rel}}

    and 0 when P@k and R@k are both 0. Average the per-query values for the mean F1 (not the harmonic
    mean of mean P and mean R).

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Ranked labels, see :func:`precision`.
    qrels : int array, shape (Q, M)
        Labels of every labelled document of each query, see :func:`recall`.
    k : int
        Cutoff, >= 1.
    threshold : int, default 1
        A document is relevant when its label >= threshold.

    Returns
    -------
    ndarray of float64, shape (S, Q)

    References
    ----------
    van Rijsbergen, C. J. (1979). Information Retrieval, ch. 7 (the F measure with beta = 1).
    """
    labels = check_labels(labels)
    qrels = check_qrels(qrels, labels)
    k = check_k(k)
    threshold = check_threshold(threshold)
    return _f1(_rel_in_top(labels, k, threshold), k, count_relevant(qrels, threshold))


def _f1(rel_at_k: IntArray, k: int, num_rel: IntArray) -> FloatArray:
    # With num_rel = 0, R is 0 by convention and so is F1, whatever P is.
    return safe_divide(2.0 * rel_at_k, np.where(num_rel > 0, k + num_rel, 0))


def hit(labels: npt.ArrayLike, *, k: int, threshold: float = 1) -> FloatArray:
    r"""Hit at cutoff k (trec_eval ``success.k``): 1 if a relevant document is in the top k, else 0.

    .. math:: \mathrm{Hit}@k = [\exists\, i \le k : \mathrm{label}_i \ge \mathrm{threshold}]

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Ranked labels, see :func:`precision`.
    k : int
        Cutoff, >= 1.
    threshold : int, default 1
        A document is relevant when its label >= threshold.

    Returns
    -------
    ndarray of float64, shape (S, Q)

    References
    ----------
    trec_eval 10.0, ``m_success.c``.
    """
    labels = check_labels(labels)
    k = check_k(k)
    threshold = check_threshold(threshold)
    return (_rel_in_top(labels, k, threshold) > 0).astype(np.float64)


def reciprocal_rank(labels: npt.ArrayLike, *, threshold: float = 1) -> FloatArray:
    r"""Reciprocal rank of the first relevant document over the whole run (trec_eval ``recip_rank``).

    .. math:: RR = \frac{1}{\min\{i : \mathrm{label}_i \ge \mathrm{threshold}\}}

    and 0 when the run has no relevant document. MRR is the mean of RR over queries.

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Ranked labels, see :func:`precision`.
    threshold : int, default 1
        A document is relevant when its label >= threshold.

    Returns
    -------
    ndarray of float64, shape (S, Q)

    References
    ----------
    Voorhees, E. M. (1999). The TREC-8 Question Answering Track Report. trec_eval 10.0, ``m_recip_rank.c``.
    """
    labels = check_labels(labels)
    threshold = check_threshold(threshold)
    first = np.argmax(labels >= threshold, axis=-1)
    found = np.take_along_axis(labels, first[..., None], axis=-1)[..., 0] >= threshold
    return np.where(found, 1.0 / (first + 1.0), 0.0)


def average_precision(labels: npt.ArrayLike, qrels: npt.ArrayLike, *, threshold: float = 1) -> FloatArray:
    r"""Average precision over the whole run (trec_eval ``map`` per query).

    .. math:: AP = \frac{1}{\mathrm{num\_rel}} \sum_{i : \mathrm{label}_i \ge \mathrm{threshold}} P@i

    Relevant documents that were not retrieved contribute 0; AP is 0 when num_rel is 0.
    MAP is the mean of AP over queries.

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Ranked labels, see :func:`precision`.
    qrels : int array, shape (Q, M)
        Labels of every labelled document of each query, see :func:`recall`.
    threshold : int, default 1
        A document is relevant when its label >= threshold.

    Returns
    -------
    ndarray of float64, shape (S, Q)

    References
    ----------
    Buckley, C. & Voorhees, E. M. (2000). Evaluating evaluation measure stability. SIGIR.
    trec_eval 10.0, ``m_map.c``.
    """
    labels = check_labels(labels)
    qrels = check_qrels(qrels, labels)
    threshold = check_threshold(threshold)
    ranks = _relevant_ranks(labels, threshold)
    return _ap_from_ranks(labels.shape, ranks, count_relevant(qrels, threshold))


def bpref(labels: npt.ArrayLike, qrels: npt.ArrayLike, *, threshold: float = 1) -> FloatArray:
    r"""Binary preference over the whole run (trec_eval ``bpref``).

    .. math::

        \mathrm{bpref} = \frac{1}{R} \sum_{r} \left(1 - \frac{\min(n_r, R)}{\min(N, R)}\right)

    The sum runs over the judged relevant retrieved documents r (label >= threshold); n_r is the number
    of judged non-relevant documents (0 <= label < threshold) ranked above r; R = num_rel and N is the
    number of the query's judged non-relevant documents, retrieved or not. A term is 1 when n_r is 0
    (so N = 0 never divides). bpref is 0 when R is 0.

    Unlike every other measure here, unjudged documents are skipped rather than counted as
    non-relevant: only the order of judged relevant against judged non-relevant documents matters, so
    a judged non-relevant document and an unjudged one at the same rank give different scores. For the
    same reason :func:`condense` (trec_eval ``-J``) leaves bpref unchanged.

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Ranked labels, see :func:`precision`.
    qrels : int array, shape (Q, M)
        Labels of every labelled document of each query, see :func:`recall`; the non-negative labels
        below the threshold give N.
    threshold : int, default 1
        A document is relevant when its label >= threshold.

    Returns
    -------
    ndarray of float64, shape (S, Q)

    References
    ----------
    Buckley, C. & Voorhees, E. M. (2004). Retrieval evaluation with incomplete information. SIGIR.
    trec_eval 10.0, ``m_bpref.c`` (the min(., R) caps are trec_eval's, not the paper's first form).
    """
    labels = check_labels(labels)
    qrels = check_qrels(qrels, labels)
    threshold = check_threshold(threshold)
    return _bpref(labels, threshold, count_relevant(qrels, threshold), count_nonrelevant(qrels, threshold))


def ndcg(labels: npt.ArrayLike, qrels: npt.ArrayLike, *, k: int, gain: str = "linear") -> FloatArray:
    r"""Normalised discounted cumulative gain at cutoff k (trec_eval ``ndcg_cut.k``).

    .. math::

        DCG@k = \sum_{i=1}^{\min(k, D)} \frac{g(\mathrm{label}_i)}{\log_2(i + 1)}, \qquad
        nDCG@k = \frac{DCG@k}{IDCG@k}

    with linear gain :math:`g(l) = l` (Järvelin & Kekäläinen) or exponential gain
    :math:`g(l) = 2^l - 1` (Burges et al.), and :math:`g(l) = 0` for :math:`l \le 0` (non-relevant,
    unjudged, padding). IDCG@k is the DCG@k of the query's qrels row sorted by label, descending.
    nDCG is 0 when IDCG is 0. Graded by design: no relevance threshold applies.

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Ranked labels, see :func:`precision`.
    qrels : int array, shape (Q, M)
        Labels of every labelled document of each query, see :func:`recall`.
    k : int
        Cutoff, >= 1.
    gain : {"linear", "exponential"}, default "linear"

    Returns
    -------
    ndarray of float64, shape (S, Q)

    References
    ----------
    Järvelin, K. & Kekäläinen, J. (2002). Cumulated gain-based evaluation of IR techniques.
    ACM TOIS 20(4), 422-446.
    Burges, C. et al. (2005). Learning to rank using gradient descent. ICML (exponential gain).
    trec_eval 10.0, ``m_ndcg_cut.c`` (linear gain; give it 2^l - 1 labels for the exponential one).
    """
    labels = check_labels(labels)
    qrels = check_qrels(qrels, labels)
    k = check_k(k)
    gain = check_gain(gain)
    return safe_divide(dcg_at_k(labels, k, gain), idcg_at_k(qrels, k, gain))


def judged(labels: npt.ArrayLike, *, k: int) -> FloatArray:
    r"""Share of the top k that has a label (ir_measures ``Judged@k``).

    .. math:: \mathrm{Judged}@k = \frac{|\{i \le \min(k, n) : \mathrm{label}_i \ne \mathrm{UNJUDGED}\}|}{\min(k, n)}

    where n is the run length (its non-``PAD`` entries); 0 for an empty run. It says how far the scores
    of the same cutoff can be trusted: unjudged documents count as non-relevant.

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Ranked labels, see :func:`precision`. Pass the uncondensed labels.
    k : int
        Cutoff, >= 1.

    Returns
    -------
    ndarray of float64, shape (S, Q)

    References
    ----------
    MacAvaney, S. et al. (2022). Streamlining evaluation with ir-measures. ECIR.
    """
    labels = check_labels(labels)
    k = check_k(k)
    return judged_share(labels, k)


def judged_share(labels: IntArray, k: int) -> FloatArray:
    top = labels[..., :k]
    # Padding only ever follows the run, so non-PAD entries of the top k number min(k, run length).
    return safe_divide(np.count_nonzero(top >= 0, axis=-1), np.count_nonzero(top != PAD, axis=-1))


def condense(labels: npt.ArrayLike) -> IntArray:
    """Drop unjudged documents from every ranking and close the gaps (trec_eval ``-J``).

    Judged documents keep their relative order and move up; the freed ranks at the end become ``PAD``.

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Ranked labels, see :func:`precision`.

    Returns
    -------
    int array, shape (S, Q, D)
        Same dtype, no ``UNJUDGED`` entries.

    References
    ----------
    Sakai, T. (2007). Alternatives to bpref. SIGIR ("condensed lists"). trec_eval 10.0, ``-J``.
    """
    labels = check_labels(labels, pad_empty=False)
    return condense_ranks(labels)


def condense_ranks(labels: IntArray) -> IntArray:
    n_rows, depth = labels.shape[0] * labels.shape[1], labels.shape[2]
    if labels.size == 0:
        return labels.copy()
    flat = np.flatnonzero(labels >= 0)
    row = flat // depth
    per_row = np.bincount(row, minlength=n_rows)
    new_rank = np.arange(flat.size) - (np.cumsum(per_row) - per_row)[row]
    out = np.full(labels.shape, PAD, dtype=labels.dtype)
    out.reshape(-1)[row * depth + new_rank] = labels.reshape(-1)[flat]
    return out


def evaluate(
    labels: npt.ArrayLike,
    qrels: npt.ArrayLike,
    *,
    k: int = 10,
    threshold: float = 1,
    gain: str = "linear",
    judged_only: bool = False,
) -> dict[str, FloatArray]:
    """Every RelJudge measure per system and query, sharing the work between them.

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Ranked labels, see :func:`precision`. The smallest integer dtype (int8) is the fastest.
    qrels : int array, shape (Q, M)
        Labels of every labelled document of each query, see :func:`recall`.
    k : int, default 10
        Cutoff of the @k measures.
    threshold : int, default 1
        Relevance threshold of the binary measures (not of nDCG).
    gain : {"linear", "exponential"}, default "linear"
        nDCG gain.
    judged_only : bool, default False
        Score the condensed rankings (:func:`condense`, trec_eval ``-J``). Judged@k is always
        computed on the rankings as retrieved.

    Returns
    -------
    dict of str to ndarray of float64, shape (S, Q)
        Keys ``P@k``, ``R@k``, ``F1@k``, ``Hit@k``, ``MRR`` (per-query RR), ``MAP`` (per-query AP),
        ``nDCG@k``, ``Judged@k``, ``bpref``, in this order, with k written out, e.g. ``"P@10"``.
        Average over queries with :func:`mean`.

    See Also
    --------
    precision, recall, f1, hit, reciprocal_rank, average_precision, ndcg, judged, bpref
    """
    labels = check_labels(labels)
    qrels = check_qrels(qrels, labels)
    k = check_k(k)
    threshold = check_threshold(threshold)
    gain = check_gain(gain)

    judged_at_k = judged_share(labels, k)
    if judged_only:
        labels = condense_ranks(labels)
    num_rel = count_relevant(qrels, threshold)
    scores = measure_set(
        labels,
        k=k,
        threshold=threshold,
        gain=gain,
        num_rel_k=num_rel,
        num_rel=num_rel,
        num_nonrel=count_nonrelevant(qrels, threshold),
        idcg=idcg_at_k(qrels, k, gain),
    )
    scores[f"Judged@{k}"] = judged_at_k
    # The registry's order (Judged@k before bpref, which was added later): the order is part of the API.
    return {name: scores[name] for name in measure_names(k)}


def measure_set(
    labels: IntArray,
    *,
    k: int,
    threshold: float,
    gain: str,
    num_rel_k: IntArray,
    num_rel: IntArray,
    num_nonrel: IntArray,
    idcg: FloatArray,
    dense: bool = False,
) -> dict[str, FloatArray]:
    """Every measure but Judged@k from checked labels and per-query (or per system and query) totals.

    ``dense`` computes every measure from cumulative counts over the whole array instead of walking
    the relevant entries (:func:`from_counts`): faster where many entries are relevant, and equal up
    to the order of the floating-point additions. evaluate keeps the walk, which adds AP's terms in
    trec_eval's order.

    num_rel_k is the num_rel of the @k measures and num_rel the one of the whole-run measures (MAP,
    bpref): they differ in :mod:`metrics.bounds`, where unjudged documents become relevant. All totals
    broadcast against (S, Q).
    """
    if dense:
        relevant = labels >= threshold
        c_rel, c_non = cumulative_counts(relevant, (labels >= 0) & (labels < threshold))
        at_k = min(k, labels.shape[-1]) - 1
        ndcg = safe_divide(dcg_at_k(labels, k, gain), idcg)
        return from_counts(relevant, c_rel, c_non, num_rel_k, num_rel, num_nonrel, k, at_k, ndcg)
    rel_at_k = _rel_in_top(labels, k, threshold)
    ranks = _relevant_ranks(labels, threshold)
    rr, ap = _rr_from_ranks(labels.shape, ranks), _ap_from_ranks(labels.shape, ranks, num_rel)
    return {
        f"P@{k}": rel_at_k / k,
        f"R@{k}": safe_divide(rel_at_k, num_rel_k),
        f"F1@{k}": _f1(rel_at_k, k, num_rel_k),
        f"Hit@{k}": (rel_at_k > 0).astype(np.float64),
        "MRR": rr,
        "MAP": ap,
        f"nDCG@{k}": safe_divide(dcg_at_k(labels, k, gain), idcg),
        "bpref": _bpref(labels, threshold, num_rel, num_nonrel),
    }


@overload
def mean(per_query: Mapping[str, npt.ArrayLike], axis: int = -1) -> dict[str, FloatArray]: ...
@overload
def mean(per_query: npt.ArrayLike, axis: int = -1) -> FloatArray: ...
def mean(per_query: Mapping[str, npt.ArrayLike] | npt.ArrayLike, axis: int = -1) -> dict[str, FloatArray] | FloatArray:
    """Macro mean over queries: every query weighs the same, as trec_eval's and the seeds' averages.

    Parameters
    ----------
    per_query : array of shape (..., Q), or a mapping of measure name to such arrays
        Per-query scores, e.g. the output of a measure or of :func:`evaluate`. The query set is the
        caller's: pass every query of the campaign that has a label, with 0 for a system that returned
        nothing for it (trec_eval ``-c``), so all systems are averaged over the same queries.
    axis : int, default -1
        The query axis.

    Returns
    -------
    ndarray of float64 (or dict of them)
        The shape of ``per_query`` without ``axis``; NaN where there are no queries.
    """
    if isinstance(per_query, Mapping):
        return {name: mean(values, axis=axis) for name, values in per_query.items()}
    values = np.asarray(per_query, dtype=np.float64)
    if values.ndim == 0:
        raise ValueError("per_query must have a query axis")
    if values.shape[axis] == 0:
        return np.full(np.delete(values.shape, axis), np.nan)
    means: FloatArray = values.mean(axis=axis)
    return means


def micro_precision(labels: npt.ArrayLike, *, k: int, threshold: float = 1) -> FloatArray:
    r"""Micro-averaged precision at k: relevant documents over retrieved documents, pooled over queries.

    .. math:: \mathrm{micro\,P}@k = \frac{\sum_q \mathrm{rel}_q@k}{\sum_q \min(k, n_q)}

    with n_q the run length for query q. Macro P@k (:func:`precision` then :func:`mean`) gives every
    query the same weight and divides by k even where the run is shorter (trec_eval's rule); pooled
    with that fixed denominator the two would always agree, so the micro average divides by the
    documents actually retrieved: it differs from the macro one where runs stop before k, and a query
    with a long run weighs more than one with a short run. 0 for a system that retrieved nothing.

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Ranked labels, see :func:`precision`. The query set is the caller's, as for :func:`mean`.
    k : int
        Cutoff, >= 1.
    threshold : int, default 1
        A document is relevant when its label >= threshold.

    Returns
    -------
    ndarray of float64, shape (S,)

    References
    ----------
    Manning, C. D., Raghavan, P. & Schütze, H. (2008). Introduction to Information Retrieval, §13.6
    (micro- and macro-averaging).
    """
    labels = check_labels(labels)
    k = check_k(k)
    threshold = check_threshold(threshold)
    top = labels[..., :k]
    relevant = np.count_nonzero(top >= threshold, axis=(1, 2))
    retrieved = np.count_nonzero(top != PAD, axis=(1, 2))
    return safe_divide(relevant, retrieved)


def micro_recall(labels: npt.ArrayLike, qrels: npt.ArrayLike, *, k: int, threshold: float = 1) -> FloatArray:
    r"""Micro-averaged recall at k: relevant retrieved over relevant, pooled over queries.

    .. math:: \mathrm{micro\,R}@k = \frac{\sum_q \mathrm{rel}_q@k}{\sum_q \mathrm{num\_rel}_q}

    Macro R@k (:func:`recall` then :func:`mean`) gives every query the same weight; the micro average
    gives every relevant document the same weight, so queries with many relevant documents dominate it
    and queries without any (R@k = 0 in the macro mean) drop out. 0 when no query has a relevant
    document.

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Ranked labels, see :func:`precision`.
    qrels : int array, shape (Q, M)
        Labels of every labelled document of each query, see :func:`recall`.
    k : int
        Cutoff, >= 1.
    threshold : int, default 1
        A document is relevant when its label >= threshold.

    Returns
    -------
    ndarray of float64, shape (S,)

    References
    ----------
    Manning, C. D., Raghavan, P. & Schütze, H. (2008). Introduction to Information Retrieval, §13.6.
    """
    labels = check_labels(labels)
    qrels = check_qrels(qrels, labels)
    k = check_k(k)
    threshold = check_threshold(threshold)
    relevant = _rel_in_top(labels, k, threshold).sum(axis=1)
    return safe_divide(relevant, count_relevant(qrels, threshold).sum())


# --------------------------------------------------------------------------------------------------------
# Ordering a run the way trec_eval does, and building the arrays


def _key_columns(values: IdArray) -> list[IdArray]:
    """Integer columns, most significant first, whose lexicographic order is the order of ``values``.

    Strings become their code points packed into uint64 words: code point order is UTF-8 byte order,
    and the zero padding of shorter strings sorts first, so this is ``strcmp``'s order, and sorting a few
    integer columns is several times faster than sorting millions of strings.
    """
    if values.dtype.kind == "O":
        values = values.astype(str)
    if values.dtype.kind not in "US":
        return [values]
    n = values.shape[0]
    if n == 0 or values.itemsize == 0:
        return [np.zeros(n, dtype=np.uint64)]
    code_unit = np.uint32 if values.dtype.kind == "U" else np.uint8
    codes = np.ascontiguousarray(values).view(code_unit).reshape(n, -1)
    bits = max(int(codes.max()).bit_length(), 1)
    per_word = 64 // bits
    words: list[IdArray] = []
    for first in range(0, codes.shape[1], per_word):  # over character positions, not documents
        word = np.zeros(n, dtype=np.uint64)
        for offset, column in enumerate(codes[:, first : first + per_word].T):
            word |= column.astype(np.uint64) << np.uint64(bits * (per_word - 1 - offset))
        words.append(word)
    return words


def _score_keys(scores: npt.ArrayLike, n: int) -> npt.NDArray[np.float32]:
    # trec_eval keeps scores as C floats: scores equal in float32 tie and fall back on the docid.
    values = np.asarray(scores, dtype=np.float64).reshape(-1)
    if values.shape[0] != n:
        raise ValueError(f"got {n} docids but {values.shape[0]} scores")
    if np.isnan(values).any():
        raise ValueError("scores contain NaN")
    return -values.astype(np.float32)


def _adjacent_equal(columns: list[IdArray]) -> BoolArray:
    """Whether each row after the first equals the previous one in every column."""
    equal = np.ones(columns[0].shape[0] - 1, dtype=bool)
    for column in columns:
        equal &= column[1:] == column[:-1]
    return equal


def trec_order(docids: Sequence[str] | Sequence[bytes] | IdArray, scores: npt.ArrayLike) -> IntArray:
    """Indices that put one query's retrieved documents in trec_eval's order.

    Score descending, ties broken by docid in descending byte order (``strcmp``, which for ``str``
    docids is code point order, the same as UTF-8 byte order). Scores are compared as float32, as
    trec_eval stores them, so scores that differ only beyond float32 precision tie. The rank column of
    a run file plays no part.

    Parameters
    ----------
    docids : sequence of str (or bytes), length n
    scores : sequence of float, length n

    Returns
    -------
    ndarray of intp, shape (n,)
        ``docids[order]`` is the ranking, best first.

    Raises
    ------
    ValueError
        On a duplicate docid (trec_eval refuses the run), a NaN score or mismatched lengths.

    References
    ----------
    trec_eval 10.0, ``form_res_rels.c`` (``comp_sim_docno``).
    """
    n = len(docids)
    ranks = trec_ranks(np.zeros(n, dtype=np.int8), docids, scores)
    order = np.empty(n, dtype=np.intp)
    order[ranks] = np.arange(n)
    return order


def trec_ranks(qids: npt.ArrayLike, docids: npt.ArrayLike, scores: npt.ArrayLike) -> IntArray:
    """0-based rank of each row of a whole run within its query, in trec_eval's order.

    The vectorised counterpart of :func:`trec_order` for a flat run (one row per retrieved document,
    queries interleaved in any way): ``labels[qindex[i], ranks[i]] = label[i]`` fills a (Q, D) array.
    String docids are compared as packed integer words, not as Python strings.

    Parameters
    ----------
    qids : sequence, length n
        Query of each row (str, bytes or integers).
    docids : sequence of str (or bytes), length n
    scores : sequence of float, length n

    Returns
    -------
    ndarray of intp, shape (n,)

    Raises
    ------
    ValueError
        On a docid repeated within a query, a NaN score or mismatched lengths.
    """
    qids = np.asarray(qids).reshape(-1)
    docids = np.asarray(docids).reshape(-1)
    n = qids.shape[0]
    if docids.shape[0] != n:
        raise ValueError(f"got {n} qids but {docids.shape[0]} docids")
    score_keys = _score_keys(scores, n)
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    query_columns = _key_columns(qids)
    # ~word reverses the order of unsigned words: docids descending.
    doc_columns: list[IdArray] = [
        np.invert(word) if word.dtype == np.uint64 else np.negative(word) for word in _key_columns(docids)
    ]

    # Grouped by query, docid descending: a repeated docid lands next to itself.
    by_doc = np.lexsort(doc_columns[::-1] + query_columns[::-1])
    query_columns = [column[by_doc] for column in query_columns]
    same_query = _adjacent_equal(query_columns)
    if (same_query & _adjacent_equal([column[by_doc] for column in doc_columns])).any():
        raise ValueError("duplicate docid in one query of a run")
    # A stable sort by score within each query keeps tied documents in descending docid order.
    by_score = np.lexsort([score_keys[by_doc]] + query_columns[::-1])
    order = by_doc[by_score]
    opens_query = np.r_[True, ~_adjacent_equal([column[by_score] for column in query_columns])]
    query_start = np.flatnonzero(opens_query)[np.cumsum(opens_query) - 1]
    ranks = np.empty(n, dtype=np.intp)
    ranks[order] = np.arange(n) - query_start
    return ranks


def labels_from_dicts(
    qrels: Mapping[str, Mapping[str, int]],
    runs: Sequence[Mapping[str, Mapping[str, float]]],
    *,
    qids: Sequence[str] | None = None,
    dtype: npt.DTypeLike = np.int16,
) -> tuple[IntArray, IntArray, list[str]]:
    """Build the ``labels`` and ``qrels`` arrays from pytrec_eval-style dicts.

    A convenience for scripts, tests and benchmarks (the web app builds its arrays from the database).

    Parameters
    ----------
    qrels : mapping qid -> {docid: label}
        Negative labels count as unjudged (trec_eval's "in the pool but not judged").
    runs : sequence of mappings qid -> {docid: score}, length S
    qids : sequence of str, optional
        The query set, in output order. Defaults to the sorted qids that have at least one label
        (SPEC's query set of a mean). Run queries outside it are ignored, as trec_eval ignores queries
        without qrels; queries a run lacks become all-``PAD`` rows, which score 0 (trec_eval ``-c``).
    dtype : integer dtype, default int16
        dtype of the returned arrays; must hold the largest label.

    Returns
    -------
    labels : ndarray, shape (S, Q, D)
        D is the longest run of any system for any query.
    qrels_array : ndarray, shape (Q, M)
    qids : list of str, length Q
    """
    if qids is None:
        qids = sorted(q for q, docs in qrels.items() if any(label >= 0 for label in docs.values()))
    qids = list(qids)
    position = {qid: i for i, qid in enumerate(qids)}
    judged_qrels = [[label for label in qrels.get(qid, {}).values() if label >= 0] for qid in qids]
    width = max((len(row) for row in judged_qrels), default=0)
    qrels_array = np.full((len(qids), width), UNJUDGED, dtype=dtype)
    filled = np.array([len(row) for row in judged_qrels], dtype=np.intp)
    qrels_array[np.arange(width) < filled[:, None]] = [label for row in judged_qrels for label in row]

    rows: list[int] = []
    lengths: list[int] = []
    docids: list[str] = []
    scores: list[float] = []
    values: list[int] = []
    for s, run in enumerate(runs):
        for qid, docs in run.items():
            if qid not in position:
                continue
            rows.append(s * len(qids) + position[qid])
            lengths.append(len(docs))
            docids.extend(docs)
            scores.extend(docs.values())
            values.extend(map(qrels.get(qid, {}).get, docs, repeat(UNJUDGED, len(docs))))
    row_of = np.repeat(np.array(rows, dtype=np.intp), lengths)
    ranks = trec_ranks(row_of, np.array(docids, dtype=str), np.array(scores, dtype=np.float64))
    # trec_eval's "in the pool but unjudged" (negative) labels are unjudged here.
    label_of = np.maximum(np.array(values, dtype=np.int64), UNJUDGED)
    depth = int(ranks.max()) + 1 if ranks.size else 0
    labels = np.full((len(runs), len(qids), depth), PAD, dtype=dtype)
    if ranks.size:
        labels.reshape(-1, depth)[row_of, ranks] = label_of
    return labels, qrels_array, qids
