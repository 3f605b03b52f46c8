"""metrics.numbers: one rule for the numbers that leave RelJudge (rounding clipped, anything beyond it a bug)."""

from __future__ import annotations

import numpy as np
import pytest

import metrics
from metrics.numbers import (
    TOLERANCE,
    NumberError,
    clip_interval,
    finite,
    finite_or_none,
    ordered_bounds,
    within,
)


def test_within_clips_rounding_and_refuses_more():
    assert within(1.0000000000000002, what="nDCG") == 1.0
    assert within(-1e-17, what="P@10") == 0.0
    np.testing.assert_array_equal(within([0.5, 1 + TOLERANCE / 2], what="x"), [0.5, 1.0])
    with pytest.raises(NumberError, match=r"MAP: 1\.0001 is outside \[0\.0, 1\.0\] at \(1,\)"):
        within([0.2, 1.0001], what="MAP")
    with pytest.raises(NumberError, match="power: nan is not a finite number"):
        within(float("nan"), what="power")
    with pytest.raises(NumberError, match="not a finite number at"):
        within(np.array([[0.1, np.inf]]), what="bound")


def test_number_error_is_not_a_value_error():
    """Handlers that turn a bad argument (ValueError) into the caller's 400 must never catch a broken invariant."""
    assert not issubclass(NumberError, ValueError)


def test_ordered_bounds_lowers_a_low_bound_a_rounding_step_above():
    low, high = ordered_bounds([[1.0000000000000002, 0.3]], [[1.0, 0.4]], what="nDCG@10 bounds")
    np.testing.assert_array_equal(low, [[1.0, 0.3]])
    np.testing.assert_array_equal(high, [[1.0, 0.4]])
    assert (low <= high).all()
    with pytest.raises(NumberError, match=r"low bound 0\.5 above high bound 0\.4 at \(0, 1\)"):
        ordered_bounds([[0.1, 0.5]], [[0.2, 0.4]], what="R@10 bounds")


def test_clip_interval_clips_however_far_but_keeps_order():
    low, high = clip_interval([-0.653, 0.842], [1.941, 1.037], what="MAP interval")
    np.testing.assert_array_equal(low, [0.0, 0.842])
    np.testing.assert_array_equal(high, [1.0, 1.0])
    low, high = clip_interval([1.2], [1.5], what="interval above the range")
    assert low[0] == high[0] == 1.0
    with pytest.raises(NumberError, match="not a finite number"):
        clip_interval([np.nan], [1.0], what="x")
    with pytest.raises(NumberError, match="above high end"):
        clip_interval([0.6], [0.5], what="x")


def test_finite_and_finite_or_none():
    assert finite(np.float64(0.25), what="x") == 0.25
    with pytest.raises(NumberError, match="tau: inf"):
        finite(float("inf"), what="tau")
    assert finite_or_none(None) is None
    assert finite_or_none(float("nan")) is None
    assert finite_or_none(np.float64(0.5)) == 0.5


def test_score_bounds_of_a_perfect_ranking_stay_within_one():
    """Six documents of grade 2 in a scale to 3: DCG summed down the ranking over the ideal DCG from grade counts
    gave a high bound of 1.0000000000000002."""
    labels = np.array([[[2, 2, 2, 2, 2, 2]]])
    for name, (low, high) in metrics.score_bounds(labels, labels[0], k=10, top_grade=3).items():
        assert ((low >= 0) & (low <= high) & (high <= 1)).all(), name
    low, high = metrics.score_bounds(labels, labels[0], k=10, top_grade=3)["nDCG@10"]
    assert low[0, 0] == high[0, 0] == 1.0


def test_sound_bounds_of_a_judged_query_are_in_order():
    """[3, 3, 2, 1] with exponential gain, every label known: the sound low bound (DCG over the largest ideal DCG)
    came out 1.0000000000000002 above its high bound 1.0, and the leaderboard answered 400 blaming the caller."""
    labels = np.array([[[3, 3, 2, 1]]])
    pool = metrics.final_pool(labels, np.arange(4).reshape(1, 1, 4), pool_depth=4)
    low, high = metrics.system_bounds("nDCG", pool, labels[0], k=10, threshold=1, gain="exponential", top_grade=3)
    assert low[0, 0] == high[0, 0] == 1.0
    assert metrics.settled(low, high).order.shape == (1, 1)


def test_settled_takes_a_rounding_step_as_equal():
    result = metrics.settled([[1.0000000000000002], [0.2]], [[1.0], [0.3]])
    np.testing.assert_array_equal(result.order, [[0, 1], [-1, 0]])
