"""Properties of the trust statistics on generated collections (bench/synthetic.py, both presets) and degenerate
ones, whatever the unjudged pairs turn out to be: bounds hold the final values, a settled order never flips,
p_holds is a probability, PPI intervals are finite and ordered, the planner's power is a probability."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

import metrics
from bench import synthetic
from metrics.final_order import order_verdicts, query_parts
from metrics.power import paired_power, paired_variance, topic_set_size
from metrics.ppi import ppi_mean
from metrics.relevance_model import label_model
from metrics.verdicts import final_pool, system_bounds

BASES = ("P", "R", "F1", "Hit", "MRR", "MAP", "nDCG", "bpref")
EPS = 1e-9
# the degenerate campaigns of issue 39, as arrays
SHAPES = (
    "as generated",
    "one system",
    "one query",
    "empty lists",  # systems that returned nothing for some queries
    "all 0",
    "all top grade",
    "all tied",  # every score tied: each run in docid order, descending
    "no labels",  # runs, nothing judged yet
)
COMPLETIONS = ("truth", "random", "all 0", "all top grade")


class Case:
    """A collection, what is judged now, and one way the pooled pairs left could turn out."""

    def __init__(self, coll, ranked, grades, known, final, pool_depth, top, k, threshold, gain):
        self.coll, self.ranked, self.grades = coll, ranked, grades
        self.known, self.final = known, final  # (Q, N) bool: labelled now / at the end
        self.pool_depth, self.top, self.k, self.threshold, self.gain = pool_depth, top, k, threshold, gain

    def arrays(self, known):
        """Ranked labels and qrels rows with the labels of ``known`` (Q, N)."""
        n_q = self.grades.shape[0]
        at = np.maximum(self.ranked, 0)
        grade = self.grades[np.arange(n_q)[None, :, None], at]
        seen = known[np.arange(n_q)[None, :, None], at]
        labels = np.where(self.ranked < 0, metrics.PAD, np.where(seen, grade, metrics.UNJUDGED)).astype(np.int8)
        rows = np.where(known, self.grades, metrics.UNJUDGED).astype(np.int8)
        width = max(int(known.sum(axis=1).max(initial=0)), 1)
        return labels, np.sort(rows, axis=1)[:, ::-1][:, :width].copy()


@st.composite
def cases(draw, shapes=SHAPES):
    preset = draw(st.sampled_from(synthetic.PRESETS))
    shape = draw(st.sampled_from(shapes))
    seed = draw(st.integers(0, 2**16))
    n_s = 1 if shape == "one system" else draw(st.integers(2, 7))
    n_q = 1 if shape == "one query" else draw(st.integers(2, 6))
    depth = draw(st.integers(3, 25))
    coll = synthetic.generate(preset, systems=n_s, queries=n_q, depth=depth, seed=seed)
    rng = np.random.default_rng(seed)
    ranked, grades = coll.ranked.copy(), coll.grades.copy()
    top = coll.scale[-1]
    if shape == "empty lists":
        ranked[rng.random(ranked.shape[:2]) < 0.3] = -1
    elif shape == "all 0":
        grades[:] = 0
    elif shape == "all top grade":
        grades[:] = top
    elif shape == "all tied":
        order = coll._docid_order  # every score equal: trec_eval orders by docid, descending
        key = np.where(ranked >= 0, -order[np.maximum(ranked, 0)], np.iinfo(np.int64).max)
        ranked = np.take_along_axis(ranked, np.argsort(key, axis=2, kind="stable"), axis=2)
    pool_depth = draw(st.integers(1, min(depth, 10)))
    pooled = np.zeros(grades.shape, dtype=bool)
    q_of = np.broadcast_to(np.arange(n_q)[None, :, None], ranked[:, :, :pool_depth].shape)
    head = ranked[:, :, :pool_depth]
    pooled[q_of[head >= 0], head[head >= 0]] = True
    share = 0.0 if shape == "no labels" else draw(st.floats(0.0, 1.0))
    known = pooled & (rng.random(pooled.shape) < share)
    if shape != "no labels" and draw(st.booleans()):  # labels outside the pool (imported qrels) count too
        known |= ~pooled & (rng.random(pooled.shape) < 0.05)
    completion = draw(st.sampled_from(COMPLETIONS))
    left = pooled & ~known
    if completion == "random":
        grades = np.where(left, rng.integers(0, top + 1, grades.shape), grades).astype(np.int8)
    elif completion == "all 0":
        grades = np.where(left, 0, grades).astype(np.int8)
    elif completion == "all top grade":
        grades = np.where(left, top, grades).astype(np.int8)
    k = draw(st.integers(1, 10))
    threshold = draw(st.integers(1, max(top, 1)))
    gain = draw(st.sampled_from(metrics.GAINS))
    return Case(coll, ranked, grades, known, known | pooled, pool_depth, top, k, threshold, gain)


def _name(base: str, k: int) -> str:
    return base if base in ("MRR", "MAP", "bpref") else f"{base}@{k}"


def _final_values(case):
    labels, qrels = case.arrays(case.final)
    return metrics.evaluate(labels, qrels, k=case.k, threshold=case.threshold, gain=case.gain), (qrels >= 0).any(1)


FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(cases(), st.sampled_from(BASES))
def test_sound_bounds_hold_every_final_value(case, base):
    """metrics.verdicts' per-query bounds (those the verdicts sum) contain each system's final score on each
    query, whatever grades the pooled pairs left get."""
    labels, qrels = case.arrays(case.known)
    pool = final_pool(labels, case.ranked, pool_depth=case.pool_depth)
    low, high = system_bounds(base, pool, qrels, k=case.k, threshold=case.threshold, gain=case.gain, top_grade=case.top)
    assert np.isfinite(low).all() and np.isfinite(high).all()
    assert (low <= high).all() and (low >= 0).all() and (high <= 1).all()  # exactly, rounding clipped
    final, _ = _final_values(case)
    end = final[_name(base, case.k)]
    assert (end >= low - EPS).all() and (end <= high + EPS).all()


def _pool_bounds(case, labels, qrels):
    """The leaderboard's bounds (judging.scoring.trust.bounds): metrics.pool_bounds of the case's pool."""
    return metrics.pool_bounds(
        labels,
        case.ranked,
        qrels,
        pool_depth=case.pool_depth,
        k=case.k,
        top_grade=case.top,
        threshold=case.threshold,
        gain=case.gain,
    )


@FAST
@given(cases())
def test_leaderboard_bounds_are_finite_ordered_and_hold_todays_value(case):
    """metrics.pool_bounds, the leaderboard's "bounds": finite, within [0, 1] and ordered exactly (rounding
    clipped, metrics.numbers), low <= today's score <= high."""
    labels, qrels = case.arrays(case.known)
    bounds = _pool_bounds(case, labels, qrels)
    today = metrics.evaluate(labels, qrels, k=case.k, threshold=case.threshold, gain=case.gain)
    for name, (low, high) in bounds.items():
        assert np.isfinite(low).all() and np.isfinite(high).all(), name
        assert (low >= 0).all() and (low <= high).all() and (high <= 1).all(), name
        assert (low <= today[name] + EPS).all() and (today[name] <= high + EPS).all(), name


def test_leaderboard_bounds_of_a_realistic_track_stay_in_range():
    """Issue 39's 1.0000000000000002: 48 systems x 50 queries of the realistic preset, 5% of the pool judged,
    nDCG@10's high bounds (a DCG over an ideal DCG summed in another order) end exactly at 1."""
    coll = synthetic.generate("realistic", seed=1)
    pooled = coll.pool(10)
    known = pooled & (np.random.default_rng(1).random(pooled.shape) < 0.05)
    for gain in metrics.GAINS:
        labels, qrels = coll.labels(known), coll.qrels(known)
        for bounds in (
            metrics.pool_bounds(labels, coll.ranked, qrels, pool_depth=10, k=10, top_grade=3, gain=gain),
            metrics.score_bounds(labels, qrels, k=10, top_grade=3, gain=gain),
        ):
            for name, (low, high) in bounds.items():
                assert (low >= 0).all() and (low <= high).all() and (high <= 1).all(), (gain, name, high.max())


@FAST
@given(cases(), st.sampled_from(("P", "Hit", "MRR")))
def test_leaderboard_bounds_hold_the_final_value_of_the_measures_of_a_runs_own_labels(case, base):
    """P@k, Hit@k and RR read nothing but the system's own ranked labels: the final value lies in the
    leaderboard's bounds whatever the pooled pairs left turn out to be."""
    labels, qrels = case.arrays(case.known)
    bounds = _pool_bounds(case, labels, qrels)
    final, _ = _final_values(case)
    name = _name(base, case.k)
    low, high = bounds[name]
    assert (final[name] >= low - EPS).all() and (final[name] <= high + EPS).all()


@settings(max_examples=300, deadline=None, derandomize=True, database=None, phases=[Phase.generate])
@given(cases(shapes=("as generated",)), st.sampled_from(("R", "F1", "MAP", "nDCG", "bpref")))
def test_leaderboard_bounds_hold_the_final_value_of_every_measure(case, base):
    """The leaderboard's bounds (metrics.pool_bounds) hold every measure's final value, R, F1, MAP, nDCG and bpref
    included: a document only another system found, graded relevant, lowers them, and the low bound counts on it
    (the per-run hull of metrics.score_bounds did not: issue 39)."""
    labels, qrels = case.arrays(case.known)
    bounds = _pool_bounds(case, labels, qrels)
    final, _ = _final_values(case)
    name = _name(base, case.k)
    low, high = bounds[name]
    assert (final[name] >= low - EPS).all() and (final[name] <= high + EPS).all()


def _verdicts(case, known, base):
    """Every ordered comparison (a, b), a != b, over the queries the final means will hold."""
    labels, qrels = case.arrays(known)
    n_s, n_q, _ = labels.shape
    pool = final_pool(labels, case.ranked, pool_depth=case.pool_depth)
    model = label_model(pool, top_grade=case.top, n_systems=n_s)
    parts = query_parts(
        base,
        pool,
        qrels,
        model,
        k=case.k,
        threshold=case.threshold,
        gain=case.gain,
        seeds=np.arange(n_q),
        samples=32,
    )
    final = (qrels >= 0).any(axis=1) | (pool.distinct > 0)
    a, b = (x.reshape(-1) for x in np.nonzero(~np.eye(n_s, dtype=bool)))
    return a, b, order_verdicts(parts, final, a, b)


@FAST
@given(cases(), st.sampled_from(BASES), st.integers(0, 2**16))
def test_a_settled_order_never_flips_as_labels_are_added(case, base, seed):
    """Label the pooled pairs left in two more steps: an order settled at one step stays settled at every later
    one and holds in the final means; a tie stays a tie; p_holds is a probability at every step."""
    rng = np.random.default_rng(seed)
    middle = case.known | (case.final & (rng.random(case.final.shape) < 0.5))
    steps = [case.known, middle, case.final]
    final, scored = _final_values(case)
    end = final[_name(base, case.k)].sum(axis=1)  # the final means times the number of final queries
    before = None
    for known in steps:
        a, b, got = _verdicts(case, known, base)
        assert np.isfinite(got.p_holds).all() and ((got.p_holds >= 0) & (got.p_holds <= 1)).all()
        assert np.isfinite(got.low).all() and np.isfinite(got.high).all() and (got.low <= got.high + EPS).all()
        settled = np.array([v == "settled" for v in got.verdict], dtype=bool)
        tied = np.array([v == "tied" for v in got.verdict], dtype=bool)
        assert (end[a[settled]] - end[b[settled]] > 0).all()
        assert (np.abs(end[a[tied]] - end[b[tied]]) <= 1e-6).all()
        if before is not None:
            assert settled[before].all(), "an order settled before is no longer settled"
        before = settled


# --------------------------------------------------------------------------- PPI and the planner


@FAST
@given(
    st.integers(1, 6),  # systems
    st.integers(2, 60),  # queries
    st.sampled_from(("uniform", "binary", "constant", "model right")),
    st.sampled_from((None, "queries", "infinite")),
    st.integers(0, 2**16),
)
def test_ppi_intervals_are_finite_and_ordered(n_s, n_q, kind, population, seed):
    """Whatever the model and human per-query values in [0, 1] (constant ones, the model right everywhere, a
    handful audited), the prediction-powered estimate is finite and low <= estimate <= high from two audited
    queries on."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, n_q + 1))
    audited = rng.permutation(n_q)[:n]
    if kind == "uniform":
        model, human = rng.random((n_s, n_q)), rng.random((n_s, n))
    elif kind == "binary":
        model, human = rng.integers(0, 2, (n_s, n_q)).astype(float), rng.integers(0, 2, (n_s, n)).astype(float)
    elif kind == "constant":
        model, human = np.full((n_s, n_q), rng.random()), np.full((n_s, n), rng.random())
    else:
        model = rng.random((n_s, n_q))
        human = model[:, audited]
    size = {None: None, "queries": float(n_q), "infinite": np.inf}[population]
    got = ppi_mean(model, audited, human, population=size)
    for x in (got.estimate, got.low, got.high):
        assert np.isfinite(x).all()
    assert (got.low <= got.estimate + EPS).all() and (got.estimate <= got.high + EPS).all()


POWER = settings(max_examples=100, deadline=None)


@POWER
@example(n=84337, delta=0.125, sd=1.0, alpha=0.01)  # scipy's NaN far in the tail (issue 39)
@given(
    st.integers(2, 100_000),
    st.floats(0.0, 1.0),
    st.one_of(st.just(0.0), st.floats(1e-9, 1.0)),
    st.sampled_from([0.01, 0.05, 0.1]),
)
def test_power_is_a_probability(n, delta, sd, alpha):
    power = paired_power(n, delta, sd, alpha)
    assert np.isfinite(power).all() and ((power >= 0) & (power <= 1)).all()


@POWER
@example(delta=1.0, sd=0.125, power=0.5)  # NaN power at n = 4 (issue 39)
@example(delta=0.0078125, sd=1.0, power=0.5)  # the normal approximation overshot the exact n by one
@given(st.floats(1e-3, 1.0), st.floats(0.0, 1.0), st.sampled_from([0.5, 0.8, 0.9, 0.95]))
def test_topic_set_size_is_the_first_n_reaching_the_power(delta, sd, power):
    n = topic_set_size(delta, sd, power=power)
    if n is not None:
        assert n >= 2 and paired_power(n, delta, sd) >= power
        if n > 2:
            assert paired_power(n - 1, delta, sd) < power


@POWER
@example(case=None, delta=0.5)
@given(cases(), st.floats(0.01, 1.0))
def test_the_planners_variance_and_power_are_finite_on_generated_scores(case, delta):
    """The planner's figures from a campaign's per-query scores (judging.scoring.plan): a finite variance >= 0,
    and for every delta the power of each adjacent comparison and of the whole in [0, 1]."""
    if case is None:  # the plan API's 500 of issue 39: delta 0.5, 4 queries, differences of sd 0.1
        diff = 0.3 + 0.1 * np.array([-1.5, -0.5, 0.5, 1.5]) / np.std([-1.5, -0.5, 0.5, 1.5], ddof=1)
        scores = np.array([0.5 + diff, np.full(4, 0.5)])
    else:
        final, scored = _final_values(case)
        scores = final[_name("nDCG", case.k)][:, scored]
    if scores.shape[0] < 2 or scores.shape[1] < 2:
        return
    var = paired_variance(scores)
    assert np.isfinite(var) and var >= 0
    order = np.argsort(-scores.mean(axis=1), kind="stable")
    pair_sd = (scores[order[:-1]] - scores[order[1:]]).std(axis=1, ddof=1)
    for sd in (np.sqrt(var), pair_sd[pair_sd > 0]):
        power = paired_power(scores.shape[1], delta, sd)
        assert np.isfinite(power).all() and ((power >= 0) & (power <= 1)).all()
