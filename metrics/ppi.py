"""Prediction-powered means: a model's per-query values over every query, corrected by a random audit.

Angelopoulos, Bates, Fannjiang, Jordan & Zrnic, "Prediction-powered inference", Science 382 (2023). For one
system and measure, with f the measure under the model judge's labels and h the measure under human labels:

    estimate = mean over all N queries of f  +  mean over the n audited queries of (h - f)

The audited queries are a uniform random sample, drawn without replacement, of the N queries, so the second
term is an unbiased estimate of the mean over all N queries of (h - f): the estimate is unbiased for the
all-human value (the mean of h over the N queries), however biased the model is. A better model only makes
the correction vary less, hence narrower intervals; it never buys a better ranking than the model's own.

The interval adds the variance of both terms. The audited term is a sample of n of N drawn without replacement:
its variance is (1 - n/N) s_d^2 / n (s_d: the spread of h - f over the audited queries, with the finite-
population correction) and its quantile is Student's t with n - 1 degrees of freedom (a normal quantile covers
about 91% at n = 10). The model term is a census of the N queries the estimate is about: its variance is
that of a sample of N of N, which the same correction sets to zero (``population=None``). Seen as a sample of
a larger population of queries (``population`` larger than N, or ``math.inf``), it adds (1 - N/population)
s_f^2 / N with a normal quantile; ``population=math.inf`` without the correction on the audited term is the
paper's classical interval (``ppi_py.ppi_mean_ci`` with ``lhat=1``). The two halves are combined as
sqrt((z se_model)^2 + (t se_audit)^2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri, stdtrit

MIN_AUDITED = 2  # an interval needs the spread of the corrections: at least two audited queries


@dataclass(frozen=True)
class PPIMean:
    """Estimates and 95% (1 - alpha) intervals, one per leading index of the inputs (e.g. (M, S)).

    ``low``/``high`` are NaN with fewer than ``MIN_AUDITED`` audited queries; ``model_mean`` is the first term,
    ``correction`` the second (0 with no audited query)."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    model_mean: np.ndarray
    correction: np.ndarray
    se_model: np.ndarray
    se_audit: np.ndarray
    n: int
    N: int


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (scipy.special.stdtrit: scipy.stats costs a second to import, scipy.special a third,
    and the app loads scipy.special at start anyway)."""
    return float(stdtrit(df, p))


def normal_quantile(p: float) -> float:
    return float(ndtri(p))


def ppi_mean(
    model: np.ndarray,
    audited: np.ndarray,
    human: np.ndarray,
    *,
    alpha: float = 0.05,
    population: float | None = None,
    fpc: bool = True,
    t: bool = True,
    ddof: int = 1,
) -> PPIMean:
    """The prediction-powered mean of a measure and its (1 - alpha) interval.

    ``model``: (..., N) the measure under the model's labels on every query; ``audited``: (n,) int positions
    (along the last axis) of the audited queries, a uniform random sample of the N drawn without replacement;
    ``human``: (..., n) the measure under human labels on those queries, in the order of ``audited``.
    ``population``: the number of queries the estimate is about (None: these N, so the model term is exact);
    ``fpc``: the finite-population correction (1 - n/N) on the audited term; ``t``: Student's t quantile with
    n - 1 degrees of freedom for the audited term (else normal); ``ddof``: of the variances (ppi_py's is 0).
    ValueError for inconsistent shapes.
    """
    model = np.asarray(model, dtype=np.float64)
    human = np.asarray(human, dtype=np.float64)
    audited = np.asarray(audited, dtype=np.intp).reshape(-1)
    N, n = model.shape[-1], audited.size
    if human.shape != (*model.shape[:-1], n):
        raise ValueError(f"human values {human.shape} do not match model {model.shape} and {n} audited queries")
    if n and (audited.min() < 0 or audited.max() >= N or np.unique(audited).size != n):
        raise ValueError("audited positions must be distinct positions among the N queries")
    if not 0 < alpha < 1:
        raise ValueError("alpha must be between 0 and 1")
    # no query at all: 0, as the leaderboard's means before the first label, and no interval
    model_mean = model.mean(axis=-1) if N else np.zeros(model.shape[:-1])
    if n:
        diff = human - model[..., audited]
        correction = diff.mean(axis=-1)
    else:
        diff = np.zeros((*model.shape[:-1], 0))
        correction = np.zeros(model.shape[:-1])
    estimate = model_mean + correction
    nan = np.full(estimate.shape, np.nan)
    if n < MIN_AUDITED:
        return PPIMean(estimate, nan, nan.copy(), model_mean, correction, nan.copy(), nan.copy(), n, N)
    finite = 1.0 - n / N if fpc else 1.0
    se_audit = np.sqrt(max(finite, 0.0) * diff.var(axis=-1, ddof=ddof) / n)
    if population is None or N < 2:
        se_model = np.zeros(estimate.shape)
    else:
        model_fpc = 1.0 if math.isinf(population) else max(1.0 - N / population, 0.0)
        se_model = np.sqrt(model_fpc * model.var(axis=-1, ddof=ddof) / N)
    q_audit = t_quantile(1 - alpha / 2, n - 1) if t else normal_quantile(1 - alpha / 2)
    q_model = normal_quantile(1 - alpha / 2)
    half = np.sqrt((q_model * se_model) ** 2 + (q_audit * se_audit) ** 2)
    return PPIMean(estimate, estimate - half, estimate + half, model_mean, correction, se_model, se_audit, n, N)


def audited_only_mean(
    human: np.ndarray, N: int, *, alpha: float = 0.05, fpc: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, low, high) of the human values on the n audited queries alone (t interval, with the
    finite-population correction over N): what the audit says without the model, for comparison."""
    human = np.asarray(human, dtype=np.float64)
    n = human.shape[-1]
    mean = human.mean(axis=-1)
    if n < MIN_AUDITED:
        nan = np.full(mean.shape, np.nan)
        return mean, nan, nan.copy()
    finite = 1.0 - n / N if fpc else 1.0
    half = t_quantile(1 - alpha / 2, n - 1) * np.sqrt(max(finite, 0.0) * human.var(axis=-1, ddof=1) / n)
    return mean, mean - half, mean + half
