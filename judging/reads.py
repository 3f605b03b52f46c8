"""Small reads that both the selectors and scoring take, below both: the pool's size (kept per process a few
seconds), the campaign's top grade, and the audit of a prediction-powered leaderboard as it stands (the queries
drawn, which of them are audited)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from django.db.models import Count, OuterRef, Q, Subquery
from django.db.models.lookups import IsNull

from judging import runtime
from judging.models import AuditQuery, Campaign, Judgment, Pair, PoolCount, Query


def grade_top(*, campaign: Campaign) -> int:
    """The campaign's highest grade value (0 for a campaign without grades). The scale's few grades come with the
    campaign where it was read with them (the API's campaigns prefetch them): no statement of its own then."""
    return max((g.value for g in campaign.grades.all()), default=0)


def pooled() -> Q:
    """The filter of a campaign's pooled pairs, written so that an index serves it."""
    # `pooled=True` compiles to a bare `WHERE pooled` that SQLite cannot match against an index column;
    # `pooled IN (true)` lets both SQLite and PostgreSQL walk pair_queue_idx (campaign, pooled, count).
    return Q(pooled__in=[True])


def judged_by(annotator_id: Any, *, judged: bool = True, pair_ref: str = "pk") -> IsNull:
    """Whether the outer pair (``pair_ref``) has a judgment by ``annotator_id`` (``judged=False``: has none), as a
    probe of the judgments' unique key (pair, annotator) per pair: ``(SELECT id ... LIMIT 1) IS [NOT] NULL``.

    Written as ``EXISTS`` with the annotator a parameter, PostgreSQL's plan made without values (a prepared
    statement, judging.compiled) turned it into a hashed subplan or an anti-join over every judgment of the
    annotator, or of the table: the judging page's progress of its query read 4,930 judgment rows per judgment in
    `hybrid` on the load bench (the model judge's answers are judgments too), and the count grows with the
    annotator's history. A scalar subquery with LIMIT is probed per pair. tests/judging/test_judging_pace.py
    holds the reads of these statements to the pairs they look at."""
    mine = Judgment.objects.filter(pair_id=OuterRef(pair_ref), annotator_id=annotator_id)
    probe = Subquery(mine.order_by().values("pk")[:1])  # no ordering: the model's joins the pair and campaign
    return IsNull(probe, not judged)


POOL_SIZE_TTL = 5.0  # seconds


# (campaign id, created) -> (expires at, size), per process. The creation time is part of the key so that a
# campaign id reused after a delete (SQLite reuses ids, tests roll back) never sees another's count.
_POOL_SIZE_LOCK = threading.Lock()
_pool_sizes: dict[tuple[int, datetime], tuple[float, int]] = runtime.keep(
    "campaigns.pool_sizes",
    {},
    bound=None,
    grows_with="campaign",
    invalidated_by="POOL_SIZE_TTL seconds",
    lock=_POOL_SIZE_LOCK,
)


def pool_size(*, campaign: Campaign) -> int:
    """Pooled pairs of the campaign: the campaign's PoolCount row, which the pool's writer keeps in its
    transaction (imports.service.pool.pool_count_add), so one row read instead of a count of the pool's index
    (100,000 rows at 100,000 pairs). Asked a few times per judgment, it is kept in this process for
    POOL_SIZE_TTL seconds (the services that add pairs forget it at once: ``pool_size_forget``)."""
    key = (campaign.id, campaign.created_at)
    cached = _pool_sizes.get(key)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    with _POOL_SIZE_LOCK:
        cached = _pool_sizes.get(key)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        # no row: nothing was ever pooled
        size = PoolCount.objects.filter(campaign_id=campaign.id).values_list("pairs", flat=True).first() or 0
        if len(_pool_sizes) > 1000:
            _pool_sizes.clear()
        _pool_sizes[key] = (time.monotonic() + POOL_SIZE_TTL, size)
    return size


def pool_size_forget(*, campaign: Campaign) -> None:
    _pool_sizes.pop((campaign.id, campaign.created_at), None)


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
