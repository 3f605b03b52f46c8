"""Tests of metrics.measures: measure names written and read back."""

import re
from pathlib import Path

import pytest

import metrics
from metrics import measures
from metrics.measures import BASES, Measure, is_judged, measure_names


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


def test_measures_registry_gives_every_list_of_measures_in_its_order():
    """The orders other tools rely on (SPEC.md): evaluate's, the leaderboard's columns, the bounds', the planner's."""
    assert measures.BASES == ("P", "R", "F1", "Hit", "MRR", "MAP", "nDCG", "Judged", "bpref")
    assert measures.LEADERBOARD == ("P", "R", "F1", "Hit", "MRR", "MAP", "nDCG", "bpref", "Judged")
    assert measures.BOUNDED == ("P", "R", "F1", "Hit", "MRR", "MAP", "nDCG", "bpref")
    assert measures.AT_K == ("P", "R", "F1", "Hit", "nDCG")
    assert measures.WHOLE_RUN_ORDER == ("MRR", "MAP", "bpref")
    assert {"MRR", "MAP", "bpref"} == measures.WHOLE_RUN
    assert all((m.low, m.high) == (0.0, 1.0) for m in measures.MEASURES)
    assert [m.name for m in measures.MEASURES if not m.bounds] == [measures.JUDGED]


def test_measures_is_judged_reads_the_base_of_a_name():
    assert is_judged("Judged@10") and is_judged("Judged")
    assert not is_judged("nDCG@10") and not is_judged("bpref")


def test_measures_docs_name_the_registry_measures_in_its_orders():
    """docs/scoring.md lists the leaderboard's measures and the planner's in the registry's orders."""
    text = " ".join((Path(__file__).parents[2] / "docs" / "scoring.md").read_text().split())
    board = [base if base in measures.WHOLE_RUN else f"{base}@k" for base in measures.LEADERBOARD]
    sentence = f"The leaderboard recomputes {', '.join(board[:-1])} and {board[-1]} per system"
    assert sentence in re.sub(r" \([^)]*\)", "", text)
    planner = ", ".join(f"`{base}@k`" for base in measures.AT_K)
    assert f"{planner} with k from 1 to 1000, {', '.join(f'`{b}`' for b in measures.WHOLE_RUN_ORDER)};" in text
