"""Soundness of the verdict bounds (metrics.verdicts): no grading of the pooled unjudged documents, those of
queries without any label included, falls outside them or flips an order they call settled."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metrics
from metrics.relevance_model import label_model, sample_scores
from metrics.verdicts import difference_bounds, final_pool, system_bounds

BASES = ("P", "R", "F1", "Hit", "MRR", "MAP", "nDCG", "bpref")
EPS = 1e-9


def _arrays(runs: np.ndarray, truth: dict[tuple[int, int], int]):
    """(labels, qrels, doc_ids) as the app builds them from runs (S, Q, D) of doc ids (-1 padding) and the
    known labels {(q, doc): grade}."""
    n_s, n_q, depth = runs.shape
    labels = np.full(runs.shape, metrics.UNJUDGED, dtype=np.int8)
    labels[runs < 0] = metrics.PAD
    for (q, d), g in truth.items():
        labels[:, q][runs[:, q] == d] = g
    width = max([sum(1 for (q, _) in truth if q == qq) for qq in range(n_q)] + [1])
    qrels = np.full((n_q, width), metrics.UNJUDGED, dtype=np.int8)
    for qq in range(n_q):
        row = [g for (q, _), g in sorted(truth.items()) if q == qq]
        qrels[qq, : len(row)] = row
    return labels, qrels, runs


@st.composite
def campaigns(draw):
    n_s = draw(st.integers(2, 4))
    n_q = draw(st.integers(1, 3))
    depth = draw(st.integers(1, 5))
    pool_depth = draw(st.integers(1, depth))
    top = draw(st.integers(1, 3))
    n_docs = draw(st.integers(depth, depth + 4))
    runs = np.full((n_s, n_q, depth), -1, dtype=np.int64)
    for s in range(n_s):
        for q in range(n_q):
            length = draw(st.integers(0, depth))
            docs = draw(st.permutations(range(n_docs)))[:length]
            runs[s, q, :length] = docs
    pooled = sorted({(q, int(d)) for q in range(n_q) for d in runs[:, q, :pool_depth].reshape(-1) if d >= 0})
    # what is judged now: some pooled pairs, maybe an imported label outside the runs; some queries none at all
    judged = {}
    for key in pooled:
        if draw(st.booleans()):
            judged[key] = draw(st.integers(0, top))
    if draw(st.booleans()):
        judged[(draw(st.integers(0, n_q - 1)), n_docs + 1)] = draw(st.integers(0, top))
    final = dict(judged)
    for key in pooled:
        if key not in final:
            final[key] = draw(st.integers(0, top))  # the grade it will get: anything on the scale
    return runs, judged, final, pool_depth, top, draw(st.sampled_from([0, 1, 2])), draw(st.booleans())


def _final_means(runs, final, k, threshold, judged_only, base):
    labels, qrels, _ = _arrays(runs, final)
    values = metrics.evaluate(labels, qrels, k=k, threshold=threshold, judged_only=judged_only)
    name = base if base in ("MRR", "MAP", "bpref") else f"{base}@{k}"
    per_query = values[name]
    scored = (qrels >= 0).any(axis=1)
    return per_query, scored


@settings(max_examples=400, deadline=None)
@given(campaigns(), st.sampled_from(BASES), st.integers(1, 4))
def test_no_grading_leaves_the_bounds_or_flips_a_settled_order(campaign, base, k):
    runs, judged, final, pool_depth, top, threshold, judged_only = campaign
    threshold = min(threshold, top)
    labels, qrels, doc_ids = _arrays(runs, judged)
    pool = final_pool(labels, doc_ids, pool_depth=pool_depth, judged_only=judged_only)
    n_s = runs.shape[0]
    pairs = np.array([(a, b) for a in range(n_s) for b in range(n_s) if a != b])
    low, high = difference_bounds(base, pool, qrels, pairs, k=k, threshold=threshold, gain="linear", top_grade=top)
    s_low, s_high = system_bounds(base, pool, qrels, k=k, threshold=threshold, gain="linear", top_grade=top)
    end, scored = _final_means(runs, final, k, threshold, judged_only, base)
    # every system's final score lies in its bounds, every difference in the pair's
    assert (end >= s_low - EPS).all() and (end <= s_high + EPS).all()
    diff = end[pairs[:, 0]] - end[pairs[:, 1]]
    assert (diff >= low - EPS).all() and (diff <= high + EPS).all()
    # the sum over every query bounds the final sum over the scored ones (unscored queries add 0)
    total = (diff * scored).sum(axis=1)
    settled = low.sum(axis=1) > EPS
    assert (total[settled] > 0).all()


def test_a_query_without_labels_can_flip_an_order_the_labelled_ones_would_settle():
    """Two systems, a labelled query where a wins, and an unlabelled query where only b retrieved a pooled
    document: the labelled query alone says a ahead for sure, yet b can end ahead, so it is not settled."""
    runs = np.array([[[1, 2], [5, 6]], [[3, 4], [7, 8]]])  # a: docs 1,2 / 5,6; b: 3,4 / 7,8
    judged = {(0, 1): 1, (0, 2): 0, (0, 3): 0, (0, 4): 0}  # query 1 judged; query 2 no label yet
    labels, qrels, doc_ids = _arrays(runs, judged)
    pool = final_pool(labels, doc_ids, pool_depth=2)
    low, _ = difference_bounds("P", pool, qrels, np.array([[0, 1]]), k=2, threshold=1, gain="linear", top_grade=1)
    assert low[0, 0] > 0 and low.sum() < 0
    end, scored = _final_means(runs, {**judged, (1, 7): 1, (1, 8): 1, (1, 5): 0, (1, 6): 0}, 2, 1, False, "P")
    assert (end[0] - end[1])[scored].sum() < 0  # b ends ahead


def test_a_document_only_another_system_found_lowers_ndcg():
    """nDCG divides by the ideal ranking: a's score falls when b's unjudged document turns out relevant, so
    a's low bound cannot be its score with its own documents non-relevant."""
    runs = np.array([[[1, 2]], [[3, 4]]])
    judged = {(0, 1): 1, (0, 2): 0}
    labels, qrels, doc_ids = _arrays(runs, judged)
    pool = final_pool(labels, doc_ids, pool_depth=2)
    s_low, _ = system_bounds("nDCG", pool, qrels, k=2, threshold=1, gain="linear", top_grade=1)
    end, _ = _final_means(runs, {**judged, (0, 3): 1, (0, 4): 1}, 2, 1, False, "nDCG")
    assert end[0, 0] < 1.0 and s_low[0, 0] <= end[0, 0]


@pytest.mark.parametrize("base", ["nDCG", "MAP", "P"])
def test_samples_are_fixed_by_their_seeds_and_exact_where_nothing_is_left(base):
    rng = np.random.default_rng(3)
    runs = np.stack([np.stack([rng.permutation(12)[:6] for _ in range(4)]) for _ in range(3)])
    truth = {(q, d): int(rng.integers(0, 3)) for q in range(4) for d in range(12)}
    judged = {key: g for key, g in truth.items() if key[0] != 1 and key[1] % 2 == 0}
    labels, qrels, doc_ids = _arrays(runs, judged)
    pool = final_pool(labels, doc_ids, pool_depth=6)
    model = label_model(pool, top_grade=2, n_systems=3)
    seeds = np.arange(4) * 7919
    mean, cov = sample_scores(base, pool, qrels, model, k=5, threshold=1, gain="linear", seeds=seeds, samples=64)
    again, _ = sample_scores(base, pool, qrels, model, k=5, threshold=1, gain="linear", seeds=seeds, samples=64)
    np.testing.assert_array_equal(mean, again)
    low, high = system_bounds(base, pool, qrels, k=5, threshold=1, gain="linear", top_grade=2)
    assert (mean >= low - EPS).all() and (mean <= high + EPS).all()
    closed = pool.distinct == 0
    assert np.allclose(cov[closed], 0.0)
    assert (np.diagonal(cov, axis1=1, axis2=2)[~closed] >= 0).all()


@pytest.mark.parametrize("base", ["P", "R", "F1", "Hit", "nDCG", "MAP", "MRR"])
def test_the_fast_sampling_paths_score_as_the_measures_do(base, monkeypatch):
    """The sparse product (P, R, F1, Hit, nDCG) and the direct AP/RR give what metrics.evaluate gives on the
    same sampled labels (the generic path), draw for draw."""
    import metrics.relevance_model as mv

    rng = np.random.default_rng(5)
    runs = np.stack([np.stack([rng.permutation(15)[:8] for _ in range(5)]) for _ in range(4)])
    truth = {(q, d): int(rng.integers(0, 3)) for q in range(5) for d in range(15)}
    judged = {key: g for key, g in truth.items() if (key[1] + key[0]) % 3 == 0 and key[0] != 2}
    labels, qrels, doc_ids = _arrays(runs, judged)
    pool = final_pool(labels, doc_ids, pool_depth=5)
    model = label_model(pool, top_grade=2, n_systems=4)
    kw = {"k": 6, "threshold": 1, "gain": "exponential", "seeds": np.arange(5) * 31, "samples": 16}
    fast = sample_scores(base, pool, qrels, model, **kw)
    monkeypatch.setattr(mv, "ADDITIVE", ())
    monkeypatch.setattr(mv, "RANKED", ())
    slow = sample_scores(base, pool, qrels, model, **kw)
    np.testing.assert_allclose(fast[0], slow[0], atol=1e-12)
    np.testing.assert_allclose(fast[1], slow[1], atol=1e-12)
    assert (pool.distinct > 0).any() and np.ptp(fast[0]) > 0


def test_a_query_stack_reads_and_patches_as_the_whole_array_would(monkeypatch):
    """The per-query covariances are kept in blocks of queries: a gather reads what the whole array holds, and
    patching some queries copies their blocks only, leaving the stack other readers hold as it was."""
    from metrics.final_order import QueryStack

    monkeypatch.setattr(QueryStack, "BLOCK", 3)
    rng = np.random.default_rng(5)
    whole = rng.random((10, 4, 4)).astype(np.float32)
    stack = QueryStack.of(whole)
    assert len(stack.blocks) == 4
    a, b = np.array([0, 2, 3]), np.array([1, 1, 0])
    np.testing.assert_array_equal(stack.gather(a, b), whole[:, a, b])
    dirty = np.array([1, 2, 7])
    rows = rng.random((3, 4, 4)).astype(np.float32)
    patched = stack.patched(rows, dirty)
    expected = whole.copy()
    expected[dirty] = rows
    np.testing.assert_array_equal(np.asarray(patched), expected)
    np.testing.assert_array_equal(patched.gather(a, b), expected[:, a, b])
    np.testing.assert_array_equal(np.asarray(stack), whole)  # the old value is untouched
    assert patched.blocks[1] is stack.blocks[1] and patched.blocks[3] is stack.blocks[3]  # untouched blocks shared
    assert QueryStack.of(whole[:0]).gather(a, b).shape == (0, 3)  # a campaign without queries


@pytest.mark.parametrize("base", ["nDCG", "MAP"])
def test_patched_parts_give_the_verdicts_of_parts_made_whole(base, monkeypatch):
    """After a judgment the app patches the judged query's parts into the previous ones (blocks of queries for
    the covariances): the verdicts are those of parts computed for every query at the new labels."""
    from metrics.final_order import QueryStack, order_verdicts, query_parts

    monkeypatch.setattr(QueryStack, "BLOCK", 4)
    rng = np.random.default_rng(11)
    n_s, n_q, depth = 5, 13, 12
    runs = np.stack([np.stack([rng.permutation(30)[:depth] for _ in range(n_q)]) for _ in range(n_s)])
    truth = {(q, int(d)): int(rng.integers(0, 3)) for q in range(n_q) for d in runs[:, q, :4].ravel()}
    known = dict(list(truth.items())[::2])
    labels, qrels, doc_ids = _arrays(runs, known)
    pool = final_pool(labels, doc_ids, pool_depth=4)
    model = label_model(pool, top_grade=2, n_systems=n_s)
    seeds = np.arange(n_q) * 7

    def parts_of(labels, qrels, queries):
        p = final_pool(labels[:, queries], doc_ids[:, queries], pool_depth=4)
        return query_parts(
            base,
            p,
            qrels[queries],
            model,
            k=5,
            threshold=1,
            gain="linear",
            seeds=seeds[queries],
            doc_ids=doc_ids[:, queries],
        )

    old = parts_of(labels, qrels, np.arange(n_q))
    # judge every pooled document of queries 2 and 9 (two blocks)
    dirty = np.array([2, 9])
    judged = dict(known)
    judged.update({key: g for key, g in truth.items() if key[0] in (2, 9)})
    labels2, qrels2, _ = _arrays(runs, judged)
    patched = old.patched(parts_of(labels2, qrels2, dirty), dirty)
    whole = parts_of(labels2, qrels2, np.arange(n_q))
    above, below = np.arange(n_s - 1), np.arange(1, n_s)
    for final in (np.ones(n_q, bool), np.arange(n_q) % 3 != 0):
        got = order_verdicts(patched, final, above, below)
        want = order_verdicts(whole, final, above, below)
        np.testing.assert_allclose(got.p_holds, want.p_holds, atol=1e-9)
        np.testing.assert_allclose(got.low, want.low, atol=1e-9)
        assert got.verdict == want.verdict
    assert not np.allclose(np.asarray(old.cov)[dirty], np.asarray(whole.cov)[dirty])  # the judgment moved them


@pytest.mark.parametrize("table", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_final_pool_finds_every_entry_of_a_pooled_unjudged_document(seed, table, monkeypatch):
    """Each ranked entry's place among the pooled unjudged documents, against sets built entry by entry: an entry
    is one of them exactly when its document is unjudged and some run ranks it within the pool depth for the same
    query (a document pooled for another query is not), padding never; by the document table (ids below
    TABLE_DOC_IDS) and by the lookup of every entry alike."""
    import metrics.verdicts as verdicts

    monkeypatch.setattr(verdicts, "TABLE_DOC_IDS", 1 << 40 if table else 0)
    rng = np.random.default_rng(seed)
    n_s, n_q, depth, pool_depth = 4, 6, 30, 5
    # few documents (shared by queries) in some campaigns, ids spread far apart in others
    n_docs = (40, 60, 5_000_000)[seed % 3]
    runs = np.stack([np.stack([rng.choice(n_docs, depth, replace=False) for _ in range(n_q)]) for _ in range(n_s)])
    runs[rng.random(runs.shape) < 0.1] = -1  # padding
    labels = np.full(runs.shape, metrics.UNJUDGED, dtype=np.int8)
    labels[runs < 0] = metrics.PAD
    truth = {}
    for q in range(n_q):
        for d in rng.choice(runs[:, q][runs[:, q] >= 0], 8):
            truth[(q, int(d))] = int(rng.integers(0, 3))
            labels[:, q][runs[:, q] == d] = truth[(q, int(d))]
    pool = final_pool(labels, runs, pool_depth=pool_depth)
    keys = sorted(
        {(q, int(d)) for s in range(n_s) for q in range(n_q) for d in runs[s, q, :pool_depth] if d >= 0} - set(truth)
    )
    assert pool.doc_query.tolist() == [q for q, _ in keys]
    at = {key: i for i, key in enumerate(keys)}
    expected = np.array(
        [
            [
                [at.get((q, int(runs[s, q, r])), -1) if runs[s, q, r] >= 0 else -1 for r in range(depth)]
                for q in range(n_q)
            ]
            for s in range(n_s)
        ]
    )
    np.testing.assert_array_equal(pool.doc_index, expected)
    assert (pool.doc_index >= 0).any()
