"""Export benchmark: 1,000,000 judgments out through the real API views, with time and peak memory.

Builds a throwaway database (a temporary SQLite file, or a test database next to DATABASE_URL's), bulk
inserts a campaign of 1,000 queries x 100 documents judged by 10 annotators (5% unsure), then exports
through the Django test Client, consuming each streamed response chunk by chunk as a client would:

* judgments as CSV and as JSON Lines (every judgment, ``unsure=include``),
* the same for one annotator (100,000 rows), to show that memory does not grow with the export,
* judgments as cursor-paginated JSON, walked page by page (1,000 per page),
* the aggregated labels as TREC qrels.

Each export runs twice: once for wall time, once under tracemalloc for the peak of Python allocations.

    python bench/export_bench.py                    # 1,000,000 judgments on SQLite
    python bench/export_bench.py --annotators 2     # 200,000: a quick run
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/reljudge python bench/export_bench.py
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.http import StreamingHttpResponse
    from django.test import Client

    from judging.models import Judgment


ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench._setup import machine_line  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("RELJUDGE_ALLOW_DEV_SECRET", "1")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--docs-per-query", type=int, default=100)
    parser.add_argument("--annotators", type=int, default=10)
    parser.add_argument("--unsure-every", type=int, default=20, help="every n-th judgment is unsure (5%%)")
    parser.add_argument("--only", default="", help="run only the exports whose label contains this (e.g. CSV)")
    return parser.parse_args()


def build(args: argparse.Namespace) -> tuple:
    """Bulk insert the campaign; returns (campaign, lead, judgments written)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password

    from judging.models import Document, Judgment, Membership, Pair, Query
    from judging.services import campaign_create

    User = get_user_model()
    campaign = campaign_create(slug="bench", name="Export benchmark", pool_depth=args.docs_per_query)
    grades = {g.value: g.id for g in campaign.grades.all()}
    password = make_password(None)
    lead = User.objects.create(username="lead", password=password)
    annotators = User.objects.bulk_create([User(username=f"a{i}", password=password) for i in range(args.annotators)])
    Membership.objects.bulk_create(
        [Membership(campaign=campaign, user=lead, role="lead")]
        + [Membership(campaign=campaign, user=u, role="annotator") for u in annotators]
    )
    Query.objects.bulk_create(
        [Query(campaign=campaign, qid=str(301 + q), text=f"query {q}") for q in range(args.queries)], batch_size=5000
    )
    Document.objects.bulk_create(
        (
            Document(campaign=campaign, docid=f"D{q}-{d}", title=f"doc {d}", text="text " * 20)
            for q in range(args.queries)
            for d in range(args.docs_per_query)
        ),
        batch_size=5000,
    )
    qids = dict(Query.objects.filter(campaign=campaign).values_list("qid", "id"))
    dids = dict(Document.objects.filter(campaign=campaign).values_list("docid", "id"))
    Pair.objects.bulk_create(
        (
            Pair(
                campaign=campaign,
                query_id=qids[str(301 + q)],
                document_id=dids[f"D{q}-{d}"],
                label=(q + d) % 3,
                judgment_count=len(annotators),
            )
            for q in range(args.queries)
            for d in range(args.docs_per_query)
        ),
        batch_size=5000,
    )
    pair_ids = list(Pair.objects.filter(campaign=campaign).order_by("id").values_list("id", flat=True))

    def judgments() -> Iterator[Judgment]:
        n = 0
        for a, user in enumerate(annotators):
            for p, pid in enumerate(pair_ids):
                n += 1
                value = (p + a) % 3
                if n % args.unsure_every == 0:
                    yield Judgment(
                        pair_id=pid, annotator=user, unsure=True, tentative_grade_id=grades[value], note="hard to say"
                    )
                else:
                    yield Judgment(pair_id=pid, annotator=user, grade_id=grades[value], seconds_spent=4.5)

    batch, written = [], 0
    for judgment in judgments():
        batch.append(judgment)
        if len(batch) == 10_000:
            Judgment.objects.bulk_create(batch)
            written += len(batch)
            batch = []
    Judgment.objects.bulk_create(batch)
    written += len(batch)
    return campaign, lead, written


def consume(response: StreamingHttpResponse, between: Callable[[], None] = lambda: None) -> tuple[int, int]:
    """Read a streamed response the way a client does; returns (bytes, lines)."""
    assert response.status_code == 200, response.status_code
    size = lines = 0
    for chunk in response.streaming_content:
        size += len(chunk)
        lines += chunk.count(b"\n")
    response.close()
    return size, lines


def walk_pages(client: Client, params: dict[str, str], between: Callable[[], None] = lambda: None) -> tuple[int, int]:
    """Follow the cursor from the first page to the last; returns (bytes, judgments)."""
    size = rows = 0
    url, query = "/api/judgments/", params
    while url:
        between()
        response = client.get(url, query)
        assert response.status_code == 200, response.status_code
        size += len(response.content)
        data = json.loads(response.content)
        rows += len(data["results"])
        url, query = data["next"], None
    return size, rows


ONLY = ""


def measure(label: str, run: Callable[[Callable[[], None]], tuple[int, int]]) -> None:
    """Time ``run`` (wall clock), then run it again under tracemalloc for the peak of Python allocations.

    ``run`` takes a callback it calls between requests. For a walk over many requests the callback
    collects garbage and restarts the peak, so the figure is the peak of one request: every DRF response
    sits in a reference cycle (view.response <-> response.renderer_context) that only the cyclic collector
    frees, and a walk would otherwise report how long the collector waited rather than what a page needs.
    """
    if ONLY not in label:
        return
    start = time.perf_counter()
    size, count = run(lambda: None)
    seconds = time.perf_counter() - start
    peaks = []

    def between() -> None:
        if peaks or tracemalloc.get_traced_memory()[1]:
            peaks.append(tracemalloc.get_traced_memory()[1])
        gc.collect()
        tracemalloc.reset_peak()

    gc.collect()
    tracemalloc.start()
    run(between)
    peaks.append(tracemalloc.get_traced_memory()[1])
    tracemalloc.stop()
    print(
        f"{label:<44} {count:>10,} {size / 1e6:>9.1f} MB {seconds:>8.1f} s {count / seconds:>10,.0f}/s"
        f" {max(peaks) / 1e6:>8.1f} MB"
    )


def main() -> None:
    global ONLY
    args = parse_args()
    ONLY = args.only
    print(machine_line(), flush=True)
    import django

    scratch = None
    if "DATABASE_URL" not in os.environ:
        fd, scratch = tempfile.mkstemp(prefix="reljudge-bench-", suffix=".sqlite3")
        os.close(fd)
        os.environ["DATABASE_URL"] = f"sqlite:///{scratch}"
    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()  # lets the test Client in (ALLOWED_HOSTS), as in the test suite
    if scratch:
        call_command("migrate", verbosity=0)
        old_name = None
    else:  # never touch the database DATABASE_URL names, nor the test suite's test_ database
        connection.settings_dict["TEST"]["NAME"] = f"{connection.settings_dict['NAME']}_export_bench_{os.getpid()}"
        old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        start = time.perf_counter()
        campaign, lead, written = build(args)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # what autovacuum does after a bulk load: the planner needs statistics
        print(
            f"database: {connection.vendor}; built {written:,} judgments "
            f"({args.queries:,} queries x {args.docs_per_query} documents x {args.annotators} annotators) "
            f"in {time.perf_counter() - start:.1f} s"
        )
        client = Client()
        client.force_login(lead)
        client.get("/api/judgments/", {"campaign": campaign.slug})  # warm up: URLconf, middleware, first queries
        every = {"campaign": campaign.slug, "unsure": "include"}
        one = {**every, "annotator": "a0"}

        def export(params: dict[str, str], fmt: str) -> Callable[[Callable[[], None]], tuple[int, int]]:
            return lambda between: consume(client.get("/api/judgments/", {**params, "format": fmt}))

        print(f"{'export':<44} {'rows':>10} {'size':>12} {'time':>10} {'rate':>12} {'peak mem':>11}")
        measure("judgments CSV (all)", export(every, "csv"))
        measure("judgments JSON Lines (all)", export(every, "jsonl"))
        measure("judgments CSV (one annotator)", export(one, "csv"))
        measure("judgments JSON Lines (one annotator)", export(one, "jsonl"))
        measure(
            "judgments JSON, cursor pages of 1,000 (all)",
            lambda between: walk_pages(client, {**every, "page_size": 1000}, between),
        )
        measure(
            "qrels (aggregated labels)", lambda between: consume(client.get(f"/api/campaigns/{campaign.slug}/qrels/"))
        )
        print(
            "rows: CSV counts lines including the header. peak mem: tracemalloc peak of Python allocations "
            "during the export, per request for the page walk (the database's own buffers are not traced)."
        )
    finally:
        if old_name is not None:
            connection.creation.destroy_test_db(old_name, verbosity=0)
        if scratch:
            connection.close()
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(scratch + suffix):
                    os.unlink(scratch + suffix)


if __name__ == "__main__":
    main()
