"""Import benchmark: a 1,000,000-line TREC run (10,000 queries x 100 documents) through run_import, and
1,000,000 qrels labels through qrels_import.

Prints parse+import time and what was created. Targets: a run under 20 s (issue 2); 1M qrels labels
under 30 s (issue 10) on the 2-core machine, on both databases.
Run: python bench/import_bench.py            (SQLite file in the temp dir)
     python bench/import_bench.py --only qrels --labels 200000
     DATABASE_URL=postgres://postgres@127.0.0.1:5432/reljudge_bench python bench/import_bench.py
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

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


def make_qrels(n_queries: int, per_query: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, size=n_queries * per_query)
    return "".join(
        f"{q} 0 D{q}-{d} {labels[q * per_query + d]}\n" for q in range(n_queries) for d in range(per_query)
    ).encode()


def bench_run(vendor: str) -> None:
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


def _cpu_seconds() -> tuple[float, float]:
    """CPU time of this process and of its PostgreSQL backend (0 on SQLite, or a server on another machine):
    on a shared 2-core machine the wall time follows the other sessions' load, the CPU time much less."""
    from django.db import connection

    server = 0.0
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (pid,) = cursor.fetchone()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            server = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            pass
    return time.process_time(), server


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def bench_qrels(vendor: str, labels: int) -> None:
    """Labels of an earlier campaign for a fresh one: every qid and docid a stub, every pair new."""
    from judging.models import Campaign
    from judging.services import campaign_create, qrels_import

    Campaign.objects.filter(slug="bench-qrels").delete()
    campaign = campaign_create(slug="bench-qrels", pool_depth=10)
    per_query = 100
    data = make_qrels(max(1, labels // per_query), per_query, seed=3)
    lines = data.count(b"\n")
    print(f"database: {vendor}; qrels file: {lines:,} labels, {len(data) / 1e6:.1f} MB")
    cpu = _cpu_seconds()
    t = time.perf_counter()
    summary = qrels_import(campaign=campaign, data=data, filename="earlier.qrels", annotator="trec-earlier")
    first = time.perf_counter() - t
    used = [after - before for before, after in zip(cpu, _cpu_seconds(), strict=True)]
    print(
        f"first import (stubs, pairs, judgments, revisions, labels): {first:.2f} s "
        f"(CPU: {used[0]:.1f} s here, {used[1]:.1f} s in the database server; load average {_load()})"
    )
    for line in summary.lines():
        print("  " + line)
    from django.db.models import Count

    from judging.models import Pair

    stored = dict(
        Pair.objects.filter(campaign=campaign, label__isnull=False, judgment_count=1)
        .values_list("label")
        .annotate(n=Count("id"))
        .values_list("label", "n")
    )
    values, counts = np.unique(np.array(data.split())[3::4].astype(int), return_counts=True)
    sent = dict(zip(values.tolist(), counts.tolist(), strict=True))
    print(f"  stored labels per grade {stored} {'==' if stored == sent else '!='} the file's {sent}")
    t = time.perf_counter()
    qrels_import(campaign=campaign, data=data, filename="earlier.qrels", annotator="trec-earlier")
    print(f"re-import of the same file (nothing changes): {time.perf_counter() - t:.2f} s")
    print(
        f"target: {labels:,} qrels labels under {30 * labels / 1e6:.0f} s (30 s per million) -> "
        f"{'met' if first < 30 * labels / 1e6 else 'MISSED'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["run", "qrels"], help="one of the two benchmarks")
    parser.add_argument("--labels", type=int, default=1_000_000, help="qrels labels to import")
    args = parser.parse_args()
    vendor = django_ready("reljudge_import_bench")
    if args.only != "qrels":
        bench_run(vendor)
    if args.only != "run":
        bench_qrels(vendor, args.labels)


if __name__ == "__main__":
    main()
