"""Paired significance tests, confidence intervals and rank correlation over per-query scores."""

import math
import numbers
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from scipy.special import stdtr

from metrics._types import FloatArray, IntArray

__all__ = [
    "bootstrap_ci",
    "holm",
    "discordant_pairs",
    "kendall_tau",
    "pearson_r",
    "paired_ttest",
    "permutation_test",
    "permutation_test_matrix",
    "tukey_hsd_randomized",
]

#: Seed of numpy.random.default_rng: the same seed gives the same result.
Seed = int | np.random.Generator | None
#: Called with the number of permutations drawn after each block.
Progress = Callable[[int], object]

# Entries of the random matrices generated at a time: about 32 MB of float64, whatever the problem size.
_BLOCK = 1 << 22
# Permuted statistics within this relative distance of the observed one count as ties (>=): they differ
# only by floating point rounding, and discrete measures (P@k, Hit@k) produce exact ties all the time.
_RTOL = 1e-9


def _check_count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _scores_matrix(scores: npt.ArrayLike, name: str = "scores") -> FloatArray:
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (systems, queries) array, got shape {x.shape}")
    if x.shape[1] == 0:
        raise ValueError(f"{name} has no queries")
    if not np.isfinite(x).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return x


def _paired_vectors(a: npt.ArrayLike, b: npt.ArrayLike) -> FloatArray:
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"a and b must be 1-D arrays of the same length, got shapes {x.shape} and {y.shape}")
    return np.stack([x, y])


def _pairwise_p(counts: npt.NDArray[np.int64] | FloatArray, total: int, plus_one: bool) -> FloatArray:
    share = (counts + 1.0) / (total + 1.0) if plus_one else counts / float(total)
    # Already float64 (a count over a float), which numpy's typing leaves as "some float": no copy made.
    p = share.astype(np.float64, copy=False)
    np.fill_diagonal(p, np.nan)
    return p


# --------------------------------------------------------------------------------------------------------
# Randomization tests


def permutation_test_matrix(
    scores: npt.ArrayLike, *, n_permutations: int = 10000, seed: Seed = 0, progress: Progress | None = None
) -> FloatArray:
    r"""Paired two-sided randomization (sign-flip) test for every pair of systems.

    For systems i and j with per-query differences :math:`d_q = x_{iq} - x_{jq}`, the statistic is
    :math:`|\sum_q d_q|` (equivalently the absolute mean difference). Under the null hypothesis the sign
    of each :math:`d_q` is a coin flip; the p-value is the share of sign assignments whose statistic is at
    least the observed one:

    .. math:: p = \frac{1 + |\{b : |\sum_q s_{bq} d_q| \ge |\sum_q d_q|\}|}{1 + B}

    over B random sign vectors :math:`s_b \in \{-1, 1\}^Q` (the observed assignment counted once, so
    p > 0, as Phipson & Smyth 2010 recommend). When :math:`2^Q \le` ``n_permutations`` all :math:`2^Q`
    assignments are enumerated instead and p is the exact share (the observed one among them).

    Every pair sees the same sign vectors. Because :math:`s \cdot (x_i - x_j) = s \cdot x_i - s \cdot x_j`,
    one (S x Q) by (Q x B) product gives the statistics of all S(S-1)/2 pairs; queries are centred across
    systems first, which leaves every difference unchanged and keeps the subtraction exact.

    Parameters
    ----------
    scores : array, shape (S, Q)
        Per-query scores of S systems on the same Q queries.
    n_permutations : int, default 10000
        Number B of random sign vectors.
    seed : int or numpy.random.Generator, default 0
        Seed of the random sign vectors; the same seed gives the same p-values.
    progress : callable, optional
        Called with the number of permutations drawn after each block (for a progress bar).

    Returns
    -------
    ndarray of float64, shape (S, S)
        Symmetric p-values, NaN on the diagonal. Adjust for multiple comparisons with :func:`holm`.

    References
    ----------
    Smucker, M. D., Allan, J. & Carterette, B. (2007). A comparison of statistical significance tests
    for information retrieval evaluation. CIKM.
    Phipson, B. & Smyth, G. K. (2010). Permutation p-values should never be zero. SAGMB 9(1).
    """
    x = _scores_matrix(scores)
    n_permutations = _check_count(n_permutations, "n_permutations")
    n_systems, n_queries = x.shape
    if n_systems == 0:
        return np.zeros((0, 0))
    centred = x - x.mean(axis=0)
    totals = centred.sum(axis=1)
    observed = np.abs(totals[:, None] - totals[None, :])
    magnitude = np.abs(centred).sum(axis=1)
    cutoff = observed - _RTOL * (magnitude[:, None] + magnitude[None, :])

    def count(bits: IntArray) -> IntArray:
        # s = 2 * bits - 1, so s . x = 2 (bits . x) - sum(x): the 0/1 matrix goes to BLAS as it is.
        flipped = 2.0 * (bits.astype(np.float64) @ centred.T) - totals
        diffs = np.abs(flipped[:, :, None] - flipped[:, None, :])
        counts: IntArray = np.count_nonzero(diffs >= cutoff, axis=0)
        return counts

    per_block = max(1, min(_BLOCK // n_queries, _BLOCK // (n_systems * n_systems)))
    counts = np.zeros((n_systems, n_systems), dtype=np.int64)
    if n_queries < 63 and 2**n_queries <= n_permutations:
        assignments = np.arange(2**n_queries, dtype=np.int64)
        for start in range(0, assignments.size, per_block):
            block = assignments[start : start + per_block]
            counts += count((block[:, None] >> np.arange(n_queries)) & 1)
            if progress is not None:
                progress(block.size)
        return _pairwise_p(counts, 2**n_queries, plus_one=False)

    rng = np.random.default_rng(seed)
    for start in range(0, n_permutations, per_block):
        size = min(per_block, n_permutations - start)
        packed = np.frombuffer(rng.bytes(size * ((n_queries + 7) // 8)), dtype=np.uint8)
        counts += count(np.unpackbits(packed.reshape(size, -1), axis=1, count=n_queries))
        if progress is not None:
            progress(size)
    return _pairwise_p(counts, n_permutations, plus_one=True)


def permutation_test(a: npt.ArrayLike, b: npt.ArrayLike, *, n_permutations: int = 10000, seed: Seed = 0) -> float:
    """Paired two-sided randomization (sign-flip) test of two systems' per-query scores.

    The two-system case of :func:`permutation_test_matrix` (same statistic, same p-value convention,
    same random sign vectors for the same seed).

    Parameters
    ----------
    a, b : array, shape (Q,)
        Per-query scores of two systems on the same queries.
    n_permutations : int, default 10000
    seed : int or numpy.random.Generator, default 0

    Returns
    -------
    float
        Two-sided p-value in (0, 1].
    """
    return float(permutation_test_matrix(_paired_vectors(a, b), n_permutations=n_permutations, seed=seed)[0, 1])


def tukey_hsd_randomized(
    scores: npt.ArrayLike, *, n_permutations: int = 10000, seed: Seed = 0, progress: Progress | None = None
) -> FloatArray:
    r"""Randomised Tukey HSD: all-pairs test that controls the familywise error rate.

    Under the null hypothesis the S systems are exchangeable within each query, so each query's scores
    are shuffled across systems independently. For each of B shuffles the statistic is the range of the
    permuted system means, :math:`\max_i \bar{x}^*_i - \min_i \bar{x}^*_i`; the p-value of pair (i, j) is

    .. math:: p_{ij} = \frac{1 + |\{b : \mathrm{range}_b \ge |\bar{x}_i - \bar{x}_j|\}|}{1 + B}

    Comparing every pair with the distribution of the largest difference is what controls the familywise
    error: do not adjust these p-values again.

    Parameters
    ----------
    scores : array, shape (S, Q)
        Per-query scores of S >= 2 systems on the same Q queries.
    n_permutations : int, default 10000
        Number B of shuffles. The cost is B x Q x S shuffled values (about 10 s for 20 x 5,000 x 10,000
        on one core).
    seed : int or numpy.random.Generator, default 0
    progress : callable, optional
        Called with the number of permutations drawn after each block (for a progress bar).

    Returns
    -------
    ndarray of float64, shape (S, S)
        Symmetric p-values, NaN on the diagonal.

    References
    ----------
    Carterette, B. (2012). Multiple testing in statistical analysis of systems-based information
    retrieval experiments. ACM TOIS 30(1).
    Sakai, T. (2018). Laboratory Experiments in Information Retrieval, ch. 4. Springer.
    """
    x = _scores_matrix(scores)
    n_permutations = _check_count(n_permutations, "n_permutations")
    n_systems, n_queries = x.shape
    if n_systems < 2:
        raise ValueError("tukey_hsd_randomized needs at least 2 systems")
    # Subtracting a per-query constant moves every permuted mean alike, so ranges are unchanged;
    # queries on which all systems tie shuffle to themselves and are dropped.
    centred = (x - x.mean(axis=0)).T
    centred = np.ascontiguousarray(centred[np.ptp(centred, axis=1) > 0])
    totals = centred.sum(axis=0)
    observed = np.abs(totals[:, None] - totals[None, :])
    cutoff = observed - _RTOL * np.ptp(centred, axis=1).sum()

    rng = np.random.default_rng(seed)
    per_block = max(1, _BLOCK // max(centred.size, 1))
    ranges = np.empty(n_permutations)
    block = np.empty((min(per_block, n_permutations),) + centred.shape)
    for start in range(0, n_permutations, per_block):
        size = min(per_block, n_permutations - start)
        shuffled = block[:size]
        shuffled[...] = centred
        rng.permuted(shuffled, axis=-1, out=shuffled)
        sums = shuffled.sum(axis=1)
        ranges[start : start + size] = sums.max(axis=1) - sums.min(axis=1)
        if progress is not None:
            progress(size)
    ranges.sort()
    counts = n_permutations - np.searchsorted(ranges, cutoff, side="left")
    return _pairwise_p(counts.astype(np.float64), n_permutations, plus_one=True)


# --------------------------------------------------------------------------------------------------------
# Parametric test, interval, correction, correlation


def paired_ttest(a: npt.ArrayLike, b: npt.ArrayLike) -> tuple[float | FloatArray, float | FloatArray]:
    r"""Paired Student t-test of per-query scores (two-sided).

    .. math:: t = \frac{\bar{d}}{s_d / \sqrt{Q}}, \qquad p = 2\, P(T_{Q-1} \ge |t|)

    with :math:`d_q = a_q - b_q`. When every difference is equal the variance is 0: t = 0 and p = 1 if
    the differences are 0, t = +-inf and p = 0 otherwise. With fewer than 2 queries t and p are NaN.

    Parameters
    ----------
    a, b : array, shape (..., Q)
        Per-query scores, broadcast against each other; queries on the last axis. Passing
        ``scores[:, None, :]`` and ``scores[None, :, :]`` tests all pairs of an (S, Q) array at once.

    Returns
    -------
    t, p : float or ndarray of float64, shape (...)

    References
    ----------
    Student (1908). The probable error of a mean. Biometrika 6(1). Same values as
    ``scipy.stats.ttest_rel``.
    """
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError("a and b need a query axis")
    try:
        d = x - y
    except ValueError as error:
        raise ValueError(f"a and b do not broadcast: shapes {x.shape} and {y.shape}") from error
    n = d.shape[-1]
    if n < 2:
        nan = np.full(d.shape[:-1], np.nan)
        return _scalar(nan), _scalar(nan.copy())
    mean_d = d.mean(axis=-1)
    # All-equal differences give an exact 0 here, where std() could leave rounding noise.
    constant = (d == d[..., :1]).all(axis=-1)
    sd = np.where(constant, 0.0, d.std(axis=-1, ddof=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean_d / (sd / np.sqrt(n))
    t = np.where(constant, np.where(mean_d == 0, 0.0, np.copysign(np.inf, mean_d)), t)
    # Student's t tail from scipy.special (what scipy.stats.t.sf reads; scipy.stats costs a second to import,
    # scipy.special, which the app loads at start, a third)
    p = np.minimum(2.0 * stdtr(n - 1, -np.abs(t)), 1.0)
    return _scalar(t), _scalar(p)


def _scalar(values: FloatArray) -> float | FloatArray:
    return float(values) if values.ndim == 0 else values


def bootstrap_ci(
    x: npt.ArrayLike, *, n_resamples: int = 10000, confidence: float = 0.95, seed: Seed = 0
) -> tuple[float | FloatArray, float | FloatArray]:
    r"""Percentile bootstrap confidence interval of the mean over queries.

    Each resample draws Q queries with replacement; the interval is the
    :math:`(1 - c)/2` and :math:`(1 + c)/2` quantiles of the resampled means (c = ``confidence``).

    Parameters
    ----------
    x : array, shape (..., Q)
        Per-query scores, queries on the last axis. Rows of a 2-D array (e.g. systems) share the same
        resamples, so their intervals are paired.
    n_resamples : int, default 10000
    confidence : float, default 0.95
        In (0, 1).
    seed : int or numpy.random.Generator, default 0

    Returns
    -------
    low, high : float or ndarray of float64, shape (...)

    References
    ----------
    Efron, B. & Tibshirani, R. J. (1993). An Introduction to the Bootstrap, ch. 13. Chapman & Hall.
    """
    values = np.asarray(x, dtype=np.float64)
    n_resamples = _check_count(n_resamples, "n_resamples")
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if values.ndim == 0 or values.shape[-1] == 0:
        raise ValueError(f"x needs at least one query on its last axis, got shape {values.shape}")
    if not np.isfinite(values).all():
        raise ValueError("x contains NaN or infinite values")
    lead, n_queries = values.shape[:-1], values.shape[-1]
    rows = values.reshape(-1, n_queries)

    rng = np.random.default_rng(seed)
    per_block = max(1, _BLOCK // n_queries)
    means = np.empty((rows.shape[0], n_resamples))
    for start in range(0, n_resamples, per_block):
        size = min(per_block, n_resamples - start)
        picks = rng.integers(0, n_queries, size=(size, n_queries))
        if rows.shape[0] <= 2:
            means[:, start : start + size] = rows[:, picks].mean(axis=-1)
            continue
        # For many rows, count how often each query was drawn: all their means are one matrix product.
        picks += np.arange(size)[:, None] * n_queries
        counts = np.bincount(picks.reshape(-1), minlength=size * n_queries).reshape(size, n_queries)
        means[:, start : start + size] = rows @ counts.astype(np.float64).T / n_queries
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2], axis=-1)
    return _scalar(low.reshape(lead)), _scalar(high.reshape(lead))


def holm(pvalues: npt.ArrayLike, *, symmetric: bool | None = None) -> FloatArray:
    r"""Holm-Bonferroni step-down adjustment of a family of p-values.

    With the m p-values sorted ascending, :math:`p_{(1)} \le \dots \le p_{(m)}`:

    .. math:: \tilde{p}_{(i)} = \min\Big(1, \max_{j \le i} (m - j + 1)\, p_{(j)}\Big)

    Adjusted values keep the order of the raw ones (monotone) and are capped at 1. NaN entries are not
    part of the family and stay NaN.

    Parameters
    ----------
    pvalues : array of any shape
        Raw p-values in [0, 1] or NaN.
    symmetric : bool, optional
        Treat ``pvalues`` as a pairwise (S, S) matrix: the family is the S(S-1)/2 pairs above the
        diagonal, each counted once, and the result is mirrored with a NaN diagonal. By default this is
        detected: a square, symmetric matrix with a NaN diagonal, as :func:`permutation_test_matrix`
        returns, is pairwise.

    Returns
    -------
    ndarray of float64, same shape

    References
    ----------
    Holm, S. (1979). A simple sequentially rejective multiple test procedure.
    Scandinavian Journal of Statistics 6(2), 65-70.
    """
    p = np.array(pvalues, dtype=np.float64)
    finite = ~np.isnan(p)
    if ((p[finite] < 0) | (p[finite] > 1)).any():
        raise ValueError("p-values must lie in [0, 1] (or be NaN)")
    square = p.ndim == 2 and p.shape[0] == p.shape[1]
    if symmetric is None:
        symmetric = (
            square
            and p.shape[0] > 0
            and bool(np.isnan(np.diagonal(p)).all())
            and np.array_equal(p, p.T, equal_nan=True)
        )
    if symmetric:
        if not square:
            raise ValueError(f"symmetric=True needs a square matrix, got shape {p.shape}")
        upper = np.triu_indices(p.shape[0], k=1)
        if not np.array_equal(p[upper], p.T[upper], equal_nan=True):
            raise ValueError("symmetric=True but the matrix is not symmetric")
        out = np.full(p.shape, np.nan)
        out[upper] = _holm_flat(p[upper])
        out.T[upper] = out[upper]
        return out
    out = np.full(p.shape, np.nan)
    out[finite] = _holm_flat(p[finite])
    return out


def _holm_flat(p: FloatArray) -> FloatArray:
    out = np.full(p.shape, np.nan)
    keep = ~np.isnan(p)
    values = p[keep]
    m = values.size
    order = np.argsort(values, kind="stable")
    stepped = np.maximum.accumulate(values[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    out[keep] = adjusted
    return out


def kendall_tau(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    r"""Kendall's rank correlation tau-b between two score vectors (or rankings) of the same items.

    .. math:: \tau_b = \frac{n_c - n_d}{\sqrt{(n_0 - n_1)(n_0 - n_2)}}

    with concordant / discordant pair counts :math:`n_c, n_d`, :math:`n_0 = n(n-1)/2` and tie
    corrections :math:`n_1, n_2`. Typical use: how far two leaderboards (system means under two
    measures, two qrels versions, two annotator groups) agree; 0.9 is the customary "equivalent" mark.

    Parameters
    ----------
    a, b : array, shape (n,)
        Scores of the same n >= 2 items.

    Returns
    -------
    float
        In [-1, 1]; NaN when either vector is constant.

    References
    ----------
    Kendall, M. G. (1945). The treatment of ties in ranking problems. Biometrika 33(3).
    Voorhees, E. M. (2000). Variations in relevance judgments and the measurement of retrieval
    effectiveness. IP&M 36(5).
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape or a.size < 2:
        raise ValueError(f"a and b must be 1-D of the same length >= 2, got shapes {a.shape} and {b.shape}")
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    # every pair of items once: n is a leaderboard's systems (tens, a few hundred), so the (n, n) signs are small;
    # scipy.stats.kendalltau (tests/metrics/test_significance.py's oracle) costs a second to import
    upper = np.triu_indices(a.size, k=1)
    da = np.sign(a[:, None] - a[None, :])[upper]
    db = np.sign(b[:, None] - b[None, :])[upper]
    untied_a, untied_b = np.count_nonzero(da), np.count_nonzero(db)
    tau = float((da * db).sum()) / math.sqrt(float(untied_a) * float(untied_b))
    return min(max(tau, -1.0), 1.0)


def pearson_r(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    r"""Pearson's linear correlation coefficient between two score vectors of the same items.

    .. math:: r = \frac{\sum_i (a_i - \bar a)(b_i - \bar b)}{\sqrt{\sum_i (a_i - \bar a)^2 \sum_i (b_i - \bar b)^2}}

    Typical use beside :func:`kendall_tau`: whether an offline measure's differences between systems are
    proportional to an online metric's (tau only asks whether the order is the same).

    Parameters
    ----------
    a, b : array, shape (n,)
        Scores of the same n >= 2 items.

    Returns
    -------
    float
        In [-1, 1]; NaN when either vector is constant.

    References
    ----------
    Pearson, K. (1895). Notes on regression and inheritance in the case of two parents. Proc. R. Soc. 58.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape or a.size < 2:
        raise ValueError(f"a and b must be 1-D of the same length >= 2, got shapes {a.shape} and {b.shape}")
    # r does not change when a vector is scaled: scaling each into [-1, 1] first keeps every step finite for
    # any finite scores (1e308 and -1e308 would overflow the mean, the squares and their product).
    a, b = _unit_scaled(a), _unit_scaled(b)
    da, db = a - a.mean(), b - b.mean()
    denom = np.sqrt(da @ da) * np.sqrt(db @ db)
    if denom == 0:
        return float("nan")
    return float(np.clip((da @ db) / denom, -1.0, 1.0))


def _unit_scaled(x: np.ndarray) -> np.ndarray:
    """``x`` divided by its largest magnitude (when finite and non-zero), so that its values lie in [-1, 1]."""
    top = np.max(np.abs(x)) if x.size else 0.0
    return x / top if np.isfinite(top) and top > 0 else x


def discordant_pairs(a: npt.ArrayLike, b: npt.ArrayLike) -> npt.NDArray[np.intp]:
    """The pairs of items that two score vectors order in opposite directions.

    Items i < j are discordant when ``(a[i] - a[j]) * (b[i] - b[j]) < 0``; a tie in either vector is not a
    discordance. These are the pairs of systems whose order an offline measure gets wrong with respect
    to an online metric (or one set of labels with respect to another).

    Parameters
    ----------
    a, b : array, shape (n,)
        Scores of the same n items.

    Returns
    -------
    ndarray of shape (d, 2), int
        Index pairs ``(i, j)`` with i < j, in lexicographic order.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"a and b must be 1-D of the same length, got shapes {a.shape} and {b.shape}")
    i, j = np.triu_indices(a.size, k=1)
    # The signs of the differences, by comparison: a difference of scores near the float limit overflows.
    sign_a = (a[i] > a[j]).astype(np.int8) - (a[i] < a[j])
    sign_b = (b[i] > b[j]).astype(np.int8) - (b[i] < b[j])
    bad = sign_a * sign_b < 0
    return np.column_stack([i[bad], j[bad]]).astype(np.intp)
