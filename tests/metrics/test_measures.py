"""Tests of metrics.measures: measure names written and read back."""

import pytest

import metrics
from metrics.measures import BASES, Measure, measure_names


@pytest.mark.parametrize(
    ("text", "measure"),
    [
        ("nDCG@10", Measure("nDCG", 10)),
        ("P@5", Measure("P", 5)),
        ("MRR", Measure("MRR")),
        ("Judged@1", Measure("Judged", 1)),
    ],
)
def test_measure_parse_and_str_round_trip(text, measure):
    assert Measure.parse(text) == measure
    assert str(measure) == text


def test_measure_at_sets_the_cutoff_of_at_k_measures_only():
    assert str(Measure("nDCG").at(20)) == "nDCG@20"
    assert str(Measure("MAP").at(20)) == "MAP"
    assert Measure.parse(" R@3 ").at(3) == Measure("R", 3)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("NDCG@10", "unknown measure 'NDCG'"),
        ("", "unknown measure ''"),
        ("P@", "cutoff in 'P@' must be a whole number"),
        ("P@x", "cutoff in 'P@x' must be a whole number"),
        ("P@-1", "cutoff in 'P@-1' must be a whole number"),
        ("P@0", "cutoff of P must be a whole number >= 1"),
        ("MRR@10", "MRR has no cutoff"),
    ],
)
def test_measure_parse_refuses_bad_names(text, match):
    with pytest.raises(ValueError, match=match):
        Measure.parse(text)


@pytest.mark.parametrize("cutoff", [0, -2, 1.5, True, "10"])
def test_measure_refuses_bad_cutoffs(cutoff):
    with pytest.raises(ValueError, match="cutoff"):
        Measure("P", cutoff)


def test_measure_names_are_the_keys_of_evaluate_in_order():
    labels = [[[2, 0, 1]]]
    qrels = [[2, 1, 0]]
    assert list(metrics.evaluate(labels, qrels, k=3)) == measure_names(3)
    assert measure_names(10) == ["P@10", "R@10", "F1@10", "Hit@10", "MRR", "MAP", "nDCG@10", "Judged@10", "bpref"]
    assert len(measure_names(10)) == len(BASES)
