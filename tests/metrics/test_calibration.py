"""The calibration statistics: the kappa verdict, tau_AP, the top-k overlap, per-system bias and
self-consistency, against hand-computed cases, independent reference code and scipy."""

import functools
import itertools
import math

import numpy as np
import pytest
from scipy import stats

import metrics
from metrics.calibration import (
    answer_agreement,
    kappa_band,
    kappa_verdict,
    paired_bias,
    self_consistency,
    tau_ap,
    top_k_overlap,
)

# --------------------------------------------------------------------------- tau_AP


def reference_tau_ap(estimate, truth):
    """Yilmaz, Aslam & Robertson (SIGIR 2008), section 3, read literally, for rankings without ties: walk the
    estimated list from its second item; C(i) = items above position i in the estimated list that the true
    list also ranks above that item; tau_AP = 2/(N-1) * sum_i C(i)/(i-1) - 1."""
    items = list(range(len(estimate)))
    estimated_list = sorted(items, key=lambda x: -estimate[x])
    true_list = sorted(items, key=lambda x: -truth[x])
    true_rank = {item: r for r, item in enumerate(true_list)}
    n = len(items)
    total = 0.0
    for i in range(2, n + 1):  # 1-based positions, as in the paper
        item = estimated_list[i - 1]
        correct = sum(1 for above in estimated_list[: i - 1] if true_rank[above] < true_rank[item])
        total += correct / (i - 1)
    return 2.0 / (n - 1) * total - 1.0


@pytest.mark.parametrize(
    ("estimate", "truth", "expected"),
    [
        ([4, 3, 2, 1], [4, 3, 2, 1], 1.0),
        ([1, 2, 3, 4], [4, 3, 2, 1], -1.0),
        # the top two swapped: C = 0, 2, 3 -> 2/3 * (0 + 1 + 1) - 1
        ([3, 4, 2, 1], [4, 3, 2, 1], 1 / 3),
        # the bottom two swapped: C = 1, 2, 2 -> 2/3 * (1 + 1 + 2/3) - 1
        ([4, 3, 1, 2], [4, 3, 2, 1], 7 / 9),
        # two items: agree or not
        ([0.2, 0.1], [0.5, 0.4], 1.0),
        ([0.1, 0.2], [0.5, 0.4], -1.0),
        # ties count half: C(2) = 0.5, C(3) = 2 -> 2/2 * (0.5 + 1) - 1
        ([1, 1, 0], [2, 1, 0], 0.5),
    ],
)
def test_tau_ap_hand_computed(estimate, truth, expected):
    assert tau_ap(estimate, truth) == pytest.approx(expected, abs=1e-12)


def test_tau_ap_weighs_top_swaps_more_than_kendall_does():
    truth = [4, 3, 2, 1]
    top, bottom = [3, 4, 2, 1], [4, 3, 1, 2]
    assert metrics.kendall_tau(top, truth) == metrics.kendall_tau(bottom, truth) == pytest.approx(2 / 3)
    assert tau_ap(top, truth) < metrics.kendall_tau(top, truth) < tau_ap(bottom, truth)


def test_tau_ap_against_the_reference_on_random_rankings():
    rng = np.random.default_rng(1)
    for n in [2, 3, 5, 8, 13, 40]:
        for _ in range(30):
            truth = rng.permutation(n).astype(float)
            estimate = truth + rng.normal(0, n / 3, n)
            assert tau_ap(estimate, truth) == pytest.approx(reference_tau_ap(estimate, truth), abs=1e-12)


def test_tau_ap_equals_kendall_on_average_when_errors_are_uniform():
    """Yilmaz et al. section 3.1: with errors spread evenly over the list, the expected tau_AP is Kendall's
    tau; over all 5! orders of 5 items, both average to 0."""
    truth = np.arange(5, 0, -1, dtype=float)
    perms = [np.array(p, float) for p in itertools.permutations(range(5))]
    assert np.mean([tau_ap(p, truth) for p in perms]) == pytest.approx(0.0, abs=1e-12)


def test_tau_ap_bad_input():
    with pytest.raises(ValueError, match="same length >= 2"):
        tau_ap([1.0], [1.0])
    with pytest.raises(ValueError, match="same length"):
        tau_ap([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="NaN"):
        tau_ap([1, float("nan")], [1, 2])


def test_top_k_overlap():
    truth = [9, 8, 7, 6, 5, 4, 3]
    assert top_k_overlap(truth, truth) == (5, 5)
    # the model moves the 5th system out and the 6th in
    assert top_k_overlap([9, 8, 7, 6, 4, 5, 3], truth) == (4, 5)
    assert top_k_overlap([1, 2, 3], [3, 2, 1]) == (3, 3)  # fewer than k systems: all of them
    assert top_k_overlap([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], list(range(10, 0, -1)), k=5) == (0, 5)
    with pytest.raises(ValueError, match="k must be at least 1"):
        top_k_overlap([1], [1], k=0)


# --------------------------------------------------------------------------- the kappa verdict


@pytest.mark.parametrize(
    ("value", "band"),
    [(-0.3, "chance"), (0.0, "chance"), (0.05, "slight"), (0.2, "slight"), (0.21, "fair"), (0.4, "fair")]
    + [
        (0.5, "moderate"),
        (0.7, "substantial"),
        (0.8, "substantial"),
        (0.81, "almost_perfect"),
        (1.0, "almost_perfect"),
    ],
)
def test_kappa_bands_of_landis_and_koch(value, band):
    assert kappa_band(value) == band


@pytest.mark.parametrize(
    ("value", "low", "high", "band", "at_least"),
    [
        (0.10, -0.05, 0.25, "chance", False),  # the interval reaches 0: chance is not ruled out
        (0.30, 0.25, 0.38, "fair", False),  # wholly inside one band
        (0.45, 0.30, 0.58, "fair", True),  # spans fair and moderate: at least fair
        (0.70, 0.45, 0.90, "moderate", True),
        (0.90, 0.85, 0.95, "almost_perfect", False),
    ],
)
def test_kappa_verdict_names_the_band_of_the_lower_end(value, low, high, band, at_least):
    verdict = kappa_verdict(value, low, high)
    assert (verdict.band, verdict.at_least) == (band, at_least)
    assert verdict.point_band == kappa_band(value)


def test_kappa_verdict_without_interval_and_bad_interval():
    assert kappa_verdict(0.5, float("nan"), float("nan")) is None
    with pytest.raises(ValueError, match="reversed"):
        kappa_verdict(0.5, 0.6, 0.4)


def _draw(rng, kappa, n):
    """Human grades from fixed marginals; the model copies the human with probability ``kappa``, else draws
    from the same marginals on its own: the population kappa is exactly ``kappa``."""
    p = [0.5, 0.3, 0.2]
    human = rng.choice(3, size=n, p=p)
    own = rng.choice(3, size=n, p=p)
    model = np.where(rng.random(n) < kappa, human, own)
    return human, model


LOWER_EDGE = {"chance": -1.0, "slight": 0.0, "fair": 0.2, "moderate": 0.4, "substantial": 0.6, "almost_perfect": 0.8}
UPPER_EDGE = {"chance": 0.0, "slight": 0.2, "fair": 0.4, "moderate": 0.6, "substantial": 0.8, "almost_perfect": 1.0}


@pytest.mark.parametrize("true_kappa", [0.0, 0.3, 0.5, 0.75])
def test_kappa_verdict_rarely_claims_more_than_the_truth(true_kappa):
    """Soundness on generated judges of known kappa: over 150 campaigns of 150 pairs, the verdict built on
    the 95% bootstrap interval claims a band above the true kappa at most 5% of the time (about 2.5%
    expected); a verdict of one band (not "at least") holds the true kappa at least 90% of the time; a
    judge that agrees by chance only is called "no better than chance" at least 90% of the time."""
    rng = np.random.default_rng(int(true_kappa * 100))
    categories = [0, 1, 2]
    over = exact = exact_wrong = chance = 0
    draws = 150
    for seed in range(draws):
        human, model = _draw(rng, true_kappa, 150)
        value = metrics.cohen_kappa(human, model, categories)
        low, high = metrics.bootstrap_agreement(
            functools.partial(metrics.cohen_kappa, categories=categories),
            np.column_stack([human, model]),
            n_resamples=400,
            seed=seed,
        )
        verdict = kappa_verdict(value, low, high)
        over += LOWER_EDGE[verdict.band] > true_kappa
        chance += verdict.band == "chance"
        if not verdict.at_least and verdict.band != "chance":
            exact += 1
            exact_wrong += not (LOWER_EDGE[verdict.band] < true_kappa <= UPPER_EDGE[verdict.band])
    assert over / draws <= 0.05
    if exact >= 20:
        assert exact_wrong / exact <= 0.10
    if true_kappa == 0.0:
        assert chance / draws >= 0.90


# --------------------------------------------------------------------------- per-system bias


def test_paired_bias_matches_scipy_ttest_rel_interval():
    rng = np.random.default_rng(3)
    human = rng.random((4, 12))
    model = human + rng.normal(0.05, 0.1, (4, 12))
    bias = paired_bias(model, human)
    assert bias.n == 12
    for s in range(4):
        ci = stats.ttest_rel(model[s], human[s]).confidence_interval(0.95)
        assert bias.mean[s] == pytest.approx(np.mean(model[s] - human[s]), abs=1e-12)
        assert (bias.low[s], bias.high[s]) == pytest.approx((ci.low, ci.high), abs=1e-12)
    one = paired_bias(model[:, :1], human[:, :1])
    assert np.isnan(one.low).all() and one.mean == pytest.approx((model - human)[:, 0])
    with pytest.raises(ValueError, match="one shape"):
        paired_bias(model, human[:, :3])


def test_paired_bias_interval_covers_a_known_bias():
    """Coverage on generated data: a model that adds 0.04 to every query's measure, with noise; over 300
    draws of 20 queries, the 95% interval holds 0.04 at least 92% of the time."""
    rng = np.random.default_rng(7)
    human = rng.random((300, 20))
    model = human + 0.04 + rng.normal(0, 0.08, (300, 20))
    bias = paired_bias(model, human)
    covered = (bias.low <= 0.04) & (bias.high >= 0.04)
    assert covered.mean() >= 0.92


# --------------------------------------------------------------------------- self-consistency


def test_self_consistency_hand_computed():
    answers = np.array([[2, 2, 2], [2, 2, 1], [0, 1, 2], [-1, -1, 1]])
    pairwise, unanimous = answer_agreement(answers)
    # agreeing pairs of answers out of 3: all, one, none, one (an unreadable answer is its own category)
    assert pairwise.tolist() == pytest.approx([1.0, 1 / 3, 0.0, 1 / 3])
    assert unanimous.tolist() == [True, False, False, False]
    sc = self_consistency(answers)
    assert (sc.unanimous, sc.items, sc.repeats) == (0.25, 4, 3)
    assert sc.pairwise == pytest.approx((1 + 1 / 3 + 0 + 1 / 3) / 4)


def test_self_consistency_against_pair_counting():
    rng = np.random.default_rng(5)
    answers = rng.integers(-1, 3, size=(50, 5))
    pairwise, unanimous = answer_agreement(answers)
    for row, got, same in zip(answers, pairwise, unanimous, strict=True):
        pairs = list(itertools.combinations(row.tolist(), 2))
        assert got == pytest.approx(sum(a == b for a, b in pairs) / len(pairs))
        assert same == (len(set(row.tolist())) == 1)
    with pytest.raises(ValueError, match="N >= 2"):
        answer_agreement(np.zeros((3, 1), int))
    assert math.isnan(self_consistency(np.zeros((0, 3), int)).pairwise)
