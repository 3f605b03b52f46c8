"""Topic set size design and the paired t-test's power against statsmodels and against simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from metrics.power import paired_power, paired_variance, topic_set_size

CASES = [(0.05, 0.2, 0.8, 0.05), (0.02, 0.15, 0.9, 0.05), (0.1, 0.3, 0.8, 0.01), (0.05, 0.05, 0.8, 0.05)]


@pytest.mark.parametrize("delta, sd, power, alpha", CASES)
def test_topic_set_size_is_the_smallest_n_reaching_the_power(delta, sd, power, alpha):
    n = topic_set_size(delta, sd, power=power, alpha=alpha)
    assert n is not None and n >= 2
    assert paired_power(n, delta, sd, alpha) >= power
    assert n == 2 or paired_power(n - 1, delta, sd, alpha) < power


@pytest.mark.parametrize("delta, sd, power, alpha", CASES)
def test_against_statsmodels(delta, sd, power, alpha):
    smp = pytest.importorskip("statsmodels.stats.power", reason="statsmodels (requirements-dev.in) not installed")
    oracle = smp.TTestPower()
    n = topic_set_size(delta, sd, power=power, alpha=alpha)
    assert n == math.ceil(oracle.solve_power(effect_size=delta / sd, power=power, alpha=alpha))
    for m in (5, 20, n):
        assert paired_power(m, delta, sd, alpha) == pytest.approx(oracle.power(delta / sd, m, alpha), abs=1e-9)


@pytest.mark.parametrize("n, delta, sd", [(10, 0.05, 0.1), (30, 0.02, 0.08), (60, 0.03, 0.2)])
def test_power_matches_simulated_paired_t_tests(n, delta, sd):
    """The share of simulated evaluations (n topics, true difference delta) in which scipy's paired t-test
    rejects at 5% is the power, within 4 standard errors."""
    rng = np.random.default_rng(7)
    reps = 4000
    a = rng.normal(0.5, 0.15, size=(reps, n))
    b = a - delta + rng.normal(0, sd, size=(reps, n))
    rejected = stats.ttest_rel(a, b, axis=1).pvalue < 0.05
    predicted = float(paired_power(n, delta, sd))
    se = math.sqrt(predicted * (1 - predicted) / reps)
    assert abs(rejected.mean() - predicted) < 4 * se + 1e-3


def test_paired_variance_of_two_systems_is_the_variance_of_their_differences():
    rng = np.random.default_rng(3)
    x = rng.random((2, 40))
    assert paired_variance(x) == pytest.approx(np.var(x[0] - x[1], ddof=1))


def test_paired_variance_is_the_anova_residual_mean_square():
    rng = np.random.default_rng(5)
    x = rng.random((5, 30)) + rng.random((5, 1)) + rng.random((1, 30))  # system and topic effects
    m, n = x.shape
    # two-way ANOVA without replication: residual SS = total - systems - topics
    total = ((x - x.mean()) ** 2).sum()
    systems = n * ((x.mean(axis=1) - x.mean()) ** 2).sum()
    topics = m * ((x.mean(axis=0) - x.mean()) ** 2).sum()
    assert paired_variance(x) == pytest.approx(2 * (total - systems - topics) / ((m - 1) * (n - 1)))


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="delta"):
        topic_set_size(0.0, 0.1)
    with pytest.raises(ValueError, match="power"):
        topic_set_size(0.05, 0.1, power=0.01)
    with pytest.raises(ValueError, match="2 topics"):
        paired_power(1, 0.05, 0.1)
    assert topic_set_size(1e-6, 10.0) is None  # beyond a million topics


@pytest.mark.parametrize("n", [2, 3, 10, 28, 200])
def test_power_is_a_probability_for_large_effects(n):
    """Far in the tail scipy's noncentral t answers NaN (delta 0.5 over sd 0.01 at 28 topics: the demo's plan at
    delta=0.5 answered 500 with a NaN power). The power stays a probability, never falls as the effect grows, and
    equals statsmodels' wherever statsmodels answers a number (it answers NaN there too)."""
    smp = pytest.importorskip("statsmodels.stats.power", reason="statsmodels (requirements-dev.in) not installed")
    effects = np.geomspace(0.01, 500, 60)
    got = paired_power(n, 1.0, 1.0 / effects)
    assert np.isfinite(got).all() and ((got >= 0) & (got <= 1)).all()
    assert (np.diff(got) >= -1e-12).all()
    assert got[-1] == 1.0
    oracle = np.array([smp.TTestPower().power(effect_size=e, nobs=n, alpha=0.05) for e in effects])
    known = np.isfinite(oracle)
    np.testing.assert_allclose(got[known], oracle[known], atol=1e-9)
