"""Time the "how far to trust the leaderboard" measures at campaign scale (issue 14).

Run from anywhere: ``python bench/trust_bench.py`` (defaults: 20 systems x 5,000 queries x 100
documents; each query has 300 candidate documents, runs rank 100 of them with a shared preference so
that they overlap; the pool is every run's top 20, 80% of it graded 0-2 so far, the rest unjudged). Times, warm (best
of several): metrics.curves (P, R, F1, Hit, nDCG at k = 1..100, means), metrics.score_bounds (every
measure at k = 10), metrics.pool_bias (pool depth 20), metrics.open_pairs and metrics.pair_priority,
and bpref against pytrec_eval's (dict building excluded). Prints the figures; asserts nothing.
"""

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytrec_eval

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import metrics

_T = TypeVar("_T")

TARGET_MS = 300


def best_of(repeat: int, function: Callable[..., _T], *args: object, **kwargs: Any) -> tuple[float, float, _T | None]:
    """(best wall time, best CPU time of this process, in seconds; last result).

    The minimum is the least disturbed by other processes; the CPU time is what the call costs on an
    idle machine (numpy here runs on one core but for BLAS), which a shared two-core box can hide.
    """
    best, best_cpu, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = function(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - start_cpu)
    return best, best_cpu, result


def make_campaign(
    n_systems: int, n_queries: int, depth: int, candidates: int, pool_depth: int, judged_share: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """labels (S, Q, D) int8, qrels (Q, M) int8, doc_ids (S, Q, D) int64 of a pooled campaign."""
    rng = np.random.default_rng(seed)
    # A preference shared by all systems plus each system's own noise: runs overlap, but not fully.
    shared = rng.standard_normal((1, n_queries, candidates), dtype=np.float32)
    keys = shared + rng.standard_normal((n_systems, n_queries, candidates), dtype=np.float32)
    local = np.argsort(-keys, axis=-1)[..., :depth].astype(np.int64)
    del keys
    # Better-liked candidates are more often relevant.
    grade_of = np.digitize(shared[0] + 0.5 * rng.standard_normal((n_queries, candidates)), [0.6, 1.4])
    pooled = np.zeros((n_queries, candidates), dtype=bool)
    q_index = np.arange(n_queries)[None, :, None]
    pooled[np.broadcast_to(q_index, local[..., :pool_depth].shape), local[..., :pool_depth]] = True
    # Judging in progress: only a share of the pool has a label yet.
    pooled &= rng.random(pooled.shape) < judged_share
    label_of = np.where(pooled, grade_of, metrics.UNJUDGED).astype(np.int8)
    labels = label_of[np.broadcast_to(q_index, local.shape), local]
    width = int(pooled.sum(axis=1).max())
    qrels = np.full((n_queries, width), metrics.UNJUDGED, dtype=np.int8)
    order = np.argsort(~pooled, axis=1, kind="stable")[:, :width]
    qrels[:] = np.where(np.take_along_axis(pooled, order, 1), np.take_along_axis(label_of, order, 1), -1)
    doc_ids = np.arange(n_queries, dtype=np.int64)[None, :, None] * candidates + local
    return labels, qrels, doc_ids


def as_dicts(
    labels: np.ndarray, qrels: np.ndarray, doc_ids: np.ndarray
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, dict[str, float]]]]:
    """pytrec_eval qrels and runs for the same campaign (scores descending along the ranking)."""
    n_systems, n_queries, depth = labels.shape
    qrel_dict: dict[str, dict[str, int]] = {}
    for q in range(n_queries):
        docs = doc_ids[:, q].ravel()
        grades = labels[:, q].ravel()
        judged = grades >= 0
        qrel_dict[f"q{q}"] = {f"d{d}": int(g) for d, g in zip(docs[judged], grades[judged], strict=True)}
    scores = [float(depth - i) for i in range(depth)]
    runs = [
        {f"q{q}": dict(zip((f"d{d}" for d in doc_ids[s, q]), scores, strict=True)) for q in range(n_queries)}
        for s in range(n_systems)
    ]
    return qrel_dict, runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=20)
    parser.add_argument("--queries", type=int, default=5000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--pool-depth", type=int, default=20)
    parser.add_argument("--judged-share", type=float, default=0.8, help="share of the pool judged so far")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-trec", action="store_true", help="skip the pytrec_eval comparison")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    labels, qrels, doc_ids = make_campaign(
        args.systems, args.queries, args.depth, 300, args.pool_depth, args.judged_share, seed=0
    )
    unjudged = (labels == metrics.UNJUDGED).mean()
    print(
        f"campaign: {args.systems} systems x {args.queries} queries x {args.depth} ranks, pool depth "
        f"{args.pool_depth}, {unjudged:.0%} of ranked entries unjudged (built in {time.perf_counter() - start:.1f} s)"
    )
    k = args.k
    low, high = metrics.score_bounds(labels, qrels, k=k, top_grade=2)[f"nDCG@{k}"]
    order = metrics.settled(low, high).order
    rows = [
        ("evaluate (reference)", lambda: metrics.evaluate(labels, qrels, k=k)),
        ("bpref", lambda: metrics.bpref(labels, qrels)),
        (f"curves P/R/F1/Hit/nDCG, k=1..{args.depth}", lambda: metrics.curves(labels, qrels, args.depth)),
        (f"score_bounds, all measures, k={k}", lambda: metrics.score_bounds(labels, qrels, k=k, top_grade=2)),
        (
            f"pool_bias, pool depth {args.pool_depth}",
            lambda: metrics.pool_bias(labels, qrels, doc_ids, pool_depth=args.pool_depth, k=k),
        ),
        ("settled (one measure)", lambda: metrics.settled(low, high)),
        (f"open_pairs, cutoff {k}", lambda: metrics.open_pairs(labels, doc_ids, order, cutoff=k)),
        ("open_pairs, whole run", lambda: metrics.open_pairs(labels, doc_ids, order)),
        (f"pair_priority, cutoff {k}", lambda: metrics.pair_priority(labels, doc_ids, order, cutoff=k)),
        ("pair_priority, whole run", lambda: metrics.pair_priority(labels, doc_ids, order)),
    ]
    targets = {2, 3, 4}  # the rows the issue holds to TARGET_MS
    for i, (name, function) in enumerate(rows):
        function()  # warm: imports, page faults, allocator
        seconds, cpu, _ = best_of(args.repeat, function)
        # Held to the target on CPU time: wall time on the shared box is mostly waiting for a core.
        mark = ("  ok" if cpu * 1000 < TARGET_MS else f"  OVER {TARGET_MS} ms") if i in targets else ""
        print(f"{name:<42} {seconds * 1000:8.1f} ms wall {cpu * 1000:8.1f} ms CPU{mark}")
    print(f"(wall times under load: {os.getloadavg()[0]:.1f} runnable processes on {os.cpu_count()} cores)")
    print(
        f"settled comparisons on nDCG@{k}: {np.count_nonzero(order) // 2} of {args.systems * (args.systems - 1) // 2}"
    )

    if not args.no_trec:
        qrel_dict, runs = as_dicts(labels, qrels, doc_ids)
        evaluator = pytrec_eval.RelevanceEvaluator(qrel_dict, {"bpref"})
        seconds, cpu, theirs = best_of(max(1, args.repeat // 2), lambda: [evaluator.evaluate(run) for run in runs])
        ours = metrics.bpref(labels, qrels)
        worst = max(
            abs(ours[s, q] - theirs[s][f"q{q}"]["bpref"]) for s in range(args.systems) for q in range(args.queries)
        )
        print(f"{'pytrec_eval bpref (all systems)':<42} {seconds * 1000:8.1f} ms wall {cpu * 1000:8.1f} ms CPU")
        print(f"largest |metrics.bpref - pytrec_eval bpref| over every system and query: {worst:.1e}")


if __name__ == "__main__":
    main()
