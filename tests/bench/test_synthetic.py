"""bench/synthetic.py: the easy preset as it always was, the realistic one shaped like a TREC track, and the
files both write as the app reads them."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import metrics
from bench import synthetic
from judging.imports.parse import FormatError, parse_run


def _digest(paths) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize(
    ("spec", "seed", "digest"),
    [
        # the files bench/effort_bench.py's generate() wrote before the generator moved here
        ("systems=5,queries=6,depth=12", 3, "836b8e9cb65493fde39742bc2980d71f2c8237bf1eea3bfe4b6dac7322a139e7"),
        ("systems=20,queries=50,depth=20", 1, "715c878cd380b64d227a0c08ea68d1a8645ff03536a1dec758a0b425eba23f9c"),
        (
            "systems=8,queries=40,depth=20,docs=70",
            1,
            "691e9c0840ece4b809a30ed05e2e0f8db2dba692c69dabdd398be59129e7e1ac",
        ),
    ],
)
def test_easy_preset_writes_the_old_generators_files_byte_for_byte(tmp_path, spec, seed, digest):
    coll = synthetic.generate("easy", **synthetic.parse_spec(spec, seed=seed))
    qrels, runs, topics = coll.write(tmp_path)
    assert _digest([qrels, topics, *runs]) == digest


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_realistic_preset_has_the_shape_of_a_trec_track(seed):
    """The figures of the issue: 35-60 systems, 40-55 queries, runs of depth 100, depth-10 pools of 50-90 pairs
    per query, 30-50% of the pool relevant on grades 0-3, queries from almost nothing relevant to mostly
    relevant, and neighbours in the final nDCG@10 ranking mostly under 0.01 apart, some under 0.001."""
    coll = synthetic.generate("realistic", seed=seed)
    n_s, n_q, depth = coll.shape
    assert 35 <= n_s <= 60 and 40 <= n_q <= 55 and depth == 100 and len(set(coll.systems)) == n_s
    assert {"first stage", "reranker", "sweep", "rerun"} <= set(coll.kinds)  # families of runs
    assert coll.scale == [0, 1, 2, 3] and set(np.unique(coll.grades)) == {0, 1, 2, 3}
    stats = synthetic.collection_stats(coll, pool_depth=10, k=10)
    assert 50 <= stats.pairs_per_query[1] <= 90 and 2000 <= stats.pool_pairs <= 4000
    assert 0.30 <= stats.relevant_share <= 0.55
    assert stats.hard_queries >= 2 and stats.easy_queries >= 2  # a spread of hard and easy queries
    assert stats.gap_median < 0.01 and stats.gaps_under_01 >= 0.6 and stats.gaps_under_001 >= 0.05
    # the easy preset is nothing like it
    easy = synthetic.collection_stats(synthetic.generate("easy", seed=seed))
    assert easy.gap_median > 0.01 and easy.gaps_under_001 < stats.gaps_under_001


def test_a_seed_gives_one_collection():
    a, b = synthetic.generate("realistic", seed=5), synthetic.generate("realistic", seed=5)
    assert a.systems == b.systems and (a.ranked == b.ranked).all() and (a.grades == b.grades).all()
    assert a.duplicates == b.duplicates
    c = synthetic.generate("realistic", seed=6)
    assert not (a.ranked == c.ranked).all()


@pytest.mark.parametrize("preset", synthetic.PRESETS)
def test_arrays_follow_the_order_the_import_reads_from_the_files(tmp_path, preset):
    """Ranks in trec_eval order (score descending, ties by docid descending): the arrays are what the app
    scores, tied scores included."""
    coll = synthetic.generate(preset, systems=6, queries=8, seed=2)
    _, runs, _ = coll.write(tmp_path)
    for s, path in enumerate(runs):
        (tag, lists), *_ = parse_run(path.read_bytes(), filename=path.name).items()
        assert tag == coll.systems[s]
        got = {r.qid: list(r.docids) for r in lists}
        for q in range(coll.shape[1]):
            want = [coll.docid(q, d) for d in coll.ranked[s, q].tolist() if d >= 0]
            assert got.get(coll.qid(q), []) == want


def test_realistic_runs_tie_scores_and_order_ties_by_docid_descending():
    coll = synthetic.generate("realistic", seed=1)
    units, ranked = coll.units, coll.ranked
    tied = (units[..., 1:] == units[..., :-1]) & (ranked[..., 1:] >= 0)
    assert tied.sum() > 100  # rounded scores and exact copies of documents under another docid
    s, q, r = np.nonzero(tied)
    above = [coll.docid(q_, d) for q_, d in zip(q.tolist(), ranked[s, q, r].tolist(), strict=True)]
    below = [coll.docid(q_, d) for q_, d in zip(q.tolist(), ranked[s, q, r + 1].tolist(), strict=True)]
    assert all(a.encode() > b.encode() for a, b in zip(above, below, strict=True))


def test_realistic_runs_miss_queries_and_stop_short():
    coll = synthetic.generate("realistic", seed=1)
    lengths = (coll.ranked >= 0).sum(axis=2)
    assert (lengths == 0).any(axis=1).sum() >= 1  # a system that returned nothing for some queries
    assert ((lengths > 0) & (lengths < 100)).sum() > 10  # lists shorter than the depth


def test_docids_listed_twice_are_dropped_from_the_files_and_refused_by_the_import(tmp_path):
    """A docid twice in one query of a run is an input error (SPEC §3): the raw file is refused naming both
    lines; the files written keep each docid's highest-scored line, as the arrays do."""
    coll = synthetic.generate("realistic", seed=1)
    assert len(coll.duplicates) > 20
    s, q, d, units = coll.duplicates[0]
    assert units < coll.units[s, q][coll.ranked[s, q] == d][0]  # the line dropped is the lower one
    raw = coll.run_text(s, duplicates="keep")
    with pytest.raises(FormatError, match=r"raw\.run, line \d+, field 'docid': duplicate docid") as refused:
        parse_run(raw.encode(), filename="raw.run")
    twice = {coll.docid(q_, d_) for s_, q_, d_, _ in coll.duplicates if (s_, q_) == (s, q)}
    assert any(f"duplicate docid '{docid}' for qid '{coll.qid(q)}'" in str(refused.value) for docid in twice)
    clean = coll.run_text(s)
    assert len(raw.splitlines()) - len(clean.splitlines()) == sum(1 for x in coll.duplicates if x[0] == s)
    parse_run(clean.encode(), filename="clean.run")


@pytest.mark.parametrize("systems", [1, 2, 3, 5])
@pytest.mark.parametrize("queries", [1, 4])
def test_small_realistic_collections(systems, queries):
    coll = synthetic.generate("realistic", systems=systems, queries=queries, depth=10, seed=systems)
    assert coll.shape == (systems, queries, 10) and len(set(coll.systems)) == systems
    stats = synthetic.collection_stats(coll)
    assert stats.systems == systems and 0 <= stats.relevant_share <= 1


def test_labels_and_qrels_arrays():
    coll = synthetic.generate("realistic", systems=4, queries=3, depth=20, seed=3)
    pooled = coll.pool(5)
    labels = coll.labels(pooled)
    assert ((labels == metrics.PAD) == (coll.ranked < 0)).all()
    assert ((labels >= 0)[:, :, :5] | (coll.ranked[:, :, :5] < 0)).all()  # the pool's depth is judged
    qrels = coll.qrels(pooled)
    assert ((qrels >= 0).sum(axis=1) == pooled.sum(axis=1)).all()
    assert (np.diff(qrels.astype(int), axis=1) <= 0).all()  # best first
    full = coll.labels()
    assert (full[coll.ranked >= 0] >= 0).all()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"preset": "hard"}, "unknown preset 'hard'; the presets are realistic, easy"),
        ({"systems": 0}, "systems must be a whole number >= 1, not 0"),
        ({"depth": 10, "docs": 5}, r"docs \(5\) must be at least depth \(10\)"),
    ],
)
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises(synthetic.SpecError, match=message):
        synthetic.generate(**kwargs)


@pytest.mark.parametrize("preset, low, high", [("llm-0.4", 0.33, 0.45), ("llm-0.5", 0.45, 0.57)])
def test_model_judge_presets_reach_their_kappa_on_the_realistic_pools(preset, low, high):
    """The simulated model judges are named by the quadratic-weighted kappa they reach against the true grades of
    the realistic preset's depth-10 pools (scikit-learn's, the oracle), as LLM judges reach with TREC's assessors."""
    from sklearn.metrics import cohen_kappa_score

    for seed in (1, 2):
        coll = synthetic.generate("realistic", seed=seed)
        pooled = coll.pool(10)
        answers = synthetic.model_answers(coll.grades, synthetic.CONFUSIONS[preset], seed=seed)
        kappa = cohen_kappa_score(coll.grades[pooled], answers.argmax(-1)[pooled], weights="quadratic")
        assert low < kappa < high, (preset, seed, kappa)


def test_repeated_answers_agree_more_than_independent_draws():
    coll = synthetic.generate("realistic", systems=6, queries=10, depth=20, seed=3)
    answers = synthetic.model_answers(coll.grades, synthetic.CONFUSIONS["llm-0.4"], seed=3, repeats=5, doubt=0.3)
    assert (answers.sum(axis=-1) == 5).all()
    unanimous = (answers.max(axis=-1) == 5).mean()
    independent = synthetic.model_answers(coll.grades, synthetic.CONFUSIONS["llm-0.4"], seed=3, repeats=5, doubt=1.0)
    assert (independent.max(axis=-1) == 5).mean() < unanimous / 2 < unanimous < 0.95


def test_confusion_matrix_from_a_preset_or_a_file(tmp_path):
    np.testing.assert_allclose(synthetic.confusion_matrix("perfect"), np.eye(4))
    good = tmp_path / "c.txt"
    good.write_text("# P(model | human)\n8 2 0 0\n1,8,1,0\n0 1 8 1\n0 0 2 8\n")
    np.testing.assert_allclose(synthetic.confusion_matrix(good).sum(axis=1), 1.0)
    bad = tmp_path / "bad.txt"
    bad.write_text("1 0 0 0\n0 1 0\n")
    with pytest.raises(synthetic.SpecError, match="line 2: expected 4 numbers"):
        synthetic.confusion_matrix(bad)
    with pytest.raises(synthetic.SpecError, match="neither a preset"):
        synthetic.confusion_matrix("gpt-17")
