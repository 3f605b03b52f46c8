"""Judgments, adjudications and gold labels, and the per-pair labels aggregated from them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from django.contrib.auth.models import User as Account
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import DEFAULT_DB_ALIAS, IntegrityError, OperationalError, transaction
from django.db.models import Exists, Field, OuterRef, QuerySet, Subquery
from django.utils.translation import gettext as _

from judging.access import Member, lead_required, membership_role
from judging.aggregation import aggregate_grades
from judging.compiled import Args, Slots, compiled_delete, compiled_select, compiled_update
from judging.labels import labels_bump, labels_refresh
from judging.models import (
    Adjudication,
    AnnotatorProfile,
    Assignment,
    Campaign,
    Grade,
    Judgment,
    JudgmentRevision,
    Membership,
    Pair,
    User,
)


def pair_lock(*, pair_id: int) -> None:
    """Lock the pair's row (inside a transaction): every writer of a pair's judgments and label takes this
    lock first. Pair.DoesNotExist if there is no such pair. Compiled once per process (judging.compiled): it
    runs once or twice in every judgment, where the ORM spent ~0.4 ms of CPU building it each time."""
    if not transaction.get_connection().in_atomic_block:
        raise transaction.TransactionManagementError("select_for_update cannot be used outside of a transaction.")
    query = compiled_select(("pair_lock",), _pair_lock_of)
    if query.first({"pair_id": pair_id}) is None:
        raise Pair.DoesNotExist("Pair matching query does not exist.")


def _pair_lock_of() -> QuerySet[Pair, Any]:
    return Pair.objects.select_for_update().filter(id=Slots()["pair_id"]).order_by().values_list("id")[:1]


#: pair_lock_bounded's tries and the pause between them: a pair's lock is held for a judgment's few milliseconds.
LOCK_TRIES = 5
LOCK_PAUSE_SECONDS = 0.02
LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL's SQLSTATE for a NOWAIT lock another transaction holds


def pair_lock_bounded(*, pair_id: int) -> bool:
    """pair_lock for a transaction that may already hold other rows (judging.request_transaction: the pair just
    judged): the lock is asked for without waiting (NOWAIT), LOCK_TRIES times LOCK_PAUSE_SECONDS apart, so such a
    transaction never waits in the lock manager for a row while holding another, and two cannot deadlock. True
    once locked; False when another transaction kept it locked throughout (the caller passes the pair over).
    Pair.DoesNotExist if there is no such pair."""
    query = compiled_select(("pair_lock_nowait",), _pair_lock_nowait_of)
    for attempt in range(LOCK_TRIES):
        try:
            with transaction.atomic():  # a refused NOWAIT aborts its statement's savepoint, not the transaction
                row = query.first({"pair_id": pair_id})
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != LOCK_NOT_AVAILABLE:
                raise
            if attempt + 1 < LOCK_TRIES:
                time.sleep(LOCK_PAUSE_SECONDS)
            continue
        if row is None:
            raise Pair.DoesNotExist("Pair matching query does not exist.")
        return True
    return False


def _pair_lock_nowait_of() -> QuerySet[Pair, Any]:
    return Pair.objects.select_for_update(nowait=True).filter(id=Slots()["pair_id"]).order_by().values_list("id")[:1]


def hold_delete(*, annotator_id: int, pair_id: int) -> None:
    """Release the annotator's hold on the pair, if they hold it."""
    query = compiled_delete(
        ("hold_delete",),
        lambda: Assignment.objects.filter(annotator_id=Slots()["annotator_id"], pair_id=Slots()["pair_id"]),
    )
    query.run({"annotator_id": annotator_id, "pair_id": pair_id})


def _grade_of(campaign: Campaign, value: int | None, what: str) -> Grade | None:
    """The campaign's grade of this value (``_grade_in`` over the campaign's scale, read in one query)."""
    if value is None:
        return None
    return _grade_in(list(Grade.objects.filter(campaign=campaign)), value, what)


NOTE_MAX = 5000


def judgment_intent(
    *, grade: int | None, unsure: bool | None, tentative_grade: int | None, note: str | None = ""
) -> dict[str, Any]:
    """The values a judgment will be stored with, or a ValidationError naming the field at fault.

    A confident judgment has a grade and no tentative grade. An unsure one has no grade and may carry a
    tentative grade; a ``grade`` sent with ``unsure`` (a number key pressed after ``u``) is taken as the
    tentative grade, but not when a tentative grade is sent as well: which one was meant is unclear.
    """
    unsure = bool(unsure)
    if unsure and grade is not None:
        if tentative_grade is not None:
            raise ValidationError(
                {"grade": _("an unsure judgment has no grade: send the tentative grade alone, or drop unsure")}
            )
        grade, tentative_grade = None, grade
    if not unsure and grade is None:
        raise ValidationError({"grade": _("choose a grade, or mark the pair unsure")})
    if not unsure and tentative_grade is not None:
        raise ValidationError({"tentative_grade": _("a tentative grade goes only with unsure")})
    note = (note or "").strip()
    if len(note) > NOTE_MAX:
        raise ValidationError({"note": _("a note can be at most %(limit)s characters") % {"limit": f"{NOTE_MAX:,}"}})
    return {"grade": grade, "unsure": unsure, "tentative_grade": tentative_grade, "note": note}


class JudgmentRecorded(tuple[Judgment, bool]):
    """What judgment_record returns: unpacks as ``(judgment, changed)`` like before, and says in
    ``created`` whether this very call created the judgment. Of several identical first posts racing for
    one pair, exactly one creates it (the pair lock orders them); the API answers 201 to that one only.
    """

    created: bool

    def __new__(cls, judgment: Judgment, changed: bool, *, created: bool) -> JudgmentRecorded:
        recorded = super().__new__(cls, (judgment, changed))
        recorded.created = created
        return recorded

    @property
    def judgment(self) -> Judgment:
        return self[0]

    @property
    def changed(self) -> bool:
        return self[1]


class JudgmentConflict(Exception):
    """The annotator's judgment changed after the form was drawn (another tab, the API) and the new choice
    differs from it: nothing was saved. ``judgment`` is the judgment as it stands."""

    def __init__(self, judgment: Judgment) -> None:
        super().__init__("the judgment changed since the form was shown")
        self.judgment = judgment


def judgment_version(judgment: Judgment | None) -> str:
    """What a judging form carries to detect a change made elsewhere meanwhile ("" for no judgment yet)."""
    return judgment.updated_at.isoformat() if judgment else ""


def _grade_in(grades: Sequence[Grade], value: int | None, what: str) -> Grade | None:
    if value is None:
        return None
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise ValidationError(
            {what: _("%(field)s must be a whole number, not %(value)s") % {"field": what, "value": repr(value)}}
        ) from None
    for grade in grades:
        if grade.value == value:
            return grade
    allowed = ", ".join(str(g.value) for g in grades)
    raise ValidationError(
        {what: _("%(value)s is not on this campaign's scale (%(allowed)s)") % {"value": value, "allowed": allowed}}
    )


def judgment_record(
    *,
    pair: Pair,
    annotator: User,
    grade: int | None = None,
    unsure: bool = False,
    tentative_grade: int | None = None,
    note: str = "",
    seconds_spent: float = 0.0,
    version: str | None = None,
    member: Member | None = None,
    locked: bool = False,
    keep_hold: bool = False,
) -> JudgmentRecorded:
    """Record or change ``annotator``'s judgment of ``pair``; returns (judgment, changed), whose
    ``created`` tells whether this call created the judgment.

    A confident judgment needs a grade on the campaign's scale. An unsure one has no grade but may carry
    a tentative grade (a ``grade`` sent with ``unsure`` is taken as the tentative grade). Recording the
    same values again (a double key press, a retried request) changes nothing and adds no revision.
    Every change is kept as a revision, and the pair's label is refreshed in the same transaction.

    ``version`` (a judging form's, see ``judgment_version``): when the judgment changed since and the
    new values differ from it, raise JudgmentConflict instead of saving. ``member``: the annotator's
    ``access.Member`` of the pair's campaign when the caller has it (spares the membership lookup; its
    grades, when loaded, spare reading the scale). ``locked``: the caller has locked the pair
    (``pair_get(lock=True)``) in its own transaction, which this joins. ``keep_hold``: the caller moves
    the annotator's hold on to their next pair in that transaction, so it is not released here.
    """
    campaign = pair.campaign
    role: str | None
    grades: list[Grade] | None
    if member is not None and member.campaign.id == campaign.id:
        role, grades = member.role, member.grades
    else:
        role, grades = membership_role(campaign=campaign, user=annotator), None
    if role is None or not isinstance(annotator, Account):  # not a member, or not signed in
        raise PermissionDenied(_("you are not a member of this campaign"))
    intent = judgment_intent(grade=grade, unsure=unsure, tentative_grade=tentative_grade, note=note)
    try:
        seconds_spent = max(0.0, min(float(seconds_spent or 0), 24 * 3600.0))
    except (TypeError, ValueError):
        raise ValidationError({"seconds_spent": _("seconds_spent must be a number")}) from None
    if grades is None:
        grades = list(Grade.objects.filter(campaign_id=campaign.id).order_by("value"))
    grade_obj = _grade_in(grades, intent["grade"], "grade")
    tentative_obj = _grade_in(grades, intent["tentative_grade"], "tentative_grade")
    write = {
        "pair": pair,
        "annotator": annotator,
        "grades": grades,
        "grade": grade_obj,
        "unsure": intent["unsure"],
        "tentative": tentative_obj,
        "note": intent["note"],
        "seconds": seconds_spent,
        "version": version,
        "keep_hold": keep_hold,
    }
    if locked:
        if not transaction.get_connection().in_atomic_block:
            raise AssertionError("locked=True: call inside the transaction that locked the pair")
        return _judgment_write(**write)
    for attempt in range(3):
        try:
            with transaction.atomic():
                # Lock the pair first: every writer of this pair's judgments and label queues here, so
                # the label is recomputed from a consistent set and no revision is lost.
                pair_lock(pair_id=pair.id)
                return _judgment_write(**write)
        except IntegrityError:
            # Only reachable where the pair lock is not honoured (SQLite has no row locks but serializes
            # writers); a concurrent first judgment by the same annotator won the insert: retry as an update.
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


# What _judgment_write reads of a locked pair in one query: the pair's stored label and count, the
# campaign's policy, a lead's adjudication, and every judgment of the pair (LEFT JOIN: one row of NULLs
# when there is none) with whether its annotator is a model judge.
_PAIR_COLUMNS = ("query_id", "label", "judgment_count", "adjudicated", "campaign__aggregation", "adjudication_value")
# Judgment's fields in their order, as Judgment.from_db takes them (the pair's read gives all but pair_id).
_JUDGMENT_FIELDS = [f.attname for f in Judgment._meta.concrete_fields]
_JUDGMENT_COLUMNS = (
    "id",
    "annotator_id",
    "grade_id",
    "unsure",
    "tentative_grade_id",
    "note",
    "seconds_spent",
    "created_at",
    "updated_at",
    "template_id",  # a model judge's prompt version (judging.judge_models)
)


_PAIR_LABEL = ("label", "judgment_count", "adjudicated")


def pair_label_of() -> tuple[QuerySet[Pair, Pair], dict[str, Any]]:
    slots = Slots({name: cast(Field[Any, Any], Pair._meta.get_field(name)) for name in _PAIR_LABEL})
    values = {name: slots[name] for name in _PAIR_LABEL}
    return Pair.objects.filter(id=slots["pair_id"]), values


def pair_state_of(args: Args) -> QuerySet[Pair, tuple[Any, ...]]:
    """_judgment_write's read of the locked pair, from named values (pair_id, annotator_id): _PAIR_COLUMNS,
    whether the annotator is a model judge, then one row per judgment: _JUDGMENT_COLUMNS and its annotator's
    kind (LEFT JOIN: one row of NULLs when there is none)."""
    model_ids = AnnotatorProfile.objects.filter(kind=AnnotatorProfile.Kind.MODEL).values("user_id")
    return (
        Pair.objects.filter(id=args["pair_id"])
        .order_by()
        .annotate(
            adjudication_value=Subquery(
                Adjudication.objects.filter(pair_id=OuterRef("pk")).order_by().values("grade__value")[:1]
            ),
            annotator_is_model=Exists(model_ids.filter(user_id=args["annotator_id"])),
        )
        .values_list(
            *_PAIR_COLUMNS,
            "annotator_is_model",
            *(f"judgments__{c}" for c in _JUDGMENT_COLUMNS),
            "judgments__annotator__annotator_profile__kind",
        )
    )


def pair_state_rows(*, pair_id: int, annotator_id: int) -> list[list[Any]]:
    """pair_state_of's rows. One of the judging page's hottest reads, compiled once per process
    (judging.compiled): the ORM spends ~1.8 ms of CPU building this query, the compiled one ~0.1 ms."""
    query = compiled_select(("pair_state",), lambda: pair_state_of(Slots()))
    return query.rows({"pair_id": pair_id, "annotator_id": annotator_id})


def _judgment_write(
    *,
    pair: Pair,
    annotator: Account,
    grades: Sequence[Grade],
    grade: Grade | None,
    unsure: bool,
    tentative: Grade | None,
    note: str,
    seconds: float,
    version: str | None,
    keep_hold: bool,
) -> JudgmentRecorded:
    """judgment_record's writes, under the pair's lock: the judgment, its revision, the hold, the pair's
    label and count, the query's labels version. The label is computed from the judgments read once under
    the lock plus the one written here (the same aggregation labels_refresh runs), not read back.

    One function: every write under the pair's lock, in one order (the judgment, its revision, the hold, the
    label, the version), each using what the one read before it found.
    """
    rows = pair_state_rows(pair_id=pair.id, annotator_id=annotator.id)
    query_id, stored_label, stored_count, stored_adjudicated, policy, adjudication, me_model = rows[0][:7]
    by_id = {g.id: g for g in grades}
    judgment: Judgment | None = None
    others: list[tuple[int | None, bool]] = []  # (grade value or None, unsure) of other people's judgments
    for row in rows:
        j = dict(zip(_JUDGMENT_COLUMNS, row[7:-1], strict=True))
        if j["id"] is None:
            continue
        if j["annotator_id"] == annotator.id:
            j["pair_id"] = pair.id
            judgment = Judgment.from_db(DEFAULT_DB_ALIAS, _JUDGMENT_FIELDS, [j[name] for name in _JUDGMENT_FIELDS])
            judgment.pair, judgment.annotator = pair, annotator
            judgment.grade = by_id.get(j["grade_id"])
            judgment.tentative_grade = by_id.get(j["tentative_grade_id"])
        elif row[-1] != AnnotatorProfile.Kind.MODEL:
            others.append((by_id[j["grade_id"]].value if j["grade_id"] else None, j["unsure"]))

    revision = JudgmentRevision(
        changed_by=annotator,
        new_grade=grade.value if grade else None,
        new_unsure=unsure,
        new_tentative_grade=tentative.value if tentative else None,
        new_note=note,
        seconds_spent=seconds,
    )
    created = judgment is None
    if judgment is not None:
        old = (judgment.grade_id, judgment.unsure, judgment.tentative_grade_id, judgment.note)
        new = (grade.id if grade else None, unsure, tentative.id if tentative else None, note)
        if version is not None and version != judgment_version(judgment) and old != new:
            raise JudgmentConflict(judgment)
        if old == new:
            return JudgmentRecorded(judgment, False, created=False)
        revision.old_grade = judgment.grade.value if judgment.grade else None
        revision.old_unsure = judgment.unsure
        revision.old_tentative_grade = judgment.tentative_grade.value if judgment.tentative_grade else None
        revision.old_note = judgment.note
        judgment.grade, judgment.unsure, judgment.tentative_grade, judgment.note = grade, unsure, tentative, note
        judgment.seconds_spent += seconds
        judgment.save(update_fields=["grade", "unsure", "tentative_grade", "note", "seconds_spent", "updated_at"])
    else:
        judgment = Judgment.objects.create(
            pair=pair,
            annotator=annotator,
            grade=grade,
            unsure=unsure,
            tentative_grade=tentative,
            note=note,
            seconds_spent=seconds,
        )
    revision.judgment = judgment
    revision.save()
    humans = others if me_model else [*others, (grade.value if grade else None, unsure)]
    confident = [value for value, is_unsure in humans if not is_unsure]
    if adjudication is not None:
        label = adjudication
    elif confident:
        label = int(aggregate_grades(np.zeros(len(confident)), np.array(confident), policy=policy)[1][0])
    else:
        label = None
    fresh = (label, len(humans), adjudication is not None)
    if fresh != (stored_label, stored_count, stored_adjudicated):
        update = compiled_update(("pair_label",), pair_label_of)
        update.run({"pair_id": pair.id, "label": fresh[0], "judgment_count": fresh[1], "adjudicated": fresh[2]})
    # Any change can move the label under some other aggregation policy: the leaderboard rescores the query.
    labels_bump(campaign_id=pair.campaign_id, query_ids=[query_id])
    if not keep_hold:
        # The pair is judged now: the annotator's hold on it must not count twice toward redundancy. Last, as
        # the judging page moves its hold after the query's version: every writer locks pair, query, hold in
        # that order, so an annotator posting from the page and the API at once cannot deadlock.
        hold_delete(annotator_id=annotator.id, pair_id=pair.id)
    return JudgmentRecorded(judgment, True, created=created)


@transaction.atomic
def adjudication_set(*, pair: Pair, lead: User, grade: int, note: str = "") -> Adjudication:
    """A lead decides a pair's label; it wins over the annotators' judgments until removed."""
    if membership_role(campaign=pair.campaign, user=lead) != Membership.Role.LEAD:
        raise PermissionDenied(_("only a lead of this campaign can adjudicate"))
    grade_obj = _grade_of(pair.campaign, grade, "grade")
    adjudication, _created = Adjudication.objects.update_or_create(
        pair=pair, defaults={"grade": grade_obj, "decided_by": lead, "note": (note or "").strip()}
    )
    labels_refresh(campaign=pair.campaign, pair_ids=[pair.id])
    return adjudication


@transaction.atomic
def adjudication_remove(*, pair: Pair, lead: User) -> bool:
    """Withdraw a lead's decision on a pair: its label goes back to the aggregated judgments (and the pair
    back to the review queue if it is still unsure or disputed). Returns whether there was a decision."""
    lead_required(campaign=pair.campaign, user=lead, what=_("withdraw an adjudication"))
    # Same lock as judgment_record: the label is recomputed from a consistent set of judgments.
    Pair.objects.select_for_update().filter(id=pair.id).order_by().values_list("id", flat=True).get()
    deleted, _per_model = Adjudication.objects.filter(pair=pair).delete()
    if deleted:
        labels_refresh(campaign=pair.campaign, pair_ids=[pair.id])
    return bool(deleted)


def gold_label_set(*, pair: Pair, lead: User, grade: int | None) -> Pair:
    """Give a pair a gold label (a grade on the campaign's scale), or take it away with ``grade=None``.

    Gold labels measure each annotator's accuracy; they are not labels the scorer uses and never change
    Pair.label (a lead who wants the gold grade scored adjudicates the pair)."""
    lead_required(campaign=pair.campaign, user=lead, what=_("set gold labels"))
    grade_obj = _grade_of(pair.campaign, grade, "grade")
    value = grade_obj.value if grade_obj is not None else None
    Pair.objects.filter(id=pair.id).update(gold_label=value)
    pair.gold_label = value
    return pair
