"""Tests of metrics.significance: small exact cases, textbook equivalences and scipy as an oracle."""

import itertools

import numpy as np
import pytest
from scipy import stats

import metrics
from metrics import significance


def p_at_10_like(rng, shape):
    """Scores that are multiples of 0.1, so that permuted statistics tie the observed one exactly."""
    return rng.integers(0, 11, size=shape) / 10


# --------------------------------------------------------------------------------------------------------
# permutation_test / permutation_test_matrix


def test_permutation_test_enumerates_all_sign_flips_for_few_queries():
    # Differences 1, 2, 3: of the 8 sign assignments only +++ and --- reach |sum| = 6.
    assert metrics.permutation_test([1.0, 2.0, 3.0], [0.0, 0.0, 0.0]) == pytest.approx(2 / 8)


def test_permutation_test_exact_p_matches_brute_force():
    rng = np.random.default_rng(4)
    a, b = p_at_10_like(rng, 10), p_at_10_like(rng, 10)
    d = a - b
    flips = np.array(list(itertools.product([-1, 1], repeat=10)))
    brute = np.mean(np.abs(flips @ d) >= abs(d.sum()) - 1e-12)
    assert metrics.permutation_test(a, b, n_permutations=1024) == pytest.approx(brute)


def test_permutation_test_random_p_close_to_exact_p():
    rng = np.random.default_rng(5)
    a, b = rng.random(14), rng.random(14)
    exact = metrics.permutation_test(a, b, n_permutations=2**14)
    sampled = metrics.permutation_test(a, b, n_permutations=2**14 - 1)
    assert sampled == pytest.approx(exact, abs=0.02)


def test_permutation_test_identical_systems_p_is_one():
    x = np.random.default_rng(0).random(40)
    assert metrics.permutation_test(x, x) == 1.0


def test_permutation_test_clear_difference_has_smallest_possible_p():
    x = np.random.default_rng(0).random(60)
    assert metrics.permutation_test(x + 0.2, x, n_permutations=999) == pytest.approx(1 / 1000)


def test_permutation_test_is_symmetric_and_reproducible():
    rng = np.random.default_rng(1)
    a, b = rng.random(50), rng.random(50) + 0.05
    p = metrics.permutation_test(a, b, seed=3)
    assert metrics.permutation_test(b, a, seed=3) == p
    assert metrics.permutation_test(a, b, seed=3) == p
    assert 0 < p <= 1


@pytest.mark.parametrize("scores", ["continuous", "ties"])
def test_permutation_test_matrix_equals_pairwise_tests(scores, monkeypatch):
    monkeypatch.setattr(significance, "_BLOCK", 4096)  # several blocks
    rng = np.random.default_rng(2)
    x = rng.random((4, 30)) if scores == "continuous" else p_at_10_like(rng, (4, 30))
    x[1] += 0.08
    matrix = metrics.permutation_test_matrix(x, n_permutations=2000, seed=7)
    for i, j in itertools.combinations(range(4), 2):
        pair = metrics.permutation_test(x[i], x[j], n_permutations=2000, seed=7)
        assert matrix[i, j] == pytest.approx(pair, abs=1e-12)
        assert matrix[j, i] == matrix[i, j]
    assert np.isnan(np.diagonal(matrix)).all()


def test_permutation_test_matrix_matches_a_loop_over_sign_vectors():
    rng = np.random.default_rng(3)
    x = p_at_10_like(rng, (3, 25))
    n = 500
    matrix = metrics.permutation_test_matrix(x, n_permutations=n, seed=11)
    # The same sign vectors, drawn the way the implementation documents (packed random bits).
    gen = np.random.default_rng(11)
    bits = np.unpackbits(np.frombuffer(gen.bytes(n * 4), dtype=np.uint8).reshape(n, 4), axis=1, count=25)
    signs = 2.0 * bits - 1
    for i, j in itertools.combinations(range(3), 2):
        d = x[i] - x[j]
        expected = (1 + np.sum(np.abs(signs @ d) >= abs(d.sum()) - 1e-9)) / (n + 1)
        assert matrix[i, j] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("scores", "kwargs"),
    [
        (np.zeros(5), {}),
        (np.zeros((2, 0)), {}),
        (np.array([[0.1, np.nan], [0.2, 0.3]]), {}),
        (np.zeros((2, 5)), {"n_permutations": 0}),
    ],
    ids=["1-D", "no-queries", "nan", "zero-permutations"],
)
def test_permutation_test_matrix_rejects_bad_input(scores, kwargs):
    with pytest.raises(ValueError):
        metrics.permutation_test_matrix(scores, **kwargs)


@pytest.mark.parametrize("n_systems", [0, 1])
def test_permutation_test_matrix_without_pairs(n_systems):
    p = metrics.permutation_test_matrix(np.zeros((n_systems, 5)))
    assert p.shape == (n_systems, n_systems)
    assert np.isnan(p).all()


def test_permutation_test_rejects_unpaired_vectors():
    with pytest.raises(ValueError, match="same length"):
        metrics.permutation_test([0.1, 0.2], [0.1, 0.2, 0.3])


# --------------------------------------------------------------------------------------------------------
# tukey_hsd_randomized


def test_tukey_hsd_identical_systems_p_is_one():
    x = np.tile(np.random.default_rng(0).random(30), (3, 1))
    p = metrics.tukey_hsd_randomized(x, n_permutations=200)
    off_diagonal = ~np.eye(3, dtype=bool)
    assert (p[off_diagonal] == 1.0).all()
    assert np.isnan(np.diagonal(p)).all()


def test_tukey_hsd_clear_winner_has_smallest_possible_p():
    rng = np.random.default_rng(1)
    x = rng.random((3, 80)) * 0.1
    x[0] += 0.5
    p = metrics.tukey_hsd_randomized(x, n_permutations=499)
    assert p[0, 1] == pytest.approx(1 / 500)
    assert p[0, 2] == pytest.approx(1 / 500)
    assert p[1, 2] > 0.05


def test_tukey_hsd_two_systems_equals_the_sign_flip_test():
    # With two systems, shuffling a query's pair of scores is flipping the sign of its difference.
    rng = np.random.default_rng(2)
    x = rng.random((2, 40))
    x[0] += 0.05
    tukey = metrics.tukey_hsd_randomized(x, n_permutations=20000, seed=1)[0, 1]
    flips = metrics.permutation_test(x[0], x[1], n_permutations=20000, seed=1)
    assert tukey == pytest.approx(flips, abs=0.015)


def test_tukey_hsd_is_more_conservative_than_unadjusted_pairwise_tests():
    rng = np.random.default_rng(3)
    x = p_at_10_like(rng, (5, 60))
    x[2] += 0.1
    tukey = metrics.tukey_hsd_randomized(x, n_permutations=4000)
    raw = metrics.permutation_test_matrix(x, n_permutations=4000)
    off_diagonal = ~np.eye(5, dtype=bool)
    assert (tukey[off_diagonal] >= raw[off_diagonal] - 0.02).all()


def test_tukey_hsd_matches_a_loop_over_shuffles(monkeypatch):
    monkeypatch.setattr(significance, "_BLOCK", 5000)  # several blocks
    rng = np.random.default_rng(4)
    x = p_at_10_like(rng, (4, 12))
    n = 2000
    p = metrics.tukey_hsd_randomized(x, n_permutations=n, seed=5)
    means = x.mean(axis=1)
    observed = np.abs(means[:, None] - means[None, :])
    # Textbook version: shuffle each query's scores across systems, take the range of the means.
    gen = np.random.default_rng(5)
    ranges = []
    for _ in range(n):
        shuffled = np.array([gen.permutation(x[:, q]) for q in range(x.shape[1])]).T
        ranges.append(np.ptp(shuffled.mean(axis=1)))
    expected = (1 + (np.array(ranges)[:, None, None] >= observed - 1e-9).sum(axis=0)) / (n + 1)
    np.fill_diagonal(expected, np.nan)
    # Same distribution, different random streams: compare as Monte Carlo estimates (3 standard errors).
    np.testing.assert_allclose(p, expected, atol=0.05)


def test_tukey_hsd_is_reproducible_and_symmetric():
    x = np.random.default_rng(6).random((4, 30))
    p = metrics.tukey_hsd_randomized(x, n_permutations=300, seed=9)
    np.testing.assert_array_equal(p, metrics.tukey_hsd_randomized(x, n_permutations=300, seed=9))
    np.testing.assert_array_equal(p, p.T)


def test_tukey_hsd_rejects_a_single_system():
    with pytest.raises(ValueError, match="2 systems"):
        metrics.tukey_hsd_randomized(np.zeros((1, 5)))


# --------------------------------------------------------------------------------------------------------
# paired_ttest


@pytest.mark.parametrize("seed", range(4))
def test_paired_ttest_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    a = rng.random(30)
    b = a + rng.normal(0.02, 0.1, 30)
    t, p = metrics.paired_ttest(a, b)
    expected = stats.ttest_rel(a, b)
    assert t == pytest.approx(expected.statistic)
    assert p == pytest.approx(expected.pvalue)


def test_paired_ttest_all_differences_zero_gives_p_one():
    x = np.array([0.1, 0.5, 0.9])
    assert metrics.paired_ttest(x, x) == (0.0, 1.0)


def test_paired_ttest_constant_nonzero_difference_gives_p_zero():
    t, p = metrics.paired_ttest([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])
    assert t == np.inf
    assert p == 0.0


def test_paired_ttest_single_query_is_nan():
    t, p = metrics.paired_ttest([0.5], [0.25])
    assert np.isnan(t)
    assert np.isnan(p)


def test_paired_ttest_broadcasts_to_all_pairs():
    x = np.random.default_rng(7).random((4, 25))
    t, p = metrics.paired_ttest(x[:, None, :], x[None, :, :])
    assert t.shape == p.shape == (4, 4)
    for i, j in itertools.permutations(range(4), 2):
        expected = stats.ttest_rel(x[i], x[j])
        assert t[i, j] == pytest.approx(expected.statistic)
        assert p[i, j] == pytest.approx(expected.pvalue)
    np.testing.assert_array_equal(np.diagonal(p), 1.0)


def test_paired_ttest_rejects_shapes_that_do_not_broadcast():
    with pytest.raises(ValueError, match="broadcast"):
        metrics.paired_ttest(np.zeros(3), np.zeros(4))


# --------------------------------------------------------------------------------------------------------
# bootstrap_ci


def test_bootstrap_ci_equals_textbook_percentile_bootstrap(monkeypatch):
    monkeypatch.setattr(significance, "_BLOCK", 1000)  # several blocks
    x = np.random.default_rng(8).random(40)
    low, high = metrics.bootstrap_ci(x, n_resamples=2000, confidence=0.9, seed=4)
    resamples = np.random.default_rng(4).integers(0, 40, size=(2000, 40))
    expected = np.quantile(x[resamples].mean(axis=1), [0.05, 0.95])
    assert (low, high) == pytest.approx(tuple(expected))


def test_bootstrap_ci_rows_share_resamples_and_match_one_row():
    x = np.random.default_rng(9).random((3, 50))
    low, high = metrics.bootstrap_ci(x, n_resamples=500, seed=2)
    assert low.shape == high.shape == (3,)
    for i in range(3):
        assert metrics.bootstrap_ci(x[i], n_resamples=500, seed=2) == pytest.approx((low[i], high[i]))


def test_bootstrap_ci_contains_the_mean_and_narrows_with_more_queries():
    rng = np.random.default_rng(10)
    small, large = rng.random(30), rng.random(3000)
    low_s, high_s = metrics.bootstrap_ci(small)
    low_l, high_l = metrics.bootstrap_ci(large)
    assert low_s < small.mean() < high_s
    assert low_l < large.mean() < high_l
    assert high_l - low_l < (high_s - low_s) / 3


def test_bootstrap_ci_of_a_constant_is_a_point():
    assert metrics.bootstrap_ci(np.full(20, 0.25)) == (0.25, 0.25)


@pytest.mark.parametrize(
    "kwargs", [{"confidence": 1.0}, {"confidence": 0}, {"n_resamples": 0}], ids=["c=1", "c=0", "n=0"]
)
def test_bootstrap_ci_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        metrics.bootstrap_ci(np.ones(5), **kwargs)


def test_bootstrap_ci_rejects_empty_input():
    with pytest.raises(ValueError, match="query"):
        metrics.bootstrap_ci(np.zeros(0))


# --------------------------------------------------------------------------------------------------------
# holm


def test_holm_multiplies_sorted_p_values_and_keeps_them_monotone():
    adjusted = metrics.holm([0.01, 0.04, 0.03, 0.005])
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> raised to 0.06 (monotone)
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02])


def test_holm_caps_at_one_and_keeps_shape_and_nan():
    p = np.array([[0.5, np.nan], [0.9, 0.01]])
    adjusted = metrics.holm(p)
    assert adjusted.shape == (2, 2)
    assert np.isnan(adjusted[0, 1])
    np.testing.assert_allclose(adjusted[[0, 1, 1], [0, 0, 1]], [1.0, 1.0, 0.03])


def test_holm_is_monotone_in_the_raw_p_values():
    p = np.random.default_rng(11).random(30) ** 3
    adjusted = metrics.holm(p)
    order = np.argsort(p)
    assert (np.diff(adjusted[order]) >= 0).all()
    assert (adjusted >= p).all()


def test_holm_counts_each_pair_of_a_pairwise_matrix_once():
    x = np.random.default_rng(12).random((4, 30))
    x[0] += 0.1
    p = metrics.permutation_test_matrix(x, n_permutations=999)
    adjusted = metrics.holm(p)
    upper = np.triu_indices(4, k=1)
    np.testing.assert_allclose(adjusted[upper], metrics.holm(p[upper]))
    np.testing.assert_array_equal(adjusted, adjusted.T)
    assert np.isnan(np.diagonal(adjusted)).all()
    # Forcing an elementwise family counts each pair twice: 12 tests instead of 6.
    twice = metrics.holm(p, symmetric=False)
    assert (twice[upper] >= adjusted[upper]).all()


def test_holm_rejects_values_outside_zero_one():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        metrics.holm([0.5, 1.5])


# --------------------------------------------------------------------------------------------------------
# kendall_tau


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [([1, 2, 3, 4], [10, 20, 30, 40], 1.0), ([1, 2, 3, 4], [4, 3, 2, 1], -1.0), ([1, 2, 3], [1, 3, 2], 1 / 3)],
)
def test_kendall_tau_known_values(a, b, expected):
    assert metrics.kendall_tau(a, b) == pytest.approx(expected)


def test_kendall_tau_matches_scipy_tau_b_with_ties():
    rng = np.random.default_rng(13)
    a, b = rng.integers(0, 4, 20), rng.integers(0, 4, 20)
    assert metrics.kendall_tau(a, b) == pytest.approx(stats.kendalltau(a, b).statistic)


def test_kendall_tau_of_a_constant_ranking_is_nan():
    assert np.isnan(metrics.kendall_tau([1, 1, 1], [1, 2, 3]))


def test_kendall_tau_rejects_mismatched_lengths():
    with pytest.raises(ValueError):
        metrics.kendall_tau([1, 2, 3], [1, 2])
