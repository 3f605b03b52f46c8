"""How far to trust the leaderboard: score bounds and settled comparisons, pool bias, macro vs micro, diversity;
each measure at every cutoff (curves); each query segment's own leaderboard."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

import numpy as np
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

import metrics
from judging import charts, scoring
from judging.errors import RequestError
from judging.models import Campaign
from judging.scoring import trust
from judging.views import leaderboard as board
from judging.views.leaderboard import BadArg, BoardRequest, handles_bad_args, int_arg, leaderboard_page
from judging.views.paging import page_of
from metrics import Measure


def _settled_rows(lb: scoring.Leaderboard, v: trust.Verdicts, b: trust.Bounds, measure: str) -> list[dict]:
    means = lb.means()[lb.measure_index(measure)]
    names = lb.cube.system_names
    rows = []
    for rank, s in enumerate(v.order.tolist(), start=1):
        low, high = float(b.mean_low[measure][s]), float(b.mean_high[measure][s])
        rows.append(
            {
                "rank": rank,
                "name": names[s],
                "value": float(means[s]),
                "low": low,
                "high": high,
                "bar": charts.interval_bar(low, high, float(means[s])),
            }
        )
    return rows


def _verdict_rows(lb: scoring.Leaderboard, v: trust.Verdicts, b: trust.Bounds, measure: str) -> list[dict]:
    """The ranking with each system's bounds and, on its row, the verdict on its order with the next system."""
    rows = _settled_rows(lb, v, b, measure)
    for row, adj in zip(rows, [*v.adjacent, None], strict=True):
        row["next"] = adj
        if adj is not None:
            row["next_percent"] = scoring.holds_percent(adj["p_holds"])
            row["next_where"] = ", ".join(f"{q['qid']} ({q['pairs']})" for q in adj["top_queries"])
    return rows


def _bounds_table(lb: scoring.Leaderboard, b: trust.Bounds, order: list[int]) -> list[dict]:
    """Every bounded measure's mean and bounds, per system in ranking order."""
    names, means = lb.cube.system_names, lb.means()
    return [
        {
            "name": names[s],
            "cells": [
                (m, float(means[lb.measure_index(m), s]), float(b.mean_low[m][s]), float(b.mean_high[m][s]))
                for m in b.mean_low
            ],
        }
        for s in order
    ]


def _pool_rows(lb: scoring.Leaderboard, measure: str, order: list[int]) -> list[dict]:
    """Pool bias per system: the measure with and without the documents only it found, and how many those are."""
    pb = trust.pool_bias(lb)
    at = lb.measure_index(measure)
    return [
        {
            "name": lb.cube.system_names[s],
            "real": float(pb.real[at, s]),
            "without": float(pb.without[at, s]),
            "drop": float(pb.drop[at, s]),
            "unique_top_k": int(pb.unique_in_top_k[s]),
            "unique_pool": int(pb.unique_in_pool[s]),
            "unique_per_query": float(pb.unique_in_top_k[s]) / max(pb.n_queries, 1),
        }
        for s in order
    ]


def _micro_rows(lb: scoring.Leaderboard, k: int, order: list[int]) -> list[dict]:
    """P@k and R@k per system, macro (the mean over queries) beside micro (over every ranked document)."""
    p_at_k, r_at_k = str(Measure("P", k)), str(Measure("R", k))
    micro, means = trust.micro(lb), lb.means()
    return [
        {
            "name": lb.cube.system_names[s],
            "macro_p": float(means[lb.measure_index(p_at_k), s]),
            "micro_p": float(micro[p_at_k][s]),
            "macro_r": float(means[lb.measure_index(r_at_k), s]),
            "micro_r": float(micro[r_at_k][s]),
        }
        for s in order
    ]


def _diversity_table(
    request: HttpRequest, lb: scoring.Leaderboard, attribute: str, measure: str, order: list[int]
) -> dict:
    """Intra-list diversity and coverage of ``attribute``: the means per system, and a page of the scored queries
    (in the cube's order) with each system's two values; BadArg for an attribute the documents lack."""
    try:
        d = trust.diversity(lb, attribute)
    except RequestError as exc:
        raise BadArg(str(exc)) from None
    ild, cov = d.means()
    names, means = lb.cube.system_names, lb.means()
    qids = lb.scored_qids()
    page = page_of(request, range(len(qids)), board.PAGE_SIZE)
    shown = np.asarray(page.object_list, dtype=np.intp)
    rows = np.asarray(order, dtype=np.intp)
    ild_q = d.ild[np.ix_(rows, shown)].T.tolist()  # (page, S) in ranking order
    cov_q = d.coverage[np.ix_(rows, shown)].T.tolist()
    return {
        "d": d,
        "ild_name": d.names[0],
        "cov_name": d.names[1],
        "rows": [
            {"name": names[s], "value": float(means[lb.measure_index(measure), s]), "ild": ild[s], "cov": cov[s]}
            for s in order
        ],
        "systems": [names[s] for s in order],
        "queries": [
            {"qid": qids[q], "cells": list(zip(i_row, c_row, strict=True))}
            for q, i_row, c_row in zip(shown.tolist(), ild_q, cov_q, strict=True)
        ],
        "page": page,
    }


@leaderboard_page()
@handles_bad_args
def leaderboard_trust(request: HttpRequest, ctx: BoardRequest) -> HttpResponse:
    """How far to trust the ranking: score bounds, settled comparisons, pool bias, macro vs micro, diversity."""
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    measure = ctx.measure
    attribute = request.GET.get("attribute", "").strip()
    attributes = trust.attribute_names(ctx.campaign)
    context = {"tab": "trust", "attribute": attribute, "attributes": attributes, "n_scored": lb.n_scored}
    if lb.n_scored and len(lb.cube.system_ids):
        b = trust.bounds(lb)
        bounded = measure in b.mean_low
        v = trust.verdicts(lb, measure) if bounded else None
        stop = trust.stop_of(lb, v, ctx.top_k) if v and v.adjacent else None
        order = trust.ranking_order(lb, measure).tolist()
        context.update(
            bounded=bounded,
            verdicts=v,
            settled_rows=_verdict_rows(lb, v, b, measure) if v else [],
            n_open=sum(a["verdict"] in ("likely", "open") for a in v.adjacent) if v else 0,
            n_likely=sum(a["verdict"] == "likely" for a in v.adjacent) if v else 0,
            stop_text=scoring.stop_sentence(stop, v.without_labels, len(v.order)) if v and stop else "",
            all_bounds=_bounds_table(lb, b, order),
            bound_names=list(b.mean_low),
            pool_rows=_pool_rows(lb, measure, order),
            pool_depth=ctx.campaign.pool_depth,
            micro_rows=_micro_rows(lb, ctx.params.k, order),
            micro_note=trust.MICRO_NOTE,
            diversity=_diversity_table(request, lb, attribute, measure, order) if attribute else None,
            queue_mode=ctx.campaign.get_queue_mode_display(),
            queue_matter=ctx.campaign.queue_mode != Campaign.QueueMode.SHUFFLED,  # a mode that chases the open orders
        )
    context["keep"] = [("attribute", attribute)] if attribute else []
    context["page_query"] = urlencode({**ctx.changed_params, **({"attribute": attribute} if attribute else {})})
    return render(request, "judging/leaderboard_trust.html", ctx.base(**context))


# metrics.CURVE_MEASURES with nDCG, the leaderboard's default ranking measure, first.
CURVE_BASES = tuple(sorted(metrics.CURVE_MEASURES, key=lambda m: m != "nDCG"))


def _with_query(url: str, query: dict) -> str:
    return f"{url}?{urlencode(query)}" if query else url


@leaderboard_page()
@handles_bad_args
def leaderboard_curves(request: HttpRequest, ctx: BoardRequest) -> HttpResponse:
    """Each system's measure at every cutoff 1..K as a line chart and a table."""
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    base = ctx.measure_base if ctx.measure_base in CURVE_BASES else "nDCG"
    k_max = int_arg(request, "k_max", trust.curve_k_default(lb), 1, trust.CURVE_K_MAX)
    values = trust.curves(lb, base, k_max)
    order = trust.ranking_order(lb, str(Measure(base, ctx.params.k))).tolist()
    names = [lb.cube.system_names[s] for s in order]
    values = values[order] if len(order) else values
    # the table shows every cutoff up to 20, then every 5th and 10th: a readable width
    shown = [k for k in range(1, k_max + 1) if k <= 20 or k % (5 if k_max <= 50 else 10) == 0]
    table = [
        {"name": n, "cells": [float(values[i, k - 1]) for k in shown], "series": i % charts.CURVE_SERIES}
        for i, n in enumerate(names)
    ]
    chart = charts.curve_chart(names, values, measure=base) if names and lb.n_scored else None
    context = ctx.base(
        tab="curves",
        base=base,
        bases=CURVE_BASES,
        k_max=k_max,
        shown=shown,
        table=table,
        chart=chart,
        n_scored=lb.n_scored,
        keep=[("k_max", k_max)] if "k_max" in request.GET else [],
        api=reverse("api:campaign-leaderboard-curves", args=[ctx.campaign.slug])
        + "?"
        + urlencode(
            {**{k: v for k, v in ctx.changed_params.items() if k != "measure"}, "measure": base, "k_max": k_max}
        ),
    )
    return render(request, "judging/leaderboard_curves.html", context)


@leaderboard_page()
@handles_bad_args
def leaderboard_segments(request: HttpRequest, ctx: BoardRequest) -> HttpResponse:
    """Each system's measure per query segment (tag), with the segment's CIs and tests."""
    # every segment of the whole campaign, whatever segment the other pages are filtered to
    lb = scoring.leaderboard(ctx.campaign, replace(ctx.params, segment=None))
    segs = trust.segments(lb, ctx.measure)
    order = trust.ranking_order(lb, ctx.measure).tolist()
    names = [lb.cube.system_names[s] for s in order]
    means = lb.means()[lb.measure_index(ctx.measure)]
    rows = []
    for rank, s in enumerate(order):
        cells: list[dict[str, Any] | None] = []
        for seg in segs:
            st = seg.stats
            if st is None:
                cells.append(None)
                continue
            p = float(st.p_vs_best[s])
            cells.append(
                {
                    "value": float(st.means[s]),
                    "ci": (float(st.ci_low[s]), float(st.ci_high[s])) if math.isfinite(st.ci_low[s]) else None,
                    "best": s == st.best,
                    "worse": bool(st.worse[s]),
                    "p": p if math.isfinite(p) else None,
                }
            )
        rows.append({"rank": rank + 1, "name": names[rank], "all": float(means[s]), "cells": cells})
    context = ctx.base(
        tab="segments",
        segments=segs,
        rows=rows,
        few=trust.SEGMENT_MIN_QUERIES,
        any_few=any(seg.few for seg in segs),
        n_scored=lb.n_scored,
        alpha=scoring.ALPHA,
        api=_with_query(
            reverse("api:campaign-leaderboard-segments", args=[ctx.campaign.slug]),
            {k: v for k, v in ctx.changed_params.items() if k != "segment"},
        ),
    )
    return render(request, "judging/leaderboard_segments.html", context)
