"""bench/effort_bench.py without a server: its file checks, generator, local scoring and verdict bookkeeping."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import pytrec_eval

import metrics
from bench import effort_bench as eb
from bench import synthetic


def _files(tmp_path, qrels: str, runs: dict[str, str], topics: str | None = None):
    (tmp_path / "q.txt").write_text(qrels)
    paths = []
    for name, text in runs.items():
        path = tmp_path / name
        path.write_text(text)
        paths.append(path)
    topic_path = None
    if topics is not None:
        topic_path = tmp_path / "t.tsv"
        topic_path.write_text(topics)
    return tmp_path / "q.txt", paths, topic_path


RUN_A = "q1 Q0 d1 1 3 a\nq1 Q0 d2 2 2 a\nq2 Q0 d3 1 1 a\n"
RUN_B = "q1 Q0 d2 1 3 b\nq1 Q0 d4 2 2 b\nq2 Q0 d3 1 1 b\n"


def test_refuses_a_label_off_the_scale_naming_file_line_and_field(tmp_path):
    qrels, runs, _ = _files(tmp_path, "q1 0 d1 1\nq1 0 d2 5\n", {"a.run": RUN_A})
    with pytest.raises(eb.InputError, match=r"q\.txt, line 2, field 'label': grade 5 is not on the scale 0,1,2"):
        eb.read_collection(qrels, runs, None, [0, 1, 2])


def test_refuses_a_run_query_missing_from_the_topics(tmp_path):
    qrels, runs, topics = _files(tmp_path, "q1 0 d1 1\n", {"a.run": RUN_A}, "q1\tfirst query\n")
    with pytest.raises(eb.InputError, match=r"a\.run, line 3, field 'qid': query 'q2' is not in"):
        eb.read_collection(qrels, runs, topics, None)


def test_refuses_one_system_in_two_files_and_bad_lines(tmp_path):
    qrels, runs, _ = _files(tmp_path, "q1 0 d1 1\n", {"a.run": RUN_A, "a2.run": RUN_A})
    with pytest.raises(eb.InputError, match=r"a2\.run, field 'tag': system 'a' is already in"):
        eb.read_collection(qrels, runs, None, None)
    qrels, runs, _ = _files(tmp_path, "q1 0 d1\n", {"a.run": RUN_A})
    with pytest.raises(eb.InputError, match=r"q\.txt, line 1"):
        eb.read_collection(qrels, runs, None, None)


def test_confusion_matrix_is_checked(tmp_path):
    assert eb.parse_confusion("1,0;0.2,0.8", [0, 1]).shape == (2, 2)
    with pytest.raises(eb.InputError, match="summing to 1"):
        eb.parse_confusion("1,0;0.5,0.8", [0, 1])
    with pytest.raises(eb.InputError, match="2 rows of 2"):
        eb.parse_confusion("1,0,0;0,1,0", [0, 1])


@pytest.mark.parametrize("preset", ["easy", "realistic"])
def test_local_scores_match_pytrec_eval_on_the_pool(tmp_path, preset):
    """The simulator's ranking (nDCG@k over the labelled queries, unjudged = not relevant) is trec_eval's
    ndcg_cut on the pooled labels."""
    qrels_path, runs, topics = eb.generate(preset, "systems=5,queries=6,depth=12", 3).write(tmp_path / "gen")
    coll = eb.read_collection(qrels_path, runs, topics, None)
    scorer = eb.Scorer(coll, pool_depth=8, k=10)
    pool_labels = {key: max(coll.qrels.get(key, 0), 0) for key in scorer.keys}
    got = scorer.scores(pool_labels)
    qrel = {}
    for (qid, docid), grade in pool_labels.items():
        qrel.setdefault(qid, {})[docid] = grade
    evaluator = pytrec_eval.RelevanceEvaluator(qrel, {"ndcg_cut.10"})
    for s, tag in enumerate(coll.systems):
        run = {qid: {d: float(len(docs) - r) for r, d in enumerate(docs)} for qid, docs in coll.rankings[tag].items()}
        per_query = evaluator.evaluate(run)
        # a query the system returned nothing for scores 0 (trec_eval -c); pytrec_eval leaves it out
        want = np.mean([per_query.get(q, {}).get("ndcg_cut_10", 0.0) for q in qrel])
        assert got[s] == pytest.approx(want, abs=1e-9)


def test_generated_files_read_back_with_their_sizes_and_scale(tmp_path):
    qrels_path, runs, topics = eb.generate("easy", "systems=8,queries=40,depth=20", 1).write(tmp_path / "easy")
    coll = eb.read_collection(qrels_path, runs, topics, None)
    assert len(coll.systems) == 8 and len(coll.qids) == 40 and coll.grades == [0, 1, 2]
    scores = eb.Scorer(coll, pool_depth=20, k=10).scores(dict(coll.qrels))
    assert np.ptp(scores) > 0.2  # systems of spread quality
    qrels_path, runs, topics = eb.generate("realistic", "systems=12,queries=5", 1).write(tmp_path / "real")
    coll = eb.read_collection(qrels_path, runs, topics, None)
    assert len(coll.systems) == 12 and len(coll.qids) == 5 and coll.grades == [0, 1, 2, 3]


def test_stats_from_the_files_are_the_generators(tmp_path):
    """What the bench prints beside its table, from the files it read, is what the generator measures."""
    gen = eb.generate("realistic", "systems=10,queries=8,depth=30", 4)
    coll = eb.read_collection(*gen.write(tmp_path / "gen"), None)
    got = dataclasses.asdict(eb.Scorer(coll, pool_depth=10, k=10).stats(coll.qrels))
    assert got == pytest.approx(dataclasses.asdict(synthetic.collection_stats(gen, pool_depth=10)), abs=1e-12)


def test_a_bad_generator_spec_names_the_part():
    with pytest.raises(eb.InputError, match=r"--generate: expected systems=N.*not 'systems=x'"):
        eb.generate("realistic", "systems=x", 1)
    with pytest.raises(eb.InputError, match="--generate: expected .* not 'pool=3'"):
        eb.generate("easy", "pool=3", 1)


def test_wrong_verdicts_are_counted_against_the_final_ranking():
    run = eb.ModeRun("mtc", pool=4)
    run.labels = {("q", "x"): 1}
    run.checkpoints = [
        eb.Checkpoint(1, 0.25, {}, [("a", "b", "settled", None), ("b", "a", "likely", 0.97)]),
        eb.Checkpoint(2, 0.5, {}, [("b", "a", "likely", 0.99)]),
    ]

    class Fixed:
        def scores(self, labels):
            return np.array([0.9, 0.1])  # a well above b, at every checkpoint and at the end

    coll = eb.Collection(["a", "b"], ["q"], {}, {}, {}, {}, None, [0, 1])
    figs = eb.figures(coll, Fixed(), run)
    assert figs.wrong_settled == set()
    assert figs.wrong_likely == {("b", "a")} and (figs.likely_wrong_claims, figs.likely_claims) == (2, 2)
    assert figs.top1 == [True, True]


def test_verdict_claims_read_either_json_shape():
    old = {"settled": [{"systems": ["a", "b"], "settled": True}, {"systems": ["b", "c"], "settled": False}]}
    assert eb.verdict_claims(old) == [("a", "b", "settled", None)]
    new = {
        "settled": [
            {"systems": ["a", "b"], "verdict": "likely", "p_holds": 0.97},
            {"systems": ["b", "c"], "verdict": "tied", "p_holds": 0.5},
            {"systems": ["c", "d"], "verdict": "settled", "p_holds": 1.0},
        ]
    }
    assert eb.verdict_claims(new) == [("a", "b", "likely", 0.97), ("c", "d", "settled", 1.0)]


def test_stays_is_the_share_from_which_a_figure_holds_to_the_end():
    shares = [0.1, 0.2, 0.3, 0.4]
    assert eb._stays(shares, [True, False, True, True]) == 0.3
    assert eb._stays(shares, [True, True, True, False]) is None


def test_the_simulated_model_judge_answers_by_its_confusion_matrix():
    coll = synthetic.generate("realistic", systems=6, queries=8, depth=20, seed=3)
    grades = np.arange(4)
    keys = [(coll.qid(q), coll.docid(q, d)) for q in range(8) for d in range(coll.grades.shape[1])]
    files = eb.Collection(
        [],
        [],
        {},
        {k: int(coll.grades[i // coll.grades.shape[1], i % coll.grades.shape[1]]) for i, k in enumerate(keys)},
        {},
        {},
        None,
        list(grades),
    )
    perfect = eb.model_labels(files, keys, synthetic.CONFUSIONS["perfect"], seed=1)
    assert perfect == {k: files.qrels[k] for k in keys}
    reversed_ = eb.model_labels(files, keys, synthetic.CONFUSIONS["reversed"], seed=1)
    true = np.array([files.qrels[k] for k in keys])
    given = np.array([reversed_[k] for k in keys])
    assert np.corrcoef(true, given)[0, 1] < -0.5
    # an LLM-like judge: each row's answers follow its row of the matrix (a chi-square-sized tolerance)
    llm = synthetic.CONFUSIONS["llm-0.5"]
    many = eb.model_labels(
        eb.Collection([], [], {}, {("q", str(i)): 2 for i in range(20_000)}, {}, {}, None, list(grades)),
        [("q", str(i)) for i in range(20_000)],
        llm,
        seed=2,
    )
    shares = np.bincount(list(many.values()), minlength=4) / 20_000
    assert np.allclose(shares, llm[2], atol=0.015)
    assert eb.model_labels(files, keys, llm, seed=1) == eb.model_labels(files, keys, llm, seed=1)  # every mode alike


def test_hybrid_checkpoints_count_wrong_settled_likely_and_stops():
    run = eb.ModeRun("hybrid", pool=4)
    run.labels = {("q", "x"): 1}
    run.checkpoints = [
        eb.Checkpoint(1, 0.25, {}, [], {"a": 0.2, "b": 0.8}, [("b", "a", "settled", 1.0)], ["b"]),
        eb.Checkpoint(2, 0.5, {}, [], {"a": 0.9, "b": 0.1}, [("a", "b", "likely", 0.95)], ["a"]),
    ]

    class Fixed:
        def scores(self, labels):
            return np.array([0.9, 0.1])  # a above b in the end

    coll = eb.Collection(["a", "b"], ["q"], {}, {}, {}, {}, None, [0, 1])
    figs = eb.figures(coll, Fixed(), run)
    assert figs.hybrid_tau == [-1.0, 1.0]
    assert figs.hybrid_wrong_settled == {("b", "a")}
    assert (figs.hybrid_likely_wrong, figs.hybrid_likely) == (0, 1)
    assert (figs.hybrid_stops, figs.hybrid_wrong_stops) == (2, 1)
    assert "hybrid tau>=0.9" in eb.table([run], [figs])


def test_hybrid_without_a_model_judge_is_refused(capsys, tmp_path, monkeypatch):
    # main() names its database in the environment: restored after the test
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'x.sqlite3'}")
    out = ["--out", str(tmp_path), "--generate", "systems=3,queries=2,depth=5"]
    assert eb.main(["--modes", "shuffled,hybrid", *out]) == 2
    assert "hybrid needs a model judge: give --model-confusion" in capsys.readouterr().err
    assert eb.main(["--model-confusion", "nope", *out]) == 2
    assert "neither a preset" in capsys.readouterr().err


# --------------------------------------------------------------------------- reference orders (issue 40 item 4)


def _tiny(tmp_path, spec: str = "systems=6,queries=5,depth=12", seed: int = 2):
    coll = eb.read_collection(*eb.generate("realistic", spec, seed).write(tmp_path / "gen"), None)
    return coll, eb.Scorer(coll, pool_depth=6, k=10)


def test_scores_of_a_label_vector_are_the_scores_of_the_same_labels(tmp_path):
    coll, scorer = _tiny(tmp_path)
    grade = eb.true_grades(coll, scorer)
    some = np.arange(grade.size) % 3 == 0
    vec = np.where(some, grade, -1).astype(np.int8)
    labels = {key: int(grade[i]) for i, key in enumerate(scorer.keys) if some[i]}
    assert np.array_equal(scorer.scores_of(vec), scorer.scores(labels))
    # a query without a label is left out of the mean (the leaderboard's means); one labelled all 0 counts
    q = int(np.argmax(np.bincount(scorer.key_q, weights=grade > 0)))
    alone = scorer.scores_of(np.where(scorer.key_q == q, grade, -1).astype(np.int8))
    zeros = scorer.scores_of(np.where(scorer.key_q == q, grade, 0).astype(np.int8))
    assert alone.max() > 0 and np.allclose(alone, zeros * scorer.n_q)


def test_relevant_first_puts_higher_grades_first_with_seeded_ties():
    grade = np.array([0, 2, 1, 0, 2, 3, 1, 0], dtype=np.int8)
    order = eb.relevant_first_order(grade, seed=1)
    assert sorted(order.tolist()) == list(range(8))
    assert grade[order].tolist() == [3, 2, 2, 1, 1, 0, 0, 0]
    assert np.array_equal(order, eb.relevant_first_order(grade, seed=1))
    many = np.zeros(50, dtype=np.int8)
    assert not np.array_equal(eb.relevant_first_order(many, seed=1), eb.relevant_first_order(many, seed=2))


def test_rank_sum_order_is_the_brute_force_one(tmp_path):
    coll, scorer = _tiny(tmp_path)
    weight = {}
    for tag in coll.systems:
        for qid, docids in coll.rankings[tag].items():
            for rank, docid in enumerate(docids[:6], start=1):
                weight[(qid, docid)] = weight.get((qid, docid), 0.0) + 1.0 / np.log2(rank + 1)
    at = {key: i for i, key in enumerate(scorer.keys)}
    want = sorted(scorer.keys, key=lambda key: (-round(weight[key], 12), at[key]))
    got = [scorer.keys[i] for i in eb.rank_sum_order(scorer, pool_depth=6)]
    assert got == want
    assert set(weight) == set(scorer.keys)


def test_relevant_first_reaches_the_whole_pools_ranking_no_later_than_shuffled(tmp_path):
    coll, scorer = _tiny(tmp_path, "systems=8,queries=8,depth=20", seed=3)
    grade = eb.true_grades(coll, scorer)
    oracle = eb.reference_figures(coll, scorer, "relevant-first", eb.relevant_first_order(grade, 1), step=5)
    relevant = np.count_nonzero(grade) / grade.size
    # once every relevant pair is judged the rest are 0s: they change no ranking
    exact = eb._stays(oracle.shares, [t == 1.0 for t in oracle.tau])
    assert exact is not None and exact <= relevant + 0.05 + 1e-9
    assert oracle.tau[-1] == 1.0 and oracle.top1[-1] and oracle.top3[-1]
    for seed in range(5):
        shuffled = np.random.default_rng(seed).permutation(grade.size)
        random_figs = eb.reference_figures(coll, scorer, "shuffled", shuffled, step=5)
        assert random_figs.shares == oracle.shares
        assert exact <= eb._stays(random_figs.shares, [t == 1.0 for t in random_figs.tau])


def test_only_reference_runs_offline_and_reports_the_ratio(capsys, tmp_path, monkeypatch):
    db = tmp_path / "x.sqlite3"
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{db}")
    out = ["--out", str(tmp_path), "--generate", "systems=6,queries=5,depth=12", "--port", "1"]
    assert eb.main(["--only-reference", *out]) == 0
    printed = capsys.readouterr().out
    assert "relevant-first*" in printed and "rank-sum*" in printed and "a reference order, not a queue mode" in printed
    assert not db.exists()  # no campaign, no server
    data = __import__("json").loads((tmp_path / "effort.json").read_text())
    assert data["modes"] == [] and [r["order"] for r in data["references"]] == ["relevant-first", "rank-sum"]
    assert data["references"][0]["tau"][-1] == 1.0
    assert eb.main(["--modes", "none", *out]) == 0


def test_the_table_gives_the_best_people_only_mode_over_relevant_first():
    def fig(mode: str, taus: list[float]) -> eb.Figures:
        n = len(taus)
        return eb.Figures(
            mode, [(i + 1) / n for i in range(n)], taus, taus, [True] * n, [True] * n, set(), set(), 0, 0, 0
        )

    refs = [fig("relevant-first", [0.5, 0.95, 1.0, 1.0]), fig("rank-sum", [0.5, 0.8, 0.95, 1.0])]
    figs = [fig("shuffled", [0.1, 0.5, 0.8, 1.0]), fig("mtc", [0.2, 0.5, 0.91, 1.0]), fig("hybrid", [1.0] * 4)]
    assert eb.best_over_oracle(figs, refs) == ("mtc", 0.75, 0.5, 1.5)  # hybrid is no people-only mode
    runs = [eb.ModeRun(f.mode, pool=4) for f in figs]
    text = eb.table(runs, figs, refs, pool=4)
    assert "the best people-only mode (mtc) from 75% of the pool, relevant-first from 50%: ratio 1.50" in text
    assert eb.best_over_oracle([fig("shuffled", [0.1] * 4)], refs) is None


# --------------------------------------------------------------------------- the stop's estimate


def test_stop_fields_read_the_leaderboards_stop():
    assert eb.stop_fields({"stop": {"reached": False, "judgments_left_estimate": 250}}) == (False, 250)
    assert eb.stop_fields({"stop": {"reached": True, "judgments_left_estimate": 0}}) == (True, 0)
    assert eb.stop_fields({}) == (None, None)
    assert eb.stop_fields({"stop": {"reached": "yes", "judgments_left_estimate": None}}) == (None, None)


def test_stop_accuracy_compares_each_estimate_with_the_judgments_the_stop_took():
    judged = [100, 200, 300, 400, 500, 600]
    reached = [False, None, False, True, False, True]
    estimate = [150, 40, 0, 0, 10, 0]
    acc = eb.stop_accuracy(judged, reached, estimate)
    # the stop first said reached at 400 (then took it back at 500, and said it again at 600)
    assert (acc.first, acc.stays) == (400, 600)
    assert acc.ratios == [pytest.approx(300 / 150), pytest.approx(200 / 40)]
    assert acc.ignored == 1  # 300's estimate of 0 before the stop
    assert acc.median == pytest.approx(3.5) and acc.within == 0.0
    exact = eb.stop_accuracy([10, 20, 30], [False, False, True], [20, 12, 0], pool=30)
    assert exact.ratios == [1.0, pytest.approx(10 / 12)] and exact.within == 1.0
    assert exact.everything == 2  # 20 of the 20 pairs left at 10, 12 of the 10 at 20
    assert eb.stop_accuracy([10, 20, 30], [False, False, True], [20, 12, 0], pool=60).everything == 0
    never = eb.stop_accuracy([10, 20], [False, False], [5, 5])
    assert never.first is None and never.ratios == [] and never.median is None
    figs = eb.Figures("mtc", [], [], [], [], [], set(), set(), 0, 0, 0, stop=never)
    assert "the stop never said reached within the pool" in eb.stop_table([figs], pool=20)


def test_figures_carry_each_checkpoints_stop():
    run = eb.ModeRun("mtc", pool=4)
    run.labels = {("q", "x"): 1}
    run.checkpoints = [
        eb.Checkpoint(1, 0.25, {}, [], stop_reached=False, stop_left=2),
        eb.Checkpoint(2, 0.5, {}, [], stop_reached=False, stop_left=4),
        eb.Checkpoint(3, 0.75, {}, [], stop_reached=True, stop_left=0),
    ]

    class Fixed:
        def scores(self, labels):
            return np.array([0.9, 0.1])

    coll = eb.Collection(["a", "b"], ["q"], {}, {}, {}, {}, None, [0, 1])
    figs = eb.figures(coll, Fixed(), run)
    assert figs.stop is not None and figs.hybrid_stop_accuracy is None
    assert figs.stop.first == 3 and figs.stop.ratios == [1.0, 0.25]
    assert "median actual/estimate" in eb.stop_table([figs], pool=4)


def test_the_issues_model_baseline_takes_people_first_in_rank_sum_order_and_the_model_elsewhere(tmp_path):
    """Issue 40's baseline with a model judge: a model that answers every true grade ranks the systems exactly at
    every share; one that calls everything not relevant gives the people-only ranking of the rank-sum order's
    first pairs (with the model's 0s counted as labels); its line names every share."""
    coll, scorer = _tiny(tmp_path, "systems=8,queries=8,depth=20", seed=3)
    grade = eb.true_grades(coll, scorer)
    perfect = {key: int(g) for key, g in zip(scorer.keys, grade, strict=True)}
    assert [t for _, t in eb.model_baseline(coll, scorer, perfect, 6)] == [1.0] * len(eb.BASELINE_SHARES)
    nothing = dict.fromkeys(scorer.keys, 0)
    got = eb.model_baseline(coll, scorer, nothing, 6)
    order = eb.rank_sum_order(scorer, 6)
    final = scorer.scores_of(grade)
    for share, tau in got:
        n = int(round(share * grade.size))
        vec = np.zeros(grade.size, dtype=np.int8)
        vec[order[:n]] = grade[order[:n]]
        assert tau == pytest.approx(metrics.kendall_tau(final, scorer.scores_of(vec)))
    assert got[0][1] < 1.0
    line = eb.model_baseline_line(coll, scorer, nothing, 6)
    assert all(f"{share:.0%} " in line for share in eb.BASELINE_SHARES)
