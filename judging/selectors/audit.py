"""The audit of a prediction-powered leaderboard for its pages: the draws and the drawn queries with their labelled
pairs. Its state (the queries drawn, which of them are audited), which scoring reads too, is
``judging.reads.audit_state``."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q

from judging.models import AuditDraw, AuditQuery, Campaign


def audit_draws(*, campaign: Campaign) -> list[dict[str, Any]]:
    """The campaign's draws, newest first, for the audit page and API: when, by whom, seed, size, and how many
    of the draw's queries are audited."""
    draws = (
        AuditDraw.objects.filter(campaign=campaign)
        .select_related("drawn_by")
        .annotate(
            n_open=Count(
                "queries__query",
                filter=Q(queries__query__pairs__pooled=True, queries__query__pairs__label__isnull=True),
                distinct=True,
            )
        )
        .order_by("-drawn_at", "-id")
    )
    return [
        {
            "id": d.pk,
            "drawn_at": d.drawn_at,
            "drawn_by": d.drawn_by.get_username() if d.drawn_by else None,
            "seed": d.seed,
            "queries": d.size,
            "audited": d.size - d.n_open,
        }
        for d in draws
    ]


def audit_queries(*, campaign: Campaign) -> list[dict[str, Any]]:
    """The drawn queries in draw order with their pooled pairs and the labelled ones (for the lead's page)."""
    rows = (
        AuditQuery.objects.filter(draw__campaign=campaign)
        .order_by("position")
        .annotate(
            pairs=Count("query__pairs", filter=Q(query__pairs__pooled=True)),
            labelled=Count("query__pairs", filter=Q(query__pairs__pooled=True, query__pairs__label__isnull=False)),
        )
        .values_list("position", "query__qid", "query__text", "pairs", "labelled")
    )
    return [
        {"position": p + 1, "qid": qid, "text": text, "pairs": n, "labelled": k, "audited": n == k}
        for p, qid, text, n, k in rows
    ]
