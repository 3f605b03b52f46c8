"""Time the final-order verdicts (sound bounds, p_holds, the stop signal) without a database.

Run from anywhere: ``python bench/verdicts_bench.py``. Two campaigns from bench/trust_bench.py's generator
(runs that overlap, graded labels, half the pool judged):

* 40 systems x 50 queries x 100 ranks: the whole computation for nDCG@10 and MAP from scratch (final pool,
  relevance model, bounds, Monte Carlo moments, verdicts), against the bounds alone; the issue holds what
  p_holds adds to under 50 ms.
* 20 systems x 5,000 queries x 100 ranks (10M ranked entries): the cold computation, then one judgment (one
  query's parts computed again and patched in) and the verdicts after it; the stop's estimate on the top 3
  (metrics.final_order.judgments_to_stop) at the even pace and with MTC's schedule, and what that schedule
  (metrics.selection.mtc_schedule over the pool depth) costs to compute.

Times are the best of several runs, wall and CPU of this process; the CPU time is what a core costs on an
idle machine (the shared box's wall time is mostly waiting for one). Prints the figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._setup import machine_line
from bench.trust_bench import make_campaign
from metrics.final_order import OrderVerdicts, judgments_to_stop, order_verdicts, query_parts
from metrics.relevance_model import label_model
from metrics.selection import mtc_schedule
from metrics.verdicts import final_pool, verdict_parts

_T = TypeVar("_T")

TARGET_MS = 50


def best_of(repeat: int, function: Callable[[], _T]) -> tuple[float, float, _T | None]:
    best, best_cpu, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = function()
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - start_cpu)
    return best * 1000, best_cpu * 1000, result


def fresh(
    labels: np.ndarray,
    qrels: np.ndarray,
    doc_ids: np.ndarray,
    base: str,
    *,
    k: int,
    pool_depth: int,
    samples: int,
    with_p: bool = True,
) -> object:
    """Everything the leaderboard computes for one measure from nothing (the verdicts of adjacent systems)."""
    n_s, n_q, depth = labels.shape
    read = depth if base in ("MAP", "MRR", "bpref") else max(k, pool_depth)
    pool = final_pool(labels[..., :read], doc_ids[..., :read], pool_depth=pool_depth)
    if not with_p:
        parts = verdict_parts(base, pool, qrels, k=k, threshold=1, gain="linear", top_grade=2)
        return parts
    head = final_pool(labels[..., :pool_depth], doc_ids[..., :pool_depth], pool_depth=pool_depth)
    model = label_model(head, top_grade=2, n_systems=n_s)
    parts = query_parts(
        base, pool, qrels, model, k=k, threshold=1, gain="linear", seeds=np.arange(n_q), samples=samples
    )
    order = np.argsort(-parts.mean.sum(axis=1), kind="stable")
    verdicts = order_verdicts(parts, np.ones(n_q, bool), order[:-1], order[1:])
    return parts, model, order, verdicts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pool-depth", type=int, default=10)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args(argv)
    print(machine_line(), flush=True)
    k, pd = args.k, args.pool_depth

    labels, qrels, doc_ids = make_campaign(40, 50, 100, 300, pd, 0.5, seed=1)
    print("40 systems x 50 queries x 100 ranks, half the pool judged")
    for base, samples in (("nDCG", 64), ("MAP", 32)):
        wall_b, cpu_b, _ = best_of(
            args.repeat,
            lambda b=base, n=samples: fresh(labels, qrels, doc_ids, b, k=k, pool_depth=pd, samples=n, with_p=False),
        )
        wall, cpu, got = best_of(
            args.repeat, lambda b=base, n=samples: fresh(labels, qrels, doc_ids, b, k=k, pool_depth=pd, samples=n)
        )
        added = cpu - cpu_b
        mark = "ok" if added < TARGET_MS else f"OVER {TARGET_MS} ms"
        print(
            f"  {base:<5} bounds only {wall_b:7.1f} ms wall {cpu_b:7.1f} ms CPU; with p_holds ({samples} draws) "
            f"{wall:7.1f} ms wall {cpu:7.1f} ms CPU: p_holds adds {added:.1f} ms CPU  {mark}"
        )
        words = got[3].verdict
        print(f"        verdicts: {', '.join(f'{w} {words.count(w)}' for w in ('settled', 'tied', 'likely', 'open'))}")

    labels, qrels, doc_ids = make_campaign(20, 5000, 100, 300, pd, 0.5, seed=2)
    print("20 systems x 5,000 queries x 100 ranks (10M ranked entries), half the pool judged; nDCG@10")
    wall, cpu, (parts, model, order, _) = best_of(
        max(1, args.repeat // 2), lambda: fresh(labels, qrels, doc_ids, "nDCG", k=k, pool_depth=pd, samples=32)
    )
    print(f"  cold: final pool, model, bounds, 32 draws, verdicts {wall:8.1f} ms wall {cpu:8.1f} ms CPU")
    one = np.array([1234])

    def judgment() -> OrderVerdicts:
        pool = final_pool(labels[:, one, : max(k, pd)], doc_ids[:, one, : max(k, pd)], pool_depth=pd)
        new = query_parts("nDCG", pool, qrels[one], model, k=k, threshold=1, gain="linear", seeds=one, samples=32)
        patched = parts.patched(new, one)
        return order_verdicts(patched, np.ones(labels.shape[1], bool), order[:-1], order[1:])

    wall, cpu, _ = best_of(args.repeat, judgment)
    mark = "ok" if cpu < TARGET_MS else f"OVER {TARGET_MS} ms"
    print(
        f"  after one judgment: one query redrawn and patched, verdicts {wall:6.1f} ms wall {cpu:6.1f} ms CPU  {mark}"
    )
    every = np.ones(labels.shape[1], bool)
    above, below, certain = order[:3], order[1:4], np.zeros(3, dtype=bool)
    wall, cpu, _ = best_of(args.repeat, lambda: judgments_to_stop(parts, every, above, below, certain=certain))
    print(f"  stop estimate, top 3, even pace: {wall:6.1f} ms wall {cpu:6.1f} ms CPU")
    head_labels, head_ids = labels[..., :pd], doc_ids[..., :pd]
    wall, cpu, schedule = best_of(
        max(1, args.repeat // 2),
        lambda: mtc_schedule(head_labels, qrels, head_ids, above, below, k=k, top_grade=2),
    )
    print(f"  MTC's schedule (mtc_schedule, pool depth {pd}): {wall:6.1f} ms wall {cpu:6.1f} ms CPU")
    assert schedule is not None
    wall, cpu, _ = best_of(
        args.repeat,
        lambda: judgments_to_stop(
            parts, every, above, below, certain=certain, queue=schedule.query, queue_weights=schedule.weight
        ),
    )
    print(f"  stop estimate, top 3, MTC's schedule given: {wall:6.1f} ms wall {cpu:6.1f} ms CPU")
    print(machine_line())


if __name__ == "__main__":
    main()
