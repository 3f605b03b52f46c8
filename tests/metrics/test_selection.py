"""metrics.selection: the MTC and MM-NS bandit orders on campaigns small enough to check by hand."""

from __future__ import annotations

import numpy as np
import pytest

from metrics import UNJUDGED as U
from metrics import average_precision, ndcg, precision
from metrics.selection import bandit_order, bandit_rates, mtc_order, mtc_weights

P = -2  # metrics.PAD


def test_mtc_weights_are_what_a_relevant_document_adds_to_the_score():
    """Each unjudged document's weight is exactly the score it adds once judged top-grade relevant, for P@k
    and (with the normaliser held) nDCG@k; for AP the first-order term with the other documents known."""
    labels = np.array([[[1, U, 0, U]]], dtype=np.int8)
    qrels = np.array([[1, 0]], dtype=np.int8)
    for measure, score in (
        ("P", lambda lab, qr: precision(lab, k=3)),
        ("MAP", lambda lab, qr: average_precision(lab, qr)),
    ):
        known, w = mtc_weights(labels, qrels, measure=measure, k=3, top_grade=1)
        assert known[0, 0] == pytest.approx(score(labels, qrels)[0, 0])
        for r in (1, 3):
            filled = labels.copy()
            filled[0, 0, r] = 1
            # scored against the same qrels: MTC holds AP's normaliser (first order)
            want = score(filled, qrels)[0, 0]
            if measure == "P" and r >= 3:
                want = known[0, 0]  # beyond k: no weight
            assert known[0, 0] + w[0, 0, r] == pytest.approx(want), (measure, r)
    known, w = mtc_weights(labels, qrels, measure="nDCG", k=4, top_grade=2)
    # ideal DCG from the labels so far: one relevant document of grade 1 -> 1, but at least one top-grade (2)
    assert known[0, 0] == pytest.approx(ndcg(labels, qrels, k=4)[0, 0] / 2)
    assert w[0, 0, 1] == pytest.approx(2 / np.log2(3) / 2)
    assert w[0, 0, 0] == 0 and w[0, 0, 2] == 0  # judged documents carry no weight


def test_mtc_prefers_the_document_that_separates_an_uncertain_comparison():
    """Systems a and b tie on what is known; c is far behind. Document 7 is ranked first by a and not at
    all by b: it alone decides a vs b. Document 8 is ranked by both at the same rank: it cancels out and
    comes after every document that moves a difference."""
    labels = np.array(
        [
            [[U, U, 1]],  # a: 7, 8, 5
            [[U, U, 1]],  # b: 9, 8, 5
            [[0, 0, 0]],  # c: 1, 2, 3
        ],
        dtype=np.int8,
    )
    docs = np.array([[[7, 8, 5]], [[9, 8, 5]], [[1, 2, 3]]])
    qrels = np.array([[1, 0, 0, 0]], dtype=np.int8)
    got = mtc_order(labels, qrels, docs, measure="P", k=3)
    assert got.doc.tolist()[:2] in ([7, 9], [9, 7])  # both separate a from b, each by 1/3
    assert got.doc.tolist()[2] == 8
    assert got.score.tolist()[:2] == pytest.approx([1 / 3, 1 / 3])  # the uncertain a-b comparison only
    assert got.score[2] == 0


def test_mtc_skips_comparisons_no_label_can_change():
    """a has two relevant documents in its top 2, b none known and one unjudged: b can reach 1/2, never a's
    2/2, so the a-b comparison is settled and b's unjudged document scores 0 over uncertain comparisons;
    c and b (both 0 known, c with two unjudged documents) are uncertain."""
    labels = np.array([[[1, 1]], [[U, 0]], [[U, U]]], dtype=np.int8)
    docs = np.array([[[1, 2]], [[3, 4]], [[5, 6]]])
    qrels = np.array([[1, 1, 0]], dtype=np.int8)
    got = mtc_order(labels, qrels, docs, measure="P", k=2)
    scores = dict(zip(got.doc.tolist(), got.score.tolist(), strict=True))
    # order by known score: a (1.0), then b and c tied at 0 (ties by index: b above c); b-c is uncertain
    assert scores == pytest.approx({3: 0.5, 5: 0.5, 6: 0.5})
    assert sorted(got.doc.tolist()) == [3, 5, 6]


def test_mtc_map_weights_count_the_relevant_documents_below():
    """AP: a relevant document at rank 1 above a known relevant one at rank 2 adds 1/1 for itself and
    1/2 to the one below (its precision goes from 1/2 to 2/2); over R = 1 known relevant."""
    labels = np.array([[[U, 1]]], dtype=np.int8)
    qrels = np.array([[1]], dtype=np.int8)
    known, w = mtc_weights(labels, qrels, measure="MAP", top_grade=1)
    assert known[0, 0] == pytest.approx(0.5)
    assert w[0, 0, 0] == pytest.approx(1.0 + 0.5)


def test_bandit_rates_are_beta_posterior_means_with_fading_evidence():
    labels = np.array([[[1, 0, U, 1]], [[U, U, U, U]]], dtype=np.int8)
    rates = bandit_rates(labels, decay=0.5)
    # arm 0: judged at ranks 1, 2, 4 -> weights 0.25, 0.5, 1 (judged documents below: 2, 1, 0)
    alpha, beta = 1 + 0.25 + 1, 1 + 0.5
    assert rates[0, 0] == pytest.approx(alpha / (alpha + beta))
    assert rates[1, 0] == pytest.approx(0.5)  # Beta(1, 1): nothing judged yet
    # decay 1: the stationary Beta-Bernoulli mean (2 relevant of 3 judged)
    assert bandit_rates(labels, decay=1.0)[0, 0] == pytest.approx(3 / 5)
    with pytest.raises(ValueError, match="decay"):
        bandit_rates(labels, decay=0)


def test_bandit_pulls_the_best_arm_first_and_untried_arms_in_turn():
    """Query 0: arm a found a relevant document (rate 2/3), arm b a non-relevant one (1/3), arm c is untried
    (1/2). a's unjudged documents come first, in rank order; then c's; then b's. A document two arms hold
    is served once, with the better arm."""
    labels = np.array(
        [
            [[1, U, U]],  # a: 1, 2, 3
            [[0, U, U]],  # b: 4, 5, 2
            [[U, U, P]],  # c: 6, 7
        ],
        dtype=np.int8,
    )
    docs = np.array([[[1, 2, 3]], [[4, 5, 2]], [[6, 7, -1]]])
    got = bandit_order(labels, docs, decay=1.0)
    assert got.doc.tolist() == [2, 3, 6, 7, 5]
    assert got.score.tolist() == pytest.approx([2 / 3, 2 / 3, 0.5, 0.5, 1 / 3])
    # depth 2: rank 3 is outside the pool
    assert bandit_order(labels, docs, depth=2, decay=1.0).doc.tolist() == [2, 6, 7, 5]


def test_bandit_interleaves_queries_and_untried_arms_breadth_first():
    labels = np.full((2, 2, 2), U, dtype=np.int8)
    docs = np.array([[[1, 2], [5, 6]], [[3, 4], [7, 8]]])
    got = bandit_order(labels, docs)
    # every arm untried: every arm's first document (by query, then system), then every second one
    assert list(zip(got.query.tolist(), got.doc.tolist(), strict=True)) == [
        (0, 1),
        (0, 3),
        (1, 5),
        (1, 7),
        (0, 2),
        (0, 4),
        (1, 6),
        (1, 8),
    ]


def test_orders_refuse_bad_shapes():
    labels = np.zeros((1, 1, 2), dtype=np.int8)
    with pytest.raises(ValueError, match="shape"):
        bandit_order(labels, np.zeros((1, 1, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="measure"):
        mtc_weights(labels, np.zeros((1, 1), dtype=np.int8), measure="bpref")


@pytest.mark.parametrize("shape", [(0, 3, 5), (1, 3, 5), (2, 0, 5), (2, 3, 0)])
def test_empty_and_single_system_campaigns(shape):
    labels = np.full(shape, U, dtype=np.int8)
    docs = np.arange(int(np.prod(shape))).reshape(shape)
    qrels = np.full((shape[1], 1), U, dtype=np.int8)
    n = int(np.prod(shape)) if shape[0] == 1 else 0
    assert mtc_order(labels, qrels, docs).doc.size == n
    assert bandit_order(labels, docs).doc.size == n


def test_every_unjudged_pair_comes_exactly_once():
    rng = np.random.default_rng(5)
    docs = np.stack([np.stack([rng.choice(30, 8, replace=False) for _ in range(6)]) for _ in range(5)])
    truth = rng.integers(0, 3, (6, 30))
    judged = rng.random((6, 30)) < 0.4
    labels = np.where(judged[np.arange(6)[None, :, None], docs], truth[np.arange(6)[None, :, None], docs], U)
    labels = labels.astype(np.int8)
    qrels = np.where(judged, truth, U).astype(np.int8)
    want = {(q, d) for q in range(6) for d in range(30) if not judged[q, d] and (docs[:, q] == d).any()}
    for measure in ("nDCG", "P", "MAP"):
        got = mtc_order(labels, qrels, docs, measure=measure, k=5, top_grade=2)
        pairs = list(zip(got.query.tolist(), got.doc.tolist(), strict=True))
        assert len(pairs) == len(set(pairs)) and set(pairs) == want
    got = bandit_order(labels, docs)
    pairs = list(zip(got.query.tolist(), got.doc.tolist(), strict=True))
    assert len(pairs) == len(set(pairs)) and set(pairs) == want


def _ranking_after(order_of, seed: int) -> float:
    """The share of a generated pool judged (in batches of 4, the order recomputed after each) from which
    Kendall's tau of the nDCG@5 ranking against the whole pool's stays >= 0.9."""
    from metrics import kendall_tau

    rng = np.random.default_rng(seed)
    n_sys, n_q, n_docs, depth = 10, 12, 20, 5
    quality = np.linspace(0.2, 1.2, n_sys)
    truth = np.where(rng.random((n_q, n_docs)) < 0.25, rng.integers(1, 3, (n_q, n_docs)), 0)
    score = quality[:, None, None] * truth[None] + rng.normal(0, 1, (n_sys, n_q, n_docs))
    docs = np.argsort(-score, axis=-1)[..., :depth]
    judged = np.zeros((n_q, n_docs), bool)
    pooled = np.zeros((n_q, n_docs), bool)
    pooled[np.arange(n_q)[None, :, None], docs] = True

    def state():
        lab = np.where(judged, truth, U)
        return lab[np.arange(n_q)[None, :, None], docs].astype(np.int8), lab.astype(np.int8)

    final = ndcg(truth[np.arange(n_q)[None, :, None], docs].astype(np.int8), truth.astype(np.int8), k=5).mean(1)
    since, total = None, pooled.sum()
    while (pooled & ~judged).any():
        labels, qrels = state()
        got = order_of(labels, qrels, docs, rng)
        judged[got.query[:4], got.doc[:4]] = True
        labels, qrels = state()
        tau = kendall_tau(final, ndcg(labels, qrels, k=5).mean(1))
        share = (judged & pooled).sum() / total
        since = (since if since is not None else share) if tau >= 0.9 else None
    return since


def test_mtc_ranks_the_systems_right_from_fewer_judgments_than_a_random_order():
    """On generated collections with known relevance (systems of graded quality), MTC's order gets the
    ranking right (tau >= 0.9, and staying there) from a smaller share of the pool than a random order."""

    def mtc(labels, qrels, docs, rng):
        return mtc_order(labels, qrels, docs, measure="nDCG", k=5, top_grade=2)

    def shuffled(labels, qrels, docs, rng):
        every = mtc(labels, qrels, docs, rng)
        pick = rng.permutation(every.query.size)
        return every._replace(query=every.query[pick], doc=every.doc[pick])

    mtc_share = np.mean([_ranking_after(mtc, seed) for seed in range(3)])
    random_share = np.mean([_ranking_after(shuffled, seed) for seed in range(3)])
    assert mtc_share < 0.5 * random_share, (mtc_share, random_share)
