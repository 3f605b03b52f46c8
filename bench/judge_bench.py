"""Time "record a judgment and load the next pair" on a 100,000-pair campaign (issue 4: p95 < 50 ms).

Builds a throwaway database (SQLite file under bench/out/, or the database <name>_judge_bench beside
DATABASE_URL's <name>), fills it through the real import services (topics, documents, two runs, earlier qrels
by another annotator), then drives the judging page with Django's test Client — the whole request stack
in-process: middleware, session, CSRF, view, selectors, services, template — and prints p50 / p95 / max
wall-clock time per request. It also prints this process's CPU time per request, which is what the
request costs when the machine is not busy with other work (on PostgreSQL the database server's own
CPU time is not included in it).

    python bench/judge_bench.py                    # SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/reljudge python bench/judge_bench.py
    python bench/judge_bench.py --keepdb           # reuse the database built by the previous run
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench._setup import machine_line  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("RELJUDGE_ALLOW_DEV_SECRET", "1")
os.environ.setdefault("RELJUDGE_TESTING", "1")  # plain static storage: no collectstatic needed

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection, reset_queries  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402

from judging.models import Campaign, Judgment, Pair  # noqa: E402
from judging.services import (  # noqa: E402
    campaign_create,
    documents_import,
    membership_add,
    qrels_import,
    queries_import,
    run_import,
)

SLUG = "bench"
HOLD_RE = re.compile(r'data-hold hx-post="([^"]+)"')
PAIR_RE = re.compile(r'data-pair-id="(\d+)"')
WORDS = (
    "wool",
    "knit",
    "sweater",
    "rain",
    "jacket",
    "waterproof",
    "merino",
    "cotton",
    "shell",
    "warm",
    "light",
    "winter",
    "summer",
    "hiking",
    "trail",
    "boots",
    "leather",
    "canvas",
    "bag",
    "travel",
    "laptop",
    "battery",
    "charger",
    "wireless",
    "headphones",
    "noise",
    "cancelling",
    "coffee",
    "grinder",
    "espresso",
    "kettle",
    "tea",
    "ceramic",
    "mug",
    "garden",
    "hose",
    "tomato",
    "seeds",
    "compost",
)


def build(*, queries: int, depth: int, prior: float) -> None:
    """Two runs over the same `depth` documents per query: a pool of queries * depth pairs."""
    rng = random.Random(4)
    User = get_user_model()
    t0 = time.perf_counter()
    campaign = campaign_create(
        slug=SLUG,
        name="Judging benchmark",
        pool_depth=depth,
        redundancy=2,
        guidelines="Judge the document against the query description.",
    )
    for name in ("ann", "other", "lead"):
        user = User.objects.create_user(username=name, password="pw-" + name)
        membership_add(campaign=campaign, user=user, role="lead" if name == "lead" else "annotator")
    topics = "".join(
        f"q{q}\t{' '.join(rng.sample(WORDS, 3))}\tDocuments about {' '.join(rng.sample(WORDS, 2))}.\n"
        for q in range(queries)
    )
    queries_import(campaign=campaign, data=topics.encode(), filename="topics.tsv")
    docs = "".join(
        json.dumps(
            {
                "docid": f"d{q}-{i}",
                "title": " ".join(rng.sample(WORDS, 5)).capitalize(),
                "text": " ".join(rng.choices(WORDS, k=80)),
                "url": f"https://example.com/{q}/{i}",
            }
        )
        + "\n"
        for q in range(queries)
        for i in range(depth)
    )
    documents_import(campaign=campaign, data=docs.encode(), filename="docs.jsonl")
    for system in ("bm25", "dense"):
        lines = []
        for q in range(queries):
            order = list(range(depth))
            rng.shuffle(order)
            lines.extend(f"q{q} Q0 d{q}-{i} {r} {depth - r} {system}\n" for r, i in enumerate(order, start=1))
        run_import(campaign=campaign, data="".join(lines).encode(), filename=f"{system}.run")
    # An earlier annotator's labels on a share of the pool (so the queue has to skip judged pairs and
    # prefer the least-judged ones), and a history of the benchmarked annotator's own.
    pairs = [(q, i) for q in range(queries) for i in range(depth)]
    rng.shuffle(pairs)
    cut = int(len(pairs) * prior)
    for user, chunk in (("other", pairs[:cut]), ("ann", pairs[cut : cut + 2000])):
        qrels = "".join(f"q{q} 0 d{q}-{i} {rng.randint(0, 2)}\n" for q, i in chunk)
        qrels_import(
            campaign=campaign, data=qrels.encode(), filename=f"{user}.qrels", annotator=User.objects.get(username=user)
        )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # what autovacuum does shortly after an import this size
    print(
        f"built {Pair.objects.filter(campaign=campaign, pooled=True).count():,} pooled pairs, "
        f"{Judgment.objects.count():,} earlier judgments in {time.perf_counter() - t0:.1f} s"
    )


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def report(name: str, ms: list[float], cpu: list[float], queries: list[int], more: str = "") -> None:
    print(
        f"{name:<32} n={len(ms):<4} p50={statistics.median(ms):6.1f} ms  p95={percentile(ms, 95):6.1f} ms  "
        f"max={max(ms):6.1f} ms | this process's CPU p50={statistics.median(cpu):5.1f} "
        f"p95={percentile(cpu, 95):5.1f} ms | SQL queries/request <= {max(queries)}{more}"
    )


def measure(*, judgments: int) -> None:
    rng = random.Random(7)
    client = Client()
    client.force_login(get_user_model().objects.get(username="ann"))
    url = f"/campaigns/{SLUG}/judge/"
    htmx = {"HTTP_HX_REQUEST": "true"}

    page = client.get(url)
    assert page.status_code == 200, page.status_code
    pair_id = int(PAIR_RE.search(page.content.decode()).group(1))
    record_ms, record_cpu, record_q, get_ms, get_cpu, get_q = [], [], [], [], [], []
    hold_ms, hold_cpu, hold_q = [], [], []
    pg_before = pg_cpu_ticks()
    for _ in range(judgments):
        data = {"grade": rng.choice([0, 1, 2]), "seconds": f"{rng.uniform(2, 30):.1f}", "version": ""}
        if rng.random() < 0.05:
            data.update(unsure="1", note="not sure the brand matches")
        reset_queries()  # the log keeps 9,000 queries: a longer run would count none
        with CaptureQueriesContext(connection) as ctx:
            t, c = time.perf_counter(), time.thread_time()
            response = client.post(f"{url}{pair_id}/", data, **htmx)
            record_ms.append((time.perf_counter() - t) * 1000)
            record_cpu.append((time.thread_time() - c) * 1000)
        record_q.append(len(ctx.captured_queries))
        assert response.status_code == 200, (response.status_code, response.content[:500])
        match = PAIR_RE.search(response.content.decode())
        if match is None:
            break
        pair_id = int(match.group(1))
        if rng.random() < 0.1:  # now and then a full page load (a reload, a new tab)
            with CaptureQueriesContext(connection) as ctx:
                t, c = time.perf_counter(), time.thread_time()
                page = client.get(url)
                assert page.status_code == 200
                get_ms.append((time.perf_counter() - t) * 1000)
                get_cpu.append((time.thread_time() - c) * 1000)
            get_q.append(len(ctx.captured_queries))
            # The GET holds nothing: the page's panel then takes the hold with an htmx POST.
            hold = HOLD_RE.search(page.content.decode())
            if hold:
                with CaptureQueriesContext(connection) as ctx:
                    t, c = time.perf_counter(), time.thread_time()
                    assert client.post(hold.group(1), **htmx).status_code in (200, 204)
                    hold_ms.append((time.perf_counter() - t) * 1000)
                    hold_cpu.append((time.thread_time() - c) * 1000)
                hold_q.append(len(ctx.captured_queries))
    pg_record = pg_cpu_line(pg_before, pg_cpu_ticks(), len(record_ms))
    if pg_record:
        pg_record += " (its page loads and holds included)"
    campaign = Campaign.objects.get(slug=SLUG)
    print(
        f"database: {connection.vendor}, {Pair.objects.filter(campaign=campaign, pooled=True).count():,} pooled "
        f"pairs, redundancy {campaign.redundancy}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    report("record + next pair (htmx POST)", record_ms, record_cpu, record_q, pg_record)
    if get_ms:
        report("judging page (full GET)", get_ms, get_cpu, get_q)
    if hold_ms:
        report("hold the pair shown (htmx POST)", hold_ms, hold_cpu, hold_q)
    api_ms, api_cpu, api_q, api_pg = measure_api(judgments=judgments, rng=rng)
    report("API judgment (POST /api/judgments/)", api_ms, api_cpu, api_q, api_pg)


def pg_cpu_ticks() -> dict[int, int]:
    """CPU clock ticks (user + system) of every PostgreSQL backend of this database, by process id: on this
    machine's PostgreSQL only (read from /proc); empty elsewhere (SQLite, a remote server)."""
    if connection.vendor != "postgresql":
        return {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        pids = [pid for (pid,) in cursor.fetchall()]
    ticks = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks[pid] = int(fields[11]) + int(fields[12])
    return ticks


def pg_cpu_line(before: dict[int, int], after: dict[int, int], n: int) -> str:
    if not after:
        return ""
    spent = sum(t - before.get(pid, 0) for pid, t in after.items()) / os.sysconf("SC_CLK_TCK")
    return f" | PostgreSQL's CPU {1000 * spent / max(n, 1):.2f} ms/request"


def measure_api(*, judgments: int, rng: random.Random) -> tuple[list[float], list[float], list[int], str]:
    """A script's judgments through the API with a token, as bench/load_bench.py's API annotators post them: pairs
    the annotator has not judged, now and then (1 in 10) a changed grade of one just posted."""
    from rest_framework.authtoken.models import Token

    user = get_user_model().objects.get(username="other")
    token = Token.objects.get_or_create(user=user)[0].key
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    public_ids = list(
        Pair.objects.filter(campaign__slug=SLUG, pooled=True)
        .exclude(judgments__annotator=user)
        .order_by("?")
        .values_list("public_id", flat=True)[:judgments]
    )
    ms, cpu, queries, done = [], [], [], []
    pg_before = pg_cpu_ticks()
    for public_id in public_ids:
        if done and rng.random() < 0.1:
            public_id = rng.choice(done[-5:])
        done.append(public_id)
        body = json.dumps({"pair": public_id, "grade": rng.choice([0, 1, 1, 2])})
        reset_queries()
        with CaptureQueriesContext(connection) as ctx:
            t, c = time.perf_counter(), time.thread_time()
            response = client.post("/api/judgments/", body, content_type="application/json")
            ms.append((time.perf_counter() - t) * 1000)
            cpu.append((time.thread_time() - c) * 1000)
        queries.append(len(ctx.captured_queries))
        assert response.status_code in (200, 201), (response.status_code, response.content[:500])
    return ms, cpu, queries, pg_cpu_line(pg_before, pg_cpu_ticks(), len(ms))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--depth", type=int, default=50, help="pooled documents per query")
    parser.add_argument("--prior", type=float, default=0.3, help="share of the pool judged by someone else")
    parser.add_argument("--judgments", type=int, default=300)
    parser.add_argument("--keepdb", action="store_true", help="keep (and reuse) the benchmark database")
    args = parser.parse_args()
    print(machine_line(), flush=True)

    setup_test_environment()
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        out = ROOT / "bench" / "out"
        out.mkdir(parents=True, exist_ok=True)
        db.setdefault("TEST", {})["NAME"] = str(out / "judge_bench.sqlite3")
    else:
        db.setdefault("TEST", {})["NAME"] = f"{db['NAME']}_judge_bench"
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=args.keepdb)
    try:
        if not Campaign.objects.filter(slug=SLUG).exists():
            build(queries=args.queries, depth=args.depth, prior=args.prior)
        measure(judgments=args.judgments)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=args.keepdb)


if __name__ == "__main__":
    main()
