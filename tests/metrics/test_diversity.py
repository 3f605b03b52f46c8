"""Intra-list diversity and coverage on hand-checked rankings."""

import itertools

import numpy as np
import pytest

import metrics
from metrics import NO_VALUE, PAD

N = NO_VALUE


def test_ild_and_coverage_by_hand():
    values = np.array(
        [
            [
                [0, 1, 0, 2, 5],  # top 4: pairs 6, equal (0, 0) 1 -> 5/6; values {0, 1, 2}
                [3, 3, 3, PAD, PAD],  # all alike -> 0; one value
                [N, 4, N, 7, 4],  # known 4, 7 in the top 4 (NO_VALUE left out) -> 1 pair, differs
                [N, N, 1, PAD, PAD],  # a single known value: no pair -> 0
            ]
        ]
    )
    np.testing.assert_allclose(metrics.intra_list_diversity(values, k=4), [[5 / 6, 0.0, 1.0, 0.0]])
    np.testing.assert_array_equal(metrics.coverage(values, k=4), [[3, 1, 2, 1]])
    # k = 5 adds the fifth document: 10 pairs, 1 equal -> 9/10; 4 then repeats: pairs 3, equal 1.
    np.testing.assert_allclose(metrics.intra_list_diversity(values, k=5), [[9 / 10, 0.0, 2 / 3, 0.0]])
    np.testing.assert_array_equal(metrics.coverage(values, k=5), [[4, 1, 2, 1]])


@pytest.mark.parametrize("k", [1, 3, 8, 12])
def test_ild_matches_counting_every_pair(k):
    rng = np.random.default_rng(k)
    values = rng.integers(-1, 4, size=(3, 7, 10))
    values[0, 0, 6:] = PAD
    ild = metrics.intra_list_diversity(values, k=k)
    cov = metrics.coverage(values, k=k)
    for s, q in itertools.product(range(3), range(7)):
        known = [v for v in values[s, q, :k] if v >= 0]
        pairs = list(itertools.combinations(known, 2))
        expected = sum(a != b for a, b in pairs) / len(pairs) if pairs else 0.0
        assert ild[s, q] == pytest.approx(expected)
        assert cov[s, q] == len(set(known))


def test_diversity_rejects_bad_arguments():
    with pytest.raises(ValueError, match="values .* must be a 3-D array"):
        metrics.intra_list_diversity(np.zeros((2, 2), dtype=int), k=2)
    with pytest.raises(ValueError, match="values .* contains values below -2"):
        metrics.coverage(np.full((1, 1, 2), -3), k=2)
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        metrics.coverage(np.zeros((1, 1, 2), dtype=int), k=0)


@pytest.mark.parametrize("measure", [metrics.intra_list_diversity, metrics.coverage])
def test_diversity_cutoff_is_keyword_only(measure):
    with pytest.raises(TypeError):
        measure(np.zeros((1, 1, 2), dtype=np.int64), 2)
