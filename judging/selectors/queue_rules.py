"""The judging queue's rules, shared by every order it serves in: which pairs are open to an annotator (redundancy,
holds, assignments' reservations, the overlap sample, their own judgments), the named values its compiled queries
run with, each annotator's own shuffled query and document orders, and a pair read with its query and document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

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

from judging.compiled import Args, Slots, compiled_select, model_columns, model_from
from judging.models import Assignment, Campaign, Document, Judgment, Pair, Query, QueryAssignment, User
from judging.reads import judged_by

_P = 100_003  # prime

_ID_MUL = 7_919


_QUERY_SALT = (104_729, 1_299_709)


_DOC_SALT = (15_485_863, 32_452_843)


def _salt(user_id: int, consts: tuple[int, int]) -> int:
    return (user_id * consts[0] + consts[1]) % _P


def _mixed(column: str, salt: Expression | int) -> tuple[Expression, Expression]:
    x = (F(column) * _ID_MUL + salt) % _P
    return (x * x) % _P, x


def doc_order(salt: Expression | int) -> list[OrderBy]:
    """The annotator's own document order; ``salt``: _salt(annotator id, _DOC_SALT), or its placeholder."""
    key, tie = _mixed("document_id", salt)
    return [key.asc(), tie.asc(), F("id").asc()]


def query_order(salt: Expression | int, column: str = "id") -> list[OrderBy]:
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


def open_pairs_of(
    args: Args, *, overlap: bool, exclude: bool, one_pair: bool = False, taken_first: bool = False
) -> QuerySet[Pair]:
    """Pooled pairs this annotator has not judged and that still need judgments from someone.

    A pair the annotator has not judged has ``judgment_count`` judgments by others; the pairs other
    annotators have on screen right now (Assignment) count too, so the campaign's redundancy is never
    exceeded. Each other annotator who was assigned the pair's query (QueryAssignment) and has neither
    judged it nor holds it keeps one slot too: the pair is open to someone else only while the judgments,
    holds and such reservations stay under the redundancy; an assignee is never kept out by another
    assignee's reservation. Unsure judgments count: the pair was looked at. Pairs of the overlap sample (``overlap``:
    the campaign has one) stay open for every annotator. ``exclude``: leave out the pairs ``exclude``.
    ``one_pair``: the caller narrows it to one pair (see _held_by_others). ``taken_first``: the caller runs it on
    candidates one by one (a priority list), many of them held or complete: the same rule, stated so that those are
    told by the pair's own row before the probe of the annotator's judgment.

    Callers always narrow this to one query. It deliberately does not filter on the campaign: the
    query implies it, and leaving the campaign out keeps SQLite's planner (which has no statistics) on
    the (query, document) index, 50 rows, instead of a walk of the campaign's pool index.
    """
    qs = Pair.objects.filter(pooled=True).filter(judged_by(args["annotator_id"], judged=False))
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
    # Only the load is compared (load >= judgment_count): with judgment_count's own condition beside it, PostgreSQL's
    # plan made without values ANDed the pool index (campaign, pooled, judgment_count) into each scan of a query's
    # pairs, every campaign's entries of it: 24,000 index entries a judgment at two 12,000-pair campaigns.
    needs_more = Q(load__lt=args["redundancy"])
    held = _held_by_others(args, one_pair=one_pair)
    qs = qs.alias(load=F("judgment_count") + held + others)
    if taken_first and not overlap:
        # The load without the assignments' reservations, tested first: PostgreSQL orders a row's conditions by their
        # estimated cost, and the full load's (its subqueries) came after the probe of the annotator's judgment, so
        # each candidate others hold or judged complete since the list was computed cost that probe too.
        qs = qs.alias(taken=F("judgment_count") + held).filter(taken__lt=args["redundancy"])
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


def user_id(user: User) -> int:
    """The id of a logged-in user (the queue is only ever asked for one: the views and the API refuse anonymous
    requests first)."""
    if user.id is None:
        raise ValueError("the judging queue needs a logged-in user")
    return user.id


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
