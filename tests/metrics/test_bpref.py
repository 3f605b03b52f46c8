"""bpref against trec_eval (pytrec_eval) on random runs with ties and partial judgments, and by hand."""

import numpy as np
import pytest
import pytrec_eval

import metrics
from metrics import PAD, UNJUDGED
from tests.data import TOLERANCE, arrays_via_trec_order, random_campaign

U = UNJUDGED


def trec_bpref(qrels, run, threshold):
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"bpref"}, relevance_level=threshold)
    return evaluator.evaluate(run)


@pytest.mark.parametrize("threshold", [1, 2])
@pytest.mark.parametrize(
    ("seed", "max_grade", "scores"),
    [(0, 2, "ties"), (1, 3, "ties"), (2, 2, "distinct"), (4, 2, "float32-ties"), (9, 1, "ties")],
)
def test_bpref_matches_trec_eval_every_query(seed, max_grade, scores, threshold):
    qrels, runs = random_campaign(seed, max_grade=max_grade, scores=scores, n_queries=40)
    qids = sorted(qrels)
    labels = arrays_via_trec_order(qrels, runs, qids)
    _, qrels_array, _ = metrics.labels_from_dicts(qrels, runs)
    ours = metrics.bpref(labels, qrels_array, threshold=threshold)
    via_evaluate = metrics.evaluate(labels, qrels_array, k=5, threshold=threshold)["bpref"]
    np.testing.assert_array_equal(ours, via_evaluate)
    checked = nonzero = 0
    for s, run in enumerate(runs):
        theirs = trec_bpref(qrels, run, threshold)
        for i, qid in enumerate(qids):
            if qid in run:
                assert ours[s, i] == pytest.approx(theirs[qid]["bpref"], abs=TOLERANCE), (s, qid)
                checked += 1
                nonzero += 0 < theirs[qid]["bpref"] < 1
            else:
                assert ours[s, i] == 0.0  # trec_eval -c
    assert checked > 80  # the comparison really ran over many queries
    # ... and over bpref values other than the trivial 0 and 1 (none is relevant above grade 1)
    assert nonzero > 20 or max_grade < threshold


def test_bpref_judged_non_relevant_differs_from_unjudged():
    # The same run with the second document judged non-relevant, then unjudged.
    qrels_judged = {"q": {"a": 0, "b": 1, "c": 0}}
    qrels_unjudged = {"q": {"b": 1, "c": 0}}
    run = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    for qrels, expected in [(qrels_judged, 0.0), (qrels_unjudged, 1.0)]:
        labels, qrels_array, _ = metrics.labels_from_dicts(qrels, [run])
        assert trec_bpref(qrels, run, 1)["q"]["bpref"] == pytest.approx(expected)
        assert metrics.bpref(labels, qrels_array)[0, 0] == pytest.approx(expected)


def test_bpref_by_hand():
    # R = 2, N = 3: the first relevant document has 1 non-relevant above it (1 - 1/2), the second 2
    # (1 - 2/2); unjudged documents in between change nothing.
    labels = np.array([[[0, U, 1, U, 0, 2, 0, PAD]]])
    qrels = np.array([[0, 0, 0, 1, 2, U]])
    assert metrics.bpref(labels, qrels)[0, 0] == pytest.approx((0.5 + 0.0) / 2)
    # threshold 2: only the grade-2 document is relevant (R = 1), four non-relevant, three above it.
    assert metrics.bpref(labels, qrels, threshold=2)[0, 0] == pytest.approx(1 - 1 / 1)


def test_bpref_caps_non_relevant_count_at_r():
    # R = 1, N = 5: one non-relevant above caps the fraction at min(1, R) / min(N, R) = 1.
    labels = np.array([[[0, 1]]])
    qrels = np.array([[1, 0, 0, 0, 0, 0]])
    assert metrics.bpref(labels, qrels)[0, 0] == 0.0
    # Relevant documents ranked first score 1 each whatever follows; unretrieved ones score 0.
    labels = np.array([[[1, 0, 0, PAD]]])
    qrels = np.array([[1, 1, 0, 0]])
    assert metrics.bpref(labels, qrels)[0, 0] == pytest.approx(0.5)


def test_bpref_unchanged_by_condensing():
    qrels, runs = random_campaign(3, n_queries=20)
    labels, qrels_array, _ = metrics.labels_from_dicts(qrels, runs)
    plain = metrics.evaluate(labels, qrels_array, k=5)["bpref"]
    condensed = metrics.evaluate(labels, qrels_array, k=5, judged_only=True)["bpref"]
    np.testing.assert_allclose(condensed, plain, rtol=0, atol=1e-12)


def test_bpref_zero_without_relevant_documents():
    labels = np.array([[[0, U, 0], [PAD, PAD, PAD]]])
    qrels = np.array([[0, 0], [1, U]])
    np.testing.assert_array_equal(metrics.bpref(labels, qrels), [[0.0, 0.0]])


@pytest.mark.parametrize("threshold", [-1, 1.5j, "1", True])
def test_bpref_rejects_bad_threshold(threshold):
    with pytest.raises(ValueError, match="threshold"):
        metrics.bpref(np.zeros((1, 1, 1), dtype=int), np.zeros((1, 1), dtype=int), threshold=threshold)


def test_bpref_rejects_mismatched_qrels():
    with pytest.raises(ValueError, match="qrels has 2 queries but labels has 1"):
        metrics.bpref(np.zeros((1, 1, 3), dtype=int), np.zeros((2, 1), dtype=int))
