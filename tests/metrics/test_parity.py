"""metrics against trec_eval itself (pytrec_eval) on random qrels and runs: every measure, every query."""

import numpy as np
import pytest
import pytrec_eval

import metrics
from metrics import PAD, UNJUDGED
from tests.data import TOLERANCE, arrays_via_trec_order, random_campaign, trec_f1

CUTOFFS = (1, 3, 5, 10, 20, 50)


def pytrec_eval_per_query(qrels, run, k, threshold, judged_only, exponential=False):
    measures = {f"P.{k}", f"recall.{k}", f"success.{k}", "recip_rank", "map", f"ndcg_cut.{k}"}
    if exponential:
        # trec_eval's gain is the qrels label: hand it 2^l - 1 for Burges' gain.
        qrels = {qid: {d: 2**label - 1 for d, label in docs.items()} for qid, docs in qrels.items()}
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, measures, relevance_level=threshold, judged_docs_only_flag=judged_only
    )
    return evaluator.evaluate(run)


@pytest.mark.parametrize("scores", ["ties", "distinct", "float32-ties"])
@pytest.mark.parametrize("seed", [0, 1])
def test_labels_from_dicts_equals_trec_order_query_by_query(seed, scores):
    qrels, runs = random_campaign(seed, scores=scores)
    labels, qrels_array, qids = metrics.labels_from_dicts(qrels, runs)
    assert qids == sorted(qrels)
    np.testing.assert_array_equal(labels, arrays_via_trec_order(qrels, runs, qids))
    for i, qid in enumerate(qids):
        row = qrels_array[i]
        assert sorted(row[row != UNJUDGED].tolist()) == sorted(qrels[qid].values())


@pytest.mark.parametrize("judged_only", [False, True], ids=["all", "judged-only"])
@pytest.mark.parametrize("threshold", [1, 2])
@pytest.mark.parametrize(
    ("seed", "max_grade", "scores"),
    [(0, 2, "ties"), (1, 3, "ties"), (2, 2, "distinct"), (3, 3, "distinct"), (4, 2, "float32-ties")],
)
def test_evaluate_matches_trec_eval_every_measure_every_query(seed, max_grade, scores, threshold, judged_only):
    qrels, runs = random_campaign(seed, max_grade=max_grade, scores=scores)
    qids = sorted(qrels)
    labels = arrays_via_trec_order(qrels, runs, qids)
    _, qrels_array, _ = metrics.labels_from_dicts(qrels, runs)

    checked = 0
    for k in CUTOFFS:
        ours = metrics.evaluate(labels, qrels_array, k=k, threshold=threshold, judged_only=judged_only)
        exp_ndcg = metrics.evaluate(labels, qrels_array, k=k, gain="exponential", judged_only=judged_only)
        for s, run in enumerate(runs):
            theirs = pytrec_eval_per_query(qrels, run, k, threshold, judged_only)
            theirs_exp = pytrec_eval_per_query(qrels, run, k, threshold, judged_only, exponential=True)
            for i, qid in enumerate(qids):
                if qid not in run:
                    continue  # trec_eval skips it; test_evaluate_missing_query_scores_zero covers -c
                t = theirs[qid]
                expected = {
                    f"P@{k}": t[f"P_{k}"],
                    f"R@{k}": t[f"recall_{k}"],
                    f"F1@{k}": trec_f1(t[f"P_{k}"], t[f"recall_{k}"]),
                    f"Hit@{k}": t[f"success_{k}"],
                    "MRR": t["recip_rank"],
                    "MAP": t["map"],
                    f"nDCG@{k}": t[f"ndcg_cut_{k}"],
                }
                for name, value in expected.items():
                    assert ours[name][s, i] == pytest.approx(value, abs=TOLERANCE), (k, s, qid, name)
                expected_exp = theirs_exp[qid][f"ndcg_cut_{k}"]
                assert exp_ndcg[f"nDCG@{k}"][s, i] == pytest.approx(expected_exp, abs=TOLERANCE), (k, s, qid)
                checked += 1
    assert checked > 300  # the comparison really ran over many queries


def test_evaluate_matches_trec_eval_with_labels_built_by_trec_ranks():
    qrels, runs = random_campaign(7, max_grade=3, scores="ties", n_queries=60)
    labels, qrels_array, qids = metrics.labels_from_dicts(qrels, runs)
    ours = metrics.evaluate(labels, qrels_array, k=10)
    for s, run in enumerate(runs):
        theirs = pytrec_eval_per_query(qrels, run, 10, 1, False)
        for i, qid in enumerate(qids):
            if qid in run:
                assert ours["MAP"][s, i] == pytest.approx(theirs[qid]["map"], abs=TOLERANCE)
                assert ours["nDCG@10"][s, i] == pytest.approx(theirs[qid]["ndcg_cut_10"], abs=TOLERANCE)


def test_evaluate_missing_query_scores_zero_like_trec_eval_c():
    qrels, runs = random_campaign(5)
    labels, qrels_array, qids = metrics.labels_from_dicts(qrels, runs)
    ours = metrics.evaluate(labels, qrels_array, k=10)
    missing = [(s, i) for s, run in enumerate(runs) for i, qid in enumerate(qids) if qid not in run]
    assert missing
    for s, i in missing:
        assert (labels[s, i] == PAD).all()
        assert all(values[s, i] == 0.0 for values in ours.values())


def test_mean_matches_trec_eval_c_average_over_all_queries():
    qrels, runs = random_campaign(6, max_grade=3)
    labels, qrels_array, qids = metrics.labels_from_dicts(qrels, runs)
    means = metrics.mean(metrics.evaluate(labels, qrels_array, k=5))
    for s, run in enumerate(runs):
        theirs = pytrec_eval_per_query(qrels, run, 5, 1, False)
        for ours_name, their_name in [("MAP", "map"), ("nDCG@5", "ndcg_cut_5"), ("P@5", "P_5")]:
            # trec_eval -c: a query the run lacks counts as 0 in the average over all qrels queries.
            expected = sum(theirs[q][their_name] for q in qids if q in theirs) / len(qids)
            assert means[ours_name][s] == pytest.approx(expected, abs=TOLERANCE)


def test_judged_matches_a_reference_from_the_sorted_run():
    qrels, runs = random_campaign(8, scores="float32-ties")
    labels, qrels_array, qids = metrics.labels_from_dicts(qrels, runs)
    for k in CUTOFFS:
        ours = metrics.judged(labels, k=k)
        for s, run in enumerate(runs):
            for i, qid in enumerate(qids):
                ranked = sorted(
                    run.get(qid, {}).items(),
                    key=lambda item: (np.float32(item[1]), item[0].encode("utf-8")),
                    reverse=True,
                )[:k]
                expected = sum(d in qrels[qid] for d, _ in ranked) / len(ranked) if ranked else 0.0
                assert ours[s, i] == pytest.approx(expected, abs=TOLERANCE)
