"""Scale benchmark: a campaign of N ranked entries (default 100M: 5,000 queries x 20 systems x depth 1,000, pool
depth 10) imported through the services, then served by gunicorn with 4 workers sharing one cube file.

Usage (PostgreSQL is what a team runs; the database is created afresh, or kept with --reuse):

    python bench/scale_bench.py --database postgres://postgres@127.0.0.1:5432/reljudge_scale
    python bench/scale_bench.py --queries 5000 --depth 100   # 10M entries

Prints, with the machine's yardstick line:
- the import rate of the run files (lines/s) and of the qrels;
- the cold start: the first leaderboard request of freshly started workers without the cube file (nothing in
  the shared cache either) and with it (after a restart);
- the default leaderboard request (bounds and verdicts) after each of --judgments judgments right after the
  restart (a worker's first new labels state is answered with the published verdicts while it builds its own
  per-query parts in the background), then after as many once the workers are idle (the steady state), then
  without per-query values, then polls with no judgment between (the floor: the answer's transfer); then the
  steady request and the floor again with the answer read in one piece (curl's way, not requests' 10 kB reads);
  each of those lines with the workers' CPU time per request (all their threads, while the requests are served);
- each worker's proportional memory (PSS, /proc/PID/smaps_rollup) with 4 workers, its anonymous memory beyond what
  it held idle (before its first request), and the shared files' sizes (the cube and the ranked labels).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench._setup import machine_line  # noqa: E402
from tests.serving.servers import Site  # noqa: E402

SLUG = "scale"
LABELS_PER_QUERY = 30


def fresh_database(url: str) -> None:
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    with psycopg.connect(parsed._replace(path="/postgres").geturl(), autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [name])
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def write_files(folder: Path, args: argparse.Namespace) -> tuple[list[Path], Path, Path, Path]:
    """Topics, documents, one run file per system and qrels of the pooled top documents, generated with numpy."""
    rng = np.random.default_rng(args.seed)
    topics = folder / "topics.tsv"
    topics.write_text("".join(f"q{q:05d}\tquery {q}\n" for q in range(args.queries)))
    docs = folder / "docs.jsonl"
    with open(docs, "w") as out:
        for start in range(0, args.docs, 100_000):
            out.write(
                "".join(
                    f'{{"docid": "D{d:07d}", "title": "document {d}", "text": "text of document {d}"}}\n'
                    for d in range(start, min(start + 100_000, args.docs))
                )
            )
    # each query ranks documents of its own window of the collection; systems differ by noise on a latent score
    offsets = rng.integers(0, args.docs, args.queries)
    latent = rng.normal(size=(args.queries, args.depth * 2))
    runs = []
    for s in range(args.systems):
        path = folder / f"sys{s:02d}.run"
        noise = 0.5 + 2.5 * s / max(args.systems - 1, 1)
        with open(path, "w") as out:
            for q0 in range(0, args.queries, 500):
                block = latent[q0 : q0 + 500]
                score = block + noise * rng.normal(size=block.shape)
                top = np.argsort(-score, axis=1)[:, : args.depth]
                doc = (offsets[q0 : q0 + 500, None] + top) % args.docs
                out.write(
                    "".join(
                        f"q{q0 + i:05d} Q0 D{d:07d} {r + 1} {args.depth - r} sys{s:02d}\n"
                        for i, row in enumerate(doc.tolist())
                        for r, d in enumerate(row)
                    )
                )
        runs.append(path)
    qrels = folder / "bench.qrels"
    best = np.argsort(-latent, axis=1)[:, :LABELS_PER_QUERY]
    grades = np.where(np.arange(LABELS_PER_QUERY) < 3, 2, np.where(np.arange(LABELS_PER_QUERY) < 10, 1, 0))
    qrels.write_text(
        "".join(
            f"q{q:05d} 0 D{(offsets[q] + d) % args.docs:07d} {g}\n"
            for q, row in enumerate(best.tolist())
            for d, g in zip(row, grades.tolist(), strict=True)
        )
    )
    return runs, topics, docs, qrels


def import_all(site: Site, runs: list[Path], topics: Path, docs: Path, qrels: Path, args: argparse.Namespace) -> None:
    code = f"""
import json, time
from django.contrib.auth import get_user_model
from judging.services import campaign_create, membership_add, queries_import, documents_import, run_import, qrels_import
User = get_user_model()
c = campaign_create(slug={SLUG!r}, name="Scale bench", pool_depth={args.pool_depth})
for name, role in (("lead", "lead"), ("ann", "annotator"), ("nist", "annotator")):
    u = User.objects.filter(username=name).first() or User.objects.create_user(username=name, password="pw-" + name)
    membership_add(campaign=c, user=u, role=role)
queries_import(campaign=c, data=open({str(topics)!r}, "rb"), filename="topics.tsv")
documents_import(campaign=c, data=open({str(docs)!r}, "rb"), filename="docs.jsonl")
lines = 0
started = time.perf_counter()
for path in {[str(p) for p in runs]!r}:
    with open(path, "rb") as handle:
        run_import(campaign=c, data=handle, filename=path.rsplit("/", 1)[-1])
    lines += {args.queries * args.depth}
runs_seconds = time.perf_counter() - started
started = time.perf_counter()
nist = User.objects.get(username="nist")
qrels_import(campaign=c, data=open({str(qrels)!r}, "rb"), filename="bench.qrels", annotator=nist)
print(json.dumps([lines, runs_seconds, time.perf_counter() - started]))
"""
    lines, runs_seconds, qrels_seconds = site.python(code, timeout=24 * 3600)
    labels = args.queries * LABELS_PER_QUERY
    print(f"import: {lines:,} run lines in {runs_seconds:.1f} s = {lines / runs_seconds:,.0f} lines/s", flush=True)
    print(
        f"import: {labels:,} qrels labels in {qrels_seconds:.1f} s = {labels / qrels_seconds:,.0f} labels/s", flush=True
    )


def pss_kb(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        parts = line.split()
        if parts[0] in ("Pss:", "Pss_Anon:", "Pss_File:", "Rss:"):
            out[parts[0].rstrip(":")] = int(parts[1])
    return out


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def idle_workers(pids: list[int], *, limit: float = 600.0) -> float:
    """Wait until the workers used under 0.05 s of CPU in each of two seconds in a row; the seconds waited."""
    started = time.monotonic()
    last, calm = cpu_seconds(pids), 0
    while calm < 2 and time.monotonic() - started < limit:
        time.sleep(1.0)
        now = cpu_seconds(pids)
        calm = calm + 1 if now - last < 0.05 else 0
        last = now
    return time.monotonic() - started


def trim_every() -> float:
    """judging.scoring.memory.TRIM_EVERY, read from its file (the package needs Django's settings to import)."""
    spec = importlib.util.spec_from_file_location("_memory", ROOT / "judging" / "scoring" / "memory.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return float(module.TRIM_EVERY)


def worker_pids(master: int) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return [int(p) for p in children]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database", default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/reljudge_scale")
    )
    parser.add_argument("--queries", type=int, default=5000)
    parser.add_argument("--systems", type=int, default=20)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--docs", type=int, default=1_000_000, help="documents in the collection")
    parser.add_argument("--pool-depth", type=int, default=10)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--port", type=int, default=9190)
    parser.add_argument("--reuse", action="store_true", help="keep the database and its campaign")
    parser.add_argument(
        "--cube-dir",
        default=str(Path(tempfile.gettempdir()) / "reljudge_scale_cubes"),
        help="RELJUDGE_CUBE_DIR of the served app (emptied for the cold start)",
    )
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument(
        "--judgments",
        type=int,
        default=15,
        help="judgments right after the restart, each followed by a leaderboard request (timed); then as many once "
        "the workers are idle, as many followed by a request without per-query values, and as many with the answer "
        "read in one piece",
    )
    args = parser.parse_args()
    entries = args.queries * args.systems * args.depth
    print(machine_line(), flush=True)
    print(f"campaign: {args.systems} systems x {args.queries:,} queries x depth {args.depth} = {entries:,} entries")
    cube_dir = Path(args.cube_dir)
    site = Site(database_url=args.database, extra_env={"RELJUDGE_CUBE_DIR": str(cube_dir), "DATABASE_POOL_MAX": "4"})
    folder = Path(tempfile.mkdtemp(prefix="reljudge_scale_"))
    try:
        if not args.reuse:
            if site.vendor == "postgresql":
                fresh_database(args.database)
            site.manage("migrate", "--noinput", timeout=600)
            site.manage("collectstatic", "--noinput", "-v", "0", timeout=300)
            started = time.perf_counter()
            files = write_files(folder, args)
            print(f"files generated in {time.perf_counter() - started:.0f} s", flush=True)
            import_all(site, *files, args)
        token = site.tokens(["lead", "ann"])
        lead = {"Authorization": f"Token {token['lead']}"}
        ann = {"Authorization": f"Token {token['ann']}"}
        log = folder / "gunicorn.log"

        def start() -> str:
            return site.gunicorn(log=log, workers=args.workers, threads=args.threads, port=args.port)

        def board(url: str, query: str = "", *, whole: bool = False) -> float:
            """One leaderboard request's time until its answer is read: by requests' default (``content``, read
            10 kB at a time: a Python client's usual way), or with ``whole`` in one read (as curl does), which
            leaves the client's own reading out of the 16 MB default answer's time at 100M entries."""
            t = time.perf_counter()
            got = requests.get(
                f"{url}/api/campaigns/{SLUG}/leaderboard/{query}", headers=lead, timeout=3600, stream=whole
            )
            assert got.status_code == 200, got.text[:500]
            body = got.raw.read() if whole else got.content
            assert body.startswith(b"{"), body[:200]
            return time.perf_counter() - t

        shutil.rmtree(cube_dir, ignore_errors=True)
        site.sql("DELETE FROM reljudge_cache RETURNING NULL")  # the shared score cache: a cold start is cold
        url = start()
        print(f"cold start without the cube file: {board(url):.2f} s", flush=True)
        site.stop_all()
        url = start()
        # what each worker holds before its first request: Django, numpy and the app's modules
        idle = {pid: pss_kb(pid) for pid in worker_pids(site.processes[0].pid)}
        print(f"cold start with the cube file: {board(url):.2f} s", flush=True)
        pairs = [
            p
            for (p,) in site.sql(
                "SELECT p.public_id FROM judging_pair p JOIN judging_campaign c ON c.id = p.campaign_id "
                "WHERE c.slug = %s AND p.pooled AND p.judgment_count = 0 ORDER BY p.public_id LIMIT %s",
                (SLUG, 4 * args.judgments),
            )
        ]

        def judge(pair: str, grade: int) -> None:
            posted = requests.post(
                f"{url}/api/judgments/", json={"pair": pair, "grade": grade % 3}, headers=ann, timeout=60
            )
            assert posted.status_code in (200, 201), posted.text[:300]

        # The workers' CPU time (all their threads) while each timed request is served: steadier than its wall time
        # on a shared machine. /proc counts it in clock ticks (10 ms): the line gives the total over its requests.
        spent: list[float] = []

        def timed(query: str = "", *, whole: bool = False) -> float:
            pids = worker_pids(site.processes[0].pid)
            before = cpu_seconds(pids)
            took = board(url, query, whole=whole)
            spent.append(cpu_seconds(pids) - before)
            return took

        def series(batch: list[str], query: str = "", *, whole: bool = False) -> list[float]:
            times = []
            for grade, pair in enumerate(batch):
                judge(pair, grade)
                times.append(timed(query, whole=whole))
            return times

        def line(label: str, times: list[float]) -> None:
            cpu = sum(spent[-len(times) :])
            print(
                f"{label}: median {statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms "
                f"(each, in order: {', '.join(f'{t * 1000:.0f}' for t in times)} ms); the workers' CPU "
                f"{cpu * 1000 / len(times):.0f} ms a request ({cpu:.2f} s in all)",
                flush=True,
            )

        n = args.judgments
        # Right after the restart: each worker's first new labels state is answered with the published verdicts
        # (verdicts_behind) while it builds its own per-query parts in the background.
        line("leaderboard after each of the first judgments after the restart", series(pairs[:n]))
        print(f"workers idle {idle_workers(worker_pids(site.processes[0].pid)):.0f} s later", flush=True)
        # The steady state a lead polling the leaderboard sees: every worker has its parts.
        line("leaderboard after a judgment, steady", series(pairs[n : 2 * n]))
        line("the same without per-query values (?per_query=false)", series(pairs[2 * n : 3 * n], "?per_query=false"))
        # The floor of the default request: a poll with no judgment before it (nothing to compute) is mostly the
        # transfer of the answer (16 MB at 100M entries) and the client's reading of it.
        line("the default request with no judgment between (the answer's transfer)", [timed() for _ in range(n)])
        # The same two lines with the answer read in one piece: the client's 10 kB reads left out.
        line("after a judgment, the answer read in one piece", series(pairs[3 * n :], whole=True))
        line("no judgment between, the answer read in one piece", [timed(whole=True) for _ in range(n)])
        master = site.processes[0].pid
        # Background builds (a worker's own trust parts, after the published verdicts answered its first new state)
        # hold their temporaries until done: memory is read once the workers' CPU time stops growing.
        waited = idle_workers(worker_pids(master))
        # A worker gives back what its last requests freed within TRIM_EVERY seconds of its last trim
        # (judging.scoring.memory): what it holds idle is read once that time is up.
        read = trim_every() + 1
        time.sleep(read)
        print(f"workers idle {waited:.0f} s after the last request (memory read {read:.0f} s later)", flush=True)
        file_pss = 0
        for pid in worker_pids(master):
            mem = pss_kb(pid)
            file_pss += mem.get("Pss_File", 0)
            base = idle.get(pid, {}).get("Pss_Anon")
            extra = f", {(mem.get('Pss_Anon', 0) - base) / 1024:.0f} MB more than idle" if base is not None else ""
            print(
                f"worker {pid}: PSS {mem['Pss'] / 1024:.0f} MB (anonymous {mem.get('Pss_Anon', 0) / 1024:.0f} MB"
                f"{extra}; file {mem.get('Pss_File', 0) / 1024:.0f} MB), RSS {mem['Rss'] / 1024:.0f} MB"
            )
        cubes = sum(p.stat().st_size for p in cube_dir.glob("cube-*.bin"))
        grids = sum(p.stat().st_size for p in cube_dir.glob("grid-*.bin"))
        print(
            f"files: cube {cubes / 2**20:.0f} MB, ranked labels {grids / 2**20:.0f} MB, shared by the workers "
            f"(their pages in the workers' PSS, each counted once: {file_pss / 1024:.0f} MB)"
        )
        print(machine_line())
    finally:
        site.stop_all()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
