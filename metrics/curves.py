"""Measure-versus-cutoff curves: P, R, F1, Hit and nDCG at every k from 1 to K in one pass."""

from collections.abc import Iterable, Set

import numpy as np
import numpy.typing as npt

from metrics._types import BoolArray, FloatArray, IntArray, NumberArray
from metrics.measures import AT_K
from metrics.ranking import (
    PAD,
    check_gain,
    check_k,
    check_labels,
    check_qrels,
    check_threshold,
    count_relevant,
    gain_values,
    rank_discounts,
    safe_divide,
)

__all__ = ["CURVE_MEASURES", "curves"]

#: Measures :func:`curves` draws, in this order: the registry's measures with a cutoff (Judged left out).
CURVE_MEASURES = AT_K


def curves(
    labels: npt.ArrayLike,
    qrels: npt.ArrayLike,
    k_max: int,
    *,
    threshold: float = 1,
    gain: str = "linear",
    measures: Iterable[str] = CURVE_MEASURES,
    average: bool = True,
) -> dict[str, FloatArray]:
    r"""P@k, R@k, F1@k, Hit@k and nDCG@k for every k from 1 to k_max, every system, in one pass.

    With :math:`\mathrm{rel}@k` the cumulative sum of relevance along the ranking and
    :math:`DCG@k` the cumulative sum of discounted gains,

    .. math::

        P@k = \frac{\mathrm{rel}@k}{k}, \quad R@k = \frac{\mathrm{rel}@k}{\mathrm{num\_rel}}, \quad
        F_1@k = \frac{2\,\mathrm{rel}@k}{k + \mathrm{num\_rel}}, \quad
        \mathrm{Hit}@k = [\mathrm{rel}@k > 0], \quad nDCG@k = \frac{DCG@k}{IDCG@k}

    each column k equal to the single-cutoff function (:func:`metrics.precision`, ...) at that k:
    the same conventions (R, F1 and nDCG 0 when their denominator is 0; runs shorter than k padded with
    non-relevant documents; unjudged documents non-relevant).

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Ranked labels, see :func:`metrics.precision`.
    qrels : int array, shape (Q, M)
        Labels of every labelled document of each query, see :func:`metrics.recall`.
    k_max : int
        Largest cutoff K, >= 1; may exceed D.
    threshold : int, default 1
        Relevance threshold of P, R, F1 and Hit (not of nDCG).
    gain : {"linear", "exponential"}, default "linear"
        nDCG gain.
    measures : iterable of str, default all of ``CURVE_MEASURES``
        The curves to compute; the others cost nothing.
    average : bool, default True
        Return the macro mean over queries (what a chart draws) instead of per-query values.

    Returns
    -------
    dict of str to ndarray of float64
        Shape (S, K) when ``average``, else (S, Q, K); column k - 1 holds the measure at cutoff k.
        With no queries the means are NaN, as :func:`metrics.mean`'s.
    """
    labels = check_labels(labels)
    qrels = check_qrels(qrels, labels)
    k_max = check_k(k_max)
    threshold = check_threshold(threshold)
    gain = check_gain(gain)
    names = tuple(measures)
    unknown = [name for name in names if name not in CURVE_MEASURES]
    if unknown:
        raise ValueError(f"unknown curve measure(s) {unknown}; choose from {CURVE_MEASURES}")

    n_queries = labels.shape[1]
    top = labels[..., :k_max]
    if top.shape[-1] < k_max:
        # Ranks past the deepest run add nothing: padding keeps every cumulative sum flat there.
        fill = np.full(top.shape[:-1] + (k_max - top.shape[-1],), PAD, dtype=top.dtype)
        top = np.concatenate([top, fill], axis=-1)
    ks = np.arange(1, k_max + 1)
    if n_queries == 0:
        shape = (labels.shape[0], k_max) if average else (labels.shape[0], 0, k_max)
        return {name: np.full(shape, np.nan) if average else np.zeros(shape) for name in names}
    num_rel = count_relevant(qrels, threshold)
    discounts = rank_discounts(k_max)
    best = np.sort(qrels, axis=-1)[:, ::-1][:, :k_max]
    ideal = np.zeros((n_queries, k_max))
    ideal[:, : best.shape[1]] = gain_values(best, gain) * discounts[: best.shape[1]]
    ideal = np.cumsum(ideal, axis=-1)  # (Q, K) IDCG@k
    if average:
        out = _mean_curves(top >= threshold, top, num_rel, ideal, set(names), gain, discounts)
    else:
        out = {}
        relevant = top >= threshold
        rel: IntArray = (
            np.cumsum(relevant, axis=-1, dtype=np.int16)
            if k_max < 2**15
            else np.cumsum(relevant, axis=-1, dtype=np.int32)
        )
        num_rel_q = num_rel[:, None]  # (Q, 1) against (S, Q, K)
        out["P"] = rel / ks
        out["R"] = safe_divide(rel, num_rel_q)
        out["F1"] = safe_divide(2.0 * rel, np.where(num_rel_q > 0, ks + num_rel_q, 0))
        out["Hit"] = (rel > 0).astype(np.float64)
        if "nDCG" in names:
            out["nDCG"] = safe_divide(np.cumsum(gain_values(top, gain) * discounts, axis=-1), ideal)
    return {name: out[name] for name in names}


def _group_sums(
    values: NumberArray | BoolArray, keys: NumberArray, dtype: npt.DTypeLike = None
) -> tuple[NumberArray, NumberArray]:
    """Sums of (S, Q, K) values over the queries that share a key row: (distinct keys, (S, G, K) sums).

    The curves' means only need, per cutoff, sums over queries with the same denominator (num_rel, or
    the IDCG curve); a handful of groups replaces a cumulative sum over every query.
    """
    distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
    order = np.argsort(inverse.reshape(-1), kind="stable")
    starts = np.searchsorted(inverse.reshape(-1)[order], np.arange(distinct.shape[0]))
    return distinct, np.add.reduceat(values[:, order], starts, axis=1, dtype=dtype)


def _mean_curves(
    relevant: BoolArray,
    top: IntArray,
    num_rel: IntArray,
    ideal: FloatArray,
    measures: Set[str],
    gain: str,
    discounts: FloatArray,
) -> dict[str, FloatArray]:
    """Macro means over queries of the curves, (S, K) each, summing before the cumulative sums.

    A cumulative sum along the ranking commutes with a sum over queries, so each measure sums the
    per-rank terms over queries that share its denominator first and then accumulates a (S, K) or
    (S, groups, K) array instead of the (S, Q, K) one.
    """
    n_systems, n_queries, k_max = top.shape
    ks = np.arange(1, k_max + 1)
    out: dict[str, FloatArray] = {}
    if "P" in measures:
        out["P"] = np.cumsum(np.count_nonzero(relevant, axis=1), axis=-1) / (n_queries * ks)
    if {"R", "F1"} & measures:
        values, sums = _group_sums(relevant, num_rel[:, None], dtype=np.int64)
        found = np.cumsum(sums, axis=-1)  # (S, G, K) relevant in the top k, summed over the group
        values = values[:, 0][:, None]  # (G, 1)
        if "R" in measures:
            out["R"] = (found * safe_divide(1.0, values)).sum(axis=1) / n_queries
        if "F1" in measures:
            out["F1"] = safe_divide(2.0 * found, np.where(values > 0, ks + values, 0)).sum(axis=1) / n_queries
    if "Hit" in measures:
        first = np.where(relevant.any(axis=-1), np.argmax(relevant, axis=-1), k_max)
        rows = np.arange(n_systems)[:, None] * (k_max + 1) + first
        counts = np.bincount(rows.reshape(-1), minlength=n_systems * (k_max + 1)).reshape(n_systems, -1)
        out["Hit"] = np.cumsum(counts[:, :k_max], axis=-1) / n_queries
    if "nDCG" in measures:
        # Queries with the same qrels grades share the IDCG curve: a few hundred groups at most.
        curves_, sums = _group_sums(gain_values(top, gain) * discounts, ideal)
        out["nDCG"] = safe_divide(np.cumsum(sums, axis=-1), curves_).sum(axis=1) / n_queries
    return out
