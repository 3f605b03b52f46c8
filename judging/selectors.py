"""Everything that reads for a page, an export or the scorer."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, F, IntegerField, Max, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce, Mod
from django.utils import timezone

from judging.models import Assignment, Campaign, Grade, Judgment, Membership, Pair, Query


def qrels_rows(*, campaign: Campaign) -> Iterator[tuple[str, str, int]]:
    """(qid, docid, label) of every labelled pair — exactly what the leaderboard scores — streamed."""
    return (
        Pair.objects.filter(campaign=campaign, label__isnull=False)
        .order_by("query__qid", "document__docid")
        .values_list("query__qid", "document__docid", "label")
        .iterator(chunk_size=5000)
    )


# --------------------------------------------------------------------------- campaigns and roles


def campaigns_for_user(*, user) -> QuerySet[Campaign]:
    """The campaigns a user may open: every one for a superuser, else those they are a member of."""
    if user.is_superuser:
        return Campaign.objects.all()
    return Campaign.objects.filter(memberships__user=user)


def grades_of(*, campaign: Campaign) -> list[Grade]:
    """The campaign's scale, lowest grade first."""
    return list(Grade.objects.filter(campaign_id=campaign.id).order_by("value"))


def campaign_members(*, campaign: Campaign) -> QuerySet[Membership]:
    return campaign.memberships.select_related("user").order_by("role", "user__username")


# --------------------------------------------------------------------------- the judging queue
#
# Every annotator walks the pool in an order of their own: queries shuffled, documents shuffled within a
# query. The order has to be computed by the database (100,000 pairs, 50 ms budget) and be the same on
# SQLite and PostgreSQL, so it is integer arithmetic on the primary keys: x = (id * A + salt) mod P mixes
# the ids with a per-annotator salt, and squaring x modulo P breaks up the runs a purely linear map leaves
# (consecutive ids, e.g. documents imported in rank order, would otherwise come out nearly in order).
# Every intermediate value stays below P**2 < 2**34, so nothing overflows a 64-bit integer.

_P = 100_003  # prime
_ID_MUL = 7_919
_QUERY_SALT = (104_729, 1_299_709)
_DOC_SALT = (15_485_863, 32_452_843)


def _salt(user_id: int, consts: tuple[int, int]) -> int:
    return (user_id * consts[0] + consts[1]) % _P


def _mixed(column: str, salt: int):
    x = (F(column) * _ID_MUL + salt) % _P
    return (x * x) % _P, x


def _doc_order(annotator_id: int) -> list:
    key, tie = _mixed("document_id", _salt(annotator_id, _DOC_SALT))
    return [key.asc(), tie.asc(), F("id").asc()]


def _query_order(annotator_id: int, column: str = "id") -> list:
    key, tie = _mixed(column, _salt(annotator_id, _QUERY_SALT))
    return [key.asc(), tie.asc(), F(column).asc()]


def overlap_q(campaign: Campaign) -> Q:
    """The campaign's overlap sample: about ``overlap_percent`` % of pairs, chosen by a fixed hash of the
    pair id, that every annotator judges (for measuring agreement) whatever the redundancy."""
    return Q(overlap_bucket__lt=campaign.overlap_percent)


def _with_overlap_bucket(qs: QuerySet[Pair]) -> QuerySet[Pair]:
    return qs.alias(overlap_bucket=Mod(F("id") * 7919 + 13, 100))


def _open_pairs(*, campaign: Campaign, annotator_id: int, exclude: Sequence[int]) -> QuerySet[Pair]:
    """Pooled pairs this annotator has not judged and that still need judgments from someone.

    A pair the annotator has not judged has ``judgment_count`` judgments by others; the pairs other
    annotators have on screen right now (Assignment) count too, so the campaign's redundancy is never
    exceeded. Unsure judgments count: the pair was looked at. Pairs of the overlap sample stay open for
    every annotator.

    Callers always narrow this to one query. It deliberately does not filter on the campaign: the
    query implies it, and leaving the campaign out keeps SQLite's planner (which has no statistics) on
    the (query, document) index, 50 rows, instead of a walk of the campaign's pool index.
    """
    held = (
        Assignment.objects.filter(pair_id=OuterRef("pk"), expires_at__gt=timezone.now())
        .exclude(annotator_id=annotator_id)
        .order_by()
        .values("pair_id")
        .annotate(n=Count("id"))
        .values("n")
    )
    qs = Pair.objects.filter(pooled=True).exclude(
        Exists(Judgment.objects.filter(pair_id=OuterRef("pk"), annotator_id=annotator_id))
    )
    needs_more = Q(judgment_count__lt=campaign.redundancy) & Q(load__lt=campaign.redundancy)
    qs = qs.alias(load=F("judgment_count") + Coalesce(Subquery(held, output_field=IntegerField()), Value(0)))
    if campaign.overlap_percent:
        qs = _with_overlap_bucket(qs).filter(needs_more | overlap_q(campaign))
    else:
        qs = qs.filter(needs_more)
    if exclude:
        qs = qs.exclude(id__in=list(exclude))
    return qs


def pair_is_open(*, campaign: Campaign, annotator_id: int, pair_id: int) -> bool:
    """Whether ``pair_id`` may still be handed to this annotator (checked again under the pair's lock)."""
    return _open_pairs(campaign=campaign, annotator_id=annotator_id, exclude=()).filter(id=pair_id).exists()


@dataclass(frozen=True)
class NextPair:
    pair: Pair | None  # with its query and document loaded
    was_skipped: bool = False  # the pool holds nothing else: a pair skipped earlier comes back

    @property
    def pair_id(self) -> int | None:
        return self.pair.id if self.pair is not None else None


def pair_next(
    *,
    campaign: Campaign,
    annotator,
    current_query_id: int | None = None,
    exclude: Sequence[int] = (),
) -> NextPair:
    """The pair ``annotator`` should judge next, or NextPair(None) when there is nothing left.

    Order: stay on the current query while it has open pairs (the annotator keeps the query in mind);
    then move to the next query in the annotator's own shuffled order, taking the least-judged pairs of
    the whole campaign first, so that with redundancy > 1 every pair gets one judgment before any gets
    two. Within a query, least-judged first, then the annotator's own document order (never the
    systems' rank order). ``exclude`` holds pairs skipped in this session; they come back at the end.
    Two or three indexed queries whatever the size of the pool.
    """
    found = _pair_next(campaign=campaign, annotator_id=annotator.id, current_query_id=current_query_id, exclude=exclude)
    if found is None and exclude:
        found = _pair_next(campaign=campaign, annotator_id=annotator.id, current_query_id=current_query_id, exclude=())
        return NextPair(found, was_skipped=found is not None)
    return NextPair(found)


def _pair_next(
    *, campaign: Campaign, annotator_id: int, current_query_id: int | None, exclude: Sequence[int]
) -> Pair | None:
    open_pairs = _open_pairs(campaign=campaign, annotator_id=annotator_id, exclude=exclude).select_related(
        "query", "document"
    )
    if current_query_id is not None:
        pair = (
            open_pairs.filter(query_id=current_query_id).order_by("judgment_count", *_doc_order(annotator_id)).first()
        )
        if pair is not None and pair.query.campaign_id == campaign.id:
            return pair
    # The next query: the first in this annotator's order that has an open pair at the lowest level
    # of judgment_count that has any. At most `redundancy` (<= 5) probes, each one indexed query.
    # Overlap-sample pairs can carry a judgment from every annotator, so look at more levels there.
    levels = (
        campaign.redundancy
        if not campaign.overlap_percent
        else max(campaign.redundancy, Membership.objects.filter(campaign_id=campaign.id).count())
    )
    for level in range(levels):
        at_level = open_pairs.filter(judgment_count=level)
        query_id = (
            Query.objects.filter(campaign_id=campaign.id)
            .filter(Exists(at_level.filter(query_id=OuterRef("pk"))))
            .order_by(*_query_order(annotator_id))
            .values_list("id", flat=True)
            .first()
        )
        if query_id is not None:
            return at_level.filter(query_id=query_id).order_by(*_doc_order(annotator_id)).first()
    return None


def pair_for_judging(*, campaign: Campaign, pair_id: int, pooled_only: bool = True) -> Pair | None:
    """A pair of this campaign (pooled, unless told otherwise) with its query and document: one query."""
    # order_by(): Pair's default ordering would join the campaign, query and document tables again.
    qs = Pair.objects.filter(campaign_id=campaign.id, id=pair_id).select_related("query", "document").order_by()
    return (qs.filter(pooled=True) if pooled_only else qs).first()


def query_order_ids(*, campaign: Campaign, annotator) -> list[int]:
    """The annotator's query order (for tests and the lead's diagnostics, not the request path)."""
    return list(
        Query.objects.filter(campaign_id=campaign.id).order_by(*_query_order(annotator.id)).values_list("id", flat=True)
    )


def document_order_ids(*, query: Query, annotator) -> list[int]:
    """The order in which ``annotator`` sees the pooled documents of ``query`` (ignoring judgments)."""
    return list(
        Pair.objects.filter(query=query, pooled=True)
        .order_by(*_doc_order(annotator.id))
        .values_list("document_id", flat=True)
    )


# --------------------------------------------------------------------------- one annotator's judgments


def judgment_current(*, pair: Pair, annotator) -> Judgment | None:
    return (
        Judgment.objects.filter(pair_id=pair.id, annotator_id=annotator.id)
        .select_related("grade", "tentative_grade")
        .order_by()
        .first()
    )


def judgment_neighbours(*, campaign: Campaign, annotator, judgment: Judgment | None) -> tuple[int | None, int | None]:
    """(previous, next) pair ids in the order the annotator first judged them: the history that Back
    and Forward walk. For a pair not judged yet the previous one is the latest judgment."""
    mine = Judgment.objects.filter(annotator_id=annotator.id, pair__campaign_id=campaign.id)
    if judgment is None:
        return mine.order_by("-id").values_list("pair_id", flat=True).first(), None
    prev_id = mine.filter(id__lt=judgment.id).order_by("-id").values_list("pair_id", flat=True).first()
    next_id = mine.filter(id__gt=judgment.id).order_by("id").values_list("pair_id", flat=True).first()
    return prev_id, next_id


def judgment_following(*, campaign: Campaign, annotator, judgment: Judgment) -> int | None:
    """The pair judged right after this one (forward in the history), if any."""
    return (
        Judgment.objects.filter(annotator_id=annotator.id, pair__campaign_id=campaign.id, id__gt=judgment.id)
        .order_by("id")
        .values_list("pair_id", flat=True)
        .first()
    )


def latest_query_id(*, campaign: Campaign, annotator) -> int | None:
    """The query of the annotator's latest judgment: where the queue resumes."""
    return (
        Judgment.objects.filter(annotator_id=annotator.id, pair__campaign_id=campaign.id)
        .order_by("-id")
        .values_list("pair__query_id", flat=True)
        .first()
    )


def judgments_of(
    *,
    campaign: Campaign,
    annotator,
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
        qs = qs.filter(
            Q(pair__query__text__icontains=text)
            | Q(pair__document__title__icontains=text)
            | Q(pair__document__docid__iexact=text)
            | Q(pair__query__qid__iexact=text)
            | Q(note__icontains=text)
        )
    return qs


# --------------------------------------------------------------------------- progress


@dataclass(frozen=True)
class JudgeProgress:
    query_done: int  # pooled pairs of the current query this annotator has judged
    query_total: int  # pooled pairs of the current query
    campaign_done: int  # pooled pairs with `redundancy` judgments
    campaign_total: int  # pooled pairs

    @property
    def campaign_percent(self) -> float:
        return 100.0 * self.campaign_done / self.campaign_total if self.campaign_total else 100.0


def _pooled() -> Q:
    # `pooled=True` compiles to a bare `WHERE pooled` that SQLite cannot match against an index column;
    # `pooled IN (true)` lets both SQLite and PostgreSQL walk pair_queue_idx (campaign, pooled, count).
    return Q(pooled__in=[True])


POOL_SIZE_TTL = 60.0  # seconds
# (campaign id, created) -> (expires at, size), per process. The creation time is part of the key so that a
# campaign id reused after a delete (SQLite reuses ids, tests roll back) never sees another's count.
_pool_sizes: dict[tuple, tuple[float, int]] = {}


def pool_size(*, campaign: Campaign) -> int:
    """Pooled pairs of the campaign. Counting 100,000 index entries on every judgment would cost more
    than the rest of the request, and the pool only changes on imports, so the count is kept in this
    process for a minute (the upload and settings pages forget it at once: ``pool_size_forget``)."""
    key, now = (campaign.id, campaign.created_at), time.monotonic()
    cached = _pool_sizes.get(key)
    if cached is not None and cached[0] > now:
        return cached[1]
    size = Pair.objects.filter(_pooled(), campaign_id=campaign.id).count()
    if len(_pool_sizes) > 1000:
        _pool_sizes.clear()
    _pool_sizes[key] = (now + POOL_SIZE_TTL, size)
    return size


def pool_size_forget(*, campaign: Campaign) -> None:
    _pool_sizes.pop((campaign.id, campaign.created_at), None)


def judge_progress(*, campaign: Campaign, annotator, query_id: int | None) -> JudgeProgress:
    """The figures on the judging page in one round trip: each one an index range that does not grow
    with the pool (the pool's size itself is cached, see ``pool_size``)."""
    campaign_done = Subquery(
        Pair.objects.filter(_pooled(), campaign_id=campaign.id, judgment_count__gte=campaign.redundancy)
        .order_by()
        .values("campaign_id")
        .annotate(n=Count("id"))
        .values("n")[:1]
    )
    if query_id is None:
        done = Pair.objects.filter(_pooled(), campaign_id=campaign.id, judgment_count__gte=campaign.redundancy)
        return JudgeProgress(0, 0, done.count(), pool_size(campaign=campaign))
    row = (
        Pair.objects.filter(query_id=query_id, pooled=True)
        .order_by()
        .aggregate(
            total=Count("id"),
            done=Count(
                "id", filter=Q(Exists(Judgment.objects.filter(pair_id=OuterRef("pk"), annotator_id=annotator.id)))
            ),
            campaign_done=Max(campaign_done),
        )
    )
    return JudgeProgress(row["done"], row["total"], row["campaign_done"] or 0, pool_size(campaign=campaign))


def judgments_count(*, campaign: Campaign, annotator) -> int:
    """How many pairs of the campaign the annotator has judged (pages off the judging path)."""
    return Judgment.objects.filter(annotator_id=annotator.id, pair__campaign_id=campaign.id).count()


def campaign_progress(*, campaign: Campaign) -> dict:
    """Pool-wide figures for the campaign page and the lead's progress page."""
    row = Pair.objects.filter(campaign_id=campaign.id, pooled=True).aggregate(
        pooled=Count("id"),
        touched=Count("id", filter=Q(judgment_count__gt=0)),
        complete=Count("id", filter=Q(judgment_count__gte=campaign.redundancy)),
        labelled=Count("id", filter=Q(label__isnull=False)),
        judgments=Sum("judgment_count"),
    )
    row["judgments"] = row["judgments"] or 0
    row["needed"] = row["pooled"] * campaign.redundancy
    row["percent"] = 100.0 * row["complete"] / row["pooled"] if row["pooled"] else 0.0
    row["queries"] = Query.objects.filter(campaign_id=campaign.id).count()
    row["unsure_open"] = (
        Pair.objects.filter(campaign_id=campaign.id, label__isnull=True, judgments__unsure=True).distinct().count()
    )
    return row


def annotators_progress(*, campaign: Campaign) -> list[dict]:
    """One row per member (and per past judge who is no longer a member): what they have done."""
    User = get_user_model()
    stats = {
        row["annotator_id"]: row
        for row in Judgment.objects.filter(pair__campaign_id=campaign.id)
        .values("annotator_id")
        .annotate(
            judgments=Count("id"),
            unsure=Count("id", filter=Q(unsure=True)),
            notes=Count("id", filter=~Q(note="")),
            seconds=Sum("seconds_spent"),
            last=Max("updated_at"),
        )
    }
    roles = dict(campaign.memberships.values_list("user_id", "role"))
    users = User.objects.filter(id__in=set(stats) | set(roles)).order_by("username")
    rows = []
    for user in users:
        s = stats.get(user.id, {})
        n = s.get("judgments", 0)
        rows.append(
            {
                "user": user,
                "role": roles.get(user.id),
                "judgments": n,
                "unsure": s.get("unsure", 0),
                "notes": s.get("notes", 0),
                "last": s.get("last"),
                "mean_seconds": (s.get("seconds") or 0) / n if n else None,
            }
        )
    return rows


# --- API


def campaign_roles(*, user) -> dict[int, str]:
    """{campaign id: role} of every campaign the user belongs to (superusers are leads everywhere anyway)."""
    if not user.is_authenticated:
        return {}
    return dict(Membership.objects.filter(user=user).values_list("campaign_id", "role"))


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
    # Imported here so that this section, appended for the API, leaves the module's header alone.
    from django.db import connection
    from django.db.models import BigIntegerField, ExpressionWrapper
    from django.db.models.lookups import In

    ids = pairs.order_by().values("id")
    if connection.vendor == "sqlite":
        return Q(In(ExpressionWrapper(F("pair_id") + 0, output_field=BigIntegerField()), ids))
    return Q(pair_id__in=ids)


def judgments_visible(*, user) -> QuerySet[Judgment]:
    """Judgments a user may read: everything in the campaigns they lead, their own in the others."""
    if not user.is_authenticated:
        return Judgment.objects.none()
    if user.is_superuser:
        return Judgment.objects.all()
    roles = campaign_roles(user=user)
    led = [cid for cid, role in roles.items() if role == Membership.Role.LEAD]
    judged = [cid for cid, role in roles.items() if role != Membership.Role.LEAD]
    in_led = _pair_in(Pair.objects.filter(campaign_id__in=led))
    if not judged:
        return Judgment.objects.filter(in_led)
    return Judgment.objects.filter(in_led | (Q(annotator=user) & _pair_in(Pair.objects.filter(campaign_id__in=judged))))


# Columns of a judgments export, in file order: (name in the file, ORM path).
JUDGMENT_EXPORT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "id"),
    ("pair", "pair_id"),
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


def judgment_export_rows(*, judgments: QuerySet[Judgment], chunk_size: int = 5000) -> Iterator[tuple]:
    """Rows of ``JUDGMENT_EXPORT_COLUMNS`` for already filtered and ordered judgments, streamed from the
    database a chunk at a time (a server-side cursor on PostgreSQL), so memory stays flat at any size."""
    paths = [path for _, path in JUDGMENT_EXPORT_COLUMNS]
    return judgments.values_list(*paths).iterator(chunk_size=chunk_size)


def system_rankings(*, system, queries_per_chunk: int = 200) -> Iterator:
    """A system's run as ``formats.Ranking`` objects in qid order, for a TREC run download.

    Read a chunk of queries at a time, resolving only that chunk's document ids, so memory stays bounded
    by the chunk however large the run."""
    # Imported here so that this section, appended for the API, leaves the module's header alone.
    import numpy as np

    from judging.formats import Ranking as RankedList
    from judging.models import Document, Ranking

    rows = (
        Ranking.objects.filter(system=system)
        .order_by("query__qid")
        .values_list("query__qid", "doc_ids", "scores")
        .iterator(chunk_size=queries_per_chunk)
    )
    batch: list[tuple[str, np.ndarray, np.ndarray]] = []

    def flush():
        ids = np.unique(np.concatenate([b[1] for b in batch])).tolist() if batch else []
        docids = {}
        for start in range(0, len(ids), 5000):  # SQLite allows a limited number of query parameters
            docids.update(Document.objects.filter(id__in=ids[start : start + 5000]).values_list("id", "docid"))
        for qid, doc_ids, scores in batch:
            yield RankedList(qid, [docids[i] for i in doc_ids.tolist()], scores)

    for qid, raw_ids, raw_scores in rows:
        batch.append((qid, np.frombuffer(bytes(raw_ids), dtype=np.int64), np.frombuffer(bytes(raw_scores))))
        if len(batch) == queries_per_chunk:
            yield from flush()
            batch = []
    yield from flush()
