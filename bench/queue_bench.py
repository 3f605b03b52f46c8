"""Next-pair latency of the queue modes on a campaign of about 100,000 pooled pairs.

One annotator asks for the next pair (services.pair_assign: choose and hold it, as GET /api/campaigns/SLUG/next/
does) and judges it, again and again; the time of each ask is recorded, the judgment that moves the labels
(and so the mode's priority list) between two asks is not. It prints p50/p95/max per mode, and the cost of
computing each mode's list afresh (cold: every cache of this process forgotten).

    python bench/queue_bench.py                       # SQLite file in /tmp
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/NAME python bench/queue_bench.py --asks 300
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._setup import django_ready

if TYPE_CHECKING:
    from django.contrib.auth.models import User as Account

    from judging.models import Campaign


def build(queries: int, systems: int, depth: int, candidates: int, seed: int) -> tuple[Campaign, Account]:
    from django.contrib.auth import get_user_model

    from judging.models import Campaign
    from judging.services import campaign_create, membership_add, run_import

    Campaign.objects.filter(slug="queue-bench").delete()
    campaign = campaign_create(slug="queue-bench", pool_depth=depth)
    rng = np.random.default_rng(seed)
    for s in range(systems):
        lines = []
        for q in range(queries):
            docs = rng.choice(candidates, size=depth, replace=False)
            lines.extend(f"q{q} Q0 q{q}-d{d} {r + 1} {depth - r} sys{s:02d}" for r, d in enumerate(docs.tolist()))
        run_import(campaign=campaign, data=("\n".join(lines) + "\n").encode(), filename=f"sys{s:02d}.run")
    user = get_user_model().objects.filter(username="queue-bench").first()
    user = user or get_user_model().objects.create_user(username="queue-bench", password=None)
    membership_add(campaign=campaign, user=user, role="annotator")
    return Campaign.objects.get(pk=campaign.pk), user


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=1700)
    parser.add_argument("--systems", type=int, default=20)
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--candidates", type=int, default=60, help="documents each query's runs draw from")
    parser.add_argument("--asks", type=int, default=200, help="next-pair requests per mode")
    parser.add_argument("--modes", default="shuffled,matter,mtc,bandit")
    args = parser.parse_args()
    vendor = django_ready("queue_bench")
    from judging.models import Pair
    from judging.scoring.trust import caches_clear
    from judging.services import campaign_settings_update, judgment_record, pair_assign

    started = time.perf_counter()
    campaign, user = build(args.queries, args.systems, args.depth, args.candidates, 7)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # what autovacuum does shortly after an import this size
    pool = Pair.objects.filter(campaign=campaign, pooled=True).count()
    print(
        f"{vendor}: {pool} pooled pairs ({args.systems} systems x {args.queries} queries, pool depth {args.depth}), "
        f"built in {time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    rng = np.random.default_rng(1)
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        campaign_settings_update(campaign=campaign, queue_mode=mode)
        caches_clear()
        t0 = time.perf_counter()
        pair_assign(campaign=campaign, annotator=user)
        cold = time.perf_counter() - t0
        times = []
        for _ in range(args.asks):
            t0 = time.perf_counter()
            pair = pair_assign(campaign=campaign, annotator=user).pair
            times.append(time.perf_counter() - t0)
            if pair is None:
                break
            judgment_record(pair=pair, annotator=user, grade=int(rng.integers(0, 3)))
        ms = np.array(times) * 1000
        print(
            f"NEXT {mode:<9} p50 {np.percentile(ms, 50):6.1f} ms  p95 {np.percentile(ms, 95):6.1f} ms  "
            f"max {ms.max():7.1f} ms  (first ask, cold caches: {cold * 1000:.0f} ms; {len(ms)} asks)",
            flush=True,
        )
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
