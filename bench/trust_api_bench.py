"""Trust API benchmark: the leaderboard's bounds, curves, segments, pool-bias and diversity endpoints on
20 systems x 5,000 queries x depth 100, through Django's full request stack.

Usage (builds leaderboard_bench's campaign, or reuses it with --reuse):

    DATABASE_URL=sqlite:////tmp/lb_bench.sqlite3 python bench/trust_api_bench.py [--reuse]

For each endpoint it prints the request time right after a new judgment (the arrays and the result are
recomputed for the new labels state: "fresh") and the median of repeated requests on an unchanged state
("warm", served from the per-state cache), plus the CPU seconds of the fresh request. Then, in process, the
pieces of a request from scratch (empty trust caches) and after one more judgment (the judged query's
arrays, bounds and unjudged pairs recomputed, the rest kept): the shared machine's load inflates wall time,
so CPU time is printed beside it, with the machine line.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("RELJUDGE_ALLOW_DEV_SECRET", "1")

import django

django.setup()

import numpy as np  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import F  # noqa: E402
from django.test import Client  # noqa: E402

from bench._setup import machine_line  # noqa: E402
from bench.leaderboard_bench import SLUG, build, generate, qid_of  # noqa: E402
from judging import scoring, services  # noqa: E402
from judging.models import Campaign, Document, Pair, QueryTag, Ranking  # noqa: E402
from judging.scoring import trust  # noqa: E402


def tag_and_attribute(campaign: Campaign, n_queries: int) -> None:
    """Tiers head/torso/tail (10/30/60 %) through import_query_tags' service; a brand per document."""
    if not QueryTag.objects.filter(query__campaign=campaign).exists():
        tiers = np.where(np.arange(n_queries) < n_queries // 10, "head", "torso")
        tiers[int(n_queries * 0.4) :] = "tail"
        data = "".join(f"{qid_of(q)}\t{t}\n" for q, t in enumerate(tiers.tolist())).encode()
        t = time.perf_counter()
        services.query_tags_import(campaign=campaign, data=data, filename="tiers.tsv")
        print(f"  query tags: {n_queries:,} queries tagged in {time.perf_counter() - t:.1f} s", flush=True)
    if not Document.objects.filter(campaign=campaign).exclude(attributes={}).exists():
        # One UPDATE per brand rather than documents_import: a docs import of 200,000 listings is
        # import_bench's subject, not this one's; here the documents only need a facet to measure.
        t = time.perf_counter()
        for brand in range(40):
            Document.objects.filter(campaign=campaign).annotate(m=F("id") % 40).filter(m=brand).update(
                attributes={"brand": f"b{brand}"}
            )
        print(f"  attributes: a brand on every document in {time.perf_counter() - t:.1f} s", flush=True)


def request(client: Client, url: str) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code, response.content[:300])
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=20)
    parser.add_argument("--queries", type=int, default=5000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--labels", type=int, default=150_000)
    parser.add_argument("--pool-depth", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5, help="warm requests per endpoint")
    parser.add_argument("--reuse", action="store_true", help="keep an existing complete bench campaign")
    parser.add_argument("--seed", type=int, default=20240)
    args = parser.parse_args()
    print(machine_line(), flush=True)
    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}", flush=True)
    call_command("migrate", verbosity=0)
    call_command("createcachetable", verbosity=0)
    User = get_user_model()
    assessor, _ = User.objects.get_or_create(username="bench-assessor")
    lead, _ = User.objects.get_or_create(username="bench-lead")
    campaign = Campaign.objects.filter(slug=SLUG).first()
    entries = Ranking.objects.filter(system__campaign=campaign).count() if campaign else 0
    if not (args.reuse and campaign and entries == args.systems * args.queries):
        runs, qrels = generate(
            n_systems=args.systems,
            n_queries=args.queries,
            depth=args.depth,
            n_candidates=max(4 * args.depth, 400),
            n_docs=200_000,
            labels_per_query=max(1, args.labels // args.queries),
            seed=args.seed,
        )
        print(f"IMPORT   {build(args, runs, qrels, assessor):8.1f} s", flush=True)
        campaign = Campaign.objects.get(slug=SLUG)
    services.membership_add(campaign=campaign, user=lead, role="lead")
    services.membership_add(campaign=campaign, user=assessor, role="annotator")
    tag_and_attribute(campaign, args.queries)
    scoring.process_caches_clear()
    trust.caches_clear()
    cache.clear()
    client = Client(HTTP_HOST="localhost")
    client.force_login(lead)
    api = f"/api/campaigns/{SLUG}/leaderboard"
    endpoints = {
        "bounds": f"{api}/?per_query=false",
        "curves": f"{api}/curves/?measure=nDCG&k_max=100",
        "pool-bias": f"{api}/pool-bias/",
        "segments": f"{api}/segments/?measure=nDCG",
        "segment": f"{api}/?per_query=false&segment=tail",
        "diversity": f"{api}/?per_query=false&bounds=false&attribute=brand",
        "micro": f"{api}/?per_query=false&bounds=false&micro=true",
    }
    for url in endpoints.values():
        request(client, url)  # the first request after start-up: the score table and run cube too
    unjudged = list(
        Pair.objects.filter(campaign=campaign, pooled=True, label__isnull=True)
        .order_by("?")
        .values_list("id", flat=True)[: len(endpoints) + 1]
    )
    unjudged, unjudged_more = unjudged[: len(endpoints)], unjudged[len(endpoints) :]
    print(f"{'endpoint':10} {'fresh':>9} {'cpu':>8} {'warm':>9}   (fresh: first request after a new judgment)")
    for (name, url), pair_id in zip(endpoints.items(), unjudged, strict=True):
        pair = Pair.objects.select_related("campaign").get(id=pair_id)
        services.judgment_record(pair=pair, annotator=assessor, grade=2)
        fresh, cpu = request(client, url)
        warm = statistics.median(request(client, url)[0] for _ in range(args.repeat))
        print(f"{name:10} {fresh * 1000:7.0f} ms {cpu * 1000:6.0f} ms {warm * 1000:7.1f} ms  {url}", flush=True)
    # the pieces of a fresh request, in process
    lb = scoring.leaderboard(campaign, scoring.Params(k=10))
    trust.caches_clear()
    for label, fn in (
        ("arrays", lambda: trust.trust_arrays(lb)),
        ("bounds", lambda: trust.bounds(lb)),
        ("verdicts", lambda: trust.verdicts(lb, "nDCG@10")),
        ("curves", lambda: trust.curves(lb, "nDCG", 100)),
        ("poolbias", lambda: trust.pool_bias(lb)),
    ):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        print(
            f"  {label:9} {(time.perf_counter() - wall) * 1000:7.0f} ms wall {(time.process_time() - cpu) * 1000:6.0f}"
            " ms cpu",
            flush=True,
        )
    # the same after one more judgment: the arrays, bounds and verdicts of the judged query only
    pair = Pair.objects.select_related("campaign").get(id=unjudged_more[0])
    services.judgment_record(pair=pair, annotator=assessor, grade=1)
    board = {}
    for label, fn in (
        ("scores", lambda: board.setdefault("lb", scoring.leaderboard(campaign, scoring.Params(k=10)))),
        ("arrays", lambda: trust.trust_arrays(board["lb"])),
        ("bounds", lambda: trust.bounds(board["lb"])),
        ("verdicts", lambda: trust.verdicts(board["lb"], "nDCG@10")),
    ):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        print(
            f"  {label:9} {(time.perf_counter() - wall) * 1000:7.1f} ms wall {(time.process_time() - cpu) * 1000:6.1f}"
            " ms cpu  (after one more judgment: its query only)",
            flush=True,
        )


if __name__ == "__main__":
    main()
