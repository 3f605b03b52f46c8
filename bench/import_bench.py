"""Import benchmark: a TREC run of --lines lines (queries x depth 100) through run_import, and --labels qrels
labels through qrels_import, each read from a file on disk as an upload is, in a process of its own.

Prints lines/s (wall), the CPU time of this process and of its PostgreSQL backend, and the importer's peak
memory (the child's peak RSS: the file is never held whole). Targets on PostgreSQL: runs at 250,000 lines/s or
more, under 300 MB of peak RSS for 10M lines; qrels under a minute of database CPU per million labels.
Run: python bench/import_bench.py                         (SQLite file in the temp dir, 1M lines, 1M labels)
     python bench/import_bench.py --only run --lines 2000000
     DATABASE_URL=postgres://postgres@127.0.0.1:5432/reljudge_bench python bench/import_bench.py
     ... python bench/import_bench.py --only run --lines 10000000 --docs 1000000   (the scale bench's collection)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _setup import django_ready

DEPTH = 100


def write_run(path: Path, n_queries: int, depth: int, n_docs: int, tag: str, seed: int) -> int:
    """A run file of ``n_queries`` x ``depth`` lines, written a query batch at a time; its line count."""
    rng = np.random.default_rng(seed)
    with path.open("w") as out:
        for start in range(0, n_queries, 1000):
            lines = []
            for q in range(start, min(n_queries, start + 1000)):
                docs = rng.choice(n_docs, size=depth, replace=False)
                scores = np.sort(rng.random(depth))[::-1] * 100
                lines.extend(
                    f"{q} Q0 D{d} {r + 1} {s:.6f} {tag}\n" for r, (d, s) in enumerate(zip(docs, scores, strict=True))
                )
            out.write("".join(lines))
    return n_queries * depth


def write_qrels(path: Path, n_queries: int, per_query: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    with path.open("w") as out:
        for q in range(n_queries):
            labels = rng.integers(0, 3, size=per_query)
            out.write("".join(f"{q} 0 D{q}-{d} {labels[d]}\n" for d in range(per_query)))
    return n_queries * per_query


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


def _peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited from the parent)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(kind: str, path: str, slug: str, name: str) -> None:
    """One import in this process (started by main): prints a JSON line with its figures."""
    vendor = django_ready("reljudge_import_bench", migrate=False, quiet=True)
    from judging.models import Campaign
    from judging.services import qrels_import, run_import

    campaign = Campaign.objects.get(slug=slug)
    rss_before = _peak_rss_mb()
    cpu = _cpu_seconds()
    started = time.perf_counter()
    with open(path, "rb") as data:
        if kind == "run":
            summary = run_import(campaign=campaign, data=data, filename=name)
        else:
            summary = qrels_import(campaign=campaign, data=data, filename=name, annotator="trec-earlier")
    wall = time.perf_counter() - started
    used = [after - before for before, after in zip(cpu, _cpu_seconds(), strict=True)]
    peak = _peak_rss_mb()
    print(
        json.dumps(
            {
                "vendor": vendor,
                "wall": wall,
                "app_cpu": used[0],
                "db_cpu": used[1],
                "peak_mb": peak,
                "before_mb": rss_before,
                "summary": summary.lines(),
            }
        )
    )


def _run_child(kind: str, path: Path, slug: str, name: str, fresh: bool) -> dict:
    if fresh:  # here, not in the child: deleting a large campaign takes memory the import would be charged
        from judging.models import Campaign
        from judging.services import campaign_create

        Campaign.objects.filter(slug=slug).delete()
        campaign_create(slug=slug, pool_depth=10)
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(path), slug, name],
        capture_output=True,
        text=True,
        env=os.environ,
    )
    if out.returncode:
        sys.exit(f"the {kind} import failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _report(label: str, lines: int, figures: dict) -> None:
    print(
        f"{label}: {lines / figures['wall']:,.0f} lines/s ({figures['wall']:.2f} s wall; "
        f"CPU {figures['app_cpu']:.1f} s here, {figures['db_cpu']:.1f} s in the database server); "
        f"peak RSS {figures['peak_mb']:.0f} MB "
        f"({figures['before_mb']:.0f} MB before the import); load average {_load()}"
    )
    for line in figures["summary"]:
        print("  " + line)


def bench_run(vendor: str, lines: int, folder: Path, once: bool = False, docs: int = 200_000) -> None:
    queries = max(1, lines // DEPTH)
    first, second = folder / "bm25.run", folder / "dense.run"
    n = write_run(first, queries, DEPTH, docs, "bm25", seed=1)
    print(f"database: {vendor}; run files: {n:,} lines each, {first.stat().st_size / 1e6:.0f} MB")
    figures = _run_child("run", first, "bench-import", "bm25.run", True)
    _report("first run (stubs for every query and document, rankings, pool)", n, figures)
    if once:
        print(f"target: peak RSS under 300 MB -> {'met' if figures['peak_mb'] < 300 else 'MISSED'}")
        return
    write_run(second, queries, DEPTH, docs, "dense", seed=2)
    figures = _run_child("run", first, "bench-import", "bm25.run", False)
    _report("the same run again (unchanged: nothing written)", n, figures)
    figures = _run_child("run", second, "bench-import", "dense.run", False)
    _report("second system (documents mostly known)", n, figures)
    if vendor == "postgresql":
        rate = n / figures["wall"]
        print(f"target: 250,000 lines/s on PostgreSQL -> {'met' if rate >= 250_000 else 'MISSED'} ({rate:,.0f})")
        # The import's statements run one after another in one server process: however fast the app, the rate
        # stays under the lines per second of that process's CPU time.
        print(f"database-bound ceiling: {n / max(figures['db_cpu'], 1e-9):,.0f} lines/s (lines / the server's CPU s)")
        # The app prepares a block while the server writes the one before (WriteBehind): with a core for each, the
        # import takes about as long as the busier of the two. An estimate from CPU times, not a measurement.
        app, server = (figures[k] * 1e6 / n for k in ("app_cpu", "db_cpu"))
        print(
            f"CPU per million lines: app {app:.2f} s, server {server:.2f} s; estimate for a quiet 2-CPU machine "
            f"(the busier side alone): {1e6 / max(app, server, 1e-9):,.0f} lines/s"
        )
    print(f"target: peak RSS under 300 MB -> {'met' if figures['peak_mb'] < 300 else 'MISSED'}")


def bench_qrels(vendor: str, labels: int, folder: Path) -> None:
    """Labels of an earlier campaign for a fresh one: every qid and docid a stub, every pair new."""
    path = folder / "earlier.qrels"
    n = write_qrels(path, max(1, labels // 100), 100, seed=3)
    print(f"database: {vendor}; qrels file: {n:,} labels, {path.stat().st_size / 1e6:.0f} MB")
    figures = _run_child("qrels", path, "bench-qrels", "earlier.qrels", True)
    _report("first qrels import (stubs, pairs, judgments, revisions, labels)", n, figures)
    figures_again = _run_child("qrels", path, "bench-qrels", "earlier.qrels", False)
    _report("the same qrels again (nothing changes)", n, figures_again)
    if vendor == "postgresql":
        per_million = figures["db_cpu"] * 1e6 / n
        print(
            f"target: under 60 s of database CPU per million labels -> "
            f"{'met' if per_million < 60 else 'MISSED'} ({per_million:.1f} s per million)"
        )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, path, slug, name = sys.argv[2:6]
        child(kind, path, slug, name)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["run", "qrels"], help="one of the two benchmarks")
    parser.add_argument("--lines", type=int, default=1_000_000, help="lines of each run file")
    parser.add_argument("--labels", type=int, default=1_000_000, help="qrels labels to import")
    parser.add_argument("--once", action="store_true", help="the first run import only (a memory check at size)")
    parser.add_argument(
        "--docs",
        type=int,
        default=200_000,
        help="the collection the runs draw their documents from (1,000,000: the scale bench's; more documents than "
        "the import's id cache holds)",
    )
    args = parser.parse_args()
    vendor = django_ready("reljudge_import_bench")
    with tempfile.TemporaryDirectory(prefix="reljudge-import-bench-") as folder:
        if args.only != "qrels":
            bench_run(vendor, args.lines, Path(folder), once=args.once, docs=args.docs)
        if args.only != "run":
            bench_qrels(vendor, args.labels, Path(folder))


if __name__ == "__main__":
    main()
