"""Leave-one-run-out pool bias against trec_eval on qrels without each system's unique pool pairs."""

import numpy as np
import pytest
import pytrec_eval

import metrics
from metrics import PAD, UNJUDGED
from tests.data import TOLERANCE, doc_id_array, random_campaign, ranked, trec_f1

U = UNJUDGED


def unique_pairs(runs, qids, pool_depth):
    """{system: {(qid, docid)}} of the pairs only that system has in its top pool_depth, the slow way."""
    contributors: dict[tuple[str, str], set[int]] = {}
    for s, run in enumerate(runs):
        for qid in qids:
            for d in ranked(run, qid)[:pool_depth]:
                contributors.setdefault((qid, d), set()).add(s)
    return {s: {pair for pair, who in contributors.items() if who == {s}} for s in range(len(runs))}


@pytest.mark.parametrize("gain", ["linear", "exponential"])
@pytest.mark.parametrize(("pool_depth", "k", "threshold"), [(5, 10, 1), (10, 5, 2), (1, 3, 1), (40, 20, 1)])
@pytest.mark.parametrize(("seed", "max_grade"), [(0, 2), (2, 3)])
def test_pool_bias_equals_trec_eval_without_unique_pairs(seed, max_grade, pool_depth, k, threshold, gain):
    qrels, runs = random_campaign(seed, max_grade=max_grade, n_queries=25)
    labels, qrels_array, qids = metrics.labels_from_dicts(qrels, runs)
    docs = doc_id_array(runs, qids, labels.shape[2])
    result = metrics.pool_bias(labels, qrels_array, docs, pool_depth=pool_depth, k=k, threshold=threshold, gain=gain)
    assert list(result.measures) == list(metrics.evaluate(labels, qrels_array, k=k))
    unique = unique_pairs(runs, qids, pool_depth)
    exp = gain == "exponential"
    measures = {f"P.{k}", f"recall.{k}", f"success.{k}", f"ndcg_cut.{k}", "recip_rank", "map", "bpref"}
    changed = 0
    for s, run in enumerate(runs):
        left = {
            qid: {d: label for d, label in docs_.items() if (qid, d) not in unique[s]} for qid, docs_ in qrels.items()
        }
        judged = left
        if exp:
            left = {qid: {d: 2**label - 1 for d, label in docs_.items()} for qid, docs_ in left.items()}
        theirs = pytrec_eval.RelevanceEvaluator(
            {q: d for q, d in left.items() if d}, measures, relevance_level=threshold
        ).evaluate(run)
        for i, qid in enumerate(qids):
            top = ranked(run, qid)
            assert result.unique[s, i] == sum((qid, d) in unique[s] for d in top[:pool_depth])
            assert result.unique_at_k[s, i] == sum((qid, d) in unique[s] for d in top[:k])
            if qid not in theirs:  # the system skipped the query, or it lost every label: 0 (-c)
                assert all(values[s, i] == 0.0 for values in result.measures.values()), (s, qid)
                continue
            t = theirs[qid]
            expected = {
                f"P@{k}": t[f"P_{k}"],
                f"R@{k}": t[f"recall_{k}"],
                f"F1@{k}": trec_f1(t[f"P_{k}"], t[f"recall_{k}"]),
                f"Hit@{k}": t[f"success_{k}"],
                "MRR": t["recip_rank"],
                "MAP": t["map"],
                f"nDCG@{k}": t[f"ndcg_cut_{k}"],
                "bpref": t["bpref"],
                f"Judged@{k}": sum(d in judged[qid] for d in top[:k]) / min(k, len(top)),
            }
            for name, value in expected.items():
                assert result.measures[name][s, i] == pytest.approx(value, abs=TOLERANCE), (s, qid, name)
        today = metrics.evaluate(labels, qrels_array, k=k, threshold=threshold, gain=gain)
        changed += int((today["MAP"][s] != result.measures["MAP"][s]).sum())
    assert changed > 0  # unique pairs really moved scores


def test_pool_bias_by_hand():
    # Query 0: A = [d1 rel, d2 non-rel, d3 rel], B = [d2, d4 rel, d1]; pool depth 2.
    # A alone contributed d1 (B ranks it 3rd, below the pool), B alone contributed d4.
    labels = np.array([[[1, 0, 1]], [[0, 1, 1]]])
    docs = np.array([[[1, 2, 3]], [[2, 4, 1]]])
    qrels = np.array([[1, 0, 1, 1]])  # d1, d2, d3, d4
    np.testing.assert_array_equal(
        metrics.unique_contributions(docs, 2), [[[True, False, False]], [[False, True, False]]]
    )
    result = metrics.pool_bias(labels, qrels, docs, pool_depth=2, k=2)
    # A without d1: [U, 0, 1], num_rel 2: P@2 = 0, R@2 = 0, AP = (1/3) / 2.
    assert result.measures["P@2"][0, 0] == 0.0
    assert result.measures["MAP"][0, 0] == pytest.approx(1 / 6)
    assert result.measures["Judged@2"][0, 0] == 0.5
    # B without d4: [0, U, 1], num_rel 2: AP = (1/3) / 2; d1 at rank 3 was A's, still judged for B.
    assert result.measures["MAP"][1, 0] == pytest.approx(1 / 6)
    np.testing.assert_array_equal(result.unique_at_k, [[1], [1]])
    np.testing.assert_array_equal(result.unique, [[1], [1]])


def test_pool_bias_changes_nothing_when_every_pair_is_shared():
    labels = np.array([[[1, 0, U], [2, PAD, PAD]], [[0, 1, U], [2, PAD, PAD]]])
    docs = np.array([[[1, 2, 3], [5, -1, -1]], [[2, 1, 4], [5, -1, -1]]])
    qrels = np.array([[1, 0, U], [2, 1, 0]])
    result = metrics.pool_bias(labels, qrels, docs, pool_depth=2, k=3)
    today = metrics.evaluate(labels, qrels, k=3)
    for name, values in today.items():
        np.testing.assert_allclose(result.measures[name], values, rtol=0, atol=1e-12, err_msg=name)
    assert not result.unique.any()


def test_pool_bias_judged_only_condenses_the_ablated_rankings():
    labels = np.array([[[1, 0, 1]], [[0, 1, 1]]])
    docs = np.array([[[1, 2, 3]], [[2, 4, 1]]])
    qrels = np.array([[1, 0, 1, 1]])
    result = metrics.pool_bias(labels, qrels, docs, pool_depth=2, k=2, judged_only=True)
    # A condensed without d1: [0, 1]: P@2 = 1/2, AP = (1/2) / 2; Judged@2 stays on the ablated run.
    assert result.measures["P@2"][0, 0] == 0.5
    assert result.measures["MAP"][0, 0] == pytest.approx(0.25)
    assert result.measures["Judged@2"][0, 0] == 0.5


def test_pool_bias_rejects_bad_arguments():
    labels, docs, qrels = np.array([[[1, PAD]]]), np.array([[[1, -1]]]), np.array([[1]])
    with pytest.raises(ValueError, match="pool_depth must be an integer >= 1, got 0"):
        metrics.pool_bias(labels, qrels, docs, pool_depth=0)
    with pytest.raises(ValueError, match="doc_ids must be -1 exactly where labels is PAD"):
        metrics.pool_bias(labels, qrels, np.array([[[1, 2]]]), pool_depth=1)
    with pytest.raises(ValueError, match="doc_ids .* must be a 3-D array"):
        metrics.unique_contributions(np.array([1, 2]), 1)
