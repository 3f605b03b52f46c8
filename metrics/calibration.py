"""How far an automatic judge can stand in for people: a plain verdict on kappa, top-weighted rank
correlation, the top-k overlap of two rankings, per-system bias, and a judge's agreement with itself."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.special import stdtrit  # Student's t quantile (scipy.stats costs half a second to import)

from metrics._types import FloatArray

# Landis & Koch (1977), Table: the upper edge of each band of kappa. Below 0 ("poor") and 0 itself are
# agreement no better than chance.
KAPPA_BANDS: tuple[tuple[str, float], ...] = (
    ("slight", 0.20),
    ("fair", 0.40),
    ("moderate", 0.60),
    ("substantial", 0.80),
    ("almost_perfect", 1.0),
)
CHANCE = "chance"
BAND_CODES: tuple[str, ...] = (CHANCE, *(name for name, _ in KAPPA_BANDS))


class KappaVerdict(NamedTuple):
    """``band``: a code of BAND_CODES; ``at_least``: the interval reaches into higher bands too, so only
    the lower one is claimed; ``point_band``: the band of the estimate itself (for reference)."""

    band: str
    at_least: bool
    point_band: str


def kappa_band(value: float) -> str:
    r"""The Landis & Koch band of one kappa value: ``chance`` for :math:`\kappa \le 0`, then ``slight``
    (up to 0.20), ``fair`` (0.40), ``moderate`` (0.60), ``substantial`` (0.80), ``almost_perfect``.

    Band edges belong to the lower band (0.40 is fair), as in the paper's table (0.21-0.40 fair).

    References
    ----------
    Landis, J. R. & Koch, G. G. (1977). The measurement of observer agreement for categorical data.
    Biometrics 33(1), 159-174.
    """
    if math.isnan(value):
        raise ValueError("kappa is NaN: no band")
    if value <= 0:
        return CHANCE
    for name, upper in KAPPA_BANDS:
        if value <= upper:
            return name
    return KAPPA_BANDS[-1][0]


def kappa_verdict(value: float, low: float, high: float) -> KappaVerdict | None:
    """A plain verdict on kappa that claims no more than its confidence interval ``[low, high]`` supports.

    The rule (decided here, documented in docs/judging.md, "Calibration"):

    - the interval reaches 0 or below (``low <= 0``): **no better than chance** (chance agreement cannot be
      ruled out, whatever the estimate);
    - both ends in one band: that band;
    - otherwise: **at least** the band of the lower end.

    So the verdict names the band of the interval's lower end, and says "at least" when the interval
    spans bands. With a 95% interval the claim "at least B" is wrong (the true kappa below band B) about
    2.5% of the time at most, if the interval covers as promised. None when there is no interval.
    """
    if any(math.isnan(x) for x in (value, low, high)):
        return None
    if low > high:
        raise ValueError(f"the interval's ends are reversed: [{low}, {high}]")
    lower, upper = kappa_band(low), kappa_band(high)
    return KappaVerdict(lower, at_least=lower != CHANCE and upper != lower, point_band=kappa_band(value))


def _order(scores: FloatArray) -> npt.NDArray[np.intp]:
    """Positions from best to worst: score descending, ties kept in the given order."""
    return np.argsort(-scores, kind="stable")


def tau_ap(estimate: npt.ArrayLike, truth: npt.ArrayLike) -> float:
    r"""AP correlation :math:`\tau_{AP}` of the ranking by ``estimate`` against the ranking by ``truth``.

    .. math:: \tau_{AP} = \frac{2}{N-1} \sum_{i=2}^{N} \frac{C(i)}{i-1} - 1

    where the items are taken in the order of the estimated ranking and :math:`C(i)` counts the items
    above position :math:`i` there that the true ranking also puts above the item at :math:`i`. Like
    Kendall's tau it runs from -1 to 1, but a swap near the top costs more than one near the bottom, and
    it is not symmetric: the true ranking (here, the systems under the human labels) is the reference.

    Ties (the paper has none): the estimated ranking keeps tied items in the order given; a pair tied in
    either ranking counts half toward :math:`C(i)`. Without ties this is the paper's definition exactly.

    Parameters
    ----------
    estimate, truth : array, shape (N,)
        Scores of the same N >= 2 items (higher ranks first).

    Returns
    -------
    float
        In [-1, 1].

    References
    ----------
    Yilmaz, E., Aslam, J. A. & Robertson, S. (2008). A new rank correlation coefficient for information
    retrieval. SIGIR 2008, 587-594.
    """
    e = np.asarray(estimate, dtype=np.float64)
    t = np.asarray(truth, dtype=np.float64)
    if e.ndim != 1 or e.shape != t.shape or e.size < 2:
        raise ValueError(f"estimate and truth must be 1-D of the same length >= 2, got {e.shape} and {t.shape}")
    if np.isnan(e).any() or np.isnan(t).any():
        raise ValueError("estimate and truth must not hold NaN")
    order = _order(e)
    e, t = e[order], t[order]
    n = e.size
    # above[i, j]: item j is above item i in the estimated order (j < i)
    above = np.tri(n, n, -1, dtype=bool)
    tied = (e[:, None] == e[None, :]) | (t[:, None] == t[None, :])
    right = t[None, :] > t[:, None]
    credit = np.where(tied, 0.5, right.astype(np.float64))
    c = (credit * above).sum(axis=1)[1:]  # C(i) for positions 2..N
    return float(2.0 / (n - 1) * (c / np.arange(1, n)).sum() - 1.0)


def top_k_overlap(estimate: npt.ArrayLike, truth: npt.ArrayLike, k: int = 5) -> tuple[int, int]:
    """How many of the top ``k`` items by ``truth`` are also in the top ``k`` by ``estimate``.

    Returns ``(overlap, k')`` with ``k' = min(k, N)``; ties at the cut keep the items in the order given.
    """
    e = np.asarray(estimate, dtype=np.float64)
    t = np.asarray(truth, dtype=np.float64)
    if e.ndim != 1 or e.shape != t.shape:
        raise ValueError(f"estimate and truth must be 1-D of the same length, got {e.shape} and {t.shape}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    kk = min(k, e.size)
    shared = np.intersect1d(_order(e)[:kk], _order(t)[:kk])
    return int(shared.size), kk


class Bias(NamedTuple):
    """Per item: the mean difference, its 95% interval (NaN with fewer than 2 queries), and the queries."""

    mean: FloatArray
    low: FloatArray
    high: FloatArray
    n: int


def paired_bias(model: npt.ArrayLike, human: npt.ArrayLike, confidence: float = 0.95) -> Bias:
    r"""Per system, the mean over queries of (model's measure - humans' measure), with a Student t
    interval: :math:`\bar d \pm t_{Q-1} s_d / \sqrt{Q}`.

    Parameters
    ----------
    model, human : array, shape (S, Q)
        One measure per system and query, on the Q queries that both label sources scored.
    confidence : float
        Coverage of the interval, in (0, 1).

    References
    ----------
    Student (1908). The probable error of a mean. Biometrika 6(1). The same interval as
    ``scipy.stats.ttest_rel(model, human).confidence_interval()``.
    """
    m = np.asarray(model, dtype=np.float64)
    h = np.asarray(human, dtype=np.float64)
    if m.ndim != 2 or m.shape != h.shape:
        raise ValueError(f"model and human must be 2-D (systems, queries) of one shape, got {m.shape} and {h.shape}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    d = m - h
    q = d.shape[1]
    mean = d.mean(axis=1) if q else np.full(d.shape[0], np.nan)
    if q < 2:
        nan = np.full(d.shape[0], np.nan)
        return Bias(mean, nan, nan.copy(), q)
    half = float(stdtrit(q - 1, (1 + confidence) / 2)) * d.std(axis=1, ddof=1) / math.sqrt(q)
    return Bias(mean, mean - half, mean + half, q)


class SelfConsistency(NamedTuple):
    """``unanimous``: share of items whose N answers are all the same; ``pairwise``: mean over items of
    the share of the N(N-1)/2 pairs of answers that agree; ``items``, ``repeats``: the shape."""

    unanimous: float
    pairwise: float
    items: int
    repeats: int


def answer_agreement(answers: npt.ArrayLike) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    r"""Per item: the share of pairs of its answers that agree, and whether all of them are the same.

    .. math:: a_i = \frac{\sum_g c_{ig} (c_{ig} - 1)}{N (N - 1)}

    with :math:`c_{ig}` the number of the item's N answers equal to g (Fleiss's per-item agreement).
    An unreadable answer is its own category (pass any integer that is no grade, e.g. -1).

    Parameters
    ----------
    answers : int array, shape (items, N), N >= 2
    """
    a = np.asarray(answers)
    if a.ndim != 2 or a.shape[1] < 2:
        raise ValueError(f"answers must be 2-D (items, N) with N >= 2, got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError("answers must be integers")
    n = a.shape[1]
    same = (a[:, :, None] == a[:, None, :]).sum(axis=(1, 2)) - n  # ordered pairs that agree
    return same / (n * (n - 1)), (a == a[:, :1]).all(axis=1)


def self_consistency(answers: npt.ArrayLike) -> SelfConsistency:
    """How often a judge asked the same question N times agrees with itself (see ``answer_agreement``).

    References
    ----------
    Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters. Psychological Bulletin 76(5)
    (the per-item agreement); Wang, X. et al. (2023). Self-consistency improves chain of thought reasoning
    in language models. ICLR 2023 (sampling one prompt several times).
    """
    a = np.asarray(answers)
    pairwise, unanimous = answer_agreement(a)
    if not a.shape[0]:
        return SelfConsistency(float("nan"), float("nan"), 0, a.shape[1])
    return SelfConsistency(float(unanimous.mean()), float(pairwise.mean()), int(a.shape[0]), int(a.shape[1]))
