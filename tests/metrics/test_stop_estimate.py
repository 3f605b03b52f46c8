"""The stop's estimate of the judgments before it (metrics.final_order.judgments_to_stop), checked against the
judgments the stop actually took on generated campaigns with known labels (bench/synthetic.py's realistic preset:
near-tied families of systems, skewed queries, grades 0-3): people judge 1% of the pool at a time, at random or in
MTC's order (Carterette, Allan & Sitaraman, SIGIR 2006), and at every step before the stop the estimate is compared
with the judgments still to come before it. On MTC's path the estimate is given MTC's schedule of the pending pairs
(metrics.selection.mtc_schedule: the queue's order, each pair weighed by its coefficients in the open top
comparisons), on the random path none (the even pace across the queries).

Issue 40 asks for the estimate within a factor of 1.5 of what the stop took; the count of pairs that would settle
the top comparisons as they stand (what ``judgments_left_estimate`` was first) was 2-7 times too small, and the
count along MTC's view with the expected differences held where they stood (what it was next) was within 1.5 at
49% of MTC's steps at 48 systems, 64% for the predictive estimate at an even pace, 72% with MTC's schedule.
"""

from __future__ import annotations

import numpy as np
import pytest

from bench import synthetic
from metrics.final_order import judgments_to_stop, order_verdicts, query_parts
from metrics.relevance_model import label_model
from metrics.selection import mtc_schedule
from metrics.verdicts import final_pool

N_SYSTEMS, N_QUERIES, DEPTH, POOL_DEPTH, K, TOP_K = 24, 30, 50, 10, 10, 3


def _reading(coll, known: np.ndarray, seed: int, how: str = "random"):
    n_systems, n_queries = coll.ranked.shape[:2]
    labels, qrels = coll.labels(known), coll.qrels(known)
    pool = final_pool(labels, coll.ranked, pool_depth=POOL_DEPTH)
    relevance = label_model(pool, top_grade=3, n_systems=n_systems)
    parts = query_parts(
        "nDCG", pool, qrels, relevance, k=K, threshold=1, gain="linear", seeds=np.arange(n_queries) + seed, samples=64
    )
    final = (qrels >= 0).any(axis=1) | (pool.distinct > 0)
    order = np.lexsort((np.arange(n_systems), -np.round((parts.mean * final).sum(axis=1), 12)))
    got = order_verdicts(parts, final, order[:-1], order[1:])
    certain = np.array([w in ("settled", "tied") for w in got.verdict[:TOP_K]])
    reached = bool(certain.all() or (1.0 - np.asarray(got.p_holds[:TOP_K])).sum() <= 0.05 + 1e-12)
    schedule = None
    if how == "mtc":
        # the queue's order, each pair weighed by its coefficients in the open top comparisons
        above, below = order[:TOP_K][~certain], order[1 : TOP_K + 1][~certain]
        ranked, ids = labels[..., :POOL_DEPTH], coll.ranked[..., :POOL_DEPTH]
        schedule = mtc_schedule(ranked, qrels, ids, above, below, k=K, top_grade=3)
    estimate = judgments_to_stop(
        parts,
        final,
        order[:TOP_K],
        order[1 : TOP_K + 1],
        certain=certain,
        queue=None if schedule is None else schedule.query,
        queue_weights=None if schedule is None else schedule.weight,
    )
    # the count to settle as the comparisons stand: the unjudged pairs in the cutoff of their systems
    systems = np.zeros(n_systems, dtype=bool)
    for i in np.flatnonzero(~certain):
        systems[order[i]] = systems[order[i + 1]] = True
    ids, lab = coll.ranked[systems][:, :, :K], labels[systems][:, :, :K]
    queries = np.broadcast_to(np.arange(n_queries)[None, :, None], ids.shape)
    unjudged = (lab == -1) & (ids >= 0)
    to_settle = np.unique(queries[unjudged] * (1 << 32) + ids[unjudged]).size
    return labels, qrels, reached, estimate, to_settle, schedule


def _ratios(seed: int, how: str, size: tuple[int, int] = (N_SYSTEMS, N_QUERIES)) -> tuple[list[float], list[float]]:
    """estimate / judgments taken, and to_settle / judgments taken, at every step before the stop."""
    coll = synthetic.generate("realistic", systems=size[0], queries=size[1], depth=DEPTH, seed=seed)
    pooled = coll.pool(POOL_DEPTH)
    step = max(1, int(pooled.sum()) // 100)
    rng = np.random.default_rng(seed)
    known = np.zeros(pooled.shape, dtype=bool)
    steps = []
    while True:
        labels, qrels, reached, estimate, to_settle, schedule = _reading(coll, known, seed, how)
        steps.append((int(known.sum()), estimate, to_settle))
        if reached or known.sum() == pooled.sum():
            break
        if schedule is not None:  # MTC's order
            known[schedule.query[:step], schedule.doc[:step]] = True
        else:
            open_ = np.flatnonzero((pooled & ~known).ravel())
            known.flat[rng.choice(open_, min(step, open_.size), replace=False)] = True
    if not reached:
        return [], []
    stop = steps[-1][0]
    taken = [max(stop - n, 1) for n, _, _ in steps[:-1]]
    return (
        [e / t for (_, e, _), t in zip(steps[:-1], taken, strict=True)],
        [s / t for (_, _, s), t in zip(steps[:-1], taken, strict=True)],
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "how, size, within",
    [("random", (N_SYSTEMS, N_QUERIES), 0.95), ("mtc", (N_SYSTEMS, N_QUERIES), 0.7), ("mtc", (48, 50), 0.68)],
)
def test_the_estimate_is_near_the_judgments_the_stop_took(how, size, within):
    """On the random path the stop comes near the end of the pool, on MTC's at 44-99% of it. Within 1.5x: random
    99% of the steps (no schedule: the even pace), 91% for the estimate that held the expected differences and aimed
    at the top comparisons; on MTC's path, with MTC's schedule (metrics.selection.mtc_schedule), 74% at 24 systems
    and 72% at 48 (the effort bench's size), where the even pace gave 68% and 64% and the estimate before that 60%
    and 49%: each bar refuses the estimates before."""
    estimate: list[float] = []
    to_settle: list[float] = []
    for seed in range(1, 7):
        e, s = _ratios(seed, how, size)
        estimate += e
        to_settle += s
    e, s = np.array(estimate), np.array(to_settle)
    near = float(np.mean((e >= 1 / 1.5) & (e <= 1.5)))
    print(how, size, "steps", e.size, "estimate within 1.5x", round(near, 2), "median", round(float(np.median(e)), 2))
    assert e.size > 200
    assert 1 / 1.5 <= np.median(e) <= 1.5 and near >= within
    # the check can fail: the count to settle the comparisons as they stand falls far short of it
    assert np.median(s) < 0.6 and np.mean((s >= 1 / 1.5) & (s <= 1.5)) < 0.2


def _parts_knowing(coll, known):
    """The verdicts' per-query parts of ``coll`` when the labels of ``known`` (a (Q, D) mask of its pairs) are in."""
    pool = final_pool(coll.labels(known), coll.ranked, pool_depth=POOL_DEPTH)
    relevance = label_model(pool, top_grade=3, n_systems=N_SYSTEMS)
    return query_parts(
        "nDCG",
        pool,
        coll.qrels(known),
        relevance,
        k=K,
        threshold=1,
        gain="linear",
        seeds=np.arange(N_QUERIES),
        samples=16,
    )


def test_the_estimate_is_0_once_reached_and_every_pending_pair_when_no_grading_reaches_it():
    coll = synthetic.generate("realistic", systems=N_SYSTEMS, queries=N_QUERIES, depth=DEPTH, seed=3)
    pooled = coll.pool(POOL_DEPTH)
    parts = _parts_knowing(coll, pooled)
    final = np.ones(N_QUERIES, dtype=bool)
    # every label known: nothing is left before the stop
    assert judgments_to_stop(parts, final, [0, 1], [1, 2], certain=[False, False]) == 0.0
    assert judgments_to_stop(parts, final, [0], [1], certain=[True]) == 0.0
    # half the pool known, and an order no grading is expected to keep (the worse system above)
    half = pooled & (np.random.default_rng(3).random(pooled.shape) < 0.5)
    parts = _parts_knowing(coll, half)
    means = parts.mean.sum(axis=1)
    best, worst = int(np.argmax(means)), int(np.argmin(means))
    got = judgments_to_stop(parts, final, [worst], [best], certain=[False])
    assert got == float(parts.pending.sum()) > 0


def test_a_schedule_takes_each_querys_uncertainty_out_at_its_own_pace():
    coll = synthetic.generate("realistic", systems=N_SYSTEMS, queries=N_QUERIES, depth=DEPTH, seed=3)
    pooled = coll.pool(POOL_DEPTH)
    known = pooled & (np.random.default_rng(4).random(pooled.shape) < 0.3)
    parts = _parts_knowing(coll, known)
    final = np.ones(N_QUERIES, dtype=bool)
    order = np.argsort(-parts.mean.sum(axis=1), kind="stable")
    above, below, certain = order[:TOP_K], order[1 : TOP_K + 1], np.zeros(TOP_K, dtype=bool)
    even = judgments_to_stop(parts, final, above, below, certain=certain)
    assert 0 < even < parts.pending.sum()
    ranked, ids = coll.labels(known)[..., :POOL_DEPTH], coll.ranked[..., :POOL_DEPTH]
    schedule = mtc_schedule(ranked, coll.qrels(known), ids, above, below, k=K, top_grade=3)
    assert schedule.query.size == parts.pending.sum() and (schedule.weight >= 0).all()
    # no pair with a weight: every query at the even pace, the estimate without a schedule
    zero = np.zeros(schedule.query.size)
    got = judgments_to_stop(parts, final, above, below, certain=certain, queue=schedule.query, queue_weights=zero)
    assert got == pytest.approx(even, rel=1e-6)
    # the pairs that weigh in the top comparisons served first: their uncertainty leaves sooner
    first = np.argsort(-schedule.weight, kind="stable")
    got = judgments_to_stop(
        parts, final, above, below, certain=certain, queue=schedule.query[first], queue_weights=schedule.weight[first]
    )
    assert np.isfinite(got) and got < even
