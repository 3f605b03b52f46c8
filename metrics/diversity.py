"""Diversity of the top k: intra-list diversity and coverage of an attribute's values."""

import numpy as np
import numpy.typing as npt

from metrics._types import BoolArray, FloatArray, IntArray
from metrics.ranking import PAD, check_k, int_array, safe_divide

__all__ = ["NO_VALUE", "coverage", "intra_list_diversity"]

#: Attribute value of a document that has none (no category, no source ...).
NO_VALUE = -1


def _check_values(values: npt.ArrayLike) -> IntArray:
    # PAD (-2) marks the end of a run, as in the labels array.
    return int_array(values, "values (systems, queries, depth)", 3, PAD)


def _sorted_top(values: IntArray, k: int) -> tuple[IntArray, BoolArray]:
    """The top k values sorted per ranking, and a flag on the first of each run of equal values."""
    top = np.sort(values[..., :k], axis=-1)
    first = np.ones(top.shape, dtype=bool)
    first[..., 1:] = top[..., 1:] != top[..., :-1]
    return top, first


def intra_list_diversity(values: npt.ArrayLike, *, k: int) -> FloatArray:
    r"""Intra-list diversity at k: the share of pairs of top-k documents whose attribute values differ.

    .. math:: \mathrm{ILD}@k = \frac{\binom{n}{2} - \sum_v \binom{n_v}{2}}{\binom{n}{2}}

    with n_v the number of top-k documents with value v and n their sum. Documents without the
    attribute (``NO_VALUE``) are left out of the pairs rather than counted as different from everyone:
    an unknown category says nothing about how alike two documents are, and counting it as a
    difference would reward runs for returning uncategorised documents. ILD@k is 0 when fewer than two
    top-k documents have a value (no pair to compare). It is the 0/1-distance case of Ziegler et al.'s
    intra-list similarity, turned into a diversity.

    Parameters
    ----------
    values : int array, shape (S, Q, D)
        Attribute value index (>= 0) of the document at each rank, ``NO_VALUE`` (-1) for a document
        without one, ``PAD`` (-2) after the end of the run; ranks as in the labels array.
    k : int
        Cutoff, >= 1.

    Returns
    -------
    ndarray of float64, shape (S, Q)

    References
    ----------
    Ziegler, C.-N. et al. (2005). Improving recommendation lists through topic diversification. WWW.
    """
    values = _check_values(values)
    k = check_k(k)
    top, first = _sorted_top(values, k)
    known = top >= 0
    n = np.count_nonzero(known, axis=-1)
    # Each document pairs with the equal values sorted before it: its index minus its run's start.
    index = np.broadcast_to(np.arange(top.shape[-1]), top.shape)
    run_start = np.maximum.accumulate(np.where(first, index, 0), axis=-1)
    same = np.sum(np.where(known, index - run_start, 0), axis=-1)
    pairs = n * (n - 1) // 2
    return safe_divide(pairs - same, pairs)


def coverage(values: npt.ArrayLike, *, k: int) -> npt.NDArray[np.int64]:
    """Coverage at k: the number of distinct attribute values among the top k documents.

    Documents without the attribute (``NO_VALUE``) add nothing; divide by the number of values of the
    query (or of the collection) for a share.

    Parameters
    ----------
    values : int array, shape (S, Q, D)
        See :func:`intra_list_diversity`.
    k : int
        Cutoff, >= 1.

    Returns
    -------
    ndarray of int64, shape (S, Q)
    """
    values = _check_values(values)
    k = check_k(k)
    top, first = _sorted_top(values, k)
    distinct: IntArray = np.count_nonzero(first & (top >= 0), axis=-1)
    return distinct.astype(np.int64)
