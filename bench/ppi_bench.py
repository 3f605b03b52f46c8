"""Prediction-powered leaderboard benchmark: 40 systems x 50 queries x depth 100, a model judge labelling every
pooled pair and people auditing 10 drawn queries; the PPI leaderboard timed after one new human judgment.

Usage:

    python bench/ppi_bench.py                       # a throwaway SQLite file
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/DB python bench/ppi_bench.py

Prints the yardstick line, then the time of ``scoring.ppi_leaderboard`` (scoring alone), of the polled table
request and of the API's JSON, each right after one new judgment of a drawn query (median and max of
--judgments), and the cold first request. The issue's target: under 100 ms after a judgment.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._setup import django_ready

_T = TypeVar("_T")

django_ready("ppi_bench")

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.test import Client  # noqa: E402
from django.urls import reverse  # noqa: E402

from bench.leaderboard_bench import docid_of, generate, qid_of, run_bytes  # noqa: E402
from judging import scoring, services  # noqa: E402
from judging.models import Campaign, Pair  # noqa: E402
from judging.services.model_judge import model_judge_get_or_create  # noqa: E402

SLUG = "ppibench"


CPU: list[float] = []  # process CPU seconds of each timed call (the wall time includes waiting on a loaded machine)


def timed(fn: Callable[..., _T], *a: object, **kw: Any) -> tuple[_T, float]:
    t, c = time.perf_counter(), time.process_time()
    out = fn(*a, **kw)
    CPU.append(time.process_time() - c)
    return out, time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=40)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--pool-depth", type=int, default=100)
    parser.add_argument("--audit", type=int, default=10, help="queries drawn and audited")
    parser.add_argument("--judgments", type=int, default=7)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    User = get_user_model()
    lead, _ = User.objects.get_or_create(username="bench-lead")
    person, _ = User.objects.get_or_create(username="bench-person")
    runs, (doc_idx, grades) = generate(
        n_systems=args.systems,
        n_queries=args.queries,
        depth=args.depth,
        n_candidates=4 * args.depth,
        n_docs=200_000,
        labels_per_query=4 * args.depth,
        seed=args.seed,
    )
    Campaign.objects.filter(slug=SLUG).delete()
    campaign = services.campaign_create(slug=SLUG, name="PPI benchmark", pool_depth=args.pool_depth)
    services.membership_add(campaign=campaign, user=lead, role="lead")
    services.membership_add(campaign=campaign, user=person, role="annotator")
    t = time.perf_counter()
    services.run_import(
        campaign=campaign,
        data=b"".join(run_bytes(f"sys{s:02d}", d, sc) for s, (d, sc) in enumerate(runs)),
        filename="runs.trec",
    )
    truth = {
        (qid_of(q), docid_of(d)): int(g)
        for q in range(args.queries)
        for d, g in zip(doc_idx[q].tolist(), grades[q].tolist(), strict=True)
    }
    rng = np.random.default_rng(args.seed)
    pooled = list(Pair.objects.filter(campaign=campaign, pooled=True).values_list("query__qid", "document__docid"))
    model_lines = [
        f"{q} 0 {d} {truth.get((q, d), 0) if rng.random() < 0.7 else int(rng.integers(0, 3))}\n" for q, d in pooled
    ]
    judge = model_judge_get_or_create(name="bot", campaign=campaign)
    services.qrels_import(campaign=campaign, data="".join(model_lines).encode(), filename="m.qrels", annotator=judge)
    services.audit_draw(campaign=campaign, size=args.audit, user=lead, seed=args.seed)
    drawn = set(
        campaign.audit_draws.values_list("queries__query__qid", flat=True)  # type: ignore[attr-defined]
    )
    human = [f"{q} 0 {d} {truth.get((q, d), 0)}\n" for q, d in pooled if q in drawn]
    # leave a few pairs of the drawn queries for the timed judgments
    keep = human[: -args.judgments]
    services.qrels_import(campaign=campaign, data="".join(keep).encode(), filename="h.qrels", annotator=person)
    print(
        f"campaign: {args.systems} systems x {args.queries} queries x depth {args.depth}, {len(pooled):,} pooled "
        f"pairs labelled by the model, {args.audit} queries drawn ({len(human):,} pairs), built in "
        f"{time.perf_counter() - t:.1f} s",
        flush=True,
    )
    params = scoring.Params(k=10, labels="ppi:bot")
    scoring.process_caches_clear()
    cache.clear()
    _, cold = timed(scoring.ppi_leaderboard, campaign, params)
    print(f"COLD     {cold * 1000:8.1f} ms  (first PPI leaderboard: both score tables computed)")
    client = Client(HTTP_HOST="localhost")
    client.force_login(lead)
    table = reverse("judging:leaderboard_table", args=[SLUG]) + "?labels=ppi:bot"
    api = f"/api/campaigns/{SLUG}/leaderboard/?labels=ppi:bot"
    client.get(table, HTTP_HX_REQUEST="true")
    open_pairs = list(
        Pair.objects.filter(campaign=campaign, pooled=True, label__isnull=True, query__qid__in=drawn).select_related(
            "query", "document", "campaign"
        )
    )
    warm, warm_cpu, base, view, api_times = [], [], [], [], []
    humans = scoring.Params(k=10)
    scoring.leaderboard(campaign, humans)
    for i, pair in enumerate(open_pairs[: args.judgments]):
        services.judgment_record(pair=pair, annotator=person, grade=truth.get((pair.query.qid, pair.document.docid), 0))
        board, t_warm = timed(scoring.ppi_leaderboard, campaign, params)
        warm.append(t_warm)
        warm_cpu.append(CPU[-1])
        # for scale: the humans' leaderboard after one more judgment (a no-op for it after the call above)
        services.judgment_record(pair=open_pairs[-1 - i], annotator=person, grade=1)
        _, t_base = timed(scoring.leaderboard, campaign, humans)
        base.append(t_base)
        if i % 2:
            response, t_view = timed(client.get, table, HTTP_HX_REQUEST="true")
            assert response.status_code == 200
            view.append(t_view)
        else:
            response, t_api = timed(client.get, api, HTTP_ACCEPT="application/json")
            assert response.status_code == 200
            api_times.append(t_api)
    print(
        f"WARM     {statistics.median(warm) * 1000:8.1f} ms  (median of {len(warm)}, max {max(warm) * 1000:.1f} ms: "
        f"ppi_leaderboard() after one new judgment of a drawn query; audit {board.n_audited} of {board.N})"
    )
    print(f"WARMCPU  {statistics.median(warm_cpu) * 1000:8.1f} ms  (median CPU time of this process in those calls)")
    print(
        f"BASELINE {statistics.median(base) * 1000:8.1f} ms  (median: the humans' leaderboard() alone after one "
        "new judgment, for scale on this machine)"
    )
    print(
        f"WARMVIEW {statistics.median(view) * 1000:8.1f} ms  (median of {len(view)}, max {max(view) * 1000:.1f} ms: "
        "the polled PPI table request after one new judgment)"
    )
    print(
        f"WARMAPI  {statistics.median(api_times) * 1000:8.1f} ms  (median of {len(api_times)}, max "
        f"{max(api_times) * 1000:.1f} ms: GET the leaderboard API, labels=ppi:bot, after one new judgment)"
    )


if __name__ == "__main__":
    main()
