"""Measure-versus-cutoff curves: P, R, F1, Hit and nDCG at every k from 1 to K in one pass."""

import numpy as np

from metrics.ranking import (
    PAD,
    _check_gain,
    _check_k,
    _check_labels,
    _check_qrels,
    _check_threshold,
    _discounts,
    _gains,
    _num_rel,
    _safe_divide,
)

__all__ = ["CURVE_MEASURES", "curves"]

#: Measures :func:`curves` draws, in this order.
CURVE_MEASURES = ("P", "R", "F1", "Hit", "nDCG")


def curves(labels, qrels, k_max: int, *, threshold=1, gain: str = "linear", measures=CURVE_MEASURES, average=True):
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
    labels = _check_labels(labels)
    qrels = _check_qrels(qrels, labels)
    k_max = _check_k(k_max)
    threshold = _check_threshold(threshold)
    gain = _check_gain(gain)
    measures = tuple(measures)
    unknown = [name for name in measures if name not in CURVE_MEASURES]
    if unknown:
        raise ValueError(f"unknown curve measure(s) {unknown}; choose from {CURVE_MEASURES}")

    n_queries = labels.shape[1]
    top = labels[..., :k_max]
    if top.shape[-1] < k_max:
        # Ranks past the deepest run add nothing: padding keeps every cumulative sum flat there.
        fill = np.full(top.shape[:-1] + (k_max - top.shape[-1],), PAD, dtype=top.dtype)
        top = np.concatenate([top, fill], axis=-1)
    ks = np.arange(1, k_max + 1)

    def finish(per_query):
        if not average:
            return per_query
        if n_queries == 0:
            return np.full((labels.shape[0], k_max), np.nan)
        return per_query.mean(axis=1)

    out = {}
    if {"P", "R", "F1", "Hit"} & set(measures):
        # int16 holds up to 32767 relevant documents per ranking, and halves the memory traffic.
        rel = np.cumsum(top >= threshold, axis=-1, dtype=np.int16 if k_max < 2**15 else np.int32)
        num_rel = _num_rel(qrels, threshold)[:, None]  # (Q, 1) against (S, Q, K)
        if "P" in measures:
            # Every query shares the denominator k: average the counts first, divide once.
            out["P"] = rel / ks if not average else (finish(rel.astype(np.float64)) / ks)
        if "R" in measures:
            weights = _safe_divide(1.0, num_rel)
            out["R"] = finish(rel * weights)
        if "F1" in measures:
            out["F1"] = finish(_safe_divide(2.0 * rel, np.where(num_rel > 0, ks + num_rel, 0)))
        if "Hit" in measures:
            out["Hit"] = finish((rel > 0).astype(np.float64))
    if "nDCG" in measures:
        discounts = _discounts(k_max)
        dcg = np.cumsum(_gains(top, gain) * discounts, axis=-1)
        best = np.sort(qrels, axis=-1)[:, ::-1][:, :k_max]
        ideal = np.zeros((n_queries, k_max))
        ideal[:, : best.shape[1]] = _gains(best, gain) * discounts[: best.shape[1]]
        out["nDCG"] = finish(_safe_divide(dcg, np.cumsum(ideal, axis=-1)))
    return {name: out[name] for name in measures}
