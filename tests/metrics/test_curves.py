"""Measure-vs-k curves: every column equals the single-cutoff measure, and trec_eval at a few k."""

import numpy as np
import pytest
import pytrec_eval

import metrics
from metrics import PAD, UNJUDGED
from tests.data import TOLERANCE, random_campaign, trec_f1

U = UNJUDGED
K_MAX = 70  # deeper than the deepest run (59): the curves go on flat past it


@pytest.mark.parametrize("gain", ["linear", "exponential"])
@pytest.mark.parametrize(("seed", "max_grade", "threshold"), [(0, 2, 1), (1, 3, 2)])
def test_curves_equal_single_cutoff_measures_at_every_k(seed, max_grade, threshold, gain):
    qrels, runs = random_campaign(seed, max_grade=max_grade, n_queries=25)
    labels, qrels_array, _ = metrics.labels_from_dicts(qrels, runs)
    assert labels.shape[2] < K_MAX
    per_query = metrics.curves(labels, qrels_array, K_MAX, threshold=threshold, gain=gain, average=False)
    means = metrics.curves(labels, qrels_array, K_MAX, threshold=threshold, gain=gain)
    for k in range(1, K_MAX + 1):
        single = {
            "P": metrics.precision(labels, k=k, threshold=threshold),
            "R": metrics.recall(labels, qrels_array, k=k, threshold=threshold),
            "F1": metrics.f1(labels, qrels_array, k=k, threshold=threshold),
            "Hit": metrics.hit(labels, k=k, threshold=threshold),
            "nDCG": metrics.ndcg(labels, qrels_array, k=k, gain=gain),
        }
        for name, values in single.items():
            np.testing.assert_allclose(per_query[name][..., k - 1], values, rtol=0, atol=1e-12, err_msg=(name, k))
            np.testing.assert_allclose(means[name][:, k - 1], values.mean(axis=1), rtol=0, atol=1e-12)


@pytest.mark.parametrize("k", [1, 5, 20, 50])
def test_curves_match_trec_eval(k):
    qrels, runs = random_campaign(3, max_grade=3, n_queries=30)
    labels, qrels_array, qids = metrics.labels_from_dicts(qrels, runs)
    ours = metrics.curves(labels, qrels_array, 50, average=False)
    measures = {f"P.{k}", f"recall.{k}", f"success.{k}", f"ndcg_cut.{k}"}
    checked = 0
    for s, run in enumerate(runs):
        theirs = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
        for i, qid in enumerate(qids):
            if qid not in run:
                assert all(values[s, i, k - 1] == 0.0 for values in ours.values())
                continue
            t = theirs[qid]
            expected = {
                "P": t[f"P_{k}"],
                "R": t[f"recall_{k}"],
                "F1": trec_f1(t[f"P_{k}"], t[f"recall_{k}"]),
                "Hit": t[f"success_{k}"],
                "nDCG": t[f"ndcg_cut_{k}"],
            }
            for name, value in expected.items():
                assert ours[name][s, i, k - 1] == pytest.approx(value, abs=TOLERANCE), (s, qid, name)
            checked += 1
    assert checked > 60


def test_curves_by_hand():
    labels = np.array([[[2, U, 0, 1, PAD]]])
    qrels = np.array([[2, 1, 0, 1]])  # num_rel 3
    c = metrics.curves(labels, qrels, 6, measures=["P", "R", "Hit", "F1"])
    assert list(c) == ["P", "R", "Hit", "F1"]
    np.testing.assert_allclose(c["P"][0], [1, 1 / 2, 1 / 3, 2 / 4, 2 / 5, 2 / 6])
    np.testing.assert_allclose(c["R"][0], [1 / 3, 1 / 3, 1 / 3, 2 / 3, 2 / 3, 2 / 3])
    np.testing.assert_allclose(c["Hit"][0], [1, 1, 1, 1, 1, 1])
    np.testing.assert_allclose(c["F1"][0], [2 / 4, 2 / 5, 2 / 6, 4 / 7, 4 / 8, 4 / 9])


def test_curves_without_queries_are_nan_means():
    c = metrics.curves(np.zeros((2, 0, 3), dtype=int), np.zeros((0, 1), dtype=int), 4)
    assert c["P"].shape == (2, 4) and np.isnan(c["P"]).all()


def test_curves_reject_bad_arguments():
    labels, qrels = np.array([[[1]]]), np.array([[1]])
    with pytest.raises(ValueError, match="k must be an integer >= 1, got 0"):
        metrics.curves(labels, qrels, 0)
    with pytest.raises(ValueError, match=r"unknown curve measure\(s\) \['MAP'\]"):
        metrics.curves(labels, qrels, 3, measures=["P", "MAP"])
    with pytest.raises(ValueError, match="gain must be one of"):
        metrics.curves(labels, qrels, 3, gain="log")
