"""Inter-annotator agreement of (items x raters) grade matrices: kappas, Krippendorff's alpha, bootstrap CIs.

Every statistic here reads a ``ratings`` matrix of shape (n_items, n_raters), or two rating vectors ``a``
and ``b`` of shape (n_items,), holding grades taken from ``categories``, the campaign's grade values in
increasing order (e.g. ``[0, 1, 2]``). A missing rating (the rater did not judge the item) is marked

* ``NaN`` in a float array, or
* ``MISSING`` (-1) in an integer array; -1 can then not be a grade (pass floats with NaN if it is one).

Any other value that is not one of ``categories`` is a ``ValueError``. A statistic that is undefined on the
data (no items rated by enough raters, or no variation at all, so that chance agreement is already perfect
and the formula is 0/0) is returned as ``NaN``, never with a warning.

Each statistic is a function of sums over items (confusion counts, coincidence counts, per-item agreement),
which is what lets :func:`bootstrap_agreement` evaluate a thousand item resamples as one matrix product.
"""

import functools
import numbers
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from metrics._types import BoolArray, FloatArray, IntArray, NumberArray

__all__ = [
    "LEVELS",
    "MISSING",
    "WEIGHTS",
    "PairwiseAgreement",
    "bootstrap_agreement",
    "cohen_kappa",
    "confusion_matrix",
    "fleiss_kappa",
    "krippendorff_alpha",
    "observed_agreement",
    "pairwise_agreement",
    "raw_agreement",
]

#: Marker of a missing rating in an integer ratings array (float arrays use NaN).
MISSING = -1
#: Disagreement weights accepted by :func:`cohen_kappa`.
WEIGHTS = (None, "linear", "quadratic")
#: Levels of measurement accepted by :func:`krippendorff_alpha`.
LEVELS = ("nominal", "ordinal", "interval")

# Bootstrap resamples are drawn and summed in blocks of about this many (resample, item) cells, which
# bounds memory at a few tens of MB whatever the campaign size.
_BLOCK_CELLS = 1 << 22


# --------------------------------------------------------------------------------------------------------
# Argument checking


def _check_categories(categories: npt.ArrayLike) -> NumberArray:
    cats: NumberArray = np.asarray(categories)
    if cats.ndim != 1 or cats.size < 2:
        raise ValueError(f"categories must be a 1-D sequence of at least 2 grades, got {categories!r}")
    if cats.dtype.kind not in "iuf" or not np.all(np.isfinite(cats)):
        raise ValueError(f"categories must be finite numbers, got {categories!r}")
    if np.any(np.diff(cats) <= 0):
        raise ValueError(f"categories must be strictly increasing, got {cats.tolist()}")
    return cats


def _missing(values: NumberArray, name: str) -> BoolArray:
    """Boolean mask of missing ratings: NaN in float arrays, MISSING in integer arrays."""
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype.kind in "iu":
        missing: BoolArray = values == MISSING
        return missing
    if values.size == 0:
        # np.asarray([]) and friends carry no value to misread whatever their dtype.
        return np.zeros(values.shape, dtype=bool)
    raise ValueError(f"{name} must be an integer or float array, got dtype {values.dtype}")


def _codes(values: npt.ArrayLike, categories: NumberArray, name: str, ndim: int) -> IntArray:
    """Grades as indices into ``categories`` (0 .. C-1), -1 where missing."""
    values = np.asarray(values)
    if values.ndim != ndim:
        shape = "(n_items,)" if ndim == 1 else "(n_items, n_raters)"
        raise ValueError(f"{name} must be a {ndim}-D array of shape {shape}, got shape {values.shape}")
    missing = _missing(values, name)
    if values.dtype.kind in "iu" and np.any(categories == MISSING):
        raise ValueError(
            f"categories contain {MISSING}, which marks a missing rating in an integer array; "
            "pass float ratings with NaN for missing instead"
        )
    if values.size == 0:
        return np.zeros(values.shape, dtype=np.intp)
    index = np.minimum(np.searchsorted(categories, values), categories.size - 1)
    outside = ~missing & (categories[index] != values)
    if outside.any():
        bad = np.unique(values[outside])[:5].tolist()
        raise ValueError(f"{name} contains grades {bad} outside categories {categories.tolist()}")
    codes: IntArray = np.where(missing, -1, index)
    return codes


def _check_pair(a: npt.ArrayLike, b: npt.ArrayLike, categories: NumberArray) -> tuple[IntArray, IntArray]:
    codes_a = _codes(a, categories, "a", 1)
    codes_b = _codes(b, categories, "b", 1)
    if codes_a.shape != codes_b.shape:
        raise ValueError(f"a and b must rate the same items, got shapes {codes_a.shape} and {codes_b.shape}")
    return codes_a, codes_b


def _check_weights(weights: str | None) -> str | None:
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    return weights


def _check_level(level: str) -> str:
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    return level


def _divide(numerator: npt.ArrayLike, denominator: npt.ArrayLike) -> FloatArray:
    """numerator / denominator, NaN where the denominator is 0 (the statistic is undefined there)."""
    numerator, denominator = np.broadcast_arrays(
        np.asarray(numerator, dtype=np.float64), np.asarray(denominator, dtype=np.float64)
    )
    quotient: FloatArray = np.divide(
        numerator, denominator, out=np.full(numerator.shape, np.nan), where=denominator != 0
    )
    return quotient


def _scalar(value: npt.ArrayLike) -> float:
    return float(np.asarray(value).reshape(()))


# --------------------------------------------------------------------------------------------------------
# Sufficient statistics: each statistic is ``finish(sum over items of parts)``; the public functions sum
# directly, the bootstrap sums with resampling weights.


def _pair_cells(a: IntArray, b: IntArray, n_categories: int) -> IntArray:
    """(n_items,) flat confusion cell ``a * C + b`` of each item, -1 where either rating is missing."""
    both = (a >= 0) & (b >= 0)
    cells: IntArray = np.where(both, a * n_categories + b, -1)
    return cells


def _value_counts(codes: IntArray, n_categories: int) -> IntArray:
    """(n_items, C) number of raters who gave each item each grade."""
    n_items = codes.shape[0]
    rated = codes >= 0
    rows = np.broadcast_to(np.arange(n_items)[:, None], codes.shape)[rated]
    flat: IntArray = np.bincount(rows * n_categories + codes[rated], minlength=n_items * n_categories)
    return flat.reshape(n_items, n_categories)


def _weight_matrix(n_categories: int, weights: str | None) -> FloatArray:
    """Cohen's disagreement weights on grade ranks, as sklearn: 1 - I, |i - j| or (i - j)^2."""
    rank = np.arange(n_categories)
    distance = np.abs(rank[:, None] - rank[None, :]).astype(np.float64)
    if weights is None:
        return (distance > 0).astype(np.float64)
    return distance if weights == "linear" else distance**2


def _kappa_from_confusion(confusion: npt.ArrayLike, weight: FloatArray) -> FloatArray:
    """Cohen's kappa of confusion matrices of shape (..., C, C); NaN where chance disagreement is 0."""
    confusion = np.asarray(confusion, dtype=np.float64)
    n = confusion.sum(axis=(-2, -1))
    rows, cols = confusion.sum(axis=-1), confusion.sum(axis=-2)
    observed = n * np.einsum("...ij,ij->...", confusion, weight)
    chance = np.einsum("...i,ij,...j->...", rows, weight, cols)
    return 1.0 - _divide(observed, chance)


def _raw_from_confusion(confusion: npt.ArrayLike) -> FloatArray:
    confusion = np.asarray(confusion, dtype=np.float64)
    return _divide(np.trace(confusion, axis1=-2, axis2=-1), confusion.sum(axis=(-2, -1)))


def _fleiss_parts(counts: IntArray) -> FloatArray:
    """(n_items, 2 + C) per item: [rated >= 2 times, P_i, n_ij / n_i for each grade j]; 0 rows otherwise."""
    shares = counts.astype(np.float64)
    m = shares.sum(axis=1)
    kept = m >= 2
    parts = np.zeros((shares.shape[0], 2 + shares.shape[1]))
    mk, ck = m[kept], shares[kept]
    parts[kept, 0] = 1.0
    parts[kept, 1] = ((ck * (ck - 1.0)).sum(axis=1)) / (mk * (mk - 1.0))
    parts[kept, 2:] = ck / mk[:, None]
    return parts


def _observed_parts(ratings: npt.ArrayLike) -> FloatArray:
    """(n_items, 2) per item: [rated >= 2 times, share of its ordered rater pairs that agree]; 0 rows otherwise.

    Only equality matters, so the distinct grades present stand in for the categories."""
    ratings = np.asarray(ratings)
    if ratings.ndim != 2:
        raise ValueError(f"ratings must be a 2-D array of shape (n_items, n_raters), got shape {ratings.shape}")
    rated = ~_missing(ratings, "ratings")
    items = np.broadcast_to(np.arange(ratings.shape[0])[:, None], ratings.shape)[rated]
    grades, codes = np.unique(ratings[rated], return_inverse=True)
    flat = np.bincount(items * grades.size + codes, minlength=ratings.shape[0] * grades.size)
    return _fleiss_parts(flat.reshape(ratings.shape[0], grades.size))[:, :2]


def _observed_finish(sums: FloatArray) -> FloatArray:
    return _divide(sums[..., 1], sums[..., 0])


def _fleiss_finish(sums: FloatArray) -> FloatArray:
    n_items = sums[..., 0]
    observed = _divide(sums[..., 1], n_items)
    chance = (_divide(sums[..., 2:], n_items[..., None]) ** 2).sum(axis=-1)
    return _divide(observed - chance, 1.0 - chance)


def _pairable_scale(counts: FloatArray) -> FloatArray:
    """(n_items,) 1 / (m_u - 1) for items with m_u >= 2 ratings, 0 for the unpairable rest."""
    m = counts.sum(axis=1)
    scale: FloatArray = np.where(m >= 2, 1.0 / np.maximum(m - 1.0, 1.0), 0.0)
    return scale


def _coincidence_parts(counts: IntArray) -> FloatArray:
    """(n_items, C * C) each item's contribution to Krippendorff's coincidence matrix (0 if unpairable)."""
    n = counts.astype(np.float64)
    n_items, n_categories = n.shape
    scale = _pairable_scale(n)
    outer = n[:, :, None] * n[:, None, :]
    outer[:, np.arange(n_categories), np.arange(n_categories)] -= n
    return (outer * scale[:, None, None]).reshape(n_items, n_categories * n_categories)


def _coincidences(counts: IntArray) -> FloatArray:
    """(C, C) coincidence matrix o_ck = sum_u (n_uc n_uk - [c = k] n_uc) / (m_u - 1) over m_u >= 2."""
    n = counts.astype(np.float64)
    scaled = n * _pairable_scale(n)[:, None]
    coincidences: FloatArray = scaled.T @ n - np.diag(scaled.sum(axis=0))
    return coincidences


def _alpha_from_coincidences(o: FloatArray, categories: NumberArray, level: str) -> FloatArray:
    """Krippendorff's alpha of coincidence matrices of shape (..., C, C); NaN where D_e is 0."""
    n_c = o.sum(axis=-1)
    n = n_c.sum(axis=-1)
    n_categories = categories.size
    if level == "nominal":
        distance = 1.0 - np.eye(n_categories)
    elif level == "interval":
        values = categories.astype(np.float64)
        distance = (values[:, None] - values[None, :]) ** 2
    else:
        # Krippendorff (2011): d_ck = (sum_{g=c..k} n_g - (n_c + n_k) / 2)^2 for c <= k, which equals
        # (cum_k - cum_c + (n_c - n_k) / 2)^2 with cum the running total, and is symmetric.
        cum = np.cumsum(n_c, axis=-1)
        distance = (cum[..., None, :] - cum[..., :, None] + (n_c[..., :, None] - n_c[..., None, :]) / 2) ** 2
    observed = (o * distance).sum(axis=(-2, -1))
    expected = _divide(np.einsum("...c,...ck,...k->...", n_c, distance, n_c), n - 1.0)
    return 1.0 - _divide(observed, expected)


# --------------------------------------------------------------------------------------------------------
# Statistics


def confusion_matrix(a: npt.ArrayLike, b: npt.ArrayLike, categories: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Confusion matrix of two raters over the items both rated.

    ``C[i, j]`` is the number of items that rater ``a`` gave ``categories[i]`` and rater ``b`` gave
    ``categories[j]``. Equal to ``sklearn.metrics.confusion_matrix(a, b, labels=categories)`` on the items
    both rated.

    Parameters
    ----------
    a, b : array, shape (n_items,)
        Grades of the two raters; NaN (float) or ``MISSING`` (int) where a rater did not rate the item.
    categories : sequence, shape (C,)
        The grade values in increasing order, at least two.

    Returns
    -------
    ndarray of int64, shape (C, C)

    Raises
    ------
    ValueError
        If a or b is not 1-D, their lengths differ, or a grade is not one of ``categories``.
    """
    cats = _check_categories(categories)
    codes_a, codes_b = _check_pair(a, b, cats)
    cells = _pair_cells(codes_a, codes_b, cats.size)
    counts = np.bincount(cells[cells >= 0], minlength=cats.size * cats.size)
    return counts.reshape(cats.size, cats.size).astype(np.int64)


def raw_agreement(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    r"""Observed proportion of agreement of two raters over the items both rated.

    .. math:: p_o = \frac{|\{i : a_i = b_i\}|}{|\{i : a_i, b_i \text{ both rated}\}|}

    Parameters
    ----------
    a, b : array, shape (n_items,)
        Grades of the two raters; NaN (float) or ``MISSING`` (int) where a rater did not rate the item.
        No ``categories`` are needed: only equality of grades matters.

    Returns
    -------
    float
        In [0, 1]; NaN when no item was rated by both.

    Raises
    ------
    ValueError
        If a or b is not a 1-D numeric array or their lengths differ.
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 1 or b.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"a and b must be 1-D arrays of equal length, got shapes {a.shape} and {b.shape}")
    both = ~_missing(a, "a") & ~_missing(b, "b")
    return _scalar(_divide(np.count_nonzero(both & (a == b)), np.count_nonzero(both)))


def observed_agreement(ratings: npt.ArrayLike) -> float:
    r"""Raw agreement of any number of raters: the share of agreeing rater pairs of an item, averaged over items.

    Over the :math:`N` items rated by at least two raters (the others are skipped), with :math:`n_i` the
    number of ratings of item :math:`i` and :math:`n_{ij}` how many of them are grade :math:`j`,

    .. math:: P_i = rac{\sum_j n_{ij}(n_{ij} - 1)}{n_i (n_i - 1)}, \quad ar P = rac{1}{N} \sum_i P_i

    :math:`P_i` is the share of the :math:`n_i (n_i - 1)` ordered pairs of item :math:`i`'s raters that gave
    the same grade, and :math:`ar P` is the observed agreement of Fleiss' kappa (Fleiss 1971). Every item
    weighs the same whatever its number of ratings. With two raters it equals :func:`raw_agreement`.

    Parameters
    ----------
    ratings : array, shape (n_items, n_raters)
        Grades; NaN (float) or ``MISSING`` (int) where a rater did not rate the item. No ``categories``
        are needed: only equality of grades matters.

    Returns
    -------
    float
        In [0, 1]; NaN when no item has two ratings.

    Raises
    ------
    ValueError
        If ratings is not a 2-D integer or float array.

    References
    ----------
    .. [1] J. L. Fleiss (1971). Measuring nominal scale agreement among many raters. Psychological
       Bulletin 76(5):378-382.
    """
    return _scalar(_observed_finish(_observed_parts(ratings).sum(axis=0)))


def cohen_kappa(a: npt.ArrayLike, b: npt.ArrayLike, categories: npt.ArrayLike, weights: str | None = None) -> float:
    r"""Cohen's kappa of two raters over the items both rated, optionally weighted for ordinal grades.

    With the confusion matrix :math:`O` of :func:`confusion_matrix` over the :math:`n` items both rated,
    the chance matrix :math:`E_{ij} = O_{i\cdot} O_{\cdot j} / n` and disagreement weights :math:`w`,

    .. math:: \kappa = 1 - \frac{\sum_{ij} w_{ij} O_{ij}}{\sum_{ij} w_{ij} E_{ij}}

    where :math:`w_{ij} = [i \ne j]` (unweighted, Cohen 1960), :math:`|i - j|` (``"linear"``) or
    :math:`(i - j)^2` (``"quadratic"``, Cohen 1968), with :math:`i, j` the *ranks* of the grades in
    ``categories``, not their values. Unweighted, this is :math:`(p_o - p_e) / (1 - p_e)`.
    Equal to ``sklearn.metrics.cohen_kappa_score(a, b, labels=categories, weights=weights)`` on the items
    both rated.

    Parameters
    ----------
    a, b : array, shape (n_items,)
        Grades of the two raters; NaN (float) or ``MISSING`` (int) where a rater did not rate the item.
    categories : sequence, shape (C,)
        The grade values in increasing order, at least two.
    weights : {None, "linear", "quadratic"}, default None

    Returns
    -------
    float
        At most 1. NaN when no item was rated by both, or when chance disagreement is 0 (both raters gave
        one and the same grade to every item: 0/0; sklearn returns nan there too, with a warning).

    Raises
    ------
    ValueError
        On bad shapes, a grade outside ``categories``, or unknown ``weights``.

    References
    ----------
    .. [1] J. Cohen (1960). A coefficient of agreement for nominal scales. Educational and Psychological
       Measurement 20(1):37-46.
    .. [2] J. Cohen (1968). Weighted kappa: nominal scale agreement with provision for scaled disagreement
       or partial credit. Psychological Bulletin 70(4):213-220.
    """
    weights = _check_weights(weights)
    confusion = confusion_matrix(a, b, categories)
    return _scalar(_kappa_from_confusion(confusion, _weight_matrix(confusion.shape[0], weights)))


def fleiss_kappa(ratings: npt.ArrayLike, categories: npt.ArrayLike) -> float:
    r"""Fleiss' kappa of any number of raters, tolerating missing ratings.

    Over the :math:`N` items rated by at least two raters (the others are skipped), with :math:`n_i` the
    number of ratings of item :math:`i` and :math:`n_{ij}` how many of them are grade :math:`j`,

    .. math::

        P_i = \frac{\sum_j n_{ij}(n_{ij} - 1)}{n_i (n_i - 1)}, \quad
        \bar P = \frac{1}{N} \sum_i P_i, \quad
        \pi_j = \frac{1}{N} \sum_i \frac{n_{ij}}{n_i}, \quad
        P_e = \sum_j \pi_j^2, \quad
        \kappa = \frac{\bar P - P_e}{1 - P_e}

    When items have unequal numbers of ratings this is Gwet's (2014) generalization: each item weighs the
    same in both :math:`\bar P` and the grade proportions :math:`\pi_j`. When every item has the same
    number of ratings it is exactly Fleiss (1971), as computed by statsmodels' ``fleiss_kappa``.
    Fleiss' kappa is a nominal statistic: the order of ``categories`` does not matter.

    Parameters
    ----------
    ratings : array, shape (n_items, n_raters)
        Grades; NaN (float) or ``MISSING`` (int) where a rater did not rate the item.
    categories : sequence, shape (C,)
        The grade values in increasing order, at least two.

    Returns
    -------
    float
        At most 1. NaN when no item has two ratings, or when :math:`P_e = 1` (every rating is the same
        grade: 0/0, where statsmodels returns nan too).

    Raises
    ------
    ValueError
        If ratings is not 2-D or holds a grade outside ``categories``.

    References
    ----------
    .. [1] J. L. Fleiss (1971). Measuring nominal scale agreement among many raters. Psychological
       Bulletin 76(5):378-382.
    .. [2] K. L. Gwet (2014). Handbook of Inter-Rater Reliability, 4th ed., chapter 2 (Fleiss' kappa with
       missing ratings). Advanced Analytics.
    """
    cats = _check_categories(categories)
    counts = _value_counts(_codes(ratings, cats, "ratings", 2), cats.size)
    return _scalar(_fleiss_finish(_fleiss_parts(counts).sum(axis=0)))


def krippendorff_alpha(ratings: npt.ArrayLike, categories: npt.ArrayLike, level: str = "ordinal") -> float:
    r"""Krippendorff's alpha of any number of raters, tolerating missing ratings.

    Items rated fewer than twice are not pairable and are skipped. From the coincidence matrix

    .. math:: o_{ck} = \sum_u \frac{n_{uc} n_{uk} - [c = k]\, n_{uc}}{m_u - 1}

    (:math:`n_{uc}` raters gave item :math:`u` grade :math:`c`, :math:`m_u \ge 2` ratings in all), its
    marginals :math:`n_c = \sum_k o_{ck}` and :math:`n = \sum_c n_c`,

    .. math::

        \alpha = 1 - \frac{D_o}{D_e} = 1 - (n - 1)
                 \frac{\sum_{c,k} o_{ck}\, \delta^2_{ck}}{\sum_{c,k} n_c n_k\, \delta^2_{ck}}

    with the distance :math:`\delta^2_{ck}` of the level of measurement:

    * nominal: :math:`[c \ne k]`;
    * ordinal: :math:`\left(\sum_{g=c}^{k} n_g - \frac{n_c + n_k}{2}\right)^2` for :math:`c \le k`, from
      the marginal frequencies of the ranks between the two grades (so only their order matters);
    * interval: :math:`(v_c - v_k)^2` on the grade values :math:`v`.

    Equal to ``krippendorff.alpha(reliability_data=ratings.T, level_of_measurement=level,
    value_domain=categories)``.

    Parameters
    ----------
    ratings : array, shape (n_items, n_raters)
        Grades; NaN (float) or ``MISSING`` (int) where a rater did not rate the item.
    categories : sequence, shape (C,)
        The grade values in increasing order, at least two.
    level : {"nominal", "ordinal", "interval"}, default "ordinal"

    Returns
    -------
    float
        At most 1. NaN when no item has two ratings, or when :math:`D_e = 0` (every pairable rating is the
        same grade: 0/0, where the krippendorff package returns nan too, with a warning).

    Raises
    ------
    ValueError
        If ratings is not 2-D, holds a grade outside ``categories``, or level is unknown.

    References
    ----------
    .. [1] K. Krippendorff (2011). Computing Krippendorff's Alpha-Reliability. Annenberg School for
       Communication Departmental Papers 43, University of Pennsylvania.
    .. [2] K. Krippendorff (2019). Content Analysis: An Introduction to Its Methodology, 4th ed.,
       chapter 12. SAGE.
    """
    level = _check_level(level)
    cats = _check_categories(categories)
    counts = _value_counts(_codes(ratings, cats, "ratings", 2), cats.size)
    return _scalar(_alpha_from_coincidences(_coincidences(counts), cats, level))


def agreement_by_group(
    ratings: npt.ArrayLike, groups: npt.ArrayLike, categories: npt.ArrayLike, level: str = "ordinal"
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.int64]]:
    r"""Krippendorff's alpha and pairwise percent agreement within each group of items (e.g. per query).

    One coincidence matrix per group, summed from the items' contributions with ``np.add.at``: no loop
    over groups. Percent agreement is the share of pairable rating pairs that agree,
    :math:`\operatorname{tr}(o) / \sum o`.

    Parameters
    ----------
    ratings : array, shape (n_items, n_raters)
        As for :func:`krippendorff_alpha`.
    groups : int array, shape (n_items,)
        Group index of each item, 0 <= groups < G.
    categories : sequence, shape (C,)
    level : {"nominal", "ordinal", "interval"}

    Returns
    -------
    alpha, agreement, pairable : ndarrays of shape (G,)
        NaN where a group has no item rated twice (``pairable`` counts those items).
    """
    level = _check_level(level)
    cats = _check_categories(categories)
    counts = _value_counts(_codes(ratings, cats, "ratings", 2), cats.size)
    groups = np.asarray(groups)
    if groups.shape != (counts.shape[0],) or (groups.size and groups.min() < 0):
        raise ValueError("groups must be a non-negative integer array with one entry per item")
    n_groups = int(groups.max()) + 1 if groups.size else 0
    flat_o = np.zeros((n_groups, cats.size * cats.size))
    np.add.at(flat_o, groups, _coincidence_parts(counts))
    o = flat_o.reshape(n_groups, cats.size, cats.size)
    pairable = np.bincount(groups, weights=(counts.sum(axis=1) >= 2), minlength=n_groups).astype(np.int64)
    alpha = _alpha_from_coincidences(o, cats, level)
    agreement = _divide(np.trace(o, axis1=1, axis2=2), o.sum(axis=(1, 2)))
    alpha_or_nan: FloatArray = np.where(pairable > 0, alpha, np.nan)
    agreement_or_nan: FloatArray = np.where(pairable > 0, agreement, np.nan)
    return alpha_or_nan, agreement_or_nan, pairable


class PairwiseAgreement(NamedTuple):
    """Agreement of every pair of raters ``(rater_a[p], rater_b[p])``, ``rater_a[p] < rater_b[p]``."""

    #: (P,) int column index of the first rater of each pair (``np.triu_indices(n_raters, 1)`` order).
    rater_a: IntArray
    #: (P,) int column index of the second rater.
    rater_b: IntArray
    #: (P,) int number of items both raters rated.
    n_common: IntArray
    #: (P,) float :func:`raw_agreement` over those items.
    raw: FloatArray
    #: (P,) float unweighted :func:`cohen_kappa`.
    kappa: FloatArray
    #: (P,) float quadratic-weighted :func:`cohen_kappa`.
    quadratic_kappa: FloatArray


def pairwise_agreement(ratings: npt.ArrayLike, categories: npt.ArrayLike) -> PairwiseAgreement:
    """Raw agreement, Cohen's kappa and quadratic-weighted kappa of every pair of raters.

    All P = R (R - 1) / 2 confusion matrices come from one (R C x R C) product of the one-hot ratings,
    so the cost does not grow with a Python loop over pairs or items.

    Parameters
    ----------
    ratings : array, shape (n_items, n_raters)
        Grades; NaN (float) or ``MISSING`` (int) where a rater did not rate the item.
    categories : sequence, shape (C,)
        The grade values in increasing order, at least two.

    Returns
    -------
    PairwiseAgreement
        Arrays of shape (P,), pairs in ``np.triu_indices(n_raters, 1)`` order. ``raw``, ``kappa`` and
        ``quadratic_kappa`` are NaN for pairs sharing fewer than 2 items (and the kappas wherever
        :func:`cohen_kappa` is NaN); otherwise each equals the two-rater function on that pair's columns.

    Raises
    ------
    ValueError
        If ratings is not 2-D or holds a grade outside ``categories``.
    """
    cats = _check_categories(categories)
    codes = _codes(ratings, cats, "ratings", 2)
    n_items, n_raters = codes.shape
    n_categories = cats.size
    one_hot = (codes[:, :, None] == np.arange(n_categories)).reshape(n_items, n_raters * n_categories)
    one_hot = one_hot.astype(np.float64)
    cross = (one_hot.T @ one_hot).reshape(n_raters, n_categories, n_raters, n_categories)
    rater_a, rater_b = np.triu_indices(n_raters, 1)
    confusion = cross.transpose(0, 2, 1, 3)[rater_a, rater_b]
    n_common = np.rint(confusion.sum(axis=(-2, -1))).astype(np.int64)
    few = n_common < 2
    raw = _raw_from_confusion(confusion)
    kappa = _kappa_from_confusion(confusion, _weight_matrix(n_categories, None))
    quadratic = _kappa_from_confusion(confusion, _weight_matrix(n_categories, "quadratic"))
    for values in (raw, kappa, quadratic):
        values[few] = np.nan
    return PairwiseAgreement(rater_a, rater_b, n_common, raw, kappa, quadratic)


# --------------------------------------------------------------------------------------------------------
# Bootstrap


#: Turns the per-item parts summed over items (..., K) into the statistic (...,).
Finish = Callable[[FloatArray], FloatArray]


def _batched(stat_fn: Callable[..., float]) -> Callable[[NumberArray], tuple[FloatArray, Finish]] | None:
    """For a statistic of this module (bare, or a functools.partial with keyword arguments only), a function
    ``prepare(ratings) -> (parts, finish)``: per-item parts of shape (n_items, K) whose sums over items,
    of shape (..., K), ``finish`` turns into the statistic. None for any other callable."""
    func, keywords = stat_fn, dict[str, object]()
    if isinstance(stat_fn, functools.partial):
        if stat_fn.args:
            return None
        func, keywords = stat_fn.func, dict(stat_fn.keywords)

    def two_raters(ratings: NumberArray) -> tuple[NumberArray, NumberArray]:
        if ratings.shape[1] != 2:
            raise ValueError(f"{func.__name__} needs ratings of shape (n_items, 2), got {ratings.shape}")
        return ratings[:, 0], ratings[:, 1]

    def raw_prepare(ratings: NumberArray) -> tuple[FloatArray, Finish]:
        a, b = two_raters(ratings)
        both = ~_missing(a, "a") & ~_missing(b, "b")
        parts = np.stack([both, both & (a == b)], axis=1).astype(np.float64)
        return parts, lambda sums: _divide(sums[..., 1], sums[..., 0])

    def cohen_prepare(
        ratings: NumberArray, categories: npt.ArrayLike, weights: str | None = None
    ) -> tuple[FloatArray, Finish]:
        weights = _check_weights(weights)
        cats = _check_categories(categories)
        a, b = _check_pair(*two_raters(ratings), cats)
        cells = _pair_cells(a, b, cats.size)
        parts = (cells[:, None] == np.arange(cats.size * cats.size)).astype(np.float64)
        weight = _weight_matrix(cats.size, weights)
        shape = (cats.size, cats.size)
        return parts, lambda sums: _kappa_from_confusion(sums.reshape(sums.shape[:-1] + shape), weight)

    def observed_prepare(ratings: NumberArray) -> tuple[FloatArray, Finish]:
        return _observed_parts(ratings), _observed_finish

    def fleiss_prepare(ratings: NumberArray, categories: npt.ArrayLike) -> tuple[FloatArray, Finish]:
        cats = _check_categories(categories)
        counts = _value_counts(_codes(ratings, cats, "ratings", 2), cats.size)
        return _fleiss_parts(counts), _fleiss_finish

    def alpha_prepare(
        ratings: NumberArray, categories: npt.ArrayLike, level: str = "ordinal"
    ) -> tuple[FloatArray, Finish]:
        level = _check_level(level)
        cats = _check_categories(categories)
        counts = _value_counts(_codes(ratings, cats, "ratings", 2), cats.size)
        shape = (cats.size, cats.size)

        def finish(sums: FloatArray) -> FloatArray:
            return _alpha_from_coincidences(sums.reshape(sums.shape[:-1] + shape), cats, level)

        return _coincidence_parts(counts), finish

    # The statistics and their preparations differ in their further arguments, which come from the partial.
    preparations: dict[Callable[..., float], Callable[..., tuple[FloatArray, Finish]]] = {
        raw_agreement: raw_prepare,
        observed_agreement: observed_prepare,
        cohen_kappa: cohen_prepare,
        fleiss_kappa: fleiss_prepare,
        krippendorff_alpha: alpha_prepare,
    }
    prepare = preparations.get(func)
    if prepare is None:
        return None
    return functools.partial(prepare, **keywords)


def bootstrap_agreement(
    stat_fn: Callable[..., float],
    ratings: npt.ArrayLike,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator | None = 0,
) -> tuple[float, float]:
    r"""Percentile bootstrap confidence interval of an agreement statistic, resampling items.

    Each resample draws ``n_items`` rows of ``ratings`` with replacement (raters stay paired within an
    item); the interval is the :math:`(1 - \gamma)/2` and :math:`(1 + \gamma)/2` quantiles (numpy's
    linear interpolation) of the statistic over the resamples, :math:`\gamma` = ``confidence``.

    The statistics of this module are evaluated on all resamples at once: each is a function of sums over
    items, so with the (resamples x items) matrix :math:`W` of how often each item was drawn, the sums of
    every resample are one product :math:`W P` with the per-item parts :math:`P`. This fast path covers
    ``fleiss_kappa``, ``krippendorff_alpha`` and ``observed_agreement`` (on ``ratings``) and
    ``raw_agreement`` and ``cohen_kappa`` (on the two columns of a (n_items, 2) ``ratings``), given bare
    or as ``functools.partial`` with keyword arguments, e.g.
    ``partial(krippendorff_alpha, categories=[0, 1, 2], level="ordinal")``. Any other callable is called
    once per resample as ``stat_fn(ratings[drawn])`` on the same draws, so for one seed both paths give
    the same interval.

    Resamples on which the statistic is undefined (NaN, e.g. every drawn rating the same grade) are left
    out of the quantiles.

    Parameters
    ----------
    stat_fn : callable
        See above; any other callable maps a (n_items, n_raters) array to a float.
    ratings : array, shape (n_items, n_raters)
        Grades; NaN (float) or ``MISSING`` (int) where a rater did not rate the item.
    n_resamples : int, default 1000
    confidence : float, default 0.95
        Coverage of the interval, in (0, 1).
    seed : int, numpy.random.Generator or None, default 0
        Seed of ``numpy.random.default_rng``; the same seed gives the same interval.

    Returns
    -------
    (low, high) : tuple of float
        NaN, NaN when there are no items or the statistic is undefined on every resample.

    Raises
    ------
    ValueError
        On a bad ``n_resamples``, ``confidence`` or ratings shape, or anything ``stat_fn`` rejects.

    References
    ----------
    .. [1] B. Efron and R. J. Tibshirani (1993). An Introduction to the Bootstrap, chapter 13 (percentile
       intervals). Chapman & Hall.
    """
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, numbers.Integral) or n_resamples < 1:
        raise ValueError(f"n_resamples must be an integer >= 1, got {n_resamples!r}")
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0 < confidence < 1:
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}")
    if not callable(stat_fn):
        raise ValueError(f"stat_fn must be callable, got {stat_fn!r}")
    ratings = np.asarray(ratings)
    if ratings.ndim != 2:
        raise ValueError(f"ratings must be a 2-D array (n_items, n_raters), got shape {ratings.shape}")
    n_items = ratings.shape[0]
    prepare = _batched(stat_fn)
    if prepare is not None:
        # Also checks the ratings and stat_fn's arguments, once, before any resampling.
        parts, finish = prepare(ratings)
    if n_items == 0:
        return (np.nan, np.nan)

    rng = np.random.default_rng(seed)
    block = max(1, min(n_resamples, _BLOCK_CELLS // n_items))
    stats = np.empty(n_resamples)
    for start in range(0, n_resamples, block):
        size = min(block, n_resamples - start)
        drawn = rng.integers(0, n_items, size=(size, n_items))
        if prepare is None:
            stats[start : start + size] = [stat_fn(ratings[row]) for row in drawn]
            continue
        offsets = (np.arange(size) * n_items)[:, None]
        times = np.bincount((drawn + offsets).ravel(), minlength=size * n_items).reshape(size, n_items)
        stats[start : start + size] = finish(times.astype(np.float64) @ parts)

    stats = stats[~np.isnan(stats)]
    if stats.size == 0:
        return (np.nan, np.nan)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [tail, 1.0 - tail])
    return (float(low), float(high))
