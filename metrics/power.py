"""How many queries an evaluation needs: the power of a paired t-test, and topic set size design.

Sakai, T. (2016). Topic set size design. Information Retrieval Journal 19(3), 256-283: choose the number of
topics n so that a two-sided paired t-test at level ``alpha`` detects a true mean difference of ``delta``
between two systems with probability at least ``power``. Under the alternative the t statistic of n paired
differences with standard deviation ``sd`` follows a noncentral t distribution with n - 1 degrees of freedom
and noncentrality ``delta * sqrt(n) / sd``; the power is the chance it falls beyond the two-sided critical
value. The variance comes from scores already in hand: Sakai estimates the variance of one system's score
across topics by the residual variance V_E of a two-way ANOVA without replication (topics x systems), and the
variance of a paired difference as 2 V_E (``paired_variance``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import nctdtr, ndtri, stdtrit

from metrics._types import FloatArray
from metrics.numbers import PROBABILITY_RANGE, within

__all__ = ["paired_power", "paired_variance", "topic_set_size", "MAX_TOPICS"]

#: topic_set_size gives up beyond this many topics (and says so: None).
MAX_TOPICS = 1_000_000


def _check(alpha: float, power: float | None = None) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha!r}")
    if power is not None and not alpha < power < 1:
        raise ValueError(f"power must be between alpha ({alpha}) and 1, got {power!r}")


def paired_power(n: int | np.ndarray, delta: float, sd: float | np.ndarray, alpha: float = 0.05) -> np.ndarray:
    """The power of a two-sided paired t-test over ``n`` topics (n >= 2) at level ``alpha`` to detect a mean
    difference ``delta`` when the paired differences have standard deviation ``sd`` (arrays broadcast). A
    zero ``sd`` with a nonzero ``delta`` has power 1; a zero ``delta`` has power ``alpha``."""
    _check(alpha)
    n_arr = np.asarray(n, dtype=np.float64)
    if np.any(n_arr < 2):
        raise ValueError("a paired t-test needs at least 2 topics")
    sd_arr = np.asarray(sd, dtype=np.float64)
    df = n_arr - 1
    crit = stdtrit(df, 1 - alpha / 2)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a subnormal sd: an infinite nc, power 1
        nc = abs(delta) * np.sqrt(n_arr) / sd_arr
    finite = np.isfinite(nc)
    safe = np.where(finite, nc, 0.0)
    # the noncentral t's tails from scipy.special (scipy.stats.nct reads the same functions; scipy.stats costs a
    # second to import, scipy.special, which the app loads at start, a third)
    upper = 1.0 - nctdtr(df, safe, crit)
    lower = nctdtr(df, safe, -crit)
    # Far in the tail, scipy's noncentral t answers NaN instead of a number that underflows (a noncentrality of 30
    # at 27 degrees of freedom: the chance of the wrong tail is below 1e-80). With nc >= 0 the lower tail only
    # shrinks as nc grows, below the central t's alpha / 2, and the upper tail only grows towards 1.
    lower = np.where(np.isnan(lower), 0.0, lower)
    upper = np.where(np.isnan(upper), np.where(safe > crit, 1.0, np.nan), upper)
    result = np.where(finite, upper + lower, 1.0 if delta else alpha)
    return within(result, *PROBABILITY_RANGE, what="paired t-test power")


def topic_set_size(delta: float, sd: float, *, power: float = 0.8, alpha: float = 0.05) -> int | None:
    """The smallest number of topics n >= 2 for which paired_power(n, delta, sd, alpha) >= ``power``
    (Sakai 2016), or None beyond MAX_TOPICS. Starts from the normal approximation
    n ~ ((z_{1-alpha/2} + z_{power}) sd / delta)^2 and searches the exact power around it."""
    _check(alpha, power)
    if not delta > 0:
        raise ValueError(f"delta must be positive, got {delta!r}")
    if not sd >= 0:
        raise ValueError(f"sd must be >= 0, got {sd!r}")
    if sd == 0:
        return 2
    z = ndtri(1 - alpha / 2) + ndtri(power)
    guess = (z * sd / delta) ** 2
    if guess > MAX_TOPICS:
        return None
    low = max(2, math.floor(guess) - 2)
    # The normal approximation can overshoot the exact n (delta 0.0078125, sd 1, power 0.5: n 62,936 guessed,
    # 62,935 already reaches it): step down, doubling the step, to an n short of the power, then search up.
    step = 2
    while low > 2 and paired_power(low, delta, sd, alpha) >= power:
        low, step = max(2, low - step), step * 2
    while True:
        ns = np.arange(low, min(MAX_TOPICS, low + 400) + 1)
        reached = np.flatnonzero(paired_power(ns, delta, sd, alpha) >= power)
        if reached.size:
            return int(ns[reached[0]])
        if ns[-1] >= MAX_TOPICS:
            return None
        low = int(ns[-1]) + 1


def paired_variance(scores: FloatArray) -> float:
    """2 V_E: the variance of a paired difference between two systems estimated from a (systems, topics)
    score matrix by the residual mean square of a two-way ANOVA without replication (Sakai 2016, section 4).
    Needs at least 2 systems and 2 topics."""
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        raise ValueError("need a (systems, topics) matrix with at least 2 of each")
    m, n = x.shape
    residual = x - x.mean(axis=1, keepdims=True) - x.mean(axis=0, keepdims=True) + x.mean()
    v_e = float((residual**2).sum() / ((m - 1) * (n - 1)))
    return 2.0 * v_e
