"""The prediction-powered leaderboard's rows (``labels=ppi:NAME``): estimates, intervals and the audit's progress."""

from __future__ import annotations

from typing import Any

import numpy as np
from django.urls import reverse

from judging import scoring
from judging.views.board import BoardRequest
from metrics.measures import is_judged


def ppi_context(ctx: BoardRequest) -> dict[str, Any]:
    """Template context of the PPI table: one row per system in the order of its estimate of the ranking
    measure, with its interval (None below two audited queries), the model's own value and the correction."""
    board = scoring.ppi_leaderboard(ctx.campaign, ctx.params)
    r = board.result
    estimate, low, high = board.shown()
    m = (
        board.measures.index(ctx.measure)
        if ctx.measure in board.measures
        else board.measures.index(f"nDCG@{ctx.params.k}")
    )
    others = [i for i, name in enumerate(board.measures) if i != m and not is_judged(name)]
    rows = []
    for rank, s in enumerate(board.order(board.measures[m]).tolist(), start=1):
        rows.append(
            {
                "rank": rank,
                "name": board.system_names[s],
                "estimate": float(estimate[m, s]),
                "interval": (float(low[m, s]), float(high[m, s])) if board.has_intervals else None,
                # the raw estimate or interval stepped outside [0, 1]: the page says why
                "clipped": bool(
                    estimate[m, s] != r.estimate[m, s]
                    or (board.has_intervals and (low[m, s] != r.low[m, s] or high[m, s] != r.high[m, s]))
                ),
                "raw": (float(r.estimate[m, s]), float(r.low[m, s]), float(r.high[m, s])),
                "model": float(r.model_mean[m, s]),
                "correction": float(r.correction[m, s]),
                "values": [float(estimate[i, s]) for i in others],
            }
        )
    widths = np.asarray(high[m] - low[m]) if board.has_intervals else np.zeros(0)
    return {
        "ppi": board,
        "ppi_rows": rows,
        "ppi_clipped": any(row["clipped"] for row in rows) or bool((estimate != r.estimate).any()),
        "ppi_measure": board.measures[m],
        "ppi_others": [(board.measures[i], scoring.measure_title(board.measures[i])) for i in others],
        "ppi_width": float(np.mean(widths)) if widths.size else None,
        "server_ms": board.seconds * 1000,
        "audit_url": reverse("judging:campaign_audit", args=[ctx.campaign.slug]),
    }
