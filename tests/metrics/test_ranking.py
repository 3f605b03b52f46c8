"""Hand-checkable tests of metrics.ranking: small worked examples and edge cases."""

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import metrics
from metrics import PAD, UNJUDGED
from metrics.ranking import dcg_at_k, idcg_at_k

U, P = UNJUDGED, PAD


def one(ranked, qrels):
    """(1, 1, D) labels and (1, M) qrels for a single system and query."""
    return np.array([[ranked]]), np.array([qrels])


def queries(rows, qrels_rows):
    """(1, Q, D) labels and (Q, M) qrels for one system over several queries."""
    return np.array([rows]), np.array(qrels_rows)


# --------------------------------------------------------------------------------------------------------
# Worked examples small enough to check by hand


def test_average_precision_three_relevant_at_ranks_1_3_5():
    labels, qrels = one([1, 0, 1, 0, 1], [1, 1, 1, 0, 0])
    assert metrics.average_precision(labels, qrels)[0, 0] == pytest.approx((1 + 2 / 3 + 3 / 5) / 3)
    assert round(metrics.average_precision(labels, qrels)[0, 0], 3) == 0.756


def test_precision_at_5_with_three_relevant():
    labels, _ = one([1, 0, 1, 0, 1], [1, 1, 1])
    assert metrics.precision(labels, k=5)[0, 0] == pytest.approx(0.6)


def test_reciprocal_rank_is_1_when_the_first_document_is_relevant():
    labels, _ = one([1, 0, 1, 0, 1], [1, 1, 1])
    assert metrics.reciprocal_rank(labels)[0, 0] == 1.0


def test_mean_reciprocal_rank_first_relevant_at_1_3_5():
    labels, _ = queries([[1, 0, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 0, 1]], [[1], [1], [1]])
    rr = metrics.reciprocal_rank(labels)
    np.testing.assert_allclose(rr, [[1, 1 / 3, 1 / 5]])
    assert round(metrics.mean(rr)[0], 3) == 0.511


def test_mean_reciprocal_rank_first_relevant_at_1_3_2():
    labels, _ = queries([[1, 0, 0], [0, 0, 1], [0, 1, 0]], [[1], [1], [1]])
    assert metrics.mean(metrics.reciprocal_rank(labels))[0] == pytest.approx((1 + 1 / 3 + 1 / 2) / 3)


def test_ndcg_exponential_gain_of_grades_3_0_2_1_3():
    labels, qrels = one([3, 0, 2, 1, 3], [3, 0, 2, 1, 3])
    assert round(dcg_at_k(labels, 5, "exponential")[0, 0], 3) == 11.639
    assert round(idcg_at_k(qrels, 5, "exponential")[0], 3) == 13.347
    assert round(metrics.ndcg(labels, qrels, k=5, gain="exponential")[0, 0], 3) == 0.872


@pytest.mark.parametrize(
    ("ranked", "dcg", "expected"),
    [([2, 0, 1, 0, 2], 3.27, 0.87), ([0, 0, 1, 2, 2], 2.13, 0.57)],
    ids=["as-listed", "reversed"],
)
def test_ndcg_linear_gain_exact_partial_irrelevant(ranked, dcg, expected):
    labels, qrels = one(ranked, [2, 0, 1, 0, 2])
    assert round(idcg_at_k(qrels, 5, "linear")[0], 2) == 3.76
    # Rounding each term before adding gives 2.13 (0.5 + 0.86 + 0.77); exactly it is 2.135.
    assert dcg_at_k(labels, 5, "linear")[0, 0] == pytest.approx(dcg, abs=0.006)
    assert round(metrics.ndcg(labels, qrels, k=5)[0, 0], 2) == expected


def test_precision_recall_of_two_models_averaged_over_two_users():
    # Two users' preferred snacks are the qrels, the two models' top 5 the runs.
    liked = {
        "X": ["치킨", "피자", "햄버거", "족발", "회", "돈까스", "샐러드", "만두", "라면", "김밥"],
        "Y": ["치킨", "피자", "햄버거", "족발", "삼겹살", "떡볶이", "탕수육", "땅콩", "빵", "국수"],
    }
    model_a = ["치킨", "피자", "고구마", "타코야끼", "회"]
    model_b = ["햄버거", "족발", "삼겹살", "떡볶이", "땅콩"]
    qrels = {user: dict.fromkeys(snacks, 1) for user, snacks in liked.items()}
    runs = [
        {user: {snack: 5.0 - rank for rank, snack in enumerate(model)} for user in liked}
        for model in (model_a, model_b)
    ]
    labels, qrels_array, _ = metrics.labels_from_dicts(qrels, runs)

    scores = metrics.mean(metrics.evaluate(labels, qrels_array, k=5))

    np.testing.assert_allclose(scores["P@5"], [0.5, 0.7])
    np.testing.assert_allclose(scores["R@5"], [0.25, 0.35])


@pytest.mark.parametrize(
    ("ranked", "k", "p", "r"),
    [([1, 1, 0, 0], 4, 0.5, 0.2), ([1, 1, 0, 0, 1], 5, 0.6, 0.3), ([1, 0, 0, 0], 4, 0.25, 0.1)],
    ids=["A@4", "A@5", "B@4"],
)
def test_precision_recall_with_ten_relevant_documents(ranked, k, p, r):
    labels, qrels = one(ranked, [1] * 10)
    assert metrics.precision(labels, k=k)[0, 0] == pytest.approx(p)
    assert metrics.recall(labels, qrels, k=k)[0, 0] == pytest.approx(r)


def test_f1_at_5_with_six_relevant():
    labels, qrels = one([1, 1, 0, 1, 0], [1] * 6)
    assert metrics.precision(labels, k=5)[0, 0] == pytest.approx(0.6)
    assert metrics.recall(labels, qrels, k=5)[0, 0] == pytest.approx(0.5)
    assert metrics.f1(labels, qrels, k=5)[0, 0] == pytest.approx(2 * 0.6 * 0.5 / 1.1)
    assert round(metrics.f1(labels, qrels, k=5)[0, 0], 2) == 0.55


# --------------------------------------------------------------------------------------------------------
# trec_eval ordering


def test_trec_order_sorts_by_score_descending():
    order = metrics.trec_order(["a", "b", "c"], [0.1, 0.9, 0.5])
    assert order.tolist() == [1, 2, 0]


def test_trec_order_ties_broken_by_docid_descending():
    order = metrics.trec_order(["d1", "d3", "d2", "d0"], [1.0, 1.0, 1.0, 2.0])
    assert np.array(["d1", "d3", "d2", "d0"])[order].tolist() == ["d0", "d3", "d2", "d1"]


def test_trec_order_ties_compare_docids_as_strings_not_numbers():
    # strcmp: "d9" > "d10" > "d1", although 10 > 9 as numbers.
    docids = ["d1", "d10", "d9"]
    order = metrics.trec_order(docids, [0.0, 0.0, 0.0])
    assert [docids[i] for i in order] == ["d9", "d10", "d1"]


def test_trec_order_ties_compare_non_ascii_docids_by_utf8_bytes():
    docids = ["z", "é", "Z", "가"]
    order = metrics.trec_order(docids, [1.0] * 4)
    expected = sorted(docids, key=lambda d: d.encode("utf-8"), reverse=True)
    assert [docids[i] for i in order] == expected


def test_trec_order_scores_equal_in_float32_tie():
    # 1.00000001 and 1.00000002 are the same C float: trec_eval falls back on the docid.
    order = metrics.trec_order(["a", "b"], [1.00000002, 1.00000001])
    assert order.tolist() == [1, 0]


def test_trec_order_ignores_the_given_order():
    order = metrics.trec_order(["b", "a"], [1.0, 1.0])
    assert order.tolist() == [0, 1]


def test_trec_order_empty_run():
    assert metrics.trec_order([], []).tolist() == []


@pytest.mark.parametrize(
    ("docids", "scores"),
    [(["a", "a"], [1.0, 2.0]), (["a", "b"], [1.0, float("nan")]), (["a", "b"], [1.0])],
    ids=["duplicate-docid", "nan-score", "length-mismatch"],
)
def test_trec_order_rejects_bad_input(docids, scores):
    with pytest.raises(ValueError):
        metrics.trec_order(docids, scores)


def test_trec_ranks_matches_trec_order_per_query():
    rng = np.random.default_rng(3)
    qids = rng.choice(["q1", "q2", "q10"], size=60)
    docids = np.array([f"d{i}" for i in rng.permutation(60)])
    scores = rng.integers(0, 4, size=60).astype(float)

    ranks = metrics.trec_ranks(qids, docids, scores)

    for qid in ("q1", "q2", "q10"):
        rows = np.flatnonzero(qids == qid)
        order = metrics.trec_order(docids[rows], scores[rows])
        assert ranks[rows[order]].tolist() == list(range(rows.size))


def test_trec_ranks_same_docid_in_two_queries_is_fine():
    assert metrics.trec_ranks(["q1", "q2"], ["d", "d"], [1.0, 2.0]).tolist() == [0, 0]


def test_trec_ranks_rejects_duplicate_docid_within_a_query():
    with pytest.raises(ValueError, match="duplicate"):
        metrics.trec_ranks(["q1", "q2", "q1"], ["d", "d", "d"], [1.0, 2.0, 3.0])


# --------------------------------------------------------------------------------------------------------
# Edge cases


def test_precision_run_shorter_than_k_divides_by_k():
    labels, _ = one([1, 1, 1, P, P], [1, 1, 1])
    assert metrics.precision(labels, k=10)[0, 0] == pytest.approx(0.3)
    assert metrics.precision(labels, k=5)[0, 0] == pytest.approx(0.6)


@pytest.mark.parametrize("k", [3, 7, 1000])
def test_measures_k_at_or_beyond_the_run_depth(k):
    labels, qrels = one([2, 0, 1], [2, 1, 1, 0])
    scores = metrics.evaluate(labels, qrels, k=k)
    ideal = 2 + 1 / math.log2(3) + 1 / math.log2(4)
    assert scores[f"P@{k}"][0, 0] == pytest.approx(2 / k)
    assert scores[f"R@{k}"][0, 0] == pytest.approx(2 / 3)
    assert scores[f"F1@{k}"][0, 0] == pytest.approx(2 * 2 / (k + 3))
    assert scores[f"nDCG@{k}"][0, 0] == pytest.approx((2 + 1 / math.log2(4)) / ideal)
    assert scores[f"Judged@{k}"][0, 0] == 1.0


def test_measures_query_without_relevant_documents_score_zero():
    labels, qrels = one([0, 0, U], [0, 0, 0])
    scores = metrics.evaluate(labels, qrels, k=3)
    for name in ("P@3", "R@3", "F1@3", "Hit@3", "MRR", "MAP", "nDCG@3"):
        assert scores[name][0, 0] == 0.0, name
    assert scores["Judged@3"][0, 0] == pytest.approx(2 / 3)


def test_measures_unjudged_documents_count_as_not_relevant():
    labels, qrels = one([U, 1, U, 1], [1, 1])
    assert metrics.precision(labels, k=4)[0, 0] == 0.5
    assert metrics.reciprocal_rank(labels)[0, 0] == 0.5
    assert metrics.average_precision(labels, qrels)[0, 0] == pytest.approx((1 / 2 + 2 / 4) / 2)
    assert metrics.judged(labels, k=4)[0, 0] == 0.5


def test_measures_all_unjudged_top_k():
    labels, qrels = one([U, U, U, 2, 1], [2, 1])
    scores = metrics.evaluate(labels, qrels, k=3)
    assert scores["P@3"][0, 0] == 0.0
    assert scores["Hit@3"][0, 0] == 0.0
    assert scores["nDCG@3"][0, 0] == 0.0
    assert scores["Judged@3"][0, 0] == 0.0
    assert scores["MRR"][0, 0] == pytest.approx(1 / 4)


def test_evaluate_judged_only_scores_the_condensed_ranking():
    labels, qrels = one([U, U, U, 2, 1], [2, 1])
    scores = metrics.evaluate(labels, qrels, k=3, judged_only=True)
    assert scores["P@3"][0, 0] == pytest.approx(2 / 3)
    assert scores["MRR"][0, 0] == 1.0
    assert scores["MAP"][0, 0] == 1.0
    assert scores["nDCG@3"][0, 0] == pytest.approx(1.0)
    # Judged@k describes the ranking as retrieved, condensed or not.
    assert scores["Judged@3"][0, 0] == 0.0


def test_condense_drops_unjudged_and_shifts_left():
    labels = np.array([[[U, 1, U, 0, 2, P], [0, U, U, U, P, P], [U, U, P, P, P, P]]])
    expected = np.array([[[1, 0, 2, P, P, P], [0, P, P, P, P, P], [P, P, P, P, P, P]]])
    np.testing.assert_array_equal(metrics.condense(labels), expected)


def test_condense_keeps_dtype_and_fully_judged_rows():
    labels = np.array([[[2, 0, 1, P]]], dtype=np.int8)
    condensed = metrics.condense(labels)
    assert condensed.dtype == np.int8
    np.testing.assert_array_equal(condensed, labels)


@pytest.mark.parametrize(
    ("threshold", "p", "r", "rr", "ap"),
    [(1, 3 / 5, 3 / 4, 1 / 2, (1 / 2 + 2 / 3 + 3 / 5) / 4), (2, 1 / 5, 1 / 2, 1 / 3, (1 / 3) / 2)],
)
def test_measures_threshold_decides_relevance(threshold, p, r, rr, ap):
    # num_rel is 4 at threshold 1 and 2 at threshold 2.
    labels, qrels = one([0, 1, 2, 0, 1], [2, 1, 1, 0, 2, U])
    assert metrics.precision(labels, k=5, threshold=threshold)[0, 0] == pytest.approx(p)
    assert metrics.recall(labels, qrels, k=5, threshold=threshold)[0, 0] == pytest.approx(r)
    assert metrics.reciprocal_rank(labels, threshold=threshold)[0, 0] == pytest.approx(rr)
    assert metrics.average_precision(labels, qrels, threshold=threshold)[0, 0] == pytest.approx(ap)


def test_ndcg_ignores_threshold_and_uses_grades():
    labels, qrels = one([1, 2], [2, 1])
    expected = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert metrics.evaluate(labels, qrels, k=2, threshold=2)["nDCG@2"][0, 0] == pytest.approx(expected)


def test_ndcg_counts_relevant_documents_the_run_missed_in_the_ideal():
    labels, qrels = one([2, 0], [2, 2, 0])
    assert metrics.ndcg(labels, qrels, k=2)[0, 0] == pytest.approx(2 / (2 + 2 / math.log2(3)))


def test_measures_empty_run_scores_zero_and_judged_zero():
    labels, qrels = queries([[P, P, P], [1, 0, P]], [[1, 2], [1, U]])
    scores = metrics.evaluate(labels, qrels, k=2)
    for name, values in scores.items():
        assert values[0, 0] == 0.0, name
    assert scores["P@2"][0, 1] == 0.5


def test_measures_depth_zero_array_scores_zero():
    labels = np.zeros((2, 3, 0), dtype=np.int8)
    qrels = np.array([[1], [2], [0]])
    for name, values in metrics.evaluate(labels, qrels, k=5).items():
        assert values.shape == (2, 3), name
        assert not values.any(), name


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int8, np.int64])
def test_evaluate_accepts_any_integer_dtype(dtype):
    labels, qrels = one([2, 0, 1, 2], [2, 2, 1, 0])
    expected = metrics.evaluate(labels, qrels, k=3, judged_only=True)
    scores = metrics.evaluate(labels.astype(dtype), qrels.astype(dtype), k=3, judged_only=True)
    for name, values in expected.items():
        np.testing.assert_array_equal(scores[name], values, err_msg=name)
    assert scores["nDCG@3"][0, 0] == pytest.approx((2 + 1 / math.log2(4)) / (2 + 2 / math.log2(3) + 1 / 2))
    np.testing.assert_array_equal(metrics.condense(labels.astype(dtype)), labels)


def test_measures_qrels_without_columns_score_zero():
    labels = np.array([[[U, U]]])
    qrels = np.zeros((1, 0), dtype=np.int64)
    scores = metrics.evaluate(labels, qrels, k=2)
    assert all(values[0, 0] == 0.0 for values in scores.values())


def test_f1_is_zero_when_precision_and_recall_are_zero():
    labels, qrels = one([0, 0], [1])
    assert metrics.f1(labels, qrels, k=2)[0, 0] == 0.0


def test_f1_is_harmonic_mean_of_precision_and_recall():
    labels, qrels = one([1, 0, 1, 1], [1, 1, 1, 1, 1, 1, 1])
    p, r = 3 / 4, 3 / 7
    assert metrics.f1(labels, qrels, k=4)[0, 0] == pytest.approx(2 * p * r / (p + r))


def test_hit_is_one_when_any_relevant_in_top_k():
    labels, _ = one([0, U, 1], [1])
    assert metrics.hit(labels, k=2)[0, 0] == 0.0
    assert metrics.hit(labels, k=3)[0, 0] == 1.0


def test_judged_uses_run_length_when_shorter_than_k():
    labels, _ = one([1, U, 0, P, P], [1])
    assert metrics.judged(labels, k=10)[0, 0] == pytest.approx(2 / 3)
    assert metrics.judged(labels, k=2)[0, 0] == pytest.approx(1 / 2)


def test_average_precision_divides_by_all_relevant_not_retrieved_ones():
    labels, qrels = one([1, 0], [1, 1, 1, 1])
    assert metrics.average_precision(labels, qrels)[0, 0] == pytest.approx(1 / 4)


# --------------------------------------------------------------------------------------------------------
# evaluate, mean, labels_from_dicts


def test_evaluate_keys_and_shapes():
    labels = np.random.default_rng(0).integers(-2, 3, size=(3, 4, 6))
    qrels = np.random.default_rng(1).integers(-1, 3, size=(4, 5))
    scores = metrics.evaluate(labels, qrels, k=5)
    assert list(scores) == ["P@5", "R@5", "F1@5", "Hit@5", "MRR", "MAP", "nDCG@5", "Judged@5", "bpref"]
    assert all(values.shape == (3, 4) and values.dtype == np.float64 for values in scores.values())


@pytest.mark.parametrize("gain", ["linear", "exponential"])
@pytest.mark.parametrize("threshold", [1, 2])
@pytest.mark.parametrize("k", [1, 5, 20])
def test_evaluate_equals_the_single_measures(k, threshold, gain):
    rng = np.random.default_rng(k * 10 + threshold)
    labels = rng.integers(-1, 4, size=(2, 6, 12))
    labels[:, :, 9:] = PAD
    qrels = np.concatenate([rng.integers(0, 4, size=(6, 15)), np.full((6, 3), U)], axis=1)
    scores = metrics.evaluate(labels, qrels, k=k, threshold=threshold, gain=gain)
    expected = {
        f"P@{k}": metrics.precision(labels, k=k, threshold=threshold),
        f"R@{k}": metrics.recall(labels, qrels, k=k, threshold=threshold),
        f"F1@{k}": metrics.f1(labels, qrels, k=k, threshold=threshold),
        f"Hit@{k}": metrics.hit(labels, k=k, threshold=threshold),
        "MRR": metrics.reciprocal_rank(labels, threshold=threshold),
        "MAP": metrics.average_precision(labels, qrels, threshold=threshold),
        f"nDCG@{k}": metrics.ndcg(labels, qrels, k=k, gain=gain),
        f"Judged@{k}": metrics.judged(labels, k=k),
    }
    for name, values in expected.items():
        np.testing.assert_allclose(scores[name], values, rtol=0, atol=1e-15, err_msg=name)


def test_mean_is_a_macro_average_over_queries():
    np.testing.assert_allclose(metrics.mean(np.array([[1.0, 0.0, 0.5], [0.0, 0.0, 0.0]])), [0.5, 0.0])


def test_mean_of_a_mapping_averages_every_measure():
    averaged = metrics.mean({"P@1": np.array([[1.0, 0.0]]), "MRR": np.array([[0.5, 0.25]])})
    assert averaged["P@1"].tolist() == [0.5]
    assert averaged["MRR"].tolist() == [0.375]


def test_mean_without_queries_is_nan():
    assert np.isnan(metrics.mean(np.zeros((2, 0)))).all()


def test_labels_from_dicts_builds_trec_ordered_arrays():
    qrels = {"q1": {"a": 2, "b": 0, "c": 1}, "q2": {"x": 1}, "q3": {"y": 0}, "q4": {}}
    runs = [
        {"q1": {"a": 0.5, "c": 0.9, "z": 0.9}, "q2": {"x": 1.0}, "q9": {"a": 1.0}},
        {"q1": {"b": 1.0}},
    ]
    labels, qrels_array, qids = metrics.labels_from_dicts(qrels, runs)
    assert qids == ["q1", "q2", "q3"]  # q4 has no label; q9 is not in the qrels
    # q1 of run 0: z and c tie at 0.9, z > c, then a.
    np.testing.assert_array_equal(labels[0], [[U, 1, 2], [1, P, P], [P, P, P]])
    np.testing.assert_array_equal(labels[1], [[0, P, P], [P, P, P], [P, P, P]])
    np.testing.assert_array_equal(np.sort(qrels_array, axis=1), [[0, 1, 2], [U, U, 1], [U, U, 0]])


def test_labels_from_dicts_treats_negative_qrels_as_unjudged():
    labels, qrels_array, _ = metrics.labels_from_dicts({"q": {"a": -1, "b": 1}}, [{"q": {"a": 2.0, "b": 1.0}}])
    np.testing.assert_array_equal(labels, [[[U, 1]]])
    np.testing.assert_array_equal(qrels_array, [[1]])


# --------------------------------------------------------------------------------------------------------
# Argument checking


@pytest.mark.parametrize("k", [0, -1, 2.5, True, "10", None])
def test_measures_reject_bad_k(k):
    labels, qrels = one([1, 0], [1])
    with pytest.raises(ValueError, match="k must be"):
        metrics.precision(labels, k=k)
    with pytest.raises(ValueError, match="k must be"):
        metrics.evaluate(labels, qrels, k=k)


def test_ndcg_rejects_unknown_gain():
    labels, qrels = one([1, 0], [1])
    with pytest.raises(ValueError, match="gain"):
        metrics.ndcg(labels, qrels, k=2, gain="burges")
    with pytest.raises(ValueError, match="gain"):
        metrics.evaluate(labels, qrels, gain="log")


@pytest.mark.parametrize(
    "labels",
    [np.array([1, 0]), np.array([[1, 0]]), np.zeros((1, 1, 1, 1), dtype=int)],
    ids=["1-D", "2-D", "4-D"],
)
def test_measures_reject_labels_of_wrong_ndim(labels):
    with pytest.raises(ValueError, match="3-D"):
        metrics.precision(labels, k=1)


def test_measures_reject_qrels_with_other_query_count():
    labels = np.zeros((1, 2, 3), dtype=int)
    with pytest.raises(ValueError, match="queries"):
        metrics.recall(labels, np.zeros((3, 4), dtype=int), k=1)
    with pytest.raises(ValueError, match="2-D"):
        metrics.recall(labels, np.zeros(2, dtype=int), k=1)


def test_measures_reject_float_labels_and_unknown_sentinels():
    with pytest.raises(ValueError, match="integer"):
        metrics.precision(np.array([[[1.0, 0.5]]]), k=1)
    with pytest.raises(ValueError, match="below"):
        metrics.precision(np.array([[[1, -3]]]), k=1)
    with pytest.raises(ValueError, match="below"):
        metrics.recall(np.array([[[1, 0]]]), np.array([[1, -2]]), k=1)


@pytest.mark.parametrize("threshold", [-1, float("nan"), "1", None])
def test_measures_reject_bad_threshold(threshold):
    labels, qrels = one([1, 0], [1])
    with pytest.raises(ValueError, match="threshold"):
        metrics.evaluate(labels, qrels, threshold=threshold)


def test_ranking_and_significance_never_import_django():
    code = "import sys, metrics.ranking, metrics.significance; sys.exit('django' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0


def test_micro_and_macro_averages_differ_by_hand():
    # Query 0: a full run [rel, rel, non], num_rel 2. Query 1: one document, relevant, of num_rel 8.
    labels = np.array([[[1, 1, 0], [1, PAD, PAD]]])
    qrels = np.array([[1, 1, 0, U, U, U, U, U], [1, 1, 1, 1, 1, 1, 1, 1]])
    # Macro P@3 = (2/3 + 1/3) / 2 (trec_eval divides by k); micro P@3 = 3 relevant / 4 retrieved.
    assert metrics.mean(metrics.precision(labels, k=3))[0] == pytest.approx(0.5)
    assert metrics.micro_precision(labels, k=3)[0] == pytest.approx(3 / 4)
    # Macro R@3 = (2/2 + 1/8) / 2; micro R@3 = 3 / 10: the query with 8 relevant documents dominates.
    assert metrics.mean(metrics.recall(labels, qrels, k=3))[0] == pytest.approx(0.5625)
    assert metrics.micro_recall(labels, qrels, k=3)[0] == pytest.approx(0.3)


def test_micro_averages_zero_when_nothing_retrieved_or_relevant():
    labels = np.array([[[PAD, PAD]], [[0, U]]])
    qrels = np.array([[0, U]])
    np.testing.assert_array_equal(metrics.micro_precision(labels, k=2), [0.0, 0.0])
    np.testing.assert_array_equal(metrics.micro_recall(labels, qrels, k=2), [0.0, 0.0])
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        metrics.micro_precision(labels, k=0)


@pytest.mark.parametrize(
    "call",
    [
        lambda labels, qrels: metrics.precision(labels, 5),
        lambda labels, qrels: metrics.recall(labels, qrels, 5),
        lambda labels, qrels: metrics.f1(labels, qrels, 5, 1),
        lambda labels, qrels: metrics.hit(labels, 5),
        lambda labels, qrels: metrics.reciprocal_rank(labels, 2),
        lambda labels, qrels: metrics.average_precision(labels, qrels, 2),
        lambda labels, qrels: metrics.ndcg(labels, qrels, 5),
        lambda labels, qrels: metrics.judged(labels, 5),
        lambda labels, qrels: metrics.bpref(labels, qrels, 2),
        lambda labels, qrels: metrics.micro_precision(labels, 5),
        lambda labels, qrels: metrics.micro_recall(labels, qrels, 5),
    ],
)
def test_cutoff_threshold_and_gain_are_keyword_only(call):
    # metrics(labels, 5, 2): is 5 the cutoff or the threshold? Naming them leaves no doubt (as scikit-learn).
    labels, qrels = np.array([[[1, 0, 2]]]), np.array([[1, 2]])
    with pytest.raises(TypeError, match="positional argument"):
        call(labels, qrels)
