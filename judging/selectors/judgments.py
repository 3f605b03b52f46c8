"""Judgments and qrels as pages, the API and exports read them."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from django.db import NotSupportedError, connection
from django.db.models import (
    BigIntegerField,
    Case,
    CharField,
    ExpressionWrapper,
    F,
    Func,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce
from django.db.models.lookups import In
from django.db.models.sql.constants import MULTI
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from judging.formats import nfc
from judging.models import Campaign, Judgment, Membership, Pair, User
from judging.roles import leads_everywhere
from judging.selectors.campaigns import membership_roles
from judging.selectors.progress import campaign_done, judge_progress_of, progress_parts

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models.sql.compiler import SQLCompiler, _AsSqlType

# A row of a judgments export (JUDGMENT_EXPORT_COLUMNS' values).
ExportRow = Sequence[Any]

# Columns of a judgments export, in file order: (name in the file, ORM path).
JUDGMENT_EXPORT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "id"),
    ("pair", "pair__public_id"),  # the public id: row ids follow run-import order
    ("campaign", "pair__campaign__slug"),
    ("qid", "pair__query__qid"),
    ("docid", "pair__document__docid"),
    ("annotator", "annotator__username"),
    ("grade", "grade__value"),
    ("unsure", "unsure"),
    ("tentative_grade", "tentative_grade__value"),
    ("note", "note"),
    ("seconds_spent", "seconds_spent"),
    ("created_at", "created_at"),
    ("updated_at", "updated_at"),
)


def judgment_export_row(judgment: Judgment) -> dict[str, Any]:
    """A judgment already in memory as the API writes it (``JUDGMENT_EXPORT_COLUMNS``, the same fields and
    values as the rows read from the database), its pair (campaign, query, document), annotator and grades
    loaded."""
    row: dict[str, Any] = {}
    for name, path in JUDGMENT_EXPORT_COLUMNS:
        value: Any = judgment
        for step in path.split("__"):
            value = getattr(value, step)
            if value is None:
                break
        row[name] = value
    return row


def qrels_rows(*, campaign: Campaign) -> Iterator[tuple[str, str, int | None]]:
    """(qid, docid, label) of every labelled pair — exactly what the leaderboard scores — streamed (the label
    is never None: the pairs are filtered on it)."""
    return (
        Pair.objects.filter(campaign=campaign, label__isnull=False)
        .order_by("query__qid", "document__docid")
        .values_list("query__qid", "document__docid", "label")
        .iterator(chunk_size=5000)
    )


def qrels_chunks(*, campaign: Campaign, chunk_size: int = 5000) -> Iterator[list[Sequence[Any]]]:
    """qrels_rows in lists of up to ``chunk_size`` rows (qid, docid, label) as the database cursor hands them
    over, with no per-row Python in between (for the streamed export)."""
    queryset = (
        Pair.objects.filter(campaign=campaign, label__isnull=False)
        .order_by("query__qid", "document__docid")
        .values_list("query__qid", "document__docid", "label")
    )
    compiler = queryset.query.get_compiler(using=queryset.db)
    chunks = compiler.execute_sql(MULTI, chunked_fetch=True, chunk_size=chunk_size)
    if compiler.get_converters([column[0] for column in compiler.select[: compiler.col_count]]):
        yield from _chunked(compiler, chunk_size, chunks, convert=False)  # a field type not expected here
        return
    yield from chunks


def judgment_current(*, pair: Pair, annotator: User) -> Judgment | None:
    return (
        Judgment.objects.filter(pair_id=pair.id, annotator_id=annotator.id)
        .select_related("grade", "tentative_grade")
        .order_by()
        .first()
    )


def judgment_neighbours(
    *, campaign: Campaign, annotator: User, judgment: Judgment | None
) -> tuple[int | None, int | None]:
    """(previous, next) pairs' public ids in the order the annotator first judged them: the history that Back
    and Forward walk. For a pair not judged yet the previous one is the latest judgment."""
    mine = Judgment.objects.filter(annotator_id=annotator.id, pair__campaign_id=campaign.id)
    if judgment is None:
        return mine.order_by("-id").values_list("pair__public_id", flat=True).first(), None
    prev_id = mine.filter(id__lt=judgment.id).order_by("-id").values_list("pair__public_id", flat=True).first()
    next_id = mine.filter(id__gt=judgment.id).order_by("id").values_list("pair__public_id", flat=True).first()
    return prev_id, next_id


def judgment_following(*, campaign: Campaign, annotator: User, judgment: Judgment) -> int | None:
    """The public id of the pair judged right after this one (forward in the history), if any."""
    return (
        Judgment.objects.filter(annotator_id=annotator.id, pair__campaign_id=campaign.id, id__gt=judgment.id)
        .order_by("id")
        .values_list("pair__public_id", flat=True)
        .first()
    )


def judgment_following_pair(*, campaign: Campaign, annotator: User, judgment: Judgment) -> Pair | None:
    """judgment_following's pair, for the judging page in one query: with its query and document, the
    annotator's judgment of it (``pair.judgment_of_annotator``, grades loaded), the public id of the pair
    judged after it (``pair.next_in_history``) and the page's progress figures (``pair.progress``).
    Its previous pair in the history is ``judgment``'s."""
    if annotator.id is None:  # anonymous: no history
        return None
    mine = Judgment.objects.filter(annotator_id=annotator.id, pair__campaign_id=campaign.id)
    parts = progress_parts(campaign, annotator.id, query_ref="pair__query_id")
    following = (
        mine.filter(id__gt=judgment.id)
        .order_by("id")
        .select_related("grade", "tentative_grade", "pair__query", "pair__document")
        .annotate(
            next_in_history=Subquery(mine.filter(id__gt=OuterRef("id")).order_by("id").values("pair__public_id")[:1]),
            query_total=Coalesce(parts["query_total"], Value(0)),
            query_done=Coalesce(parts["query_done"], Value(0)),
        )
        .first()
    )
    if following is None:
        return None
    pair = following.pair
    pair.judgment_of_annotator = following
    pair.next_in_history = following.next_in_history
    pair.progress = judge_progress_of(
        campaign=campaign,
        query_done=following.query_done,
        query_total=following.query_total,
        done=campaign_done(campaign=campaign),
    )
    return pair


def judgment_list(
    *,
    campaign: Campaign,
    annotator: User,
    qid: str = "",
    grade: int | None = None,
    unsure: bool | None = None,
    text: str = "",
) -> QuerySet[Judgment]:
    """One annotator's own judgments in a campaign, newest change first, filtered."""
    qs = (
        Judgment.objects.filter(annotator_id=annotator.id, pair__campaign_id=campaign.id)
        .select_related("pair__query", "pair__document", "grade", "tentative_grade")
        .order_by("-updated_at", "-id")
    )
    if qid:
        qs = qs.filter(pair__query__qid=qid)
    if grade is not None:
        qs = qs.filter(Q(grade__value=grade) | Q(tentative_grade__value=grade))
    if unsure is not None:
        qs = qs.filter(unsure=unsure)
    if text:
        text = nfc(text)  # stored text is NFC (formats.nfc); a search pasted from a Mac file name may not be
        qs = qs.filter(
            Q(pair__query__text__icontains=text)
            | Q(pair__document__title__icontains=text)
            | Q(pair__document__docid__iexact=text)
            | Q(pair__query__qid__iexact=text)
            | Q(note__icontains=text)
        )
    return qs


def judgments_count(*, campaign: Campaign, annotator: User) -> int:
    """How many pairs of the campaign the annotator has judged (pages off the judging path)."""
    return Judgment.objects.filter(annotator_id=annotator.id, pair__campaign_id=campaign.id).count()


def judgments_in_campaigns(*, judgments: QuerySet[Judgment], campaigns: QuerySet[Campaign]) -> QuerySet[Judgment]:
    """Narrow judgments to some campaigns without a condition on a joined table.

    A condition on the joined pair (or campaign) makes databases drive the query from the campaign's pairs
    and sort every judgment for each id-ordered page: 0.5 s a page at 1M judgments. Matched as
    ``pair_id IN (subquery)`` instead, PostgreSQL (with its statistics) walks the primary key and stops at
    the page's end. SQLite has no such statistics and still prefers the pair_id index; ``pair_id + 0``
    hides the index from it, so it too scans in id order.
    """
    return judgments.filter(_pair_in(Pair.objects.filter(campaign__in=campaigns)))


def _pair_in(pairs: QuerySet[Pair]) -> Q:
    ids = pairs.order_by().values("id")
    if connection.vendor == "sqlite":
        return Q(In(ExpressionWrapper(F("pair_id") + 0, output_field=BigIntegerField()), ids))
    return Q(pair_id__in=ids)


def judgments_visible(*, user: User) -> QuerySet[Judgment]:
    """Judgments a user may read: everything in the campaigns they lead, their own in the others."""
    if not user.is_authenticated:
        return Judgment.objects.none()
    if leads_everywhere(user):
        return Judgment.objects.all()
    roles = membership_roles(user=user)
    led = [cid for cid, role in roles.items() if role == Membership.Role.LEAD]
    judged = [cid for cid, role in roles.items() if role != Membership.Role.LEAD]
    in_led = _pair_in(Pair.objects.filter(campaign_id__in=led))
    if not judged:
        return Judgment.objects.filter(in_led)
    return Judgment.objects.filter(in_led | (Q(annotator=user) & _pair_in(Pair.objects.filter(campaign_id__in=judged))))


# The export's wire form of each judgment, computed by the database rather than per row in Python (where
# parsing and formatting two timestamps per judgment was most of a million-row export's time):
# timestamps as ISO 8601 text in UTC with "Z", exactly as DRF writes them (datetime.isoformat(): microseconds
# only when there are some), and the unsure flag as the text true/false.
class _UtcIsoText(Func):
    arity = 1
    output_field = CharField()

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra: Any,
    ) -> _AsSqlType:
        raise NotSupportedError(f"judgment exports support SQLite and PostgreSQL, not {connection.vendor}")

    def as_sqlite(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any) -> _AsSqlType:
        # Django stores a SQLite timestamp as str() of the naive UTC datetime: "YYYY-MM-DD HH:MM:SS[.ffffff]".
        # Any other shape is passed through unchanged and converted in Python (judgment_export_chunks).
        template = (
            "CASE WHEN length(%(expressions)s) IN (19, 26) AND substr(%(expressions)s, 11, 1) = ' ' "
            "THEN substr(%(expressions)s, 1, 10) || 'T' || substr(%(expressions)s, 12) || 'Z' "
            "ELSE %(expressions)s END"
        )
        return super().as_sql(compiler, connection, template=template, **extra)

    def as_postgresql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any) -> _AsSqlType:
        template = (
            "(to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS') || "
            "CASE WHEN mod(EXTRACT(MICROSECONDS FROM %(expressions)s)::bigint, 1000000) = 0 THEN '' "
            "ELSE to_char(%(expressions)s AT TIME ZONE 'UTC', '.US') END || 'Z')"
        )
        return super().as_sql(compiler, connection, template=template, **extra)


class _GradeOr(Func):
    """A grade in an export: its value, or the given text where there is none. SQLite hands the value over
    as an int (CPython's small ints are shared objects: nothing allocated per row); PostgreSQL wants one
    type in a COALESCE, so there it is text."""

    function = "COALESCE"
    output_field = CharField()

    def as_postgresql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any) -> _AsSqlType:
        grade, missing = self.get_source_expressions()
        return Coalesce(Cast(grade, CharField()), missing).as_sql(compiler, connection)


_WIRE_TEXT = {
    "unsure": Case(When(unsure=True, then=Value("true")), default=Value("false"), output_field=CharField()),
    "created_at": _UtcIsoText("created_at"),
    "updated_at": _UtcIsoText("updated_at"),
}
_TIME_COLUMNS = tuple(i for i, (name, _) in enumerate(JUDGMENT_EXPORT_COLUMNS) if name in ("created_at", "updated_at"))


def judgment_export_chunks(
    *, judgments: QuerySet[Judgment], missing_grade: str, chunk_size: int = 5000
) -> Iterator[list[ExportRow]]:
    """Rows of ``JUDGMENT_EXPORT_COLUMNS`` for already filtered and ordered judgments, in lists of up to
    ``chunk_size`` rows as the database cursor hands them over (a server-side cursor on PostgreSQL), so memory
    stays flat at any size. Each row is in its wire form: grades as numbers (or text, "2"), the text
    ``missing_grade`` where there is none ("" for CSV, "null" for JSON); the unsure flag as "true"/"false";
    the timestamps as ISO 8601 text ("2024-05-01T12:00:00.123456Z", as the JSON API writes them); other
    values as stored.

    The rows come straight from the cursor, with no per-row Python in between: Django's per-value
    converters (a timestamp parsed, made aware and formatted again) cost more than all the rest of a
    million-row export.
    """
    wire = {
        **_WIRE_TEXT,
        "grade__value": _GradeOr(F("grade__value"), Value(missing_grade)),
        "tentative_grade__value": _GradeOr(F("tentative_grade__value"), Value(missing_grade)),
    }
    names = []
    annotations = {}
    for name, path in JUDGMENT_EXPORT_COLUMNS:
        if path in wire:
            names.append(f"wire_{name}")
            annotations[f"wire_{name}"] = wire[path]
        else:
            names.append(path)
    queryset = judgments.annotate(**annotations).values_list(*names)
    compiler = queryset.query.get_compiler(using=queryset.db)
    chunks = compiler.execute_sql(MULTI, chunked_fetch=True, chunk_size=chunk_size)
    if compiler.get_converters([column[0] for column in compiler.select[: compiler.col_count]]):
        yield from _chunked(compiler, chunk_size, chunks)  # a field type this module did not expect
        return
    for rows in chunks:
        if connection.vendor == "sqlite" and not _all_iso(rows):
            rows = [_iso_row(row) for row in rows]
        yield rows


def _chunked(
    compiler: SQLCompiler, chunk_size: int, results: Any = None, *, convert: bool = True
) -> Iterator[list[ExportRow]]:
    """The general path: Django's own conversions, then (``convert``) the timestamps' wire form in Python."""
    rows = compiler.results_iter(results, tuple_expected=True, chunked_fetch=True, chunk_size=chunk_size)
    while chunk := list(islice(rows, chunk_size)):
        yield [_iso_row(row) for row in chunk] if convert else chunk


def _all_iso(rows: list[ExportRow]) -> bool:
    """Whether every timestamp of the chunk came out of the database in its wire form: each such text holds
    one "T" and one "Z" (a stored value of another shape lacks one of them)."""
    n = len(rows)
    for i in _TIME_COLUMNS:
        text = "".join(map(itemgetter(i), rows))
        if text.count("Z") != n or text.count("T") != n:
            return False
    return True


def _iso_row(row: Iterable[Any]) -> ExportRow:
    values = list(row)
    for i in _TIME_COLUMNS:
        values[i] = _iso_text(values[i])
    return tuple(values)


def _iso_text(value: str | datetime.datetime) -> str:
    """A timestamp (a datetime, or text as SQLite stores it) as the JSON API writes it."""
    if isinstance(value, str):
        if value.endswith("Z"):
            return value
        parsed = parse_datetime(value)
        if parsed is None:
            return value  # not a timestamp: passed through as stored
        value = parsed
    if timezone.is_naive(value):
        value = timezone.make_aware(value, datetime.UTC)
    text = value.astimezone(datetime.UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text
