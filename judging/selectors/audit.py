"""The audit of a prediction-powered leaderboard as it stands: the queries drawn, which of them are audited."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db.models import Count, Q

from judging import runtime
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


_LOCK = threading.Lock()
_STATES: dict[int, tuple[object, AuditState]] = runtime.keep(
    "audit.states",
    {},
    bound=None,
    grows_with="campaign",
    invalidated_by="the campaign's audit stamp (draws and labels) moving",
    lock=_LOCK,
)


def audit_state(*, campaign: Campaign, total: int | None = None, stamp: object = None) -> AuditState:
    """The drawn queries in order, and which are audited: a query is audited when each of its pooled pairs has a
    label. A pair's label is the humans' (aggregated from people's confident judgments, a lead's adjudication or
    imported qrels; a model judge's grades never make it), so this is exactly "people labelled every pooled
    pair". A query with no pooled pair has nothing to audit and counts as audited.

    One small query (the drawn queries with their labels versions); the count of unlabelled pooled pairs per
    drawn query is read again only when a drawn query's labels version moved, or ``stamp`` did (the caller's
    fingerprint of the pool: the runs and the pool depth). ``total``: the campaign's number of queries, when
    the caller knows it."""
    rows = list(
        AuditQuery.objects.filter(draw__campaign=campaign)
        .order_by("position")
        .values_list("query_id", "query__labels_version")
    )
    drawn = np.array([r[0] for r in rows], dtype=np.int64)
    if total is None:
        total = Query.objects.filter(campaign=campaign).count()
    key = (tuple(rows), stamp, total)
    if stamp is not None:
        with _LOCK:
            got = _STATES.get(campaign.pk)
        if got is not None and got[0] == key:
            return got[1]
    open_by_query = dict(
        Pair.objects.filter(query__audit__draw__campaign=campaign, pooled=True, label__isnull=True)
        .order_by()
        .values("query_id")
        .annotate(n=Count("id"))
        .values_list("query_id", "n")
    )
    audited = np.array([q not in open_by_query for q in drawn.tolist()], dtype=bool)
    state = AuditState(drawn, audited, sum(open_by_query.values()), total)
    if stamp is not None:
        with _LOCK:
            _STATES[campaign.pk] = (key, state)
    return state


def audit_states_clear() -> None:
    """Forget the audit states this process keeps (tests and benchmarks)."""
    with _LOCK:
        _STATES.clear()


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
