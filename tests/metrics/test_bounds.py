"""Score bounds against trec_eval on completed qrels, settled comparisons, open pairs and their priority."""

import numpy as np
import pytest
import pytrec_eval

import metrics
from metrics import PAD, UNJUDGED
from tests.data import TOLERANCE, doc_id_array, random_campaign, ranked

U = UNJUDGED


def completed(qrels, run, grade, cutoff):
    """The qrels with every unjudged document among the run's top `cutoff` (None: all) at `grade`."""
    out = {qid: dict(docs) for qid, docs in qrels.items()}
    for qid in out:
        for d in ranked(run, qid)[:cutoff]:
            out[qid].setdefault(d, grade)
    return out


def trec(qrels, run, measures, threshold, exponential=False):
    result = pytrec_eval.RelevanceEvaluator(qrels, measures, relevance_level=threshold).evaluate(run)
    ndcg = {m for m in measures if m.startswith("ndcg")}
    if exponential and ndcg:
        # trec_eval's gain is the label: nDCG alone is scored on 2^l - 1 labels (which would move
        # the threshold of the binary measures).
        exp_qrels = {qid: {d: 2**label - 1 for d, label in docs.items()} for qid, docs in qrels.items()}
        exp = pytrec_eval.RelevanceEvaluator(exp_qrels, ndcg, relevance_level=threshold).evaluate(run)
        for qid, values in exp.items():
            result[qid].update(values)
    return result


@pytest.mark.parametrize("gain", ["linear", "exponential"])
@pytest.mark.parametrize(("k", "threshold"), [(1, 1), (5, 1), (10, 2), (20, 1), (5, 4)])
@pytest.mark.parametrize(("seed", "max_grade"), [(0, 2), (1, 3)])
def test_score_bounds_equal_trec_eval_on_completed_qrels(seed, max_grade, k, threshold, gain):
    qrels, runs = random_campaign(seed, max_grade=max_grade, n_queries=25)
    labels, qrels_array, qids = metrics.labels_from_dicts(qrels, runs)
    bounds = metrics.score_bounds(labels, qrels_array, k=k, top_grade=max_grade, threshold=threshold, gain=gain)
    assert list(bounds) == [name for name in metrics.evaluate(labels, qrels_array, k=k) if name != f"Judged@{k}"]
    at_k = {f"P@{k}": f"P_{k}", f"R@{k}": f"recall_{k}", f"Hit@{k}": f"success_{k}", f"nDCG@{k}": f"ndcg_cut_{k}"}
    whole = {"MRR": "recip_rank", "MAP": "map", "bpref": "bpref"}
    measures = {f"P.{k}", f"recall.{k}", f"success.{k}", f"ndcg_cut.{k}", "recip_rank", "map", "bpref"}
    exp = gain == "exponential"
    checked = moved = 0
    for s, run in enumerate(runs):
        today = trec(qrels, run, measures, threshold, exp)
        top_k = trec(completed(qrels, run, max_grade, k), run, measures, threshold, exp)
        top_all = trec(completed(qrels, run, max_grade, None), run, measures, threshold, exp)
        zero_all = trec(completed(qrels, run, 0, None), run, {"bpref"}, threshold, exp)
        for i, qid in enumerate(qids):
            if qid not in run:
                for low, high in bounds.values():
                    assert low[s, i] == high[s, i] == 0.0
                continue
            expected = {ours: (today[qid][t], top_k[qid][t]) for ours, t in at_k.items()}
            expected |= {ours: (today[qid][t], top_all[qid][t]) for ours, t in whole.items()}
            p, r = top_k[qid][f"P_{k}"], top_k[qid][f"recall_{k}"]
            expected[f"F1@{k}"] = (bounds[f"F1@{k}"][0][s, i], 2 * p * r / (p + r) if p + r else 0.0)
            for name, (now, best) in expected.items():
                values = [now, best] + ([zero_all[qid]["bpref"]] if name == "bpref" else [])
                low, high = bounds[name]
                assert low[s, i] == pytest.approx(min(values), abs=TOLERANCE), (s, qid, name)
                assert high[s, i] == pytest.approx(max(values), abs=TOLERANCE), (s, qid, name)
                moved += best > now + 1e-9
            checked += 1
    assert checked > 50 and moved > 20  # and the completions really moved scores


def test_score_bounds_completion_can_lower_ap_and_ndcg():
    """Why the interval is a hull: a relevant document found below the only relevant one lowers AP and nDCG.

    One query, k = 4: [rel 2, non-rel 0, non-rel 0, unjudged]; qrels {2, 0, 0}. Today AP = 1 and nDCG@4 = 1.
    The unjudged document at grade 2: AP = (1/1 + 2/4) / 2 = 0.75, nDCG@4 = (2 + 2/log2 5) / (2 + 2/log2 3).
    """
    labels = np.array([[[2, 0, 0, U]]])
    qrels = np.array([[2, 0, 0]])
    today = metrics.evaluate(labels, qrels, k=4)
    bounds = metrics.score_bounds(labels, qrels, k=4, top_grade=2)
    assert today["MAP"][0, 0] == pytest.approx(1.0) and today["nDCG@4"][0, 0] == pytest.approx(1.0)
    assert bounds["MAP"][0][0, 0] == pytest.approx(0.75) and bounds["MAP"][1][0, 0] == pytest.approx(1.0)
    completed_ndcg = (2 + 2 / np.log2(5)) / (2 + 2 / np.log2(3))
    assert bounds["nDCG@4"][0][0, 0] == pytest.approx(completed_ndcg)
    assert bounds["nDCG@4"][1][0, 0] == pytest.approx(1.0)


def test_score_bounds_lower_is_todays_score_for_every_measure_but_bpref():
    qrels, runs = random_campaign(3, n_queries=20)
    labels, qrels_array, _ = metrics.labels_from_dicts(qrels, runs)
    today = metrics.evaluate(labels, qrels_array, k=10)
    bounds = metrics.score_bounds(labels, qrels_array, k=10, top_grade=2)
    for name in ["P@10", "R@10", "F1@10", "Hit@10", "MRR"]:  # monotone: exact min and max
        np.testing.assert_array_equal(bounds[name][0], today[name], err_msg=name)
        assert (bounds[name][1] >= today[name]).all()
        assert (bounds[name][1] > today[name]).any()


def test_score_bounds_by_hand():
    # One query, k = 3: [rel 2, unjudged, non-rel 0, unjudged]; qrels {2, 0, 1 (not retrieved)}.
    labels = np.array([[[2, U, 0, U, PAD]]])
    qrels = np.array([[2, 0, 1]])
    b = metrics.score_bounds(labels, qrels, k=3, top_grade=2)
    assert b["P@3"][0][0, 0] == pytest.approx(1 / 3)
    assert b["P@3"][1][0, 0] == pytest.approx(2 / 3)
    # The unjudged document at rank 2 becomes relevant: 2 of num_rel 2 + 1.
    assert b["R@3"][1][0, 0] == pytest.approx(2 / 3)
    # Whole run: both unjudged relevant, num_rel 4: AP = (1 + 2/2 + 3/4) / 4.
    assert b["MAP"][1][0, 0] == pytest.approx((1 + 1 + 0.75) / 4)
    assert b["MAP"][0][0, 0] == pytest.approx(1 / 2)
    # nDCG@3 with the rank-2 document at grade 2: ideal is [2, 2, 1].
    ideal = 2 + 2 / np.log2(3) + 1 / 2
    assert b["nDCG@3"][1][0, 0] == pytest.approx((2 + 2 / np.log2(3)) / ideal)
    # bpref: [rel, unjudged, rel] with R = 2, N = 1 is 1 today; judging the middle document
    # non-relevant (N = 2) costs the second relevant one half: (1 + 1 - 1/2) / 2 = 0.75 below today.
    labels = np.array([[[1, U, 1]]])
    qrels = np.array([[1, 1, 0]])
    b = metrics.score_bounds(labels, qrels, k=3, top_grade=2)
    assert metrics.bpref(labels, qrels)[0, 0] == 1.0
    assert b["bpref"][0][0, 0] == pytest.approx(0.75)
    assert b["bpref"][1][0, 0] == pytest.approx(1.0)


def test_score_bounds_rejects_bad_top_grade():
    labels, qrels = np.array([[[2, U]]]), np.array([[2, 1]])
    with pytest.raises(ValueError, match=r"top_grade 1 is below the largest label in qrels \(2\)"):
        metrics.score_bounds(labels, qrels, top_grade=1)
    with pytest.raises(ValueError, match="top_grade must be an integer >= 0"):
        metrics.score_bounds(labels, qrels, top_grade=-1)
    with pytest.raises(ValueError, match="top_grade must be an integer >= 0"):
        metrics.score_bounds(labels, qrels, top_grade=2.0)


# --------------------------------------------------------------------------------------------------------
# settled / open_pairs / pair_priority


def test_settled_by_hand():
    # Two queries. A: exact 0.8, 0.6; B: 0.2-0.4, 0.1-0.5; C: 0.5-0.9, 0.4-0.9.
    low = np.array([[0.8, 0.6], [0.2, 0.1], [0.5, 0.4]])
    high = np.array([[0.8, 0.6], [0.4, 0.5], [0.9, 0.9]])
    result = metrics.settled(low, high)
    # A - B lies in [0.7 - 0.45, 0.7 - 0.15] > 0: settled; A - C in [0.7 - 0.9, 0.7 - 0.45]: open;
    # B - C in [0.15 - 0.9, 0.45 - 0.45] = [-0.75, 0]: still open (a tie is possible).
    np.testing.assert_array_equal(result.order, [[0, 1, 0], [-1, 0, 0], [0, 0, 0]])
    assert result.diff_low[0, 1] == pytest.approx(0.25)
    assert result.diff_high[0, 1] == pytest.approx(0.55)
    assert result.diff_high[1, 2] == pytest.approx(0.0)
    np.testing.assert_allclose(result.diff_low, -result.diff_high.T)


def test_settled_rejects_bad_bounds():
    with pytest.raises(ValueError, match="low bound above high bound for system 1, query 0"):
        metrics.settled([[0.1], [0.5]], [[0.2], [0.4]])
    with pytest.raises(ValueError, match="one shape"):
        metrics.settled(np.zeros((2, 3)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="NaN"):
        metrics.settled([[np.nan]], [[1.0]])


def test_settled_on_score_bounds_flips_only_when_open():
    """A settled order holds under any completion: score every system with a random grading."""
    qrels, runs = random_campaign(11, n_queries=40)
    qrels = {qid: dict(list(docs.items())[: len(docs) // 2]) for qid, docs in qrels.items()}
    labels, qrels_array, qids = metrics.labels_from_dicts(qrels, runs)
    low, high = metrics.score_bounds(labels, qrels_array, k=5, top_grade=2)["P@5"]
    order = metrics.settled(low, high).order
    rng = np.random.default_rng(0)
    for _ in range(20):
        graded = np.where(labels == U, rng.integers(0, 3, labels.shape), labels)
        means = metrics.precision(graded, k=5).mean(axis=1)
        diff = means[:, None] - means[None, :]
        assert (diff[order == 1] > 0).all() and (diff[order == -1] < 0).all()


def test_open_pairs_and_priority_by_hand():
    # Query 0: A = [d1 U, d2 rel, d3 U], B = [d3 U, d4 non-rel, d5 U], C = [d2 rel, d4, d6 U].
    # Query 1: A = [d7 U], B = [d7 U], C = [d8 U].
    labels = np.array(
        [
            [[U, 1, U], [U, PAD, PAD]],
            [[U, 0, U], [U, PAD, PAD]],
            [[1, 0, U], [U, PAD, PAD]],
        ]
    )
    docs = np.array(
        [
            [[1, 2, 3], [7, -1, -1]],
            [[3, 4, 5], [7, -1, -1]],
            [[2, 4, 6], [8, -1, -1]],
        ]
    )
    order = np.array([[0, 0, 1], [0, 0, -1], [-1, 1, 0]])  # only A-B is open
    counts = metrics.open_pairs(labels, docs, order)
    # A's unjudged {(0,1), (0,3), (1,7)} and B's {(0,3), (0,5), (1,7)}: 4 distinct.
    np.testing.assert_array_equal(counts, [[0, 4, 0], [4, 0, 0], [0, 0, 0]])
    # Within the top 1: A {(0,1), (1,7)}, B {(0,3), (1,7)} -> 3.
    assert metrics.open_pairs(labels, docs, order, cutoff=1)[0, 1] == 3

    p = metrics.pair_priority(labels, docs, order)
    got = list(zip(p.query.tolist(), p.doc.tolist(), p.best_rank.tolist(), p.systems.tolist(), strict=True))
    # C is settled against both: its d6 and d8 are left out.
    # Best rank first, then the number of open systems, then query and document.
    assert got == [(0, 3, 1, 2), (1, 7, 1, 2), (0, 1, 1, 1), (0, 5, 3, 1)]


def test_open_pairs_counts_union_on_random_campaign():
    qrels, runs = random_campaign(4, n_queries=15)
    labels, qrels_array, qids = metrics.labels_from_dicts(qrels, runs)
    docs = doc_id_array(runs, qids, labels.shape[2])
    order = np.zeros((3, 3), dtype=np.int8)
    for cutoff in [3, None]:
        counts = metrics.open_pairs(labels, docs, order, cutoff=cutoff)
        sets = [
            {
                (i, d)
                for i in range(len(qids))
                for d, lab in zip(docs[s, i, :cutoff], labels[s, i, :cutoff], strict=True)
                if lab == U
            }
            for s in range(3)
        ]
        for a in range(3):
            for b in range(3):
                assert counts[a, b] == (len(sets[a] | sets[b]) if a != b else 0)


def test_open_pairs_by_query_by_hand_and_on_a_random_campaign():
    # Query 0: A = [d1 U, d2 rel, d3 U], B = [d3 U, d4 non-rel, d5 U]; query 1: A = [d7 U], B = [d7 U], C = [d8 U].
    labels = np.array([[[U, 1, U], [U, PAD, PAD]], [[U, 0, U], [U, PAD, PAD]], [[1, 0, U], [U, PAD, PAD]]])
    docs = np.array([[[1, 2, 3], [7, -1, -1]], [[3, 4, 5], [7, -1, -1]], [[2, 4, 6], [8, -1, -1]]])
    # A-B: {d1, d3, d5} and {d7}; B-C: {d3, d5, d6} and {d7, d8}; within the top 1, A-B: {d1, d3} and {d7}
    np.testing.assert_array_equal(metrics.open_pairs_by_query(labels, docs, [[0, 1], [1, 2]]), [[3, 1], [3, 2]])
    np.testing.assert_array_equal(metrics.open_pairs_by_query(labels, docs, [[0, 1]], cutoff=1), [[2, 1]])

    qrels, runs = random_campaign(4, n_queries=15)
    labels, qrels_array, qids = metrics.labels_from_dicts(qrels, runs)
    docs = doc_id_array(runs, qids, labels.shape[2])
    pairs = [[0, 1], [1, 2], [2, 0]]
    for cutoff in [3, None]:
        got = metrics.open_pairs_by_query(labels, docs, pairs, cutoff=cutoff)
        totals = metrics.open_pairs(labels, docs, np.zeros((3, 3), dtype=np.int8), cutoff=cutoff)
        for c, (a, b) in enumerate(pairs):
            for i in range(len(qids)):
                unjudged = {
                    d
                    for s in (a, b)
                    for d, lab in zip(docs[s, i, :cutoff], labels[s, i, :cutoff], strict=True)
                    if lab == U
                }
                assert got[c, i] == len(unjudged), (cutoff, a, b, i)
            assert got[c].sum() == totals[a, b]
    with pytest.raises(ValueError, match="comparisons must hold system indices from 0 to 2"):
        metrics.open_pairs_by_query(labels, docs, [[0, 3]])


def test_open_pairs_more_than_64_systems():
    rng = np.random.default_rng(1)
    labels = rng.choice([U, 0, 1], size=(70, 2, 4))
    docs = np.stack([rng.permutation(12)[:4] for _ in range(140)]).reshape(70, 2, 4)
    order = np.zeros((70, 70), dtype=np.int8)
    counts = metrics.open_pairs(labels, docs, order)
    sets = [
        {(i, d) for i in range(2) for d, lab in zip(docs[s, i], labels[s, i], strict=True) if lab == U}
        for s in range(70)
    ]
    assert counts[3, 68] == len(sets[3] | sets[68])
    assert counts[65, 69] == len(sets[65] | sets[69])


def test_open_pairs_rejects_mismatched_doc_ids():
    labels = np.array([[[1, PAD]]])
    with pytest.raises(ValueError, match="doc_ids must be -1 exactly where labels is PAD"):
        metrics.open_pairs(labels, np.array([[[1, 2]]]), np.zeros((1, 1)))
    with pytest.raises(ValueError, match=r"doc_ids has shape \(1, 1, 3\) but labels has shape \(1, 1, 2\)"):
        metrics.open_pairs(labels, np.array([[[1, -1, -1]]]), np.zeros((1, 1)))
    with pytest.raises(ValueError, match=r"order must have shape \(1, 1\)"):
        metrics.open_pairs(labels, np.array([[[1, -1]]]), np.zeros((2, 2)))


def test_unjudged_pairs_by_hand_and_pairs_by_query_per_query():
    # the by-hand campaign of test_open_pairs_by_query_by_hand_and_on_a_random_campaign
    labels = np.array([[[U, 1, U], [U, PAD, PAD]], [[U, 0, U], [U, PAD, PAD]], [[1, 0, U], [U, PAD, PAD]]])
    docs = np.array([[[1, 2, 3], [7, -1, -1]], [[3, 4, 5], [7, -1, -1]], [[2, 4, 6], [8, -1, -1]]])
    got = metrics.unjudged_pairs(labels, docs)
    np.testing.assert_array_equal(got.query, [0, 0, 0, 0, 1, 1])
    np.testing.assert_array_equal(got.doc, [1, 3, 5, 6, 7, 8])
    np.testing.assert_array_equal(got.members[:, 0], [0b001, 0b011, 0b010, 0b100, 0b011, 0b100])
    top1 = metrics.unjudged_pairs(labels, docs, cutoff=1)
    np.testing.assert_array_equal(top1.doc, [1, 3, 7, 8])
    # one query's pairs grouped alone are that query's part of the whole: a caller can replace them
    qrels, runs = random_campaign(5, n_queries=12)
    labels, _, qids = metrics.labels_from_dicts(qrels, runs)
    docs = doc_id_array(runs, qids, labels.shape[2])
    comparisons = [[0, 1], [1, 2], [0, 2]]
    for cutoff in [3, None]:
        whole = metrics.pairs_by_query(metrics.unjudged_pairs(labels, docs, cutoff=cutoff), comparisons, len(qids))
        np.testing.assert_array_equal(whole, metrics.open_pairs_by_query(labels, docs, comparisons, cutoff=cutoff))
        for i in range(len(qids)):
            alone = metrics.unjudged_pairs(labels[:, i : i + 1], docs[:, i : i + 1], cutoff=cutoff)
            np.testing.assert_array_equal(metrics.pairs_by_query(alone, comparisons, 1)[:, 0], whole[:, i])
    with pytest.raises(ValueError, match="comparisons must hold system indices from 0 to 63"):
        metrics.pairs_by_query(alone, [[0, 64]], 1)


@pytest.mark.parametrize("gain", ["linear", "exponential"])
def test_scores_and_bounds_of_a_query_do_not_depend_on_the_queries_scored_with_it(gain):
    """Bit for bit: the leaderboard rescores and bounds only the queries whose labels moved, and its
    result must equal a computation over every query (and qrels rows padded wider must not matter)."""
    qrels, runs = random_campaign(6, max_grade=3, n_queries=40)
    labels, qrels_array, qids = metrics.labels_from_dicts(qrels, runs)
    wider = np.pad(qrels_array, ((0, 0), (0, 9)), constant_values=U)
    for k in (3, 10):
        every = metrics.evaluate(labels, qrels_array, k=k, gain=gain)
        bounds = metrics.score_bounds(labels, qrels_array, k=k, top_grade=3, gain=gain)
        for i in (0, 7, 39):
            alone = metrics.evaluate(labels[:, i : i + 1], wider[i : i + 1], k=k, gain=gain)
            some = metrics.score_bounds(labels[:, i : i + 3], wider[i : i + 3], k=k, top_grade=3, gain=gain)
            for name, values in every.items():
                np.testing.assert_array_equal(alone[name][:, 0], values[:, i], err_msg=name)
            for name, (low, high) in bounds.items():
                np.testing.assert_array_equal(some[name][0], low[:, i : i + 3], err_msg=name)
                np.testing.assert_array_equal(some[name][1], high[:, i : i + 3], err_msg=name)
