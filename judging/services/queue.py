"""The judging queue's writes: holding a pair on an annotator's screen (Assignment), and "record + next"."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from django.db import transaction
from django.utils import timezone

from judging import selectors
from judging.access import Member
from judging.models import Assignment, Campaign, Judgment, Pair, User
from judging.selectors.queue_rules import user_id
from judging.services.judgments import (
    JudgmentRecorded,
    hold_delete,
    judgment_record,
    pair_lock,
    pair_lock_bounded,
)

ASSIGNMENT_MINUTES = 15
# Lost races for a pair in one request past which the log says so (it goes on looking).
LOST_RACES_LOGGED = 50

logger = logging.getLogger(__name__)


def _hold(*, campaign: Campaign, annotator: User, pair_id: int, wait: bool = True) -> bool:
    """Hold ``pair_id`` for ``annotator`` if it is still open to them, under the pair's row lock. ``wait``: False
    when the caller's transaction holds another pair's lock (a "record + next" in the request's transaction,
    judging.request_transaction): the lock is then asked for without waiting (pair_lock_bounded), so two such
    transactions cannot deadlock, and a pair another keeps locked is not held here (False). A pair found no longer
    open lets its lock go with this block's savepoint: the caller holds no pair it passed over."""
    with transaction.atomic():
        if wait:
            pair_lock(pair_id=pair_id)
        elif not pair_lock_bounded(pair_id=pair_id):
            return False
        if not selectors.pair_is_open(campaign=campaign, annotator_id=user_id(annotator), pair_id=pair_id):
            transaction.set_rollback(True)  # the row lock was taken in this block: it goes with it
            return False
        # One upsert on the one-hold-per-annotator constraint (update_or_create took a locking read, two
        # savepoints and an insert: five more statements on every "record + next" of a priority queue mode).
        hold = Assignment(
            campaign=campaign,
            annotator_id=user_id(annotator),
            pair_id=pair_id,
            expires_at=timezone.now() + timedelta(minutes=ASSIGNMENT_MINUTES),
        )
        Assignment.objects.bulk_create(
            [hold], update_conflicts=True, unique_fields=["campaign", "annotator"], update_fields=["pair", "expires_at"]
        )
        return True


def pair_hold(*, campaign: Campaign, annotator: User, pair: Pair) -> bool:
    """Hold a pair the judging page showed (read-only, on a GET) for the annotator looking at it now.

    Holds are taken only by POST: a page's plain GET never writes, so a foreign page cannot take or
    refresh one. Returns False when the pair is no longer open to them (someone else took its last slot,
    or they judged it meanwhile)."""
    return _hold(campaign=campaign, annotator=annotator, pair_id=pair.id)


def pair_assign(
    *,
    campaign: Campaign,
    annotator: User,
    current_query_id: int | None = None,
    exclude: Sequence[int] = (),
    wait: bool = True,
    progress: bool = False,
) -> selectors.NextPair:
    """Hand ``annotator`` the next pair of their queue and hold it for them (see Assignment).

    The choice (selectors.pair_next) is re-checked under the pair's row lock before the pair is held,
    so two annotators asking at the same moment are never both given the last open slot of a pair
    (redundancy); the loser of the race gets the next candidate. ``wait``: as _hold's (False inside a
    transaction that holds another pair's lock). Returns selectors.NextPair.
    """
    lost: list[int] = []
    while True:
        found = selectors.pair_next(
            campaign=campaign,
            annotator=annotator,
            current_query_id=current_query_id,
            exclude=exclude,
            lost=lost,
            progress=progress,
        )
        if found.pair is None:
            Assignment.objects.filter(campaign=campaign, annotator_id=user_id(annotator)).delete()
            return found
        if found.pair.id in lost:  # a broken invariant of pair_next, not the caller's: a 500 and a log line
            raise RuntimeError(f"the queue chose pair {found.pair.id} again after it was lost to another annotator")
        if _hold(campaign=campaign, annotator=annotator, pair_id=found.pair.id, wait=wait):
            return found
        # Another annotator took it between the choice and the hold: on to the next candidate, never to "done".
        # Each lost race passes a pair somebody else now holds or has judged, so the loop ends (the pool is
        # finite); with 50 annotators on one list's head it passes a few.
        if len(lost) == LOST_RACES_LOGGED:
            logger.warning(
                "%s lost %d races for a pair in campaign %s (%s); still looking",
                user_id(annotator),
                len(lost),
                campaign.slug,
                campaign.queue_mode,
            )
        lost.append(found.pair.id)


def pair_assign_locked(
    *,
    campaign: Campaign,
    annotator: User,
    current_query_id: int | None,
    exclude: Sequence[int] = (),
    judged: Pair,
    release: bool = True,
) -> selectors.NextPair | None:
    """pair_assign inside the transaction that has just recorded ``annotator``'s judgment of ``judged``
    (judgment_record(locked=True, keep_hold=True)): three statements in the usual case.

    The next pair is chosen and locked in one query (SKIP LOCKED: a pair another request holds locked is
    passed over, never waited for, so two such transactions cannot deadlock); a read in a snapshot taken
    after the lock re-checks that the pair is still open to them, and one UPDATE moves their hold to it.
    Returns None when this could not settle it (nothing unlocked is left, the queue mode serves from a
    priority list, a lead's focus is on, or the pair was taken meanwhile): the hold on ``judged`` is released,
    and the caller calls pair_assign once its transaction is committed. ``release=False``: the caller calls
    pair_assign in the same transaction, which moves that hold to the pair it finds or deletes it (nothing left),
    so it is left to it (one statement less a judgment); the annotator's own hold never closes a pair to them."""
    if selectors.priority_for(campaign.queue_mode) is None and campaign.queue_focus_id is None:
        found = selectors.pair_next(
            campaign=campaign, annotator=annotator, current_query_id=current_query_id, exclude=exclude, lock=True
        )
        if found.pair is not None:
            moved = _hold_move(campaign=campaign, annotator=annotator, pair_id=found.pair.id)
            # No hold to move (the annotator's first pair here, or one released): take one.
            if moved or _hold(campaign=campaign, annotator=annotator, pair_id=found.pair.id, wait=False):
                return found
    if release:
        hold_release(annotator=annotator, pair=judged)
    return None


def _hold_move(*, campaign: Campaign, annotator: User, pair_id: int) -> int:
    """Move the annotator's hold in the campaign to ``pair_id`` if that pair is still open to them, checked
    under the pair's lock (taken by the caller: every writer of a pair's holds and judgments takes it
    first, so nothing changes that answer until the commit); how many holds moved (0 or 1)."""
    if not selectors.pair_is_open(campaign=campaign, annotator_id=user_id(annotator), pair_id=pair_id):
        return 0
    return Assignment.objects.filter(campaign_id=campaign.id, annotator_id=annotator.id).update(
        pair_id=pair_id, expires_at=timezone.now() + timedelta(minutes=ASSIGNMENT_MINUTES)
    )


def hold_release(*, annotator: User, pair: Pair) -> None:
    """Release the annotator's hold on ``pair`` (judged now: it must not count twice toward redundancy)."""
    hold_delete(annotator_id=user_id(annotator), pair_id=pair.id)


@dataclass(frozen=True)
class RecordedNext:
    """What "record + next" did: the judgment recorded, and the pair the annotator goes on to."""

    recorded: JudgmentRecorded
    pair: Pair | None  # the next pair (its campaign, query and document loaded), or None: nothing left
    from_history: bool = False  # the pair judged after the one just changed, in the annotator's history
    judgment: Judgment | None = None  # the annotator's judgment of ``pair`` (a pair of the history)
    neighbours: tuple[int | None, int | None] | None = None  # public ids of Back and Forward (the history)
    was_skipped: bool = False  # the queue holds nothing else: a pair skipped earlier comes back


def judgment_record_next(
    *,
    member: Member,
    pair: Pair,
    annotator: User,
    grade: int | None,
    unsure: bool,
    tentative_grade: int | None,
    note: str,
    seconds_spent: float,
    version: str | None,
    exclude: Sequence[int] = (),
) -> RecordedNext:
    """The judging page's "record + next": record ``annotator``'s judgment of ``pair`` and choose (and hold)
    the pair they go on to. ``member``: their access.Member of the pair's campaign; ``exclude``: the pairs
    they skipped (they come back at the end of the queue).

    One transaction: the pair is locked, the judgment written and the pair's label refreshed
    (judgment_record), and then either the following pair of the annotator's history is read (they were
    changing an earlier judgment: on like a browser's Forward) or the next pair of the queue is chosen
    and the annotator's hold moved to it (pair_assign_locked). When the queue could not be settled inside
    the transaction, pair_assign does it after the commit. Raises JudgmentConflict, ValidationError and
    PermissionDenied as judgment_record does, having written nothing."""
    campaign = member.campaign
    # In the request's transaction (judging.request_transaction) pair_assign below runs before anything commits, and
    # it moves or deletes the annotator's hold itself: the hold on the judged pair need not be deleted first.
    in_request = transaction.get_connection().in_atomic_block
    with transaction.atomic():
        pair_lock(pair_id=pair.id)
        recorded = judgment_record(
            pair=pair,
            annotator=annotator,
            grade=grade,
            unsure=unsure,
            tentative_grade=tentative_grade,
            note=note,
            seconds_spent=seconds_spent,
            version=version,
            member=member,
            locked=True,
            keep_hold=True,
        )
        if not recorded.created:
            # A judgment changed on the way back through the history (the annotator holds no pair they have
            # judged, so there is no hold to release): on to the next pair of the history, with the
            # annotator's judgment of it, its neighbours and the progress figures read in the same query.
            following = selectors.judgment_following_pair(
                campaign=campaign, annotator=annotator, judgment=recorded.judgment
            )
            # (A following pair no longer pooled cannot be shown: on along the queue instead.)
            if following is not None and following.pooled:
                following.campaign = campaign
                return RecordedNext(
                    recorded,
                    following,
                    from_history=True,
                    judgment=cast(Any, following).judgment_of_annotator,  # read with it (judgment_following_pair)
                    neighbours=(pair.public_id, cast(Any, following).next_in_history),
                )
        found = pair_assign_locked(
            campaign=campaign,
            annotator=annotator,
            current_query_id=pair.query_id,
            exclude=exclude,
            judged=pair,
            release=not in_request,
        )
    if found is None:
        # in the request's transaction (judging.request_transaction) the judged pair's lock is still held: no wait
        found = pair_assign(
            campaign=campaign,
            annotator=annotator,
            current_query_id=pair.query_id,
            exclude=exclude,
            wait=not in_request,
            progress=True,  # the judging page shows them
        )
    if found.pair is not None:
        found.pair.campaign = campaign
    return RecordedNext(recorded, found.pair, was_skipped=found.was_skipped)
