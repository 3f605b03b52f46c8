"""Next-pair latency of the queue modes on a campaign of about 100,000 pooled pairs.

One annotator asks for the next pair (services.pair_assign: choose and hold it, as GET /api/campaigns/SLUG/next/
does) and judges it, again and again. It prints per mode the ask's p50/p95/max, the cost of computing the mode's
list afresh (cold: every cache of this process forgotten), and record + next (the judgment, which moves the labels
and so the mode's priority list, and the ask after it). ``hybrid`` (in the default modes) gives the campaign a
model judge that answered every pooled pair first (grades drawn at random: only the cost is measured).

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


def with_model_judge(campaign: Campaign, rng: np.random.Generator) -> None:
    """A model judge on ``campaign`` that answered every pooled pair, as hybrid judging needs."""
    from judging.models import Pair
    from judging.services import qrels_import
    from judging.services.model_judge import model_judge_get_or_create

    judge = model_judge_get_or_create(name="bot", campaign=campaign)
    pairs = Pair.objects.filter(campaign=campaign, pooled=True).values_list("query__qid", "document__docid")
    lines = "".join(f"{q} 0 {d} {int(g)}\n" for (q, d), g in zip(pairs, rng.choice(3, size=len(pairs)), strict=True))
    qrels_import(campaign=campaign, data=lines.encode(), filename="model.qrels", annotator=judge)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=1700)
    parser.add_argument("--systems", type=int, default=20)
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--candidates", type=int, default=60, help="documents each query's runs draw from")
    parser.add_argument("--asks", type=int, default=200, help="next-pair requests per mode")
    parser.add_argument("--modes", default="shuffled,matter,mtc,bandit,hybrid")
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
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if "hybrid" in modes:
        with_model_judge(campaign, rng)
    for mode in modes:
        campaign_settings_update(campaign=campaign, queue_mode=mode)
        caches_clear()
        t0 = time.perf_counter()
        pair_assign(campaign=campaign, annotator=user)
        cold = time.perf_counter() - t0
        times, recorded = [], []
        for _ in range(args.asks):
            t0 = time.perf_counter()
            pair = pair_assign(campaign=campaign, annotator=user).pair
            times.append(time.perf_counter() - t0)
            if pair is None:
                break
            t0 = time.perf_counter()
            judgment_record(pair=pair, annotator=user, grade=int(rng.integers(0, 3)))
            recorded.append(time.perf_counter() - t0)
        ms = np.array(times) * 1000
        both = (np.array(recorded[: len(times) - 1]) + np.array(times[1:])) * 1000  # a judgment and the ask after it
        print(
            f"NEXT {mode:<9} p50 {np.percentile(ms, 50):6.1f} ms  p95 {np.percentile(ms, 95):6.1f} ms  "
            f"max {ms.max():7.1f} ms  (first ask, cold caches: {cold * 1000:.0f} ms; {len(ms)} asks); "
            f"record + next p50 {np.percentile(both, 50):6.1f} ms  p95 {np.percentile(both, 95):6.1f} ms",
            flush=True,
        )
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
