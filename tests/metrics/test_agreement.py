"""Tests of metrics.agreement: hand-checkable tables, textbook values, and sklearn / krippendorff as oracles."""

import functools
import subprocess
import sys
import warnings
from pathlib import Path

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from sklearn.metrics import cohen_kappa_score
from sklearn.metrics import confusion_matrix as sk_confusion_matrix

from metrics.agreement import (
    LEVELS,
    MISSING,
    WEIGHTS,
    bootstrap_agreement,
    cohen_kappa,
    confusion_matrix,
    fleiss_kappa,
    krippendorff_alpha,
    observed_agreement,
    pairwise_agreement,
    raw_agreement,
)

NAN = np.nan
GRADES = [0, 1, 2]

# Two raters, ten items, grades 0-2. Rows of the confusion matrix are a's grade, columns b's:
#
#            b=0  b=1  b=2 | a's total
#     a=0     2    1    0  |  3
#     a=1     1    2    0  |  3
#     a=2     0    1    3  |  4
#     b's     3    4    3  | 10
#
# p_o = 7/10; p_e = (3*3 + 3*4 + 4*3) / 100 = 33/100; kappa = (0.70 - 0.33) / 0.67 = 37/67.
# The three disagreements are all one grade apart, so the weighted observed disagreement is 3 for both
# linear and quadratic weights. Chance counts E = outer(a's, b's) / 10:
#     [[0.9, 1.2, 0.9], [0.9, 1.2, 0.9], [1.2, 1.6, 1.2]]
# linear:    sum |i-j| E   = 1.2 + 2(0.9) + 0.9 + 0.9 + 2(1.2) + 1.6 = 8.8  -> kappa = 1 - 3/8.8 = 29/44
# quadratic: sum (i-j)^2 E = 1.2 + 4(0.9) + 0.9 + 0.9 + 4(1.2) + 1.6 = 13   -> kappa = 1 - 3/13  = 10/13
HAND_A = [0, 0, 1, 1, 2, 2, 2, 1, 0, 2]
HAND_B = [0, 1, 1, 1, 2, 1, 2, 0, 0, 2]
HAND_CONFUSION = [[2, 1, 0], [1, 2, 0], [0, 1, 3]]
HAND_KAPPA = {None: 37 / 67, "linear": 29 / 44, "quadratic": 10 / 13}

# Fleiss (1971) as worked on Wikipedia ("Fleiss' kappa"): 10 items, 14 raters, 5 grades, given as counts
# n_ij. P_bar = 172/455 = 0.378, P_e = 417/1960 = 0.213, kappa = 4211/20059 = 0.210.
FLEISS_COUNTS = np.array(
    [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
)

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", section C: 4 observers x 12 units,
# grades 1-5, missing ratings. Published: nominal .743, ordinal .815, interval .849.
KRIPPENDORFF_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
        [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
    ]
).T
KRIPPENDORFF_2011_ALPHA = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849}


def ratings_from_counts(counts, categories):
    """Complete (items x raters) ratings whose per-item grade counts are ``counts``."""
    counts = np.asarray(counts)
    values = np.repeat(np.tile(categories, counts.shape[0]), counts.ravel())
    return values.reshape(counts.shape[0], -1)


def random_ratings(seed, n_items=40, n_raters=3, categories=GRADES, missing=0.25):
    rng = np.random.default_rng(seed)
    ratings = rng.choice(np.asarray(categories, dtype=np.float64), size=(n_items, n_raters))
    # Correlated raters, so that the statistics are not all near 0.
    shared = rng.choice(np.asarray(categories, dtype=np.float64), size=(n_items, 1))
    ratings = np.where(rng.random(ratings.shape) < 0.5, shared, ratings)
    ratings[rng.random(ratings.shape) < missing] = NAN
    return ratings


def sklearn_kappa(a, b, categories, weights):
    both = ~np.isnan(a) & ~np.isnan(b)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return cohen_kappa_score(a[both], b[both], labels=categories, weights=weights)


def oracle_alpha(ratings, categories, level):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return krippendorff.alpha(reliability_data=ratings.T, level_of_measurement=level, value_domain=categories)


def statsmodels_fleiss(counts):
    """statsmodels.stats.inter_rater.fleiss_kappa(table, method="fleiss"), transcribed (5 lines)."""
    counts = np.asarray(counts, dtype=np.float64)
    n_rat = counts.sum(axis=1).max()
    p_cat = counts.sum(axis=0) / counts.sum()
    p_rat = ((counts**2).sum(axis=1) - n_rat) / (n_rat * (n_rat - 1))
    return (p_rat.mean() - (p_cat**2).sum()) / (1 - (p_cat**2).sum())


# --------------------------------------------------------------------------------------------------------
# confusion_matrix, raw_agreement, cohen_kappa


def test_confusion_matrix_hand_table():
    assert confusion_matrix(HAND_A, HAND_B, GRADES).tolist() == HAND_CONFUSION
    assert confusion_matrix(HAND_A, HAND_B, GRADES).dtype == np.int64


def test_confusion_matrix_counts_only_items_both_rated():
    a = [0, 1, NAN, 2, 2]
    b = [0, NAN, 1, 2, 0]
    assert confusion_matrix(a, b, GRADES).tolist() == [[1, 0, 0], [0, 0, 0], [1, 0, 1]]


@pytest.mark.parametrize("seed", range(5))
def test_confusion_matrix_matches_sklearn(seed):
    ratings = random_ratings(seed, n_raters=2)
    a, b = ratings.T
    both = ~np.isnan(a) & ~np.isnan(b)
    expected = sk_confusion_matrix(a[both], b[both], labels=GRADES)
    np.testing.assert_array_equal(confusion_matrix(a, b, GRADES), expected)


def test_raw_agreement_hand_table():
    assert raw_agreement(HAND_A, HAND_B) == pytest.approx(0.7)


def test_raw_agreement_ignores_items_not_rated_by_both():
    # Two shared items, one agreement; the third item is rated by a only.
    assert raw_agreement([1, 2, 0], [1, 0, NAN]) == 0.5
    assert raw_agreement(np.array([1, 2, 0]), np.array([1, 0, MISSING])) == 0.5


@pytest.mark.parametrize("weights", WEIGHTS)
def test_cohen_kappa_hand_table(weights):
    assert cohen_kappa(HAND_A, HAND_B, GRADES, weights=weights) == pytest.approx(HAND_KAPPA[weights], abs=1e-12)


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("seed", range(8))
def test_cohen_kappa_matches_sklearn_with_missing(seed, weights):
    ratings = random_ratings(seed, n_raters=2)
    a, b = ratings.T
    expected = sklearn_kappa(a, b, GRADES, weights)
    assert cohen_kappa(a, b, GRADES, weights=weights) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("weights", ["linear", "quadratic"])
def test_cohen_kappa_weights_use_grade_ranks_like_sklearn(weights):
    # Grades 0, 1, 3: the weights count ranks (0, 1, 2), as sklearn does, not the values.
    categories = [0, 1, 3]
    ratings = random_ratings(11, n_items=60, n_raters=2, categories=categories)
    a, b = ratings.T
    assert cohen_kappa(a, b, categories, weights) == pytest.approx(sklearn_kappa(a, b, categories, weights), abs=1e-9)
    relabelled = np.where(ratings == 3, 2, ratings)
    assert cohen_kappa(a, b, categories, weights) == pytest.approx(
        cohen_kappa(*relabelled.T, GRADES, weights), abs=1e-12
    )


def test_cohen_kappa_unused_category_changes_nothing_unweighted():
    assert cohen_kappa(HAND_A, HAND_B, [0, 1, 2, 3]) == pytest.approx(37 / 67, abs=1e-12)


# --------------------------------------------------------------------------------------------------------
# fleiss_kappa


def test_fleiss_kappa_fourteen_raters_ten_items_five_categories():
    ratings = ratings_from_counts(FLEISS_COUNTS, [1, 2, 3, 4, 5])
    assert ratings.shape == (10, 14)
    kappa = fleiss_kappa(ratings, [1, 2, 3, 4, 5])
    assert kappa == pytest.approx(0.210, abs=5e-4)
    assert kappa == pytest.approx(4211 / 20059, abs=1e-12)


def test_fleiss_kappa_hand_table_complete():
    # P_i = [sum_j n_ij (n_ij - 1)] / (3 * 2): items 1 and 4 unanimous (1), items 2 and 3 split 2-1 (1/3).
    # P_bar = (1 + 1/3 + 1/3 + 1) / 4 = 2/3; p_0 = p_1 = 6/12, P_e = 1/2; kappa = (2/3 - 1/2) / (1/2) = 1/3.
    ratings = np.array([[0, 0, 0], [0, 0, 1], [1, 1, 0], [1, 1, 1]])
    assert fleiss_kappa(ratings, [0, 1]) == pytest.approx(1 / 3, abs=1e-12)


def test_fleiss_kappa_hand_table_unequal_raters():
    # The table above plus item 5 rated (0, 1) by two raters and item 6 rated once (skipped).
    # P_5 = 0, so P_bar = (1 + 1/3 + 1/3 + 1 + 0) / 5 = 8/15. Per-item proportions of grade 0:
    # 1, 2/3, 1/3, 0, 1/2 -> pi_0 = 2.5 / 5 = 1/2 = pi_1, P_e = 1/2; kappa = (8/15 - 1/2) / (1/2) = 1/15.
    ratings = np.array([[0, 0, 0], [0, 0, 1], [1, 1, 0], [1, 1, 1], [0, 1, NAN], [1, NAN, NAN]], dtype=np.float64)
    assert fleiss_kappa(ratings, [0, 1]) == pytest.approx(1 / 15, abs=1e-12)
    # Same table with the integer missing marker.
    assert fleiss_kappa(np.nan_to_num(ratings, nan=MISSING).astype(int), [0, 1]) == pytest.approx(1 / 15)


@pytest.mark.parametrize("seed", range(5))
def test_fleiss_kappa_matches_statsmodels_formula_on_complete_tables(seed):
    ratings = random_ratings(seed, n_items=30, n_raters=4, missing=0.0)
    counts = (ratings[:, :, None] == np.array(GRADES)).sum(axis=1)
    assert fleiss_kappa(ratings, GRADES) == pytest.approx(statsmodels_fleiss(counts), abs=1e-12)


def test_fleiss_kappa_skips_items_rated_fewer_than_twice():
    ratings = random_ratings(3, n_items=30)
    extra = np.array([[2, NAN, NAN], [NAN, 0, NAN], [NAN, NAN, NAN]])
    assert fleiss_kappa(np.vstack([ratings, extra]), GRADES) == pytest.approx(
        fleiss_kappa(ratings[(~np.isnan(ratings)).sum(axis=1) >= 2], GRADES), abs=1e-12
    )


# --------------------------------------------------------------------------------------------------------
# observed_agreement


def test_observed_agreement_hand_table_complete():
    # The shares of agreeing ordered rater pairs are 1, 1/3, 1/3, 1 (see the Fleiss table above): 2/3.
    ratings = np.array([[0, 0, 0], [0, 0, 1], [1, 1, 0], [1, 1, 1]])
    assert observed_agreement(ratings) == pytest.approx(2 / 3, abs=1e-12)


def test_observed_agreement_weighs_every_item_the_same():
    # Item 1: four raters agree (12 of 12 ordered pairs), item 2: two disagree (0 of 2), item 3 is rated once
    # and skipped. Items average to (1 + 0) / 2 = 1/2; pooling the pairs would give 12 / 14 instead.
    ratings = np.array([[2, 2, 2, 2], [0, 1, NAN, NAN], [1, NAN, NAN, NAN]], dtype=np.float64)
    assert observed_agreement(ratings) == pytest.approx(1 / 2, abs=1e-12)
    assert observed_agreement(np.nan_to_num(ratings, nan=MISSING).astype(int)) == pytest.approx(1 / 2, abs=1e-12)


def test_observed_agreement_unequal_raters_and_fleiss_example():
    # The unequal-raters table of the Fleiss test: P_bar = (1 + 1/3 + 1/3 + 1 + 0) / 5 = 8/15.
    ratings = np.array([[0, 0, 0], [0, 0, 1], [1, 1, 0], [1, 1, 1], [0, 1, NAN], [1, NAN, NAN]], dtype=np.float64)
    assert observed_agreement(ratings) == pytest.approx(8 / 15, abs=1e-12)
    # Fleiss (1971) as worked on Wikipedia: P_bar = 172/455.
    wiki = ratings_from_counts(FLEISS_COUNTS, [1, 2, 3, 4, 5])
    assert observed_agreement(wiki) == pytest.approx(172 / 455, abs=1e-12)


def test_observed_agreement_of_two_raters_is_raw_agreement():
    assert observed_agreement(np.array([HAND_A, HAND_B]).T) == pytest.approx(0.7, abs=1e-12)
    ratings = random_ratings(4, n_items=50, n_raters=2)
    assert observed_agreement(ratings) == pytest.approx(raw_agreement(ratings[:, 0], ratings[:, 1]), abs=1e-12)


@pytest.mark.parametrize(
    "ratings", [np.empty((0, 3)), np.array([[1.0, NAN], [NAN, 2.0]]), np.full((3, 1), 1.0)], ids=["empty", "apart", "1"]
)
def test_observed_agreement_without_pairable_items_is_nan(ratings):
    assert np.isnan(observed_agreement(ratings))


@pytest.mark.parametrize(
    ("ratings", "match"),
    [(np.zeros(3), "shape"), (np.zeros((2, 2, 2)), "shape"), (np.array([["0", "1"], ["1", "1"]]), "dtype")],
)
def test_observed_agreement_bad_ratings_raise(ratings, match):
    with pytest.raises(ValueError, match=match):
        observed_agreement(ratings)


# --------------------------------------------------------------------------------------------------------
# krippendorff_alpha


@pytest.mark.parametrize("level", LEVELS)
def test_krippendorff_alpha_four_observers_twelve_units_with_gaps(level):
    alpha = krippendorff_alpha(KRIPPENDORFF_2011, [1, 2, 3, 4, 5], level=level)
    assert alpha == pytest.approx(KRIPPENDORFF_2011_ALPHA[level], abs=5e-4)


def test_krippendorff_alpha_nominal_hand_table():
    # Two raters, items (0,0), (0,1), (1,1), (1,NaN): the last is unpairable. Coincidences, each pairable
    # item adding its ordered pairs / (m_u - 1) = 1: o = [[2, 1], [1, 2]], n_0 = n_1 = 3, n = 6.
    # alpha = 1 - (n - 1) o_01+o_10 / (2 n_0 n_1) = 1 - 5 * 2 / 18 = 4/9.
    ratings = np.array([[0, 0], [0, 1], [1, 1], [1, NAN]])
    assert krippendorff_alpha(ratings, [0, 1], level="nominal") == pytest.approx(4 / 9, abs=1e-12)


@pytest.mark.parametrize("categories", [[0, 1, 2], [0, 1, 3], [0, 1, 2, 3]])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("seed", range(6))
def test_krippendorff_alpha_matches_package_with_missing(seed, level, categories):
    # [0, 1, 2, 3] with grades drawn from [0, 1, 2] leaves a category unused.
    ratings = random_ratings(seed, n_items=50, n_raters=4, categories=categories[:3])
    expected = oracle_alpha(ratings, categories, level)
    assert krippendorff_alpha(ratings, categories, level=level) == pytest.approx(expected, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(
    ratings=hnp.arrays(
        np.float64,
        st.tuples(st.integers(1, 10), st.integers(1, 4)),
        elements=st.sampled_from([NAN, 0.0, 1.0, 2.0, 3.0]),
    ),
    level=st.sampled_from(LEVELS),
)
def test_krippendorff_alpha_matches_package_on_any_table(ratings, level):
    categories = [0, 1, 2, 3]
    alpha = krippendorff_alpha(ratings, categories, level=level)
    if ((~np.isnan(ratings)).sum(axis=1) < 2).all():
        # The package refuses tables without a pairable item; here alpha is NaN.
        assert np.isnan(alpha)
    else:
        np.testing.assert_allclose(alpha, oracle_alpha(ratings, categories, level), rtol=0, atol=1e-9)


@settings(max_examples=200, deadline=None)
@given(
    ratings=hnp.arrays(
        np.float64, st.tuples(st.integers(1, 12), st.just(2)), elements=st.sampled_from([NAN, 0.0, 1.0, 2.0])
    ),
    weights=st.sampled_from(WEIGHTS),
)
def test_cohen_kappa_matches_sklearn_on_any_table(ratings, weights):
    a, b = ratings.T
    kappa = cohen_kappa(a, b, GRADES, weights=weights)
    if not (~np.isnan(a) & ~np.isnan(b)).any():
        # sklearn refuses a table with no item rated by both; here kappa is NaN.
        assert np.isnan(kappa)
    else:
        np.testing.assert_allclose(kappa, sklearn_kappa(a, b, GRADES, weights), rtol=0, atol=1e-9)


# --------------------------------------------------------------------------------------------------------
# Missing markers and degenerate tables


def test_missing_marker_int_equals_float_nan():
    ratings = random_ratings(5)
    as_int = np.nan_to_num(ratings, nan=MISSING).astype(np.int64)
    a, b = ratings[:, 0], ratings[:, 1]
    ia, ib = as_int[:, 0], as_int[:, 1]
    assert raw_agreement(ia, ib) == raw_agreement(a, b)
    assert cohen_kappa(ia, ib, GRADES, "quadratic") == cohen_kappa(a, b, GRADES, "quadratic")
    assert fleiss_kappa(as_int, GRADES) == fleiss_kappa(ratings, GRADES)
    assert krippendorff_alpha(as_int, GRADES) == krippendorff_alpha(ratings, GRADES)


def test_single_category_everywhere_is_undefined_like_the_oracles():
    ratings = np.full((6, 3), 1.0)
    ratings[0, 2] = NAN
    a, b = ratings[:, 0], ratings[:, 1]
    assert raw_agreement(a, b) == 1.0
    for weights in WEIGHTS:
        assert np.isnan(sklearn_kappa(a, b, GRADES, weights))
        assert np.isnan(cohen_kappa(a, b, GRADES, weights))
    assert np.isnan(fleiss_kappa(ratings, GRADES))
    for level in LEVELS:
        assert np.isnan(oracle_alpha(ratings, GRADES, level))
        assert np.isnan(krippendorff_alpha(ratings, GRADES, level))
    pairs = pairwise_agreement(ratings, GRADES)
    assert np.isnan(pairs.kappa).all()
    assert np.isnan(pairs.quadratic_kappa).all()


def test_perfect_agreement_with_variation_is_one():
    ratings = np.repeat(np.array([[0], [1], [2], [2], [1]]), 3, axis=1)
    assert cohen_kappa(ratings[:, 0], ratings[:, 1], GRADES, "quadratic") == 1.0
    assert fleiss_kappa(ratings, GRADES) == 1.0
    for level in LEVELS:
        assert krippendorff_alpha(ratings, GRADES, level) == 1.0


def test_no_shared_items_is_nan():
    a = [0, 1, NAN, NAN]
    b = [NAN, NAN, 2, 0]
    assert confusion_matrix(a, b, GRADES).sum() == 0
    assert np.isnan(raw_agreement(a, b))
    assert np.isnan(cohen_kappa(a, b, GRADES))
    ratings = np.array([a, b]).T
    assert np.isnan(fleiss_kappa(ratings, GRADES))
    assert np.isnan(krippendorff_alpha(ratings, GRADES))


@pytest.mark.parametrize("ratings", [np.empty((0, 3)), random_ratings(0, n_raters=1)], ids=["empty", "1-rater"])
def test_tables_without_pairable_items_are_nan(ratings):
    assert np.isnan(fleiss_kappa(ratings, GRADES))
    assert np.isnan(krippendorff_alpha(ratings, GRADES))
    pairs = pairwise_agreement(ratings, GRADES)
    assert pairs.n_common.size == ratings.shape[1] * (ratings.shape[1] - 1) // 2
    assert np.isnan(pairs.kappa).all()


# --------------------------------------------------------------------------------------------------------
# Argument errors


@pytest.mark.parametrize(
    "call",
    [
        lambda: confusion_matrix([[0, 1]], [[0, 1]], GRADES),
        lambda: confusion_matrix([0, 1, 2], [0, 1], GRADES),
        lambda: raw_agreement([0, 1, 2], [0, 1]),
        lambda: raw_agreement(np.zeros((2, 2)), np.zeros((2, 2))),
        lambda: cohen_kappa([0, 1], [0, 1, 1], GRADES),
        lambda: fleiss_kappa([0, 1, 2], GRADES),
        lambda: fleiss_kappa(np.zeros((2, 2, 2)), GRADES),
        lambda: krippendorff_alpha([0, 1, 2], GRADES),
        lambda: pairwise_agreement(np.zeros(3), GRADES),
    ],
)
def test_wrong_shapes_raise(call):
    with pytest.raises(ValueError, match="shape"):
        call()


@pytest.mark.parametrize(
    "ratings",
    [
        np.array([[0, 3], [1, 1]]),  # integer grade not a category
        np.array([[0.0, 1.5], [1.0, 1.0]]),  # fractional grade
        np.array([[0.0, -1.0], [1.0, 1.0]]),  # -1 is only the missing marker in integer arrays
        np.array([[0.0, np.inf], [1.0, 1.0]]),
        np.array([[0, -2], [1, 1]]),
    ],
)
@pytest.mark.parametrize(
    "stat",
    [
        lambda r: confusion_matrix(r[:, 0], r[:, 1], GRADES),
        lambda r: cohen_kappa(r[:, 0], r[:, 1], GRADES, "quadratic"),
        lambda r: fleiss_kappa(r, GRADES),
        lambda r: krippendorff_alpha(r, GRADES),
        lambda r: pairwise_agreement(r, GRADES),
    ],
)
def test_grade_outside_categories_raises(ratings, stat):
    with pytest.raises(ValueError, match="outside categories"):
        stat(ratings)


@pytest.mark.parametrize(
    "categories", [[0], [], [2, 1, 0], [0, 1, 1], [[0, 1], [2, 3]], ["a", "b"], [0, np.nan], [True, False]]
)
def test_bad_categories_raise(categories):
    with pytest.raises(ValueError, match="categories"):
        krippendorff_alpha(np.zeros((3, 2)), categories)


def test_missing_marker_as_category_with_integer_ratings_raises():
    with pytest.raises(ValueError, match="missing"):
        fleiss_kappa(np.array([[-1, 0], [0, 0]]), [-1, 0, 1])
    # With float ratings NaN is the marker and -1 is an ordinary grade.
    assert fleiss_kappa(np.array([[-1.0, -1.0], [0.0, 0.0]]), [-1, 0, 1]) == 1.0


@pytest.mark.parametrize("ratings", [np.array([["0", "1"], ["1", "1"]]), np.array([[0, None], [1, 1]])])
def test_non_numeric_ratings_raise(ratings):
    with pytest.raises(ValueError, match="dtype"):
        krippendorff_alpha(ratings, GRADES)


def test_unknown_weights_and_level_raise():
    with pytest.raises(ValueError, match="weights"):
        cohen_kappa(HAND_A, HAND_B, GRADES, weights="cubic")
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha(np.zeros((3, 2)), GRADES, level="ratio")


# --------------------------------------------------------------------------------------------------------
# pairwise_agreement


def test_pairwise_agreement_equals_two_rater_functions():
    ratings = random_ratings(7, n_items=60, n_raters=4)
    ratings[:, 3] = NAN
    ratings[:1, 3] = 2  # rater 3 shares at most one item with anyone
    pairs = pairwise_agreement(ratings, GRADES)
    assert pairs.rater_a.tolist() == [0, 0, 0, 1, 1, 2]
    assert pairs.rater_b.tolist() == [1, 2, 3, 2, 3, 3]
    for p, (i, j) in enumerate(zip(pairs.rater_a, pairs.rater_b, strict=True)):
        a, b = ratings[:, i], ratings[:, j]
        shared = int((~np.isnan(a) & ~np.isnan(b)).sum())
        assert pairs.n_common[p] == shared
        if shared < 2:
            assert np.isnan([pairs.raw[p], pairs.kappa[p], pairs.quadratic_kappa[p]]).all()
            continue
        assert pairs.raw[p] == pytest.approx(raw_agreement(a, b), abs=1e-12)
        assert pairs.kappa[p] == pytest.approx(sklearn_kappa(a, b, GRADES, None), abs=1e-9)
        assert pairs.quadratic_kappa[p] == pytest.approx(sklearn_kappa(a, b, GRADES, "quadratic"), abs=1e-9)
    assert np.isnan(pairs.kappa[pairs.rater_b == 3]).all()


def test_pairwise_agreement_hand_table():
    pairs = pairwise_agreement(np.array([HAND_A, HAND_B]).T, GRADES)
    assert pairs.n_common.tolist() == [10]
    assert pairs.raw[0] == pytest.approx(0.7)
    assert pairs.kappa[0] == pytest.approx(37 / 67)
    assert pairs.quadratic_kappa[0] == pytest.approx(10 / 13)


# --------------------------------------------------------------------------------------------------------
# bootstrap_agreement

BOOTSTRAPPED = [
    pytest.param(functools.partial(fleiss_kappa, categories=GRADES), 3, id="fleiss"),
    pytest.param(functools.partial(krippendorff_alpha, categories=GRADES, level="ordinal"), 3, id="alpha-ord"),
    pytest.param(functools.partial(krippendorff_alpha, categories=GRADES, level="nominal"), 3, id="alpha-nom"),
    pytest.param(functools.partial(krippendorff_alpha, categories=GRADES, level="interval"), 3, id="alpha-int"),
    pytest.param(functools.partial(cohen_kappa, categories=GRADES), 2, id="kappa"),
    pytest.param(functools.partial(cohen_kappa, categories=GRADES, weights="quadratic"), 2, id="qwk"),
    pytest.param(raw_agreement, 2, id="raw"),
    pytest.param(observed_agreement, 3, id="observed"),
]


def point_estimate(stat_fn, ratings):
    return stat_fn(ratings[:, 0], ratings[:, 1]) if ratings.shape[1] == 2 else stat_fn(ratings)


@pytest.mark.parametrize(("stat_fn", "n_raters"), BOOTSTRAPPED)
def test_bootstrap_interval_contains_point_estimate(stat_fn, n_raters):
    ratings = random_ratings(21, n_items=300, n_raters=n_raters, missing=0.1)
    low, high = bootstrap_agreement(stat_fn, ratings, n_resamples=500)
    assert low < point_estimate(stat_fn, ratings) < high
    assert high - low < 0.5


@pytest.mark.parametrize(("stat_fn", "n_raters"), BOOTSTRAPPED)
def test_bootstrap_fast_path_equals_resampling_loop(stat_fn, n_raters):
    ratings = random_ratings(22, n_items=80, n_raters=n_raters)

    def opaque(resampled):
        return point_estimate(stat_fn, resampled)

    fast = bootstrap_agreement(stat_fn, ratings, n_resamples=200, seed=5)
    loop = bootstrap_agreement(opaque, ratings, n_resamples=200, seed=5)
    np.testing.assert_allclose(fast, loop, rtol=0, atol=1e-12)


def test_bootstrap_is_reproducible_by_seed():
    ratings = random_ratings(23, n_items=200)
    stat_fn = functools.partial(krippendorff_alpha, categories=GRADES)
    first = bootstrap_agreement(stat_fn, ratings, n_resamples=300, seed=42)
    assert bootstrap_agreement(stat_fn, ratings, n_resamples=300, seed=42) == first
    assert bootstrap_agreement(stat_fn, ratings, n_resamples=300, seed=43) != first


def test_bootstrap_higher_confidence_gives_wider_interval():
    ratings = random_ratings(24, n_items=200)
    stat_fn = functools.partial(fleiss_kappa, categories=GRADES)
    low80, high80 = bootstrap_agreement(stat_fn, ratings, confidence=0.8)
    low99, high99 = bootstrap_agreement(stat_fn, ratings, confidence=0.99)
    assert low99 < low80 < high80 < high99


def test_bootstrap_undefined_statistic_gives_nan():
    ratings = np.ones((20, 3))
    low, high = bootstrap_agreement(functools.partial(fleiss_kappa, categories=GRADES), ratings)
    assert np.isnan(low) and np.isnan(high)
    low, high = bootstrap_agreement(functools.partial(fleiss_kappa, categories=GRADES), np.empty((0, 3)))
    assert np.isnan(low) and np.isnan(high)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_resamples": 0}, "n_resamples"),
        ({"n_resamples": 10.0}, "n_resamples"),
        ({"confidence": 1.0}, "confidence"),
        ({"confidence": 0}, "confidence"),
    ],
)
def test_bootstrap_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bootstrap_agreement(raw_agreement, np.zeros((5, 2)), **kwargs)


def test_bootstrap_checks_ratings_before_resampling():
    with pytest.raises(ValueError, match=r"\(n_items, 2\)"):
        bootstrap_agreement(functools.partial(cohen_kappa, categories=GRADES), np.zeros((5, 3)))
    with pytest.raises(ValueError, match="outside categories"):
        bootstrap_agreement(functools.partial(fleiss_kappa, categories=GRADES), np.full((5, 3), 7))
    with pytest.raises(ValueError, match="shape"):
        bootstrap_agreement(raw_agreement, np.zeros(5))


# --------------------------------------------------------------------------------------------------------


def test_agreement_module_does_not_import_django():
    root = Path(__file__).resolve().parents[2]
    code = "import sys, metrics.agreement; sys.exit('django' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_agreement_by_group_equals_alpha_of_each_group(level):
    from metrics.agreement import agreement_by_group

    rng = np.random.default_rng(3)
    ratings = rng.integers(0, 3, size=(60, 3)).astype(float)
    ratings[rng.random(ratings.shape) < 0.3] = np.nan
    groups = rng.integers(0, 5, size=60)
    groups[groups == 4] = 3  # group 4 left empty: NaN there
    alpha, agree, pairable = agreement_by_group(ratings, groups, [0, 1, 2], level=level)
    for g in range(4):
        sub = ratings[groups == g]
        np.testing.assert_allclose(alpha[g], krippendorff_alpha(sub, [0, 1, 2], level=level), atol=1e-12)
        pairs = [
            (x, y)
            for row in sub
            for i, x in enumerate(row)
            for j, y in enumerate(row)
            if i != j and not np.isnan(x) and not np.isnan(y)
        ]
        weights = [
            1 / (np.count_nonzero(~np.isnan(row)) - 1)
            for row in sub
            for i, x in enumerate(row)
            for j, y in enumerate(row)
            if i != j and not np.isnan(x) and not np.isnan(y)
        ]
        same = sum(w for (x, y), w in zip(pairs, weights, strict=True) if x == y)
        np.testing.assert_allclose(agree[g], same / sum(weights), atol=1e-12)
        assert pairable[g] == np.count_nonzero((~np.isnan(sub)).sum(axis=1) >= 2)
