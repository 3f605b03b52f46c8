"""How far to trust the leaderboard: score bounds and settled comparisons, pool bias, macro vs micro, diversity;
each measure at every cutoff (curves); each query segment's own leaderboard."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

import numpy as np
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


@leaderboard_page()
@handles_bad_args
def leaderboard_trust(request, ctx: BoardRequest):
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
        rows = _settled_rows(lb, v, b, measure) if v else []
        if v:
            for row, adj in zip(rows, [*v.adjacent, None], strict=True):
                row["next"] = adj
                if adj is not None:
                    row["next_percent"] = scoring.holds_percent(adj["p_holds"])
                    row["next_where"] = ", ".join(f"{q['qid']} ({q['pairs']})" for q in adj["top_queries"])
        stop = trust.stop_of(lb, v, ctx.top_k) if v and v.adjacent else None
        bound_names = list(b.mean_low)
        order = trust.ranking_order(lb, measure).tolist()
        names = lb.cube.system_names
        means = lb.means()
        all_bounds = [
            {
                "name": names[s],
                "cells": [
                    (
                        m,
                        float(means[lb.measure_index(m), s]),
                        float(b.mean_low[m][s]),
                        float(b.mean_high[m][s]),
                    )
                    for m in bound_names
                ],
            }
            for s in order
        ]
        pb = trust.pool_bias(lb)
        pool_rows = [
            {
                "name": names[s],
                "real": float(pb.real[lb.measure_index(measure), s]),
                "without": float(pb.without[lb.measure_index(measure), s]),
                "drop": float(pb.drop[lb.measure_index(measure), s]),
                "unique_top_k": int(pb.unique_in_top_k[s]),
                "unique_pool": int(pb.unique_in_pool[s]),
                "unique_per_query": float(pb.unique_in_top_k[s]) / max(pb.n_queries, 1),
            }
            for s in order
        ]
        p_at_k, r_at_k = str(Measure("P", ctx.params.k)), str(Measure("R", ctx.params.k))
        micro = trust.micro(lb)
        micro_rows = [
            {
                "name": names[s],
                "macro_p": float(means[lb.measure_index(p_at_k), s]),
                "micro_p": float(micro[p_at_k][s]),
                "macro_r": float(means[lb.measure_index(r_at_k), s]),
                "micro_r": float(micro[r_at_k][s]),
            }
            for s in order
        ]
        diversity = None
        if attribute:
            try:
                d = trust.diversity(lb, attribute)
            except RequestError as exc:
                raise BadArg(str(exc)) from None
            ild, cov = d.means()
            # per query, a page of the scored queries (in the cube's order) with each system's two values
            qids = lb.scored_qids()
            page = page_of(request, range(len(qids)), board.PAGE_SIZE)
            shown = np.asarray(page.object_list, dtype=np.intp)
            ild_q = d.ild[np.ix_(order, shown)].T.tolist()  # (page, S) in ranking order
            cov_q = d.coverage[np.ix_(order, shown)].T.tolist()
            diversity = {
                "d": d,
                "ild_name": d.names[0],
                "cov_name": d.names[1],
                "rows": [
                    {
                        "name": names[s],
                        "value": float(means[lb.measure_index(measure), s]),
                        "ild": ild[s],
                        "cov": cov[s],
                    }
                    for s in order
                ],
                "systems": [names[s] for s in order],
                "queries": [
                    {"qid": qids[q], "cells": list(zip(i_row, c_row, strict=True))}
                    for q, i_row, c_row in zip(shown.tolist(), ild_q, cov_q, strict=True)
                ],
                "page": page,
            }
        context.update(
            bounded=bounded,
            verdicts=v,
            settled_rows=rows,
            n_open=sum(a["verdict"] in ("likely", "open") for a in v.adjacent) if v else 0,
            n_likely=sum(a["verdict"] == "likely" for a in v.adjacent) if v else 0,
            stop_text=scoring.stop_sentence(stop, v.without_labels, len(v.order)) if v and stop else "",
            all_bounds=all_bounds,
            bound_names=bound_names,
            pool_rows=pool_rows,
            pool_depth=ctx.campaign.pool_depth,
            micro_rows=micro_rows,
            micro_note=trust.MICRO_NOTE,
            diversity=diversity,
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
def leaderboard_curves(request, ctx: BoardRequest):
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
def leaderboard_segments(request, ctx: BoardRequest):
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
