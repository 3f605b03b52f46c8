"""The judging queue: which pair an annotator sees next, in what order, and their progress."""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from django.contrib.postgres.expressions import ArraySubquery
from django.db import connection
from django.db.models import (
    Case,
    Count,
    DateTimeField,
    Exists,
    Expression,
    F,
    Field,
    Func,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.expressions import OrderBy
from django.db.models.functions import Coalesce, Mod
from django.utils import timezone

from judging import runtime
from judging.compiled import (
    Args,
    Slots,
    Values,
    compiled_first_of,
    compiled_select,
    model_columns,
    model_from,
)
from judging.models import (
    Assignment,
    Campaign,
    Document,
    Grade,
    Judgment,
    Membership,
    Pair,
    Query,
    QueryAssignment,
    QueueFocus,
    User,
)
from judging.selectors import priority
from judging.selectors.campaigns import grades_json, grades_parse
from judging.selectors.progress import campaign_done, done_counted_exactly, judge_progress_of, with_progress
from judging.selectors.strategies import EXCLUSIVE_MODES, priority_for

_P = 100_003  # prime

FOCUS_KEPT = 256  # lead's focus lists kept per process


_ID_MUL = 7_919


_QUERY_SALT = (104_729, 1_299_709)


_DOC_SALT = (15_485_863, 32_452_843)


def _salt(user_id: int, consts: tuple[int, int]) -> int:
    return (user_id * consts[0] + consts[1]) % _P


def _mixed(column: str, salt: Expression | int) -> tuple[Expression, Expression]:
    x = (F(column) * _ID_MUL + salt) % _P
    return (x * x) % _P, x


def _doc_order(salt: Expression | int) -> list[OrderBy]:
    """The annotator's own document order; ``salt``: _salt(annotator id, _DOC_SALT), or its placeholder."""
    key, tie = _mixed("document_id", salt)
    return [key.asc(), tie.asc(), F("id").asc()]


def _query_order(salt: Expression | int, column: str = "id") -> list[OrderBy]:
    """The annotator's own query order; ``salt``: _salt(annotator id, _QUERY_SALT), or its placeholder."""
    key, tie = _mixed(column, salt)
    return [key.asc(), tie.asc(), F(column).asc()]


def overlap_q(campaign: Campaign) -> Q:
    """The campaign's overlap sample: about ``overlap_percent`` % of pairs, chosen by a fixed hash of the
    pair id, that every annotator judges (for measuring agreement) whatever the redundancy."""
    return Q(overlap_bucket__lt=campaign.overlap_percent)


def with_overlap_bucket(qs: QuerySet[Pair]) -> QuerySet[Pair]:
    return qs.alias(overlap_bucket=Mod(F("id") * 7919 + 13, 100))


# The queue's queries are built by the functions below from named values (judging.compiled): with Slots,
# once per process and shape, then run as plain SQL with each request's values; with Values, as an ORM
# query run at once. The values, by name: annotator_id, campaign_id, redundancy, overlap_percent, now (the
# time holds are compared with), exclude (pair ids), current_query_id, pair_id, query_salt, doc_salt.
QUEUE_FIELDS: dict[str, Field[Any, Any]] = {"now": DateTimeField()}


def queue_values(*, campaign: Campaign, annotator_id: int, **more: Any) -> dict[str, Any]:
    """The named values of the queue's queries for this annotator and campaign (and ``more``)."""
    return {
        "annotator_id": annotator_id,
        "campaign_id": campaign.id,
        "redundancy": campaign.redundancy,
        "overlap_percent": campaign.overlap_percent,
        "now": timezone.now(),
        "query_salt": _salt(annotator_id, _QUERY_SALT),
        "doc_salt": _salt(annotator_id, _DOC_SALT),
        **more,
    }


def open_pairs_of(args: Args, *, overlap: bool, exclude: bool, one_pair: bool = False) -> QuerySet[Pair]:
    """Pooled pairs this annotator has not judged and that still need judgments from someone.

    A pair the annotator has not judged has ``judgment_count`` judgments by others; the pairs other
    annotators have on screen right now (Assignment) count too, so the campaign's redundancy is never
    exceeded. Each other annotator who was assigned the pair's query (QueryAssignment) and has neither
    judged it nor holds it keeps one slot too: the pair is open to someone else only while the judgments,
    holds and such reservations stay under the redundancy; an assignee is never kept out by another
    assignee's reservation. Unsure judgments count: the pair was looked at. Pairs of the overlap sample (``overlap``:
    the campaign has one) stay open for every annotator. ``exclude``: leave out the pairs ``exclude``.
    ``one_pair``: the caller narrows it to one pair (see _held_by_others).

    Callers always narrow this to one query. It deliberately does not filter on the campaign: the
    query implies it, and leaving the campaign out keeps SQLite's planner (which has no statistics) on
    the (query, document) index, 50 rows, instead of a walk of the campaign's pool index.
    """
    qs = Pair.objects.filter(pooled=True).exclude(
        Exists(Judgment.objects.filter(pair_id=OuterRef("pk"), annotator_id=args["annotator_id"]))
    )
    # Others' reservations (see _reserved) count only when the campaign has assignments at all (an
    # uncorrelated EXISTS, evaluated once per statement) and the pair's query is not the caller's own.
    others = Case(
        When(
            Q(Exists(QueryAssignment.objects.filter(campaign_id=args["campaign_id"])))
            & ~Q(
                Exists(QueryAssignment.objects.filter(query_id=OuterRef("query_id"), annotator_id=args["annotator_id"]))
            ),
            then=Coalesce(Subquery(_reserved(args), output_field=IntegerField()), Value(0)),
        ),
        default=Value(0),
        output_field=IntegerField(),
    )
    needs_more = Q(judgment_count__lt=args["redundancy"]) & Q(load__lt=args["redundancy"])
    qs = qs.alias(load=F("judgment_count") + _held_by_others(args, one_pair=one_pair) + others)
    if overlap:
        qs = with_overlap_bucket(qs).filter(needs_more | Q(overlap_bucket__lt=args["overlap_percent"]))
    else:
        qs = qs.filter(needs_more)
    if exclude:
        qs = qs.filter(args.not_in("id", "exclude"))
    return qs


def _reserved(args: Args) -> QuerySet[Any, Any]:
    """How many slots of the outer pair other annotators' assignments keep: one per annotator (not the caller)
    given the pair's query who has neither judged the pair nor holds it now (a hold counts in ``load``)."""
    return (
        QueryAssignment.objects.filter(query_id=OuterRef("query_id"))
        .exclude(annotator_id=args["annotator_id"])
        .exclude(
            Exists(Judgment.objects.filter(pair_id=OuterRef(OuterRef("pk")), annotator_id=OuterRef("annotator_id")))
        )
        .exclude(
            Exists(
                Assignment.objects.filter(
                    pair_id=OuterRef(OuterRef("pk")), annotator_id=OuterRef("annotator_id"), expires_at__gt=args["now"]
                )
            )
        )
        .order_by()
        .values("query_id")
        .annotate(n=Count("id"))
        .values("n")
    )


class _CountOf(Func):
    """How many times the second expression occurs in the first (a PostgreSQL array)."""

    template = "COALESCE(cardinality(array_positions(%(expressions)s)), 0)"
    output_field = IntegerField()


def _held_by_others(args: Args, *, one_pair: bool = False) -> Expression:
    """How many live holds other annotators have on the outer pair (Assignment: one per annotator).

    On PostgreSQL the campaign's live holds are read once per statement (an array, planned as an InitPlan: as
    many rows as annotators) and each candidate pair looks itself up in it, instead of a subquery per candidate:
    with a table this small the planner scans it for each of them (50 annotators, 50 candidates: 2,500 rows).
    A statement about ``one_pair`` (pair_is_open, twice a judgment) asks for that pair's holds alone: a probe of
    the holds' pair index once the table is more than a page or two, where the array read every hold of the
    campaign (~35 rows a judgment at 50 annotators)."""
    others = Assignment.objects.filter(expires_at__gt=args["now"]).exclude(annotator_id=args["annotator_id"])
    if connection.vendor == "postgresql" and not one_pair:
        holds = others.filter(campaign_id=args["campaign_id"]).order_by().values("pair_id")
        return _CountOf(ArraySubquery(holds), F("id"))
    per_pair = others.filter(pair_id=OuterRef("pk")).order_by().values("pair_id").annotate(n=Count("id")).values("n")
    return Coalesce(Subquery(per_pair, output_field=IntegerField()), Value(0))


def _open_pairs(*, campaign: Campaign, annotator_id: int, exclude: Sequence[int]) -> QuerySet[Pair]:
    """open_pairs_of as an ORM query with this call's values."""
    args = Values(QUEUE_FIELDS, **queue_values(campaign=campaign, annotator_id=annotator_id, exclude=exclude))
    return open_pairs_of(args, overlap=bool(campaign.overlap_percent), exclude=bool(exclude))


def open_pair_of(args: Args, *, overlap: bool) -> QuerySet[Pair, Any]:
    """The id of the pair ``pair_id`` if it may still be handed to the annotator (see open_pairs_of), built
    from named values (queue_values)."""
    # order_by(): Pair's default ordering would join the campaign (three times), query and document to sort one row.
    open_pairs = open_pairs_of(args, overlap=overlap, exclude=False, one_pair=True)
    return open_pairs.filter(id=args["pair_id"]).order_by().values("id")[:1]


def pair_is_open(*, campaign: Campaign, annotator_id: int, pair_id: int) -> bool:
    """Whether ``pair_id`` may still be handed to this annotator: checked again under the pair's lock before
    a hold is taken or moved. One of the judging page's hottest reads, compiled once per process
    (judging.compiled): the ORM spends ~3.5 ms of CPU building this query, the compiled one ~0.1 ms."""
    overlap = bool(campaign.overlap_percent)
    query = compiled_select(("pair_is_open", overlap), lambda: open_pair_of(Slots(QUEUE_FIELDS), overlap=overlap))
    return query.first(queue_values(campaign=campaign, annotator_id=annotator_id, pair_id=pair_id)) is not None


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
    """
    annotator_id = user_id(annotator)
    if campaign.queue_focus_id is not None and not lock:
        # A lead's "judge what is new first": its pairs before any other, in every mode.
        focused = focus_pair_next(campaign=campaign, annotator_id=annotator_id, exclude=[*exclude, *lost])
        if focused is not None:
            return NextPair(focused)
    strategy = priority_for(campaign.queue_mode)
    if strategy is not None and not lock:
        # The annotator's own queries first, in every mode (the shuffled order's query does this itself).
        mine = assigned_pair_next(
            campaign=campaign, annotator=annotator, current_query_id=current_query_id, exclude=[*exclude, *lost]
        )
        exclusive = campaign.queue_mode in EXCLUSIVE_MODES
        listed = strategy(campaign, annotator_id) if mine is None or exclusive else None
        # An exclusive mode wins over assignments (the audit must stay a random sample): an assigned pair comes
        # first only when the mode's list holds it, and an annotator whose queries were not drawn is served
        # drawn pairs, or nothing.
        if mine is not None and (listed is None or bool(np.isin(mine.id, listed))):
            return NextPair(mine)
        assert listed is not None
        found = _pair_of_priority(listed, campaign=campaign, annotator_id=annotator_id, exclude=[*exclude, *lost])
        if found is not None:
            return NextPair(found)
        if exclusive:
            if exclude:  # the skipped pairs come back at the end, as in the query-by-query order
                found = _pair_of_priority(listed, campaign=campaign, annotator_id=annotator_id, exclude=lost)
                return NextPair(found, was_skipped=found is not None)
            return NextPair(None)
    args: dict[str, Any] = {
        "campaign": campaign,
        "annotator_id": annotator_id,
        "current_query_id": current_query_id,
        "lock": lock,
    }
    found = _pair_next(**args, exclude=[*exclude, *lost])
    if found is None and exclude:
        found = _pair_next(**args, exclude=lost)
        return NextPair(found, was_skipped=found is not None)
    return NextPair(found)


# QueueFocus id -> its pairs (a row is never changed: a new focus is a new row), per process.
_FOCUS_LOCK = threading.Lock()
_FOCUS_IDS: dict[int, np.ndarray] = runtime.keep(
    "queue.focus_pairs",
    {},
    bound=FOCUS_KEPT,
    invalidated_by="never (a focus row is immutable; a new focus is a new id)",
    lock=_FOCUS_LOCK,
)


def focus_ids(focus_id: int) -> np.ndarray:
    """The pair ids of the focus ``focus_id`` in their order (empty when it is gone): read once per process."""
    with _FOCUS_LOCK:
        kept = _FOCUS_IDS.get(focus_id)
    if kept is not None:
        return kept
    raw = QueueFocus.objects.filter(pk=focus_id).values_list("pair_ids", flat=True).first()
    if raw is None:
        return np.empty(0, dtype=np.int64)
    ids = np.frombuffer(bytes(raw), dtype=np.int64)
    with _FOCUS_LOCK:
        if len(_FOCUS_IDS) >= FOCUS_KEPT:
            _FOCUS_IDS.clear()
        return _FOCUS_IDS.setdefault(focus_id, ids)


def focus_pair_next(*, campaign: Campaign, annotator_id: int, exclude: Sequence[int]) -> Pair | None:
    """The first pair of the campaign's focus still open to the annotator (the open-pair rules of the priority
    lists: redundancy, others' holds, their own judgments, skips), or None: none is, or there is no focus. The
    whole list is checked, from past the head already closed (kept per process, as for a mode's list)."""
    if campaign.queue_focus_id is None:
        return None
    ids = focus_ids(campaign.queue_focus_id)
    if not ids.size:
        return None
    return _pair_of_priority(
        ids,
        campaign=campaign,
        annotator_id=annotator_id,
        exclude=exclude,
        list_name=f"focus:{campaign.queue_focus_id}",
        candidates=ids.size,
    )


def user_id(user: User) -> int:
    """The id of a logged-in user (the queue is only ever asked for one: the views and the API refuse anonymous
    requests first)."""
    if user.id is None:
        raise ValueError("the judging queue needs a logged-in user")
    return user.id


# Candidate pairs of a priority list checked per request before the shuffled order takes over.
PRIORITY_CANDIDATES = 2000


def priority_open_of(args: Args, *, overlap: bool, exclude: bool) -> QuerySet[Pair, Any]:
    """The candidate pair ``candidate`` of a priority list if it is still open to the annotator (see
    open_pairs_of): the test _pair_of_priority runs on each candidate in turn."""
    qs = open_pairs_of(args, overlap=overlap, exclude=exclude).filter(id=args["candidate"])
    # order_by(): Pair's default ordering would join the campaign, query and document for each candidate.
    return qs.order_by().values("id")[:1]


def _pair_of_priority(
    ids: np.ndarray,
    *,
    campaign: Campaign,
    annotator_id: int,
    exclude: Sequence[int],
    list_name: str | None = None,
    candidates: int = PRIORITY_CANDIDATES,
) -> Pair | None:
    """The first pair of a queue mode's priority list still open to this annotator: one compiled statement per
    chunk of candidates that checks them in the list's order and stops at the first open one
    (judging.compiled.compiled_first_of), so it reads the rows of the pairs ahead of it (those others hold, or
    judged since the list was computed), not of the whole chunk; then the chosen pair with its query and
    document. That read goes by id alone: if another annotator takes the pair in between, the caller's hold
    (services.queue._hold, which checks again under the pair's lock) fails and it asks again, never a 500.

    The check starts past the list's head closed to the annotator (``priority.complete_prefix``: pairs with all
    the judgments the campaign asks for; ``priority.own_prefix``: and pairs they judged), which each process reads
    once per list rather than at every request. ``list_name`` names a list that is not the queue mode's (the
    prefixes are kept per name); ``candidates``: how many of the list are checked at most."""
    overlap, skips = bool(campaign.overlap_percent), bool(exclude)
    place = priority.spread(campaign.id, annotator_id)
    query = compiled_first_of(
        ("priority_open", overlap, skips),
        lambda: priority_open_of(Slots(QUEUE_FIELDS), overlap=overlap, exclude=skips),
        candidate="candidate",
        count=priority.SPREAD_WIDTH if place else 1,
    )
    end = min(ids.size, candidates)
    start = priority.complete_prefix(ids, campaign=campaign, end=end, list_name=list_name)
    start = priority.own_prefix(
        ids, campaign=campaign, annotator_id=annotator_id, start=start, end=end, list_name=list_name
    )
    for at, to in priority.chunks(start, end):
        chunk = ids[at:to]
        values = queue_values(campaign=campaign, annotator_id=annotator_id, exclude=exclude, candidates=chunk)
        found = query.rows(values)
        if found:
            # a busy campaign's annotators take different ones of the first open pairs (priority.spread)
            row = compiled_select(("pooled_pair",), _pooled_pair_of).first({"pair_id": found[place % len(found)][0]})
            return None if row is None else pair_from_row(row)[0]
    return None


def _pooled_pair_of() -> QuerySet[Pair, Any]:
    """The pooled pair ``pair_id`` as a row of PAIR_COLUMNS (compiled once: the ORM builds it in ~2 ms)."""
    return Pair.objects.filter(id=Slots()["pair_id"], pooled=True).order_by().values_list(*PAIR_COLUMNS)[:1]


# A pair, its query and its document, read as plain columns in this order (see pair_from_row).
PAIR_COLUMNS = (*model_columns(Pair), *model_columns(Query, "query__"), *model_columns(Document, "document__"))


def pair_from_row(row: Sequence[Any], start: int = 0) -> tuple[Pair, int]:
    """The Pair of a row's PAIR_COLUMNS from ``start`` on, with its query and document loaded; and where
    those columns end."""
    pair, at = model_from(Pair, row, start)
    query, at = model_from(Query, row, at)
    document, at = model_from(Document, row, at)
    pair = cast(Pair, pair)
    pair.query, pair.document = cast(Query, query), cast(Document, document)
    return pair, at


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
        .order_by(*_query_order(args["query_salt"], column="query_id"))
        .values("query_id")[:1]
    )
    return found


def assigned_pair_next(
    *, campaign: Campaign, annotator: User, current_query_id: int | None, exclude: Sequence[int]
) -> Pair | None:
    """The next pair among the annotator's assigned queries only (the first step of a queue mode with a
    priority list, whose list then orders the shared work): one indexed query, compiled once per shape.

    Most annotators have no assigned query: one probe of their assignments (a prepared statement PostgreSQL
    plans once) answers them, where the whole query was planned anew at each call (PostgreSQL found a plan made
    with the call's values cheaper, and its planning cost ~2 ms of the database's CPU: ~20% of it per
    judgment at 50 annotators, bench/load_bench.py with pg_stat_statements)."""
    mine = compiled_select(("has_assigned_queries",), _has_assigned_queries_of)
    if mine.first({"campaign_id": campaign.id, "annotator_id": user_id(annotator)}) is None:
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
) -> QuerySet[Pair, Any]:
    """_pair_next's query, built from named values (see open_pairs_of): a row of PAIR_COLUMNS, then with
    ``lock`` the progress figures query_done, query_total and, with ``done`` (a small pool: see
    ``campaign_done``), campaign_done."""
    open_pairs = open_pairs_of(args, overlap=overlap, exclude=exclude)
    candidates = _assigned_candidates(args, open_pairs, current=current)
    if current and shared:
        candidates.append(
            Query.objects.filter(id=args["current_query_id"], campaign_id=args["campaign_id"])
            .filter(Exists(open_pairs.filter(query_id=OuterRef("pk"))))
            .values("id")[:1]
        )
    for level in range(levels):
        candidates.append(
            Query.objects.filter(campaign_id=args["campaign_id"])
            .filter(Exists(open_pairs.filter(judgment_count=args[f"level{level}"], query_id=OuterRef("pk"))))
            .order_by(*_query_order(args["query_salt"]))
            .values("id")[:1]
        )
    subqueries = [Subquery(c, output_field=IntegerField()) for c in candidates]
    query_id = Coalesce(*subqueries) if len(subqueries) > 1 else subqueries[0]
    qs = open_pairs.filter(query_id=cast(Any, query_id)).order_by("judgment_count", *_doc_order(args["doc_salt"]))
    columns = list(PAIR_COLUMNS)
    if lock:
        qs = with_progress(qs.select_for_update(of=("self",), skip_locked=True), args, done=done)
        columns += ["query_done", "query_total", *(["campaign_done"] if done else [])]
    return qs.values_list(*columns)[:1]


def _pair_next_from_slots(shape: dict[str, bool | int]) -> QuerySet[Pair, Any]:
    """pair_next_of of one shape, built from placeholders (compiled once per process and shape)."""
    return pair_next_of(Slots(QUEUE_FIELDS), **cast(dict[str, Any], shape))


def _pair_next(
    *, campaign: Campaign, annotator_id: int, current_query_id: int | None, exclude: Sequence[int], lock: bool = False
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
    for current_only, probes in ((True, 0), (False, levels)) if current else ((False, levels),):
        if not current_only and not probes:
            break
        shape = {
            "current": current_only,
            "levels": probes,
            "overlap": bool(campaign.overlap_percent),
            "exclude": bool(exclude),
            "lock": lock,
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
    pair, at = pair_from_row(row)
    if lock:
        query_done, query_total = row[at : at + 2]
        done = row[at + 2] or 0 if shape["done"] else campaign_done(campaign=campaign)
        pair.progress = judge_progress_of(campaign=campaign, query_done=query_done, query_total=query_total, done=done)
    return pair


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
