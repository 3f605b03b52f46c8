"""How fast a fetch from a live search engine gets through a campaign's queries (issue 44).

Run from anywhere: ``python bench/fetch_bench.py`` (defaults: 5,000 queries, 100 hits kept per query, 8 requests
in flight, against the local Elasticsearch-speaking engine of tests/fake_engine.py, BM25 over 3,000 generated
documents, in a process of its own on a port from RELJUDGE_FAKE_ENGINE_PORT_FIRST). Two figures:

1. the client alone (templates, HTTP, reading and checking the hits; no database): queries/s;
2. end to end, the fetch job as ``manage.py fetch_run`` runs it: asking every query, then the snapshot written
   in one transaction (documents, the run of NAME@1 through the run importer, its pool pairs).

Each with the process's peak memory (its maximum resident set so far, and what the fetch added to it).
DATABASE_URL picks the database (a throwaway SQLite file by default). Prints the figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._setup import django_ready


def vocabulary(n: int = 4000, seed: int = 5) -> tuple[list[str], list[float]]:
    """``n`` made-up words and Zipf weights (a word's frequency about 1 / its rank), as in real text."""
    rng = random.Random(seed)
    syllables = ["ka", "ri", "mo", "su", "te", "na", "lo", "pe", "zu", "bi", "ha", "go", "ne", "ta", "ru", "shi"]
    words = sorted({"".join(rng.choices(syllables, k=rng.randint(2, 4))) for _ in range(n * 2)})[:n]
    rng.shuffle(words)
    return words, [1 / (rank + 1) for rank in range(len(words))]


WORDS, WEIGHTS = vocabulary()


def documents(n: int, seed: int = 7) -> dict[str, dict[str, str]]:
    rng = random.Random(seed)
    return {
        f"doc{i:05d}": {
            "title": " ".join(rng.choices(WORDS, WEIGHTS, k=4)).capitalize(),
            "text": " ".join(rng.choices(WORDS, WEIGHTS, k=30)),
        }
        for i in range(n)
    }


def serve(docs: int, ready: Any, url: Any) -> None:
    """The engine, in its own process (its threads do not take the client's interpreter lock)."""
    from tests.fake_engine import FakeEngine

    engine = FakeEngine(documents(docs))
    url.value = engine.url.encode()
    ready.set()
    while True:
        time.sleep(3600)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=5000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--docs", type=int, default=3000)
    args = parser.parse_args()

    vendor = django_ready("fetch_bench")
    ready, url = multiprocessing.Event(), multiprocessing.Array("c", 64)
    server = multiprocessing.Process(target=serve, args=(args.docs, ready, url), daemon=True)
    server.start()
    ready.wait(30)
    base = url.value.decode()

    from judging.engine_models import Engine
    from judging.jobs import engine_fetch_job_start, job_run
    from judging.models import Job, Pair
    from judging.services import campaign_create, queries_import
    from judging.services.engine_client import engine_fetch_queries
    from judging.services.engines import campaign_queries, engine_system_save
    from tests.fake_engine import INDEX

    rng = random.Random(11)
    campaign = campaign_create(slug=f"fetch-bench-{int(time.time())}", name="fetch bench", pool_depth=10)
    topics = "".join(f"q{i:05d}\t{' '.join(rng.choices(WORDS[:800], k=3))}\t\n" for i in range(args.queries))
    queries_import(campaign=campaign, data=topics.encode(), filename="topics.tsv")
    engine = Engine.objects.create(
        name=f"bench-{campaign.pk}", kind="elasticsearch", base_url=base, timeout=30, concurrency=args.concurrency
    )
    system = engine_system_save(
        campaign=campaign,
        user=None,
        engine=engine,
        name="bm25",
        target=INDEX,
        template='{"query": {"multi_match": {"query": "{{query}}", "fields": ["title", "text"]}}}',
        title_field="title",
        text_field="text",
        depth=args.depth,
    )
    queries = campaign_queries(campaign=campaign)
    print(
        f"{vendor}: {len(queries):,} queries, {args.depth} hits each, concurrency {args.concurrency}, "
        f"BM25 over {args.docs:,} documents (engine in its own process)",
        flush=True,
    )

    before = peak_mb()
    started, cpu = time.perf_counter(), time.process_time()
    fetched = engine_fetch_queries(system=system, queries=queries)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(
        f"client alone: {len(queries) / seconds:,.0f} queries/s ({seconds:.2f} s; {len(fetched.failures)} failed; "
        f"the client's CPU {cpu / len(queries) * 1000:.2f} ms a query, a ceiling of "
        f"{len(queries) / cpu:,.0f} queries/s on one free core); "
        f"peak memory {peak_mb():.0f} MB (+{peak_mb() - before:.0f} MB)",
        flush=True,
    )
    del fetched

    before = peak_mb()
    started = time.perf_counter()
    job = engine_fetch_job_start(campaign=campaign, user=None, system=system, enqueue=False)
    job_run(job_id=job.pk)
    seconds = time.perf_counter() - started
    job.refresh_from_db()
    assert job.status == Job.Status.DONE, job.error
    r = job.result
    fetch_seconds = r["seconds"]
    print(
        f"end to end (fetch job): {len(queries) / seconds:,.0f} queries/s ({seconds:.2f} s: asking "
        f"{fetch_seconds:.2f} s, writing {seconds - fetch_seconds:.2f} s); {r['ok']:,} answered, {r['failed']} "
        f"failed, {r['documents_added']:,} documents, {Pair.objects.filter(campaign=campaign).count():,} pool "
        f"pairs; median answer {r['answer_ms']:.1f} ms; peak memory {peak_mb():.0f} MB "
        f"(+{peak_mb() - before:.0f} MB)",
        flush=True,
    )
    server.terminate()


if __name__ == "__main__":
    main()
