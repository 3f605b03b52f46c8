"""Significance and confidence for the leaderboard: bootstrap CIs, randomization tests, pairwise matrices, cached."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone
from django.utils.translation import gettext_lazy

import metrics
from judging.errors import RequestError
from judging.scoring.cache import CACHE_SECONDS, Leaderboard

ALPHA = 0.05

logger = logging.getLogger(__name__)


TESTS = {
    "randomization": gettext_lazy("paired randomization test, Holm-corrected"),
    "ttest": gettext_lazy("paired t-test, Holm-corrected"),
    "tukey": gettext_lazy("randomized Tukey HSD (controls the familywise error itself)"),
}


@dataclass
class RankingStats:
    """Confidence intervals of one measure's means and the tests of every system against the best."""

    measure: str
    state: str  # Leaderboard.state the numbers were computed from
    means: np.ndarray  # (S,)
    ci_low: np.ndarray  # (S,) 95% percentile bootstrap CI of the mean over queries
    ci_high: np.ndarray
    best: int  # index of the system with the highest mean (-1 without systems)
    p_vs_best: np.ndarray  # (S,) Holm-adjusted p-values of best vs each other system; NaN for the best
    n_queries: int
    n_resamples: int
    n_permutations: int
    alpha: float = ALPHA
    computed_at: datetime = field(default_factory=timezone.now)
    seconds: float = 0.0

    @property
    def worse(self) -> np.ndarray:
        """(S,) bool: significantly worse than the best at ``alpha``."""
        worse: np.ndarray = np.nan_to_num(self.p_vs_best, nan=1.0) < self.alpha
        return worse


@dataclass
class PairwiseStats:
    """Every pair of systems on one measure: mean differences and adjusted p-values."""

    measure: str
    test: str
    state: str
    diff: np.ndarray  # (S, S) mean of row minus mean of column
    p: np.ndarray  # (S, S) adjusted p-values, NaN on the diagonal
    n_queries: int
    alpha: float = ALPHA
    computed_at: datetime = field(default_factory=timezone.now)
    seconds: float = 0.0


def ranking_stats(
    lb: Leaderboard, measure: str, *, n_resamples: int = 2000, n_permutations: int = 5000, seed: int = 0
) -> RankingStats:
    """95% bootstrap CIs of every system's mean ``measure`` and a paired randomization test of the best
    system against each other one, Holm-corrected over those S - 1 comparisons.

    Fixed seeds: the same labels always give the same intervals and p-values.
    """
    started = time.perf_counter()
    x = lb.per_query(measure)  # (S, Q)
    n_sys, n_q = x.shape
    nan = np.full(n_sys, np.nan)
    means = x.mean(axis=1) if n_q else np.zeros(n_sys)
    best = int(np.argmax(means)) if n_sys else -1
    low, high, p_best = nan.copy(), nan.copy(), nan.copy()
    if n_q:
        ci_low, ci_high = metrics.bootstrap_ci(x, n_resamples=n_resamples, confidence=0.95, seed=seed)
        low, high = np.atleast_1d(ci_low), np.atleast_1d(ci_high)
    if n_q and n_sys > 1:
        p = metrics.permutation_test_matrix(x, n_permutations=n_permutations, seed=seed)
        others = np.arange(n_sys) != best
        p_best[others] = metrics.holm(p[best, others])
    return RankingStats(
        measure,
        lb.state,
        means,
        low,
        high,
        best,
        p_best,
        n_q,
        n_resamples,
        n_permutations,
        seconds=time.perf_counter() - started,
    )


PAIRWISE_PERMUTATIONS = 5000


def pairwise_stats(
    lb: Leaderboard,
    measure: str,
    *,
    test: str = "randomization",
    n_permutations: int = PAIRWISE_PERMUTATIONS,
    seed: int = 0,
    progress: Callable[[int], object] | None = None,
) -> PairwiseStats:
    """All S(S-1)/2 comparisons of one measure with the chosen test (see ``TESTS``). ``progress(n)`` is
    told of the permutations drawn, block by block (the randomized tests only)."""
    if test not in TESTS:
        raise RequestError("test", f"test must be one of {', '.join(TESTS)}")
    started = time.perf_counter()
    x = lb.per_query(measure)
    n_sys, n_q = x.shape
    means = x.mean(axis=1) if n_q else np.zeros(n_sys)
    diff = means[:, None] - means[None, :]
    p = np.full((n_sys, n_sys), np.nan)
    if n_q and n_sys > 1:
        if test == "randomization":
            p = metrics.holm(
                metrics.permutation_test_matrix(x, n_permutations=n_permutations, seed=seed, progress=progress)
            )
        elif test == "tukey":
            p = metrics.tukey_hsd_randomized(x, n_permutations=n_permutations, seed=seed, progress=progress)
        else:
            _, raw = metrics.paired_ttest(x[:, None, :], x[None, :, :])
            raw = np.array(raw, dtype=np.float64)
            np.fill_diagonal(raw, np.nan)
            p = metrics.holm(raw, symmetric=True)
    return PairwiseStats(measure, test, lb.state, diff, p, n_q, seconds=time.perf_counter() - started)


def _stats_key(lb: Leaderboard, what: str) -> str:
    return f"{lb.key}:stats:{hashlib.sha256(what.encode()).hexdigest()[:16]}"


def stats_cached(lb: Leaderboard, measure: str) -> RankingStats | None:
    """The last ranking statistics computed for these parameters, current or not (compare ``.state``)."""
    got = cache.get(_stats_key(lb, f"rank:{measure}"))
    return got if isinstance(got, RankingStats) else None


def stats_refresh(lb: Leaderboard, measure: str) -> RankingStats:
    """Compute the ranking statistics of the current scores and share them with every process."""
    stats = ranking_stats(lb, measure)
    cache.set(_stats_key(lb, f"rank:{measure}"), stats, timeout=CACHE_SECONDS)
    logger.info(
        "ranking statistics of %s on %s: %d systems x %d queries in %.2f s",
        lb.campaign.slug,
        measure,
        len(stats.means),
        stats.n_queries,
        stats.seconds,
    )
    return stats


def stats_refresh_once(lb: Leaderboard, measure: str) -> bool:
    """Bring the ranking statistics up to date unless another request is already at it (then False).

    One computation at a time per parameter set and measure: the cache's atomic add is the lock, so
    a table polled by many browsers does not start the bootstrap many times over."""
    stats = stats_cached(lb, measure)
    if stats is not None and stats.state == lb.state:
        return True
    lock = f"{lb.key}:stats-lock:{measure}"
    if not cache.add(lock, 1, timeout=300):
        return False
    try:
        stats_refresh(lb, measure)
    finally:
        cache.delete(lock)
    return True


def pairwise_cached(lb: Leaderboard, measure: str, test: str) -> PairwiseStats:
    """The pairwise matrix of the current scores, computed on the first request for this labels state."""
    got = pairwise_current(lb, measure, test)
    if got is not None:
        return got
    stats = pairwise_stats(lb, measure, test=test)
    pairwise_store(lb, stats)
    return stats


def pairwise_current(lb: Leaderboard, measure: str, test: str) -> PairwiseStats | None:
    """The cached pairwise matrix if it was computed from the current labels (their state), else None:
    a result computed before the labels last moved is never shown as current."""
    got = cache.get(_stats_key(lb, f"pairs:{measure}:{test}"))
    if isinstance(got, PairwiseStats) and got.state == lb.state and len(got.diff) == len(lb.cube.system_ids):
        return got
    return None


def pairwise_store(lb: Leaderboard, stats: PairwiseStats) -> None:
    """Share a pairwise matrix with every process (a background job computes the large ones)."""
    cache.set(_stats_key(lb, f"pairs:{stats.measure}:{stats.test}"), stats, timeout=CACHE_SECONDS)


def pairwise_cost(lb: Leaderboard, test: str) -> int:
    """Systems x queries x permutations of a pairwise test (0 for the t-test, which draws none)."""
    if test == "ttest":
        return 0
    return len(lb.cube.system_ids) * lb.n_scored * PAIRWISE_PERMUTATIONS


def pairwise_needs_job(lb: Leaderboard, test: str) -> bool:
    """Whether the test is too slow for a request (above RELJUDGE_STATS_JOB_CELLS) and goes to a job."""
    return pairwise_cost(lb, test) > settings.RELJUDGE_STATS_JOB_CELLS


INLINE_STATS_CELLS = 10_000  # systems x queries up to which CIs and tests are computed within the request
STATS_MIN_AGE = 5.0  # seconds: stale statistics are recomputed at most this often...
STATS_DUTY = 10  # ...and after at least this many times as long as they took: at most 10% of the time


# A "best" system or a significance test over one query (or none) means nothing.
MIN_QUERIES_FOR_STATS = 2


def stats_for_page(lb: Leaderboard, measure: str) -> tuple[RankingStats | None, bool, bool]:
    """(statistics to show, whether they are current, whether a background refresh should be asked for).

    Small campaigns get current statistics within the request. Large ones show the last statistics
    (marked as older than the scores) and let a separate request recompute them, so the polled table
    stays fast; that refresh runs at most every STATS_MIN_AGE seconds and at most 10% of the time.
    With fewer than MIN_QUERIES_FOR_STATS scored queries there is nothing to show.
    """
    if lb.n_scored < MIN_QUERIES_FOR_STATS:
        return None, True, False
    stats = stats_cached(lb, measure)
    if stats is not None and len(stats.means) != len(lb.cube.system_ids):
        stats = None
    if stats is not None and stats.state == lb.state:
        return stats, True, False
    if len(lb.cube.system_ids) * max(lb.n_scored, 1) <= INLINE_STATS_CELLS:
        return stats_refresh(lb, measure), True, False
    if stats is None:
        return None, False, True
    age = (timezone.now() - stats.computed_at).total_seconds()
    return stats, False, age >= max(STATS_MIN_AGE, STATS_DUTY * stats.seconds)
