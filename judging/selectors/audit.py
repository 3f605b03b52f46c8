"""The audit of a prediction-powered leaderboard as it stands: the queries drawn, which of them are audited."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db.models import Count, Q

from judging.models import AuditDraw, AuditQuery, Campaign, Pair, Query


@dataclass(frozen=True)
class AuditState:
    """``drawn``: the drawn queries' ids in draw order; ``audited``: (len(drawn),) bool, each of the query's
    pooled pairs has a human label; ``open_pairs``: pooled pairs of drawn queries without one; ``total``: the
    campaign's queries."""

    drawn: np.ndarray
    audited: np.ndarray
    open_pairs: int
    total: int

    @property
    def n_audited(self) -> int:
        return int(self.audited.sum())

    @property
    def audited_ids(self) -> np.ndarray:
        ids: np.ndarray = self.drawn[self.audited]
        return ids


def audit_state(*, campaign: Campaign) -> AuditState:
    """Two small queries: the drawn queries in order, and per drawn query its pooled pairs with no label.

    A pair's label is the humans' (aggregated from people's confident judgments, a lead's adjudication or
    imported qrels; a model judge's grades never make it), so a query is audited exactly when people have
    labelled each of its pooled pairs. A query with no pooled pair has nothing to audit and counts as audited."""
    drawn = np.array(
        AuditQuery.objects.filter(draw__campaign=campaign).order_by("position").values_list("query_id", flat=True),
        dtype=np.int64,
    )
    open_by_query = dict(
        Pair.objects.filter(query__audit__draw__campaign=campaign, pooled=True, label__isnull=True)
        .order_by()
        .values("query_id")
        .annotate(n=Count("id"))
        .values_list("query_id", "n")
    )
    audited = np.array([q not in open_by_query for q in drawn.tolist()], dtype=bool)
    total = Query.objects.filter(campaign=campaign).count()
    return AuditState(drawn, audited, sum(open_by_query.values()), total)


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
