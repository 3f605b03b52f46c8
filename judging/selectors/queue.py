"""The judging queue: which pair an annotator sees next, in what order, and their progress."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from django.db.models import (
    Exists,
    IntegerField,
    OuterRef,
    QuerySet,
    Subquery,
)
from django.db.models.functions import Coalesce

from judging.compiled import (
    Args,
    Slots,
    compiled_select,
    model_columns,
    model_from,
)
from judging.models import (
    Campaign,
    Document,
    Grade,
    Judgment,
    Membership,
    Pair,
    Query,
    QueryAssignment,
    User,
)
from judging.selectors.campaigns import grades_json, grades_parse
from judging.selectors.progress import campaign_done, done_counted_exactly, judge_progress_of, with_progress
from judging.selectors.queue_lists import focus_pair_next, pair_of_priority
from judging.selectors.queue_rules import (
    PAIR_COLUMNS,
    QUEUE_FIELDS,
    doc_order,
    open_pairs_of,
    pair_from_row,
    query_order,
    queue_values,
    user_id,
)
from judging.selectors.strategies import EXCLUSIVE_MODES, priority_for


@dataclass(frozen=True)
class NextPair:
    pair: Pair | None  # with its query and document loaded
    was_skipped: bool = False  # the pool holds nothing else: a pair skipped earlier comes back


def pair_next(
    *,
    campaign: Campaign,
    annotator: User,
    current_query_id: int | None = None,
    exclude: Sequence[int] = (),
    lock: bool = False,
    lost: Sequence[int] = (),
    progress: bool = False,
) -> NextPair:
    """The pair ``annotator`` should judge next, or NextPair(None) when there is nothing left.

    Order: stay on the current query while it has open pairs (the annotator keeps the query in mind);
    then move to the next query in the annotator's own shuffled order, taking the least-judged pairs of
    the whole campaign first, so that with redundancy > 1 every pair gets one judgment before any gets
    two. Within a query, least-judged first, then the annotator's own document order (never the
    systems' rank order). ``exclude`` holds pairs skipped in this session; they come back at the end.
    One indexed query whatever the size of the pool (see ``_pair_next``).

    ``lock`` (inside a transaction): the pair comes locked (SELECT ... FOR UPDATE SKIP LOCKED on
    PostgreSQL), with the annotator's progress on its query (``pair.progress``), for the judging page's
    "record + next" to hold it in the same transaction; a pair another request has locked is passed over.

    Queries a lead assigned to the annotator (QueryAssignment) come before everything else, in every mode but
    the exclusive ones (the audit), where they come first only when drawn: the current query if it is one of
    theirs, then their other queries in their own order. Another
    annotator's assigned query keeps a slot of each pair's redundancy for its assignee until they have
    judged it, so with redundancy 1 it stays out of everyone else's queue while its assignee has work
    there (see open_pairs_of); unassigned queries stay shared.

    Queue modes with a priority list (``Campaign.queue_mode``, chosen by a lead; judging.selectors.strategies,
    e.g. "pairs that matter most") serve first, across queries, the pairs of their list in its order; the same
    open-pair rules (redundancy, holds, the annotator's own judgments, skips) filter them. When none is left it
    falls back to the order above, except in the modes of ``EXCLUSIVE_MODES`` (the audit), which serve their
    list only.

    A lead's focus (``Campaign.queue_focus``: "judge what is new first", the pairs a search engine's snapshot
    brought) comes before all of this, in every mode: its pairs in their order, filtered by the same open-pair
    rules, then the mode's order once none is open to the annotator. ``lock`` does not look at it: its caller
    (services.queue.pair_assign_locked) leaves a campaign with a focus to pair_assign.

    ``lost``: pairs this request chose and another annotator took first (services.queue.pair_assign); unlike
    the skips they never come back in this call, so the caller moves on to the next candidate.

    ``progress``: a pair served from a queue mode's list comes with the annotator's progress figures
    (``pair.progress``), read with it (the judging page's "record + next" shows them).
    """
    annotator_id = user_id(annotator)
    if campaign.queue_focus_id is not None and not lock:
        # A lead's "judge what is new first": its pairs before any other, in every mode.
        focused = focus_pair_next(campaign=campaign, annotator_id=annotator_id, exclude=[*exclude, *lost])
        if focused is not None:
            return NextPair(focused)
    # Most annotators have no query of their own: one probe of their assignments, asked once for every statement
    # below (which leave the assigned queries' candidates out without them).
    assigned = has_assigned_queries(campaign_id=campaign.id, annotator_id=annotator_id)
    strategy = priority_for(campaign.queue_mode)
    if strategy is not None and not lock:
        # The annotator's own queries first, in every mode (the shuffled order's query does this itself).
        mine = assigned_pair_next(
            campaign=campaign,
            annotator=annotator,
            current_query_id=current_query_id,
            exclude=[*exclude, *lost],
            assigned=assigned,
        )
        exclusive = campaign.queue_mode in EXCLUSIVE_MODES
        listed = strategy(campaign, annotator_id) if mine is None or exclusive else None
        # An exclusive mode wins over assignments (the audit must stay a random sample): an assigned pair comes
        # first only when the mode's list holds it, and an annotator whose queries were not drawn is served
        # drawn pairs, or nothing.
        if mine is not None and (listed is None or bool(np.isin(mine.id, listed))):
            return NextPair(mine)
        assert listed is not None
        found = pair_of_priority(
            listed, campaign=campaign, annotator_id=annotator_id, exclude=[*exclude, *lost], progress=progress
        )
        if found is not None:
            return NextPair(found)
        if exclusive:
            if exclude:  # the skipped pairs come back at the end, as in the query-by-query order
                found = pair_of_priority(
                    listed, campaign=campaign, annotator_id=annotator_id, exclude=lost, progress=progress
                )
                return NextPair(found, was_skipped=found is not None)
            return NextPair(None)
    args: dict[str, Any] = {
        "campaign": campaign,
        "annotator_id": annotator_id,
        "current_query_id": current_query_id,
        "lock": lock,
        "assigned": assigned,
    }
    found = _pair_next(**args, exclude=[*exclude, *lost])
    if found is None and exclude:
        found = _pair_next(**args, exclude=lost)
        return NextPair(found, was_skipped=found is not None)
    return NextPair(found)


def _assigned_candidates(args: Args, open_pairs: QuerySet[Pair], *, current: bool) -> list[QuerySet[Any, Any]]:
    """The first probes of the queue: the annotator's own queries (QueryAssignment) come before shared work.
    The current query if it is one of theirs and still open to them (they stay on it), then the first of
    their queries, in their own query order, with a pair open to them. Each an index probe of the
    annotator's assignments (empty for most annotators)."""
    mine = QueryAssignment.objects.filter(annotator_id=args["annotator_id"], campaign_id=args["campaign_id"])
    found = []
    if current:
        found.append(
            mine.filter(query_id=args["current_query_id"])
            .filter(Exists(open_pairs.filter(query_id=OuterRef("query_id"))))
            .values("query_id")[:1]
        )
    found.append(
        mine.filter(Exists(open_pairs.filter(query_id=OuterRef("query_id"))))
        .order_by(*query_order(args["query_salt"], column="query_id"))
        .values("query_id")[:1]
    )
    return found


def assigned_pair_next(
    *,
    campaign: Campaign,
    annotator: User,
    current_query_id: int | None,
    exclude: Sequence[int],
    assigned: bool | None = None,
) -> Pair | None:
    """The next pair among the annotator's assigned queries only (the first step of a queue mode with a
    priority list, whose list then orders the shared work): one indexed query, compiled once per shape.

    Most annotators have no assigned query: one probe of their assignments (a prepared statement PostgreSQL
    plans once) answers them, where the whole query was planned anew at each call (PostgreSQL found a plan made
    with the call's values cheaper, and its planning cost ~2 ms of the database's CPU: ~20% of it per
    judgment at 50 annotators, bench/load_bench.py with pg_stat_statements). ``assigned``: that probe's answer,
    when the caller has it already."""
    if assigned is None:
        assigned = has_assigned_queries(campaign_id=campaign.id, annotator_id=user_id(annotator))
    if not assigned:
        return None
    shape = {
        "current": current_query_id is not None,
        "overlap": bool(campaign.overlap_percent),
        "exclude": bool(exclude),
    }
    values = queue_values(
        campaign=campaign, annotator_id=user_id(annotator), current_query_id=current_query_id, exclude=exclude
    )
    query = compiled_select(
        ("assigned_pair_next", *shape.values()),
        lambda: pair_next_of(Slots(QUEUE_FIELDS), levels=0, lock=False, shared=False, **shape),
    )
    row = query.first(values)
    return None if row is None else pair_from_row(row)[0]


def has_assigned_queries(*, campaign_id: int, annotator_id: int) -> bool:
    """Whether a lead gave the annotator queries of their own in the campaign (QueryAssignment): one prepared
    probe of their assignments."""
    mine = compiled_select(("has_assigned_queries",), _has_assigned_queries_of)
    return mine.first({"campaign_id": campaign_id, "annotator_id": annotator_id}) is not None


def _has_assigned_queries_of() -> QuerySet[Any, Any]:
    slots = Slots()
    return (
        QueryAssignment.objects.filter(annotator_id=slots["annotator_id"], campaign_id=slots["campaign_id"])
        .order_by()
        .values_list("id")[:1]
    )


def pair_next_of(
    args: Args,
    *,
    current: bool,
    levels: int,
    overlap: bool,
    exclude: bool,
    lock: bool,
    shared: bool = True,
    done: bool = False,
    assigned: bool = True,
    related: bool = True,
) -> QuerySet[Pair, Any]:
    """_pair_next's query, built from named values (see open_pairs_of): a row of PAIR_COLUMNS, then with
    ``lock`` the progress figures query_done, query_total and, with ``done`` (a small pool: see
    ``campaign_done``), campaign_done. ``assigned``: the annotator has queries of their own in the campaign
    (QueryAssignment), whose probes then come first; without them (most annotators) the statement leaves them out.
    ``related``: the row holds the pair's query and document (PAIR_COLUMNS); else the pair's own columns only."""
    open_pairs = open_pairs_of(args, overlap=overlap, exclude=exclude)
    candidates = _assigned_candidates(args, open_pairs, current=current) if assigned else []
    if current and shared:
        current_query = Query.objects.filter(id=args["current_query_id"], campaign_id=args["campaign_id"])
        if candidates or levels:
            # the current query only if it has an open pair: the later candidates are asked otherwise
            current_query = current_query.filter(Exists(open_pairs.filter(query_id=OuterRef("pk"))))
        # (Alone, the current query is the one candidate: the outer scan of its open pairs asks the same question
        # once. Written twice, the open-pair rule was planned once more in the prepared statement, whose plan made
        # without values ANDed the whole pool index into it: 2.5 ms of PostgreSQL's CPU a judgment on the load
        # bench, of 7.2.)
        candidates.append(current_query.values("id")[:1])
    for level in range(levels):
        candidates.append(
            Query.objects.filter(campaign_id=args["campaign_id"])
            .filter(Exists(open_pairs.filter(judgment_count=args[f"level{level}"], query_id=OuterRef("pk"))))
            .order_by(*query_order(args["query_salt"]))
            .values("id")[:1]
        )
    subqueries = [Subquery(c, output_field=IntegerField()) for c in candidates]
    query_id = Coalesce(*subqueries) if len(subqueries) > 1 else subqueries[0]
    qs = open_pairs.filter(query_id=cast(Any, query_id)).order_by("judgment_count", *doc_order(args["doc_salt"]))
    columns = list(PAIR_COLUMNS) if related else model_columns(Pair)
    if lock:
        qs = with_progress(qs.select_for_update(of=("self",), skip_locked=True), args, done=done)
        columns += ["query_done", "query_total", *(["campaign_done"] if done else [])]
    return qs.values_list(*columns)[:1]


def _pair_next_from_slots(shape: dict[str, bool | int]) -> QuerySet[Pair, Any]:
    """pair_next_of of one shape, built from placeholders (compiled once per process and shape)."""
    return pair_next_of(Slots(QUEUE_FIELDS), **cast(dict[str, Any], shape))


def _pair_next(
    *,
    campaign: Campaign,
    annotator_id: int,
    current_query_id: int | None,
    exclude: Sequence[int],
    assigned: bool,
    lock: bool = False,
) -> Pair | None:
    """One SQL query: the first open pair, in the annotator's document order, of the query picked by
    COALESCE(the current query if it has an open pair, the first query in the annotator's order with an
    open pair at judgment level 0, ... at level 1, ...). The COALESCE holds uncorrelated subqueries that
    each database evaluates once and only as far as needed (an InitPlan on PostgreSQL), so the outer
    query walks the (query, ...) index of one query's 50-odd pairs; each level probe is the indexed
    search the queue always did. Within the picked query the least-judged pair comes first, which at
    level L is a pair at level L: no query has open pairs at a lower level, or it would have been picked.

    The judging page's hottest read: built and compiled once per process for each shape (judging.compiled:
    whether there is a current query, the number of levels, an overlap sample, skipped pairs, a lock), it
    costs ~0.1 ms of CPU a call where the ORM spends ~20 ms building and compiling it.
    """
    # At most `redundancy` (<= 5) levels. Overlap-sample pairs can carry a judgment from every annotator,
    # so look at more levels there.
    levels = (
        campaign.redundancy
        if not campaign.overlap_percent
        else max(campaign.redundancy, Membership.objects.filter(campaign_id=campaign.id).count())
    )
    current = current_query_id is not None
    if not current and not levels:
        return None
    values = queue_values(
        campaign=campaign,
        annotator_id=annotator_id,
        current_query_id=current_query_id,
        exclude=exclude,
        **{f"level{level}": level for level in range(levels)},
    )
    row, shape = None, {}
    # The current query alone first: the usual case, a statement PostgreSQL plans once (a prepared statement:
    # judging.compiled). Only when it has no open pair (or none unlocked) the level probes, planned with their
    # values each time: a plan made without them can walk every pair of the campaign at a level.
    # ``assigned`` (pair_next's probe): without queries of their own, the statements leave those candidates out.
    for current_only, probes in ((True, 0), (False, levels)) if current else ((False, levels),):
        if not current_only and not probes and not assigned:
            break
        shape = {
            "assigned": assigned,
            "current": current_only,
            "levels": probes,
            "overlap": bool(campaign.overlap_percent),
            "exclude": bool(exclude),
            "lock": lock,
            # The query and document are read by key once the pair is chosen (pair_related): joined in this
            # statement, PostgreSQL's plan made without values read the query's row for every candidate pair, by
            # a scan of the queries table (40 candidates x 200 queries a judgment on the load bench).
            "related": False,
            # A small pool's complete pairs are counted in the same query; a large pool's come from campaign_done.
            "done": lock and done_counted_exactly(campaign),
        }
        query = compiled_select(
            ("pair_next", *shape.values()),
            functools.partial(_pair_next_from_slots, shape),
            prepare=current_only,
        )
        row = query.first(values)
        if row is not None:
            break
    if row is None:
        return None
    pair, at = pair_related(row)
    if lock:
        query_done, query_total = row[at : at + 2]
        done = row[at + 2] or 0 if shape["done"] else campaign_done(campaign=campaign)
        pair.progress = judge_progress_of(campaign=campaign, query_done=query_done, query_total=query_total, done=done)
    return pair


def pair_related(row: Sequence[Any]) -> tuple[Pair, int]:
    """The Pair of a row of the pair's own columns (model_columns), with its query and document read by key in one
    prepared statement; and where the pair's columns end."""
    pair, at = model_from(Pair, row)
    related = compiled_select(("pair_related",), _pair_related_of).first({"pair_id": pair.pk})
    if related is None:  # the row was read in this transaction: its query and document exist (foreign keys)
        raise Pair.DoesNotExist(f"pair {pair.pk} has no query or document")
    query, end = model_from(Query, related)
    document, _end = model_from(Document, related, end)
    pair = cast(Pair, pair)
    pair.query, pair.document = cast(Query, query), cast(Document, document)
    return pair, at


def _pair_related_of() -> QuerySet[Pair, Any]:
    columns = (*model_columns(Query, "query__"), *model_columns(Document, "document__"))
    return Pair.objects.filter(id=Slots()["pair_id"]).order_by().values_list(*columns)[:1]


def pair_get(
    *,
    campaign: Campaign,
    pair_id: int | None = None,
    public_id: int | None = None,
    pooled_only: bool = True,
    lock: bool = False,
) -> Pair | None:
    """A pair of this campaign (pooled, unless told otherwise) with its query and document: one query. Named
    by its row id (leads' pages) or by its public id (what annotators see). ``lock`` (inside a transaction):
    the pair's row is locked (FOR UPDATE) as every writer of its judgments locks it."""
    key = {"id": pair_id} if public_id is None else {"public_id": public_id}
    # order_by("pk"): Pair's default ordering would join the campaign, query and document tables again.
    qs = Pair.objects.filter(campaign_id=campaign.id, **key).select_related("query", "document").order_by("pk")
    if pooled_only:
        qs = qs.filter(pooled=True)
    if lock:
        qs = qs.select_for_update(of=("self",))
    return qs.first()


def pair_with_scale(*, public_id: int) -> tuple[Pair, list[Grade]] | None:
    """The pair of this public id, pooled or not, in any campaign (the caller checks who may see it), with its
    query, document and campaign loaded and its campaign's scale (as grades_parse gives it): one query."""
    pair = (
        Pair.objects.filter(public_id=public_id)
        .select_related("query", "document", "campaign")
        .annotate(scale_json=grades_json())  # grades_json names the joined "judging_campaign"
        .order_by("pk")
        .first()
    )
    if pair is None:
        return None
    return pair, grades_parse(pair.campaign, pair.scale_json)


def latest_query_id(*, campaign: Campaign, annotator: User) -> int | None:
    """The query of the annotator's latest judgment: where the queue resumes."""
    return (
        Judgment.objects.filter(annotator_id=annotator.id, pair__campaign_id=campaign.id)
        .order_by("-id")
        .values_list("pair__query_id", flat=True)
        .first()
    )
