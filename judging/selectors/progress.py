"""The judging page's progress figures: the annotator's share of the current query and the campaign's complete
pairs, read in the same statement as the next pair (``with_progress``) or on their own (``judge_progress``)."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any

from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from judging import runtime
from judging.compiled import Args, Slots, Values, compiled_select
from judging.figures import JudgeProgress
from judging.models import Campaign, Pair, User
from judging.reads import judged_by, pool_size, pooled


def judge_progress_of(*, campaign: Campaign, query_done: int, query_total: int, done: int) -> JudgeProgress:
    """The judging page's figures, with the pool's size, and once every pair has its judgments, the pairs still
    without a label (unsure ones waiting for a lead): counted only then, at the campaign's end."""
    total = pool_size(campaign=campaign)
    unlabelled = pairs_unlabelled(campaign=campaign) if total and done >= total else 0
    return JudgeProgress(query_done, query_total, done, total, unlabelled)


def pairs_unlabelled(*, campaign: Campaign) -> int:
    """Pooled pairs of the campaign without a label."""
    return Pair.objects.filter(pooled(), campaign_id=campaign.id, label__isnull=True).count()


def progress_parts(campaign: Campaign, annotator_id: int, *, query_ref: str = "query_id") -> dict[str, Any]:
    """The judging page's figures (judge_progress) as subqueries, for the query named by the outer query's
    column ``query_ref``."""
    args = Values(campaign_id=campaign.id, annotator_id=annotator_id, redundancy=campaign.redundancy)
    return progress_parts_of(args, query_ref=query_ref)


def progress_parts_of(args: Args, *, query_ref: str = "query_id") -> dict[str, Any]:
    of_query = Pair.objects.filter(query_id=OuterRef(query_ref), pooled=True).order_by().values("query_id")
    mine = judged_by(args["annotator_id"])
    return {
        "query_total": Subquery(of_query.annotate(n=Count("id")).values("n")[:1], output_field=IntegerField()),
        "query_done": Subquery(
            of_query.filter(mine).annotate(n=Count("id")).values("n")[:1], output_field=IntegerField()
        ),
        "campaign_done": Subquery(
            Pair.objects.filter(pooled(), campaign_id=args["campaign_id"], judgment_count__gte=args["redundancy"])
            .order_by()
            .values("campaign_id")
            .annotate(n=Count("id"))
            .values("n")[:1],
            output_field=IntegerField(),
        ),
    }


def with_progress(qs: QuerySet[Pair], args: Args, *, done: bool = False) -> QuerySet[Pair]:
    parts = progress_parts_of(args)
    qs = qs.annotate(
        query_total=Coalesce(parts["query_total"], Value(0)),
        query_done=Coalesce(parts["query_done"], Value(0)),
    )
    return qs.annotate(campaign_done=parts["campaign_done"]) if done else qs


# The judging page's "N% complete" after each judgment. Counting the complete pairs reads one index entry per
# complete pair: 50,000 rows a judgment half-way through a 100,000-pair campaign. Above DONE_EXACT_UP_TO pooled
# pairs one pair is under half a percent, less than the page shows (a whole percent), so the count is kept in
# this process for DONE_TTL seconds; at or below it, it is counted each time (at most that many rows).
DONE_EXACT_UP_TO = 200
DONE_TTL = 10.0

# (campaign id, created) -> (expires at, count), per process (the key as pool_size's).
_DONE_LOCK = threading.Lock()
_done_counts: dict[tuple[int, datetime], tuple[float, int]] = runtime.keep(
    "progress.done_counts",
    {},
    bound=None,
    grows_with="campaign",
    invalidated_by="DONE_TTL seconds",
    lock=_DONE_LOCK,
)


def done_counted_exactly(campaign: Campaign) -> bool:
    """Whether the campaign's complete pairs are counted each time (a pool of up to DONE_EXACT_UP_TO pairs: the
    next-pair statement counts them itself) rather than kept for DONE_TTL seconds (see campaign_done)."""
    return pool_size(campaign=campaign) <= DONE_EXACT_UP_TO


def campaign_done(*, campaign: Campaign) -> int:
    """Pooled pairs of the campaign with ``redundancy`` judgments or more: exact for a pool of up to
    DONE_EXACT_UP_TO pairs, at most DONE_TTL seconds old above (see there)."""
    if done_counted_exactly(campaign):
        return _campaign_done_count(campaign)
    key = (campaign.id, campaign.created_at)
    cached = _done_counts.get(key)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    with _DONE_LOCK:  # one thread of the process counts, the others wait for its count
        cached = _done_counts.get(key)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        count = _campaign_done_count(campaign)
        if len(_done_counts) > 1000:
            _done_counts.clear()
        _done_counts[key] = (time.monotonic() + DONE_TTL, count)
    return count


def _campaign_done_count(campaign: Campaign) -> int:
    return Pair.objects.filter(pooled(), campaign_id=campaign.id, judgment_count__gte=campaign.redundancy).count()


def judge_progress(*, campaign: Campaign, annotator: User, query_id: int | None) -> JudgeProgress:
    """The figures on the judging page: the annotator's share of the query, an index range of its pairs, and the
    campaign's complete pairs (campaign_done: counted for a small pool, kept a few seconds for a large one, whose
    count reads one index entry per complete pair) and pool size (cached, see ``pool_size``). A query without
    pooled pairs has no row: nothing of it is done."""
    done = campaign_done(campaign=campaign)
    if query_id is None:
        return judge_progress_of(campaign=campaign, query_done=0, query_total=0, done=done)
    # Compiled once per process (judging.compiled): the ORM spent ~1 ms of CPU building it at every judgment.
    query = compiled_select(("judge_progress",), lambda: _query_progress_of(Slots()))
    row = query.first({"query_id": query_id, "annotator_id": annotator.id}) or (0, 0)
    return judge_progress_of(campaign=campaign, query_done=row[0], query_total=row[1], done=done)


def _query_progress_of(args: Args) -> QuerySet[Pair, Any]:
    """judge_progress's figures of the query ``query_id``: pooled pairs ``annotator_id`` has judged, and all."""
    mine = judged_by(args["annotator_id"])
    return (
        Pair.objects.filter(query_id=args["query_id"], pooled=True)
        .order_by()
        .values("query_id")
        .annotate(done=Count("id", filter=Q(mine)), total=Count("id"))
        .values_list("done", "total")[:1]
    )
