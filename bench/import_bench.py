"""Import benchmark: a 1,000,000-line TREC run (10,000 queries x 100 documents) through run_import.

Prints parse+import time and what was created. Target (issue 2): under 20 s on the 2-core machine.
Run: python bench/import_bench.py            (SQLite file in the temp dir)
     DATABASE_URL=postgres://postgres@127.0.0.1:5432/reljudge_bench python bench/import_bench.py
"""

from __future__ import annotations

import time

import numpy as np
from _setup import django_ready


def make_run(n_queries: int, depth: int, n_docs: int, tag: str, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    lines = []
    for q in range(n_queries):
        docs = rng.choice(n_docs, size=depth, replace=False)
        scores = np.sort(rng.random(depth))[::-1] * 100
        lines.extend(f"{q} Q0 D{d} {r + 1} {s:.6f} {tag}\n" for r, (d, s) in enumerate(zip(docs, scores, strict=True)))
    return "".join(lines).encode()


def main() -> None:
    vendor = django_ready("reljudge_import_bench")
    from judging.models import Campaign
    from judging.services import campaign_create, run_import

    Campaign.objects.filter(slug="bench-import").delete()
    campaign = campaign_create(slug="bench-import", pool_depth=10)
    data = make_run(10_000, 100, 200_000, "bm25", seed=1)
    lines = data.count(b"\n")
    print(f"database: {vendor}; run file: {lines:,} lines, {len(data) / 1e6:.1f} MB")
    t = time.perf_counter()
    summary = run_import(campaign=campaign, data=data, filename="bm25.run")
    first = time.perf_counter() - t
    print(f"first import (parse + 10,000 queries and ~200,000 documents as stubs + rankings + pool): {first:.2f} s")
    for line in summary.lines():
        print("  " + line)
    t = time.perf_counter()
    run_import(campaign=campaign, data=data, filename="bm25.run")
    print(f"re-import of the same file (idempotent, nothing written): {time.perf_counter() - t:.2f} s")
    data2 = make_run(10_000, 100, 200_000, "dense", seed=2)
    t = time.perf_counter()
    summary = run_import(campaign=campaign, data=data2, filename="dense.run")
    print(
        f"second system, 1M lines, stubs mostly existing: {time.perf_counter() - t:.2f} s "
        f"({summary.pairs_added:,} pairs added)"
    )
    print(f"target: under 20 s per 1M-line run -> {'met' if first < 20 else 'MISSED'}")


if __name__ == "__main__":
    main()
