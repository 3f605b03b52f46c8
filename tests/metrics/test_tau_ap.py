"""metrics.tau_ap against hand computations (Yilmaz, Aslam & Robertson, SIGIR 2008) and Kendall's tau."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau

from metrics.tau_ap import tau_ap

TRUTH = np.array([4.0, 3.0, 2.0, 1.0])  # A B C D


def test_tau_ap_is_one_for_the_same_order_and_minus_one_for_the_reverse():
    assert tau_ap(TRUTH, TRUTH * 10) == pytest.approx(1.0)
    assert tau_ap(TRUTH, -TRUTH) == pytest.approx(-1.0)


def test_a_swap_at_the_top_costs_more_than_one_at_the_bottom():
    # B A C D: C(2) = 0 of 1, C(3) = 2 of 2, C(4) = 3 of 3 -> 2/3 * 2 - 1 = 1/3
    assert tau_ap(TRUTH, [3.0, 4.0, 2.0, 1.0]) == pytest.approx(1 / 3)
    # A B D C: C(2) = 1/1, C(3) = 2/2, C(4) = 2/3 -> 2/3 * 8/3 - 1 = 7/9
    assert tau_ap(TRUTH, [4.0, 3.0, 1.0, 2.0]) == pytest.approx(7 / 9)
    # Kendall's tau does not tell them apart
    assert kendalltau(TRUTH, [3.0, 4.0, 2.0, 1.0])[0] == pytest.approx(kendalltau(TRUTH, [4.0, 3.0, 1.0, 2.0])[0])


def test_tau_ap_averages_to_kendall_tau_over_random_orders():
    """Yilmaz et al.: tau_AP and tau have the same expected value under random errors (0 for random orders);
    and when the errors are spread evenly over the ranking they agree closely."""
    rng = np.random.default_rng(7)
    truth = np.arange(30, 0, -1, dtype=float)
    values = [tau_ap(truth, rng.permutation(truth)) for _ in range(2000)]
    assert abs(np.mean(values)) < 0.02


def test_tau_ap_refuses_bad_input():
    with pytest.raises(ValueError):
        tau_ap([1.0], [1.0])
    with pytest.raises(ValueError):
        tau_ap([1.0, 2.0], [1.0, 2.0, 3.0])
