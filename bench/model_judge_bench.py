"""How fast judge_with_model gets through a campaign against an endpoint that answers in 5 ms (issue 15).

Run from anywhere: ``python bench/model_judge_bench.py`` (defaults: 100,000 pooled pairs, 8 requests in flight,
a local fake OpenAI-compatible endpoint answering every request after 5 ms, in its own process on port 8212).
With 8 in flight and 5 ms per answer the ceiling is 1,600 pairs/s; the client is not the bottleneck when it gets
close to that. Two figures:

1. the client alone (prompt, HTTP, parsing; no database): pairs/s and the client's CPU time per pair;
2. end to end, ``model_judge_run`` as the command runs it: reading the pairs, calling, and storing each batch
   of judgments with their revisions (one transaction per batch, labels refreshed) in the database.

``--pairs N`` judges fewer pairs on a loaded machine (the figures are per pair; say so when you quote them).
DATABASE_URL picks the database (a throwaway SQLite file by default). Prints the figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from judging.models import Campaign


if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._setup import django_ready

ANSWER = json.dumps({"choices": [{"message": {"role": "assistant", "content": '{"grade": 1, "reason": "ok"}'}}]})


def serve(port: int, latency: float, ready: threading.Event) -> None:
    """The fake endpoint: every POST is answered after ``latency`` seconds (threads, so 8 wait at once)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    body = ANSWER.encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # as real servers do: headers and body go out without waiting

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(latency)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    ready.set()
    server.serve_forever()


def make_campaign(n_pairs: int) -> Campaign:
    """A campaign of n_pairs pooled pairs: n_pairs / 100 queries, one run of 100 documents each."""
    from judging.models import Campaign
    from judging.services import campaign_create, documents_import, queries_import, run_import

    Campaign.objects.filter(slug="mjbench").delete()
    campaign = campaign_create(slug="mjbench", pool_depth=100, guidelines="Grade 0, 1 or 2.")
    n_queries = max(1, n_pairs // 100)
    queries_import(
        campaign=campaign,
        data="".join(f"q{q}\twool sweater {q}\tA warm wool sweater.\n" for q in range(n_queries)).encode(),
        filename="t.tsv",
    )
    documents_import(
        campaign=campaign,
        data="".join(
            json.dumps({"docid": f"d{d}", "title": f"Sweater {d}", "text": "Merino wool, hand wash. " * 20}) + "\n"
            for d in range(1000)
        ).encode(),
        filename="d.jsonl",
    )
    run = "".join(
        f"q{q} Q0 d{(q * 7 + r) % 1000} {r + 1} {100 - r} sys\n" for q in range(n_queries) for r in range(100)
    )
    run_import(campaign=campaign, data=run.encode(), filename="r.trec")
    return campaign


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument(
        "--client-pairs", type=int, default=None, help="pairs of the client-only run (default: --pairs)"
    )
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=5.0)
    parser.add_argument("--port", type=int, default=8212)
    args = parser.parse_args()
    vendor = django_ready("model_judge_bench")

    from judging.models import Judgment
    from judging.services.model_client import ChatClient, Endpoint
    from judging.services.model_judge import (
        PairText,
        model_judge_get_or_create,
        model_judge_run,
        pairs_to_judge,
        parse_answer,
        prompt_messages,
    )

    ready = multiprocessing.Event()
    server = multiprocessing.Process(target=serve, args=(args.port, args.latency_ms / 1000, ready), daemon=True)
    server.start()
    ready.wait(10)
    endpoint = Endpoint.configured(url=f"http://127.0.0.1:{args.port}/v1", model="fake", retries=2)
    ceiling = args.concurrency / (args.latency_ms / 1000)
    print(
        f"fake endpoint: {args.latency_ms:g} ms per answer, {args.concurrency} in flight: "
        f"ceiling {ceiling:,.0f} pairs/s"
    )
    try:
        # 1. the client alone
        from concurrent.futures import ThreadPoolExecutor

        n_client = args.client_pairs or args.pairs
        client = ChatClient(endpoint)
        scale = [(0, "Not relevant", ""), (1, "Partially", ""), (2, "Highly", "")]
        text = "Merino wool, hand wash. " * 20

        def ask(i: int) -> tuple[int | None, str]:
            pair = PairText(i, f"q{i // 100}", "wool sweater", "A warm wool sweater.", f"d{i}", "Sweater", text)
            answer = client.complete(prompt_messages(guidelines="Grade 0, 1 or 2.", scale=scale, pair=pair))
            return parse_answer(answer, (0, 1, 2))

        started, cpu = time.perf_counter(), time.process_time()
        with ThreadPoolExecutor(args.concurrency) as pool:
            graded = sum(g is not None for g, _ in pool.map(ask, range(n_client), chunksize=64))
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        print(
            f"client only:  {n_client:,} pairs in {wall:.1f} s = {n_client / wall:,.0f} pairs/s "
            f"({n_client / wall / ceiling:.0%} of the ceiling); client CPU {cpu / n_client * 1e6:.0f} us/pair "
            f"({graded:,} graded)"
        )
        # 2. end to end through the database
        t0 = time.perf_counter()
        campaign = make_campaign(args.pairs)
        judge = model_judge_get_or_create(name="fake", campaign=campaign)
        pair_ids = pairs_to_judge(campaign=campaign, judge=judge, mode="unjudged")
        print(f"set-up ({vendor}): {len(pair_ids):,} pooled pairs in {time.perf_counter() - t0:.1f} s")
        started, cpu = time.perf_counter(), time.process_time()
        summary = model_judge_run(
            campaign=campaign, judge=judge, endpoint=endpoint, pair_ids=pair_ids, concurrency=args.concurrency
        )
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        stored = Judgment.objects.filter(annotator=judge).count()
        print(
            f"end to end:   {summary.pairs:,} pairs in {wall:.1f} s = {summary.pairs / wall:,.0f} pairs/s "
            f"({summary.pairs / wall / ceiling:.0%} of the ceiling); CPU {cpu / summary.pairs * 1e6:.0f} us/pair; "
            f"{stored:,} judgments stored, {summary.failed} failed"
        )
    finally:
        server.terminate()
        server.join(5)


if __name__ == "__main__":
    main()
