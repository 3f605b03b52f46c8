"""judging.aggregation.aggregate_grades: every policy on cases small enough to check by hand.

The expected labels are written out, never computed by another aggregation: these tests are the oracle that
the scorer, the policy switch and the agreement page's policy comparison all rely on.
"""

import numpy as np
import pytest

from judging.aggregation import POLICIES, aggregate_grades

# (policy, one pair's grades in the order they were given, the label a person works out)
ONE_PAIR = [
    # median: the middle grade; on an even count the lower of the two middle grades
    ("median", [0, 1, 2], 1),
    ("median", [2, 2, 0, 0, 1], 1),  # sorted 0 0 1 2 2
    ("median", [0, 2], 0),
    ("median", [1, 2], 1),
    ("median", [3, 0, 0, 3], 0),  # sorted 0 0 3 3: middle grades 0 and 3
    ("median", [2, 1, 0, 2], 1),  # sorted 0 1 2 2: middle grades 1 and 2
    # majority: the most frequent grade; a tie goes to the lower grade
    ("majority", [1, 1, 2], 1),
    ("majority", [0, 2, 2], 2),  # the winner need not be the lowest grade
    ("majority", [2, 0, 2], 2),  # equal grades need not be given one after the other
    ("majority", [0, 2], 0),
    ("majority", [2, 0], 0),
    ("majority", [2, 1, 0], 0),  # three-way tie
    ("majority", [2, 2, 1, 1, 0], 1),  # 2 and 1 tie at two votes each; 0 has one
    # mean: the arithmetic mean rounded half up (never half to even: 2.5 gives 3, as 0.5 gives 1)
    ("mean", [0, 1], 1),  # 0.5
    ("mean", [1, 2], 2),  # 1.5
    ("mean", [2, 3], 3),  # 2.5 (Python's round() would give 2)
    ("mean", [0, 0, 1], 0),  # 0.33
    ("mean", [0, 1, 1], 1),  # 0.67
    ("mean", [0, 2], 1),  # a grade neither annotator gave
    ("mean", [1, 1, 1, 2], 1),  # 1.25
    ("mean", [0, 1, 1, 1, 2, 2, 2, 3], 2),  # 12 / 8 = 1.5
    # max and min
    ("max", [0, 2, 1], 2),
    ("max", [1, 1], 1),
    ("min", [2, 0, 1], 0),
    ("min", [2, 2], 2),
]


@pytest.mark.parametrize(("policy", "grades", "expected"), ONE_PAIR)
def test_aggregate_grades_one_pair(policy, grades, expected):
    keys, labels = aggregate_grades([7] * len(grades), grades, policy=policy)
    assert keys.tolist() == [7]
    assert labels.tolist() == [expected]


def test_aggregate_grades_hand_cases_cover_every_policy():
    assert {policy for policy, _, _ in ONE_PAIR} == set(POLICIES)


# Three pairs given in no order: pair 10 has 0 2 2, pair 20 has 1 1, pair 30 has 2 0 2 0.
GROUP = [30, 10, 20, 10, 30, 10, 30, 20, 30]
GRADES = [2, 0, 1, 2, 0, 2, 2, 1, 0]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("median", [2, 1, 0]),  # 30: sorted 0 0 2 2, the lower middle grade
        ("majority", [2, 1, 0]),  # 30: 0 and 2 tie, the lower wins
        ("mean", [1, 1, 1]),  # 10: 4/3; 30: 4/4
        ("max", [2, 1, 2]),
        ("min", [0, 1, 0]),
    ],
)
def test_aggregate_grades_several_pairs_in_any_order(policy, expected):
    keys, labels = aggregate_grades(np.array(GROUP), np.array(GRADES), policy=policy)
    assert keys.tolist() == [10, 20, 30]
    assert labels.tolist() == expected


@pytest.mark.parametrize("policy", POLICIES)
def test_aggregate_grades_single_judgment_is_the_label(policy):
    keys, labels = aggregate_grades([4], [3], policy=policy)
    assert keys.tolist() == [4] and labels.tolist() == [3]


@pytest.mark.parametrize("policy", POLICIES)
def test_aggregate_grades_no_judgments_gives_no_labels(policy):
    keys, labels = aggregate_grades([], [], policy=policy)
    assert keys.shape == (0,) and labels.shape == (0,)
    assert keys.dtype == np.int64 and labels.dtype == np.int64


@pytest.mark.parametrize("policy", POLICIES)
def test_aggregate_grades_pair_without_confident_grades_gets_no_key(policy):
    # pair 2's only judgment was unsure, so the caller passes nothing for it: it gets no label at all
    keys, labels = aggregate_grades([3, 1, 3], [1, 2, 1], policy=policy)
    assert keys.tolist() == [1, 3]
    assert labels.tolist() == [2, 1]


def test_aggregate_grades_refuses_an_unknown_policy():
    with pytest.raises(ValueError, match=r"unknown aggregation policy 'vote'; expected one of median, majority"):
        aggregate_grades([1], [1], policy="vote")


@pytest.mark.parametrize(
    ("group", "grades"),
    [([1, 2], [1]), ([[1, 2]], [[1, 2]])],
    ids=["different-lengths", "two-dimensional"],
)
def test_aggregate_grades_refuses_misshapen_arrays(group, grades):
    with pytest.raises(ValueError, match="group and grades must be 1-d arrays of the same length"):
        aggregate_grades(group, grades)


def test_aggregate_grades_defaults_to_median():
    assert aggregate_grades([1, 1], [2, 0])[1].tolist() == [0]
