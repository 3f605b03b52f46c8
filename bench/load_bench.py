"""Load benchmark: 50 simulated annotators and a lead against gunicorn on PostgreSQL (issue 10).

It builds a throwaway database beside DATABASE_URL's (`<name>_load`), starts gunicorn as
scripts/serve.sh does (WEB_CONCURRENCY x GUNICORN_THREADS, a psycopg pool per process), and runs two
60-second phases, each on a fresh campaign so every annotator starts with an open queue:

  (a) think time uniform 0.5-1.5 s between actions;   (b) no think time.

Most annotators use the judging page exactly as the browser does (session login with CSRF, htmx
"record + next" posts, now and then Back to an earlier pair, a changed grade, then "Next unjudged");
the rest judge through the API with a token; a lead polls the leaderboard API every 5 s. It prints the
throughput, p50/p95/p99 per endpoint and the error count (an annotator shown "nothing left to judge" while more
pairs had no judgment than there are annotators counts as one), then checks that nothing was lost (each
annotator's last grade of each pair and the number of revisions, against what the clients sent) and
prints the most PostgreSQL connections seen (pg_stat_activity, sampled every 50 ms).

Each queue mode of ``--modes`` (default shuffled, mtc, bandit and hybrid, whose campaign gets a model judge that
answered every pair) runs both phases on campaigns of its own, one after the other, and a last table gives per mode
and phase the judgments per second, the app's and PostgreSQL's CPU per judgment, the rows read and the transactions
committed per judgment, record + next's p95 and the annotators sent home early (issue 45), with the machine's
yardstick line.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/reljudge python bench/load_bench.py
    ... --annotators 50 --api-annotators 10 --seconds 60 --workers 2 --threads 8

The load generator is asyncio + aiohttp in one process (a few % of a core at these rates), so it
competes little with the server on a small machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import aiohttp
import yarl

if TYPE_CHECKING:
    import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench import statement_cpu  # noqa: E402
from bench._setup import machine_line  # noqa: E402
from tests.serving.servers import Site  # noqa: E402

PAIR_RE = re.compile(r'data-pair-id="(\d+)"')
VERSION_RE = re.compile(r'name="version" value="([^"]*)"')
WORDS = ("wool", "knit", "sweater", "rain", "jacket", "merino", "cotton", "shell", "warm", "light", "winter")


# --------------------------------------------------------------------------- set-up


def seed(
    site: Site, *, slug: str, annotators: list[str], queries: int, depth: int, folder: Path, queue_mode: str | None
) -> None:
    """A campaign of queries x depth pairs with real documents, imported through the services."""
    rng = random.Random(slug)
    topics = "".join(f"q{q}\t{' '.join(rng.sample(WORDS, 3))}\n" for q in range(queries))
    docs = "".join(
        json.dumps(
            {"docid": f"d{q}-{i}", "title": " ".join(rng.sample(WORDS, 4)), "text": " ".join(rng.choices(WORDS, k=60))}
        )
        + "\n"
        for q in range(queries)
        for i in range(depth)
    )
    run = "".join(f"q{q} Q0 d{q}-{i} {i + 1} {depth - i} sys\n" for q in range(queries) for i in range(depth))
    # hybrid needs its model judge first: the campaign is created in another mode and switched below
    mode = f", queue_mode={queue_mode!r}" if queue_mode and queue_mode != "hybrid" else ""
    for name, text in (("topics.tsv", topics), ("docs.jsonl", docs), ("sys.run", run)):
        (folder / f"{slug}-{name}").write_text(text)
    site.python(
        f"""
import json
from pathlib import Path
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from judging.services import campaign_create, membership_add, queries_import, documents_import, run_import
User = get_user_model()
c = campaign_create(slug={slug!r}, name={slug!r}, pool_depth={depth}{mode})
folder = Path({str(folder)!r})
queries_import(campaign=c, data=(folder / "{slug}-topics.tsv").read_bytes(), filename="topics.tsv")
documents_import(campaign=c, data=(folder / "{slug}-docs.jsonl").read_bytes(), filename="docs.jsonl")
run_import(campaign=c, data=(folder / "{slug}-sys.run").read_bytes(), filename="sys.run")
hashed = {{}}
for name in {annotators + ["lead"]!r}:
    u = User.objects.filter(username=name).first()
    if u is None:
        # One hash per password is enough for a benchmark: PBKDF2 for 50 users would take a while.
        u = User.objects.create(username=name, password=make_password("pw-" + name))
    membership_add(campaign=c, user=u, role="lead" if name == "lead" else "annotator")
if {queue_mode!r} == "hybrid":
    # hybrid judging needs a model judge: one that answered every pair (grades at random; only the cost is measured)
    from judging.services.model_judge import model_judge_get_or_create
    from judging.services import qrels_import
    import random as _random
    judge = model_judge_get_or_create(name="bot", campaign=c)
    rng = _random.Random(1)
    lines = "".join(
        f"q{{q}} 0 d{{q}}-{{i}} {{rng.choice((0, 0, 1, 2))}}\\n" for q in range({queries}) for i in range({depth})
    )
    qrels_import(campaign=c, data=lines.encode(), filename="model.qrels", annotator=judge)
    from judging.services.campaigns import campaign_settings_update
    c.refresh_from_db()
    campaign_settings_update(campaign=c, queue_mode="hybrid")
print(json.dumps(c.pk))
""",
        timeout=600,
    )


# --------------------------------------------------------------------------- the simulated team


class Stats:
    def __init__(self) -> None:
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)
        self.error_samples: list[str] = []
        self.judgments = 0
        # what the clients sent, per (annotator, pair): last grade, and how many changes (revisions)
        self.expected: dict[tuple[str, int], list[int]] = {}
        # annotators shown "nothing left to judge" before their minute was up, with the campaign's pairs that had
        # no judgment yet at that moment (with redundancy 1 and no skips, a pair without a judgment is open to
        # them unless another annotator holds it: one hold each, so more of them than annotators is work left)
        self.sent_home: list[tuple[str, int]] = []

    def sent(self, who: str, pair: int, grade: int) -> None:
        last = self.expected.get((who, pair))
        if last is None:
            self.expected[(who, pair)] = [grade, 1]
        elif last[0] != grade:
            last[0], last[1] = grade, last[1] + 1
        self.judgments += 1


async def timed(
    stats: Stats,
    name: str,
    call: Callable[[], AbstractAsyncContextManager[aiohttp.ClientResponse]],
    ok: tuple[int, ...] = (200,),
) -> str | None:
    t0 = time.perf_counter()
    try:
        async with call() as r:
            body = await r.text()
            status = r.status
    except (TimeoutError, aiohttp.ClientError) as exc:
        stats.errors[name] += 1
        stats.error_samples.append(f"{name}: {exc!r}")
        return None
    stats.latency[name].append(time.perf_counter() - t0)
    if status not in ok:
        stats.errors[name] += 1
        if len(stats.error_samples) < 20:
            stats.error_samples.append(f"{name}: {status} {body[:200]!r}")
        return None
    return body


async def web_login(session: aiohttp.ClientSession, base: str, name: str) -> str:
    async with session.get(base + "/accounts/login/") as r:
        await r.read()
    token = session.cookie_jar.filter_cookies(yarl.URL(base))["csrftoken"].value
    data = {"username": name, "password": "pw-" + name, "csrfmiddlewaretoken": token}
    async with session.post(base + "/accounts/login/", data=data, allow_redirects=False) as r:
        assert r.status == 302, f"login of {name}: {r.status}"
    return session.cookie_jar.filter_cookies(yarl.URL(base))["csrftoken"].value


def new_session(**kwargs: Any) -> aiohttp.ClientSession:
    # unsafe=True: keep cookies set by an IP-address host (127.0.0.1), as a browser does.
    return aiohttp.ClientSession(
        cookie_jar=aiohttp.CookieJar(unsafe=True), timeout=aiohttp.ClientTimeout(total=60), **kwargs
    )


async def web_annotator(
    base: str,
    slug: str,
    name: str,
    s: aiohttp.ClientSession,
    csrf: str,
    stats: Stats,
    until: float,
    think: Callable[[random.Random], Awaitable[None]],
    unjudged: Callable[[], int] | None = None,
) -> None:
    async with s:
        hx = {"HX-Request": "true", "X-CSRFToken": csrf, "Referer": base + "/"}
        judge = f"{base}/campaigns/{slug}/judge/"
        rng = random.Random(name)
        body = await timed(stats, "judge page", lambda: s.get(judge))
        until = time.monotonic() + until
        history: list[int] = []
        while body and time.monotonic() < until:
            m = PAIR_RE.search(body)
            if not m:  # "nothing left to judge"
                if unjudged is not None and time.monotonic() < until:
                    stats.sent_home.append((name, await asyncio.to_thread(unjudged)))
                return
            pair, version = int(m.group(1)), VERSION_RE.search(body).group(1)
            await think(rng)
            if history and rng.random() < 0.1:
                # Back to an earlier pair, change its grade, then on to the next unjudged pair.
                prev = rng.choice(history[-5:])
                page = await timed(stats, "back", lambda p=prev: s.get(judge, params={"pair": p}, headers=hx))
                if not page:
                    break
                old = stats.expected[(name, prev)][0]
                grade = (old + 1) % 3
                v = VERSION_RE.search(page).group(1)
                post = {"grade": str(grade), "version": v, "seconds": "2", "note": ""}
                url = f"{judge}{prev}/"
                if await timed(stats, "change", lambda u=url, d=post: s.post(u, data=d, headers=hx)):
                    stats.sent(name, prev, grade)
                body = await timed(stats, "next unjudged", lambda: s.get(judge, headers=hx))
                continue
            grade = rng.choice((0, 1, 1, 2))
            post = {"grade": str(grade), "version": version, "seconds": "3", "note": ""}
            url = f"{judge}{pair}/"
            body = await timed(stats, "record+next", lambda u=url, d=post: s.post(u, data=d, headers=hx))
            if body is not None:
                stats.sent(name, pair, grade)
                history.append(pair)


async def api_annotator(
    base: str,
    token: str,
    name: str,
    pairs: list[int],
    stats: Stats,
    until: float,
    think: Callable[[random.Random], Awaitable[None]],
) -> None:
    headers = {"Authorization": f"Token {token}"}
    rng = random.Random(name)
    until = time.monotonic() + until
    async with new_session(headers=headers) as s:
        done: list[int] = []
        for pair in pairs:
            if time.monotonic() >= until:
                return
            await think(rng)
            # A change goes back to a pair whose judgment was stored (a failed post is counted as an error).
            revisit = bool(done) and rng.random() < 0.1
            if revisit:
                pair = rng.choice(done[-5:])
                grade = (stats.expected[(name, pair)][0] + 1) % 3
            else:
                grade = rng.choice((0, 1, 1, 2))
            call = lambda p=pair, g=grade: s.post(base + "/api/judgments/", json={"pair": p, "grade": g})  # noqa: E731
            if await timed(stats, "api judgment", call, ok=(200, 201)):
                stats.sent(name, pair, grade)
                if not revisit:
                    done.append(pair)


async def lead_polling(base: str, token: str, slug: str, stats: Stats, until: float) -> None:
    headers = {"Authorization": f"Token {token}"}
    until = time.monotonic() + until
    async with new_session(headers=headers) as s:
        while time.monotonic() < until:
            await timed(stats, "leaderboard", lambda: s.get(f"{base}/api/campaigns/{slug}/leaderboard/"))
            await asyncio.sleep(5)


async def phase(
    base: str,
    slug: str,
    web_names: list[str],
    api_names: list[str],
    tokens: dict[str, str],
    api_pairs: dict[str, list[int]],
    seconds: float,
    think: Callable[[random.Random], Awaitable[None]],
    started: Callable[[], None] = lambda: None,
    unjudged: Callable[[], int] | None = None,
) -> tuple[Stats, float]:
    stats = Stats()
    # Log in first (PBKDF2 on the server), so the measured minute is judging only: ``started`` is called
    # once every client is logged in, where the CPU and PostgreSQL meters start.
    sessions = [new_session() for _ in web_names]
    csrfs = await asyncio.gather(*(web_login(sess, base, n) for sess, n in zip(sessions, web_names, strict=True)))
    started()
    t0 = time.monotonic()
    until = seconds  # each client counts its own minute from its first request
    await asyncio.gather(
        *(
            web_annotator(base, slug, n, sess, c, stats, until, think, unjudged)
            for n, sess, c in zip(web_names, sessions, csrfs, strict=True)
        ),
        *(api_annotator(base, tokens[n], n, api_pairs[n], stats, until, think) for n in api_names),
        lead_polling(base, tokens["lead"], slug, stats, until),
    )
    return stats, time.monotonic() - t0


class PostgresMeter:
    """What PostgreSQL spent on the site's database while the phase ran.

    - CPU: the user + system time of every server process attached to this database (the app's backends and
      any autovacuum worker on it), read from /proc every ``interval`` s: each process counts from the start
      (or its birth) to its last sample, so the other sessions on a shared server are not counted. The meter
      analyzes the growing tables every ANALYZE_EVERY s (see there) and counts that too.
    - Rows read: the deltas of ``seq_tup_read`` (rows returned by sequential scans) and ``idx_tup_fetch``
      (rows fetched through an index) over the database's tables, from pg_stat_user_tables. A backend
      publishes its counters when it goes idle, at most once a second and within 10 s of its last
      statement, so ``stop`` waits for them before reading.
    """

    FLUSH_WAIT = 11.0
    # Autovacuum keeps the planner's statistics in step with tables that grow (a judgments table analyzed empty is
    # scanned whole at every judgment, and the statements prepared meanwhile keep that plan until the next
    # analysis). On a deployment's tables, which hold a history, it analyzes after 10% growth; on the bench's new
    # database the tables pass that in the first seconds, but autovacuum looks only once a minute (and a shared
    # test server may have it off): the meter analyzes the app's growing tables this often, and counts that CPU.
    ANALYZE_EVERY = 10.0
    # A table this small (8 pages) is read whole where an index would read one row: its rows are counted apart.
    SMALL_BYTES = 65536
    GROWING = "judging_judgment, judging_judgmentrevision, judging_pair, judging_assignment, judging_query"

    def __init__(self, database_url: str, interval: float = 0.2) -> None:
        self.url = database_url
        self.dbname = urlparse(database_url).path.lstrip("/")
        self.interval = interval
        self.ticks = os.sysconf("SC_CLK_TCK")
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        self.tables_before: dict[str, tuple[int, int]] = {}
        self.analyze_ticks = 0  # the CPU of the meter's own ANALYZE runs (autovacuum's work)
        self.commits_before = 0
        self.own_statements = 0  # the meter's own (autocommit) statements, each a transaction: not the app's

    def _tables(self, conn: psycopg.Connection) -> dict[str, tuple[int, int]]:
        rows = conn.execute(
            "SELECT relname, COALESCE(seq_tup_read, 0), COALESCE(idx_tup_fetch, 0) FROM pg_stat_user_tables"
        ).fetchall()
        return {name: (seq, idx) for name, seq, idx in rows}

    def _commits(self, conn: psycopg.Connection) -> int:
        row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s", [self.dbname]).fetchone()
        return int(row[0]) if row else 0

    def _pids(self, conn: psycopg.Connection) -> list[int]:
        self.own_statements += 1
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [self.dbname]
        ).fetchall()
        return [r[0] for r in rows]

    @staticmethod
    def _cpu_ticks(pid: int) -> int | None:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            return None
        return int(fields[11]) + int(fields[12])

    def _sample(self, conn: psycopg.Connection, *, baseline: bool) -> None:
        for pid in self._pids(conn):
            ticks = self._cpu_ticks(pid)
            if ticks is None:
                continue
            if pid not in self.first:
                self.first[pid] = ticks if baseline else 0  # born during the phase: all of its time counts
            self.last[pid] = ticks

    def start(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            self.tables_before = self._tables(conn)
            self.commits_before = self._commits(conn)
            self._sample(conn, baseline=True)
            self.own_statements = 0

        def run() -> None:
            with psycopg.connect(self.url, autocommit=True) as conn:
                own = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
                analyzed = time.monotonic()
                while not self.stop_event.wait(self.interval):
                    self._sample(conn, baseline=False)
                    if time.monotonic() - analyzed > self.ANALYZE_EVERY:
                        before = self._cpu_ticks(own) or 0
                        conn.execute(f"ANALYZE {self.GROWING}")
                        self.own_statements += 1
                        self.analyze_ticks += (self._cpu_ticks(own) or 0) - before
                        analyzed = time.monotonic()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def stop(self) -> tuple[float, dict[str, tuple[int, int]], int, set[str]]:
        """CPU seconds, per table the rows read (sequential, through an index), the transactions committed on
        the database (the app's: each autocommit statement of a read is one too; the meter's own are taken out)
        during the phase, and the small tables at its end (SMALL_BYTES at most: PostgreSQL reads such a table whole
        rather than through an index, every row counted as read: users, tokens, memberships, holds)."""
        import psycopg

        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(timeout=10)
        cpu = (sum(self.last[pid] - self.first[pid] for pid in self.last) + self.analyze_ticks) / self.ticks
        time.sleep(self.FLUSH_WAIT)
        with psycopg.connect(self.url, autocommit=True) as conn:
            after = self._tables(conn)
            commits = self._commits(conn) - self.commits_before - self.own_statements
            small = {
                name
                for (name,) in conn.execute(
                    "SELECT relname FROM pg_stat_user_tables WHERE pg_relation_size(relid) <= %s", [self.SMALL_BYTES]
                ).fetchall()
            }
        reads = {}
        for name, (seq, idx) in after.items():
            seq0, idx0 = self.tables_before.get(name, (0, 0))
            if seq - seq0 or idx - idx0:
                reads[name] = (seq - seq0, idx - idx0)
        return cpu, reads, max(commits, 0), small


def small_rows(reads: dict[str, tuple[int, int]], small: set[str]) -> int:
    """Of the rows read, those of the small tables (PostgresMeter.SMALL_BYTES)."""
    return sum(seq + idx for name, (seq, idx) in reads.items() if name in small)


def pg_report(cpu: float, reads: dict[str, tuple[int, int]], judgments: int, commits: int, small: set[str]) -> None:
    n = max(1, judgments)
    total = sum(seq + idx for seq, idx in reads.values())
    print(
        f"  PostgreSQL CPU (this database's backends): {cpu:.1f} s, {1000 * cpu / n:.2f} ms per judgment; "
        f"rows read {total:,}, {total / n:,.0f} per judgment (pg_stat_user_tables seq_tup_read + idx_tup_fetch), "
        f"{small_rows(reads, small) / n:,.0f} of them from tables of 64 KiB or less; "
        f"{commits:,} commits, {commits / n:.1f} per judgment (pg_stat_database xact_commit)"
    )
    top = sorted(reads.items(), key=lambda item: -(item[1][0] + item[1][1]))[:6]
    print(
        "    most read: "
        + ", ".join(f"{name} {seq / n:,.0f} seq + {idx / n:,.0f} idx" for name, (seq, idx) in top)
        + " per judgment"
    )


# --------------------------------------------------------------------------- checks and output


def server_cpu(site: Site) -> float:
    """CPU seconds used so far by gunicorn (its master and workers: the processes of its process group, and
    the workers it has reaped), read from /proc (Linux)."""
    master = site.processes[0].pid
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[2]) == master:  # pgrp (fields from the state on: state, ppid, pgrp, ...)
            total += int(fields[11]) + int(fields[12])  # utime, stime
            if int(entry) == master:
                total += int(fields[13]) + int(fields[14])  # cutime, cstime: reaped workers
    return total / ticks


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return 1000 * values[min(len(values) - 1, int(q * len(values)))]


def report(stats: Stats, elapsed: float) -> None:
    print(f"  {'endpoint':<15} {'n':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'errors':>7}")
    for name, lat in sorted(stats.latency.items()):
        print(
            f"  {name:<15} {len(lat):>7} {pct(lat, 0.5):>8.1f} {pct(lat, 0.95):>8.1f} {pct(lat, 0.99):>8.1f} "
            f"{stats.errors.get(name, 0):>7}"
        )
    requests = sum(len(v) for v in stats.latency.values())
    print(
        f"  {requests / elapsed:.1f} requests/s, {stats.judgments / elapsed:.1f} judgments/s over {elapsed:.1f} s; "
        f"errors: {sum(stats.errors.values())}"
    )
    for sample in stats.error_samples[:5]:
        print("   ", sample)


def verify(site: Site, slug: str, stats: Stats) -> int:
    rows = site.sql(
        """SELECT u.username, p.public_id, g.value,
                  (SELECT COUNT(*) FROM judging_judgmentrevision r WHERE r.judgment_id = j.id)
           FROM judging_judgment j JOIN auth_user u ON u.id = j.annotator_id JOIN judging_grade g ON g.id = j.grade_id
           JOIN judging_pair p ON p.id = j.pair_id JOIN judging_campaign c ON c.id = p.campaign_id
           WHERE c.slug = %s""",
        (slug,),
    )
    stored = {(u, p): [g, n] for u, p, g, n in rows if u != "bot"}  # not the hybrid campaign's model judge
    lost = sum(1 for k, v in stats.expected.items() if stored.get(k) != v)
    extra = len(stored.keys() - stats.expected.keys())
    print(
        f"  check: {len(stats.expected)} (annotator, pair) judgments sent, {len(stored)} stored; "
        f"{lost} differ in last grade or revision count, {extra} unexpected"
    )
    return lost + extra


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=50)
    parser.add_argument("--api-annotators", type=int, default=10, help="of --annotators, how many use the API")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--workers", type=int, default=int(os.environ.get("WEB_CONCURRENCY", "2")))
    parser.add_argument("--threads", type=int, default=int(os.environ.get("GUNICORN_THREADS", "8")))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--depth", type=int, default=60)
    parser.add_argument("--phases", default="ab", help="a (think time), b (none), or ab")
    parser.add_argument(
        "--modes",
        default="shuffled,mtc,bandit,hybrid",
        help="the queue modes, one campaign each per phase, run one after the other (default: "
        "shuffled,mtc,bandit,hybrid; hybrid's campaign gets a model judge that answered every pair)",
    )
    parser.add_argument("--queue-mode", default=None, help="one queue mode only (the same as --modes MODE)")
    parser.add_argument(
        "--statements",
        type=int,
        default=0,
        metavar="N",
        help="also print, per mode, the N statements that cost PostgreSQL the most CPU a judgment "
        "(bench/statement_cpu.py; Linux, PostgreSQL on this machine)",
    )
    args = parser.parse_args()
    modes = [args.queue_mode] if args.queue_mode else [m.strip() for m in args.modes.split(",") if m.strip()]
    if not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        sys.exit("load_bench.py measures the PostgreSQL deployment: set DATABASE_URL=postgres://...")
    print(machine_line(), flush=True)

    folder = Path(tempfile.mkdtemp(prefix="reljudge-load-"))
    site = Site.create("load", tmp_dir=folder)
    names = [f"ann{i:02d}" for i in range(args.annotators)]
    api_names, web_names = names[: args.api_annotators], names[args.api_annotators :]
    try:
        t0 = time.monotonic()
        slugs = {(m, p): f"load-{m}-{p}" for m in modes for p in args.phases}
        for (m, _p), slug in slugs.items():
            seed(site, slug=slug, annotators=names, queries=args.queries, depth=args.depth, folder=folder, queue_mode=m)
        if site.vendor == "postgresql":
            # What autovacuum does shortly after imports this size (as judge_bench.py does): without statistics
            # the planner may walk every pair of the campaign for each query when choosing an annotator's next
            # query (docs/deployment.md).
            import psycopg

            with psycopg.connect(site.database_url, autocommit=True) as conn:
                conn.execute("ANALYZE")
        tokens = site.tokens(names + ["lead"])
        print(
            f"set-up: {len(slugs)} campaigns of {args.queries * args.depth} pairs, queue modes {', '.join(modes)}, "
            f"in {time.monotonic() - t0:.0f} s"
        )
        statements_dir = folder / "statements"
        env = {"DATABASE_POOL_MAX": str(args.threads), "DJANGO_LOG_LEVEL": "WARNING"}
        if args.statements:
            statements_dir.mkdir()
            env[statement_cpu.DIR_ENV] = str(statements_dir)
        base = site.gunicorn(
            log=folder / "gunicorn.log",
            workers=args.workers,
            threads=args.threads,
            env=env,
            config="python:bench.statement_cpu" if args.statements else None,
        )
        bound = args.workers * args.threads
        print(
            f"gunicorn {args.workers} workers x {args.threads} threads, pool max {args.threads}/process "
            f"(bound {bound} connections); {len(web_names)} web + {len(api_names)} API annotators + 1 lead"
        )

        failures = 0
        summary: list[tuple[str, str, float, float, float, float, float, float, float, int]] = []
        for (mode, p), slug in slugs.items():
            # API annotators take the pool from its end, one slice each; web annotators use the queue.
            pair_ids = [
                r[0]
                for r in site.sql(
                    # public ids: what the pages and the API name pairs by (row ids are never shown)
                    "SELECT p.public_id FROM judging_pair p JOIN judging_campaign c ON c.id = p.campaign_id "
                    "WHERE c.slug = %s ORDER BY p.id DESC",
                    (slug,),
                )
            ]
            per = len(pair_ids) // (4 * max(1, len(api_names)))
            api_pairs = {n: pair_ids[i * per : (i + 1) * per] for i, n in enumerate(api_names)}

            async def think_a(rng: random.Random) -> None:
                await asyncio.sleep(rng.uniform(0.5, 1.5))

            async def think_b(rng: random.Random) -> None:
                await asyncio.sleep(0)

            label = "(a) think time 0.5-1.5 s" if p == "a" else "(b) no think time"
            # The targets assume the machine is ours: say how busy it was, as judge_bench.py does.
            load = os.getloadavg()[0]
            print(
                f"\nqueue mode {mode}, {label}, {args.seconds:.0f} s "
                f"(load average {load:.1f} on {os.cpu_count()} CPUs at start):"
            )
            meter = PostgresMeter(site.database_url)
            cpu_before = [0.0]
            statements_before: list[dict[str, tuple[int, int]]] = [{}]

            def started(
                meter: PostgresMeter = meter,
                cpu_before: list[float] = cpu_before,
                statements_before: list[dict[str, tuple[int, int]]] = statements_before,
            ) -> None:
                cpu_before[0] = server_cpu(site)
                meter.start()
                if args.statements:
                    time.sleep(2 * statement_cpu.FLUSH_EVERY)  # the logins' statements written out
                    statements_before[0] = statement_cpu.totals(statements_dir)

            def unjudged(slug: str = slug) -> int:
                rows = site.sql(
                    "SELECT count(*) FROM judging_pair p JOIN judging_campaign c ON c.id = p.campaign_id "
                    "WHERE c.slug = %s AND p.pooled AND p.judgment_count = 0",
                    (slug,),
                )
                return int(rows[0][0])

            with site.connection_peak() as peak:
                stats, elapsed = asyncio.run(
                    phase(
                        base,
                        slug,
                        web_names,
                        api_names,
                        tokens,
                        api_pairs,
                        args.seconds,
                        think_a if p == "a" else think_b,
                        started=started,
                        unjudged=unjudged,
                    )
                )
            cpu = server_cpu(site) - cpu_before[0]
            pg_cpu, reads, commits, small = meter.stop()
            report(stats, elapsed)
            print(
                f"  app CPU (gunicorn, every request and the lead's polls, logins excluded): {cpu:.1f} s, "
                f"{1000 * cpu / max(1, stats.judgments):.2f} ms per judgment"
            )
            pg_report(pg_cpu, reads, stats.judgments, commits, small)
            if args.statements:  # (the meter's stop waited for the backends' statistics: the workers flushed too)
                after = statement_cpu.totals(statements_dir)
                statement_cpu.report(statements_before[0], after, stats.judgments, args.statements)
            lost = verify(site, slug, stats)
            print(f"  max PostgreSQL connections seen: {peak[0]} (bound {bound})")
            early = [(who, left) for who, left in stats.sent_home if left > len(names)]
            print(
                f"  told nothing is left before their minute was up: {len(stats.sent_home)} of {len(web_names)} web "
                f"annotators, {len(early)} of them while more pairs had no judgment than there are annotators "
                f"(pairs without a judgment then: {sorted(left for _, left in stats.sent_home)[:10]})"
            )
            errors = sum(stats.errors.values()) + len(early)
            n = max(1, stats.judgments)
            summary.append(
                (
                    mode,
                    p,
                    stats.judgments / elapsed,
                    1000 * cpu / n,
                    1000 * pg_cpu / n,
                    sum(a + b for a, b in reads.values()) / n,
                    small_rows(reads, small) / n,
                    commits / n,
                    pct(stats.latency["record+next"], 0.95),
                    len(early),
                )
            )
            if p == "a":
                p95 = pct(stats.latency["record+next"], 0.95)
                ok = errors == 0 and p95 < 100 and not lost
                print(f"  target: 0 errors and record+next p95 < 100 ms -> {'met' if ok else 'MISSED'} ({p95:.1f} ms)")
            else:
                rate = stats.judgments / elapsed
                ok = errors == 0 and rate >= 150 and not lost
                print(f"  target: 0 errors and >= 150 judgments/s -> {'met' if ok else 'MISSED'} ({rate:.1f}/s)")
            failures += not ok
        print(f"\nper mode ({machine_line()}):")
        print(
            f"  {'mode':<9} {'phase':<5} {'judg./s':>8} {'app ms/j':>9} {'PG ms/j':>8} {'rows/j':>8} "
            f"{'small':>7} {'commits/j':>9} {'r+n p95 ms':>10} {'sent home':>9}"
        )
        for mode, p, rate, app, pg, rows, small_j, commit, p95, home in summary:
            print(
                f"  {mode:<9} {p:<5} {rate:>8.1f} {app:>9.2f} {pg:>8.2f} {rows:>8,.0f} {small_j:>7,.0f} "
                f"{commit:>9.1f} {p95:>10.1f} {home:>9}"
            )
        print("  (small: of rows/j, those read from tables of 64 KiB or less, which PostgreSQL reads whole)")
    finally:
        site.drop()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
