"""The judging queue's writes: holding a pair on an annotator's screen (Assignment)."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.db.models import DateTimeField, Exists
from django.utils import timezone

from judging import selectors
from judging.compiled import Slots, compiled_update
from judging.models import (
    Assignment,
    Campaign,
    Pair,
    User,
)
from judging.services.judgments import hold_delete, pair_lock

ASSIGNMENT_MINUTES = 15


def _hold(*, campaign: Campaign, annotator: User, pair_id: int) -> bool:
    """Hold ``pair_id`` for ``annotator`` if it is still open to them, under the pair's row lock."""
    with transaction.atomic():
        pair_lock(pair_id=pair_id)
        if not selectors.pair_is_open(campaign=campaign, annotator_id=annotator.id, pair_id=pair_id):
            return False
        Assignment.objects.update_or_create(
            campaign=campaign,
            annotator=annotator,
            defaults={"pair_id": pair_id, "expires_at": timezone.now() + timedelta(minutes=ASSIGNMENT_MINUTES)},
        )
        return True


def pair_hold(*, campaign: Campaign, annotator: User, pair: Pair) -> bool:
    """Hold a pair the judging page showed (read-only, on a GET) for the annotator looking at it now.

    Holds are taken only by POST: a page's plain GET never writes, so a foreign page cannot take or
    refresh one. Returns False when the pair is no longer open to them (someone else took its last slot,
    or they judged it meanwhile)."""
    return _hold(campaign=campaign, annotator=annotator, pair_id=pair.id)


def pair_assign(*, campaign: Campaign, annotator: User, current_query_id: int | None = None, exclude=()):
    """Hand ``annotator`` the next pair of their queue and hold it for them (see Assignment).

    The choice (selectors.pair_next) is re-checked under the pair's row lock before the pair is held,
    so two annotators asking at the same moment are never both given the last open slot of a pair
    (redundancy); the loser of the race gets the next candidate. Returns selectors.NextPair.
    """
    passed: list[int] = []
    for _ in range(10):
        found = selectors.pair_next(
            campaign=campaign,
            annotator=annotator,
            current_query_id=current_query_id,
            exclude=[*exclude, *passed],
        )
        if found.pair is None:
            Assignment.objects.filter(campaign=campaign, annotator=annotator).delete()
            return found
        if _hold(campaign=campaign, annotator=annotator, pair_id=found.pair.id):
            return found
        passed.append(found.pair.id)
    return selectors.NextPair(None)


def pair_assign_locked(
    *, campaign: Campaign, annotator: User, current_query_id: int | None, exclude=(), judged: Pair
) -> selectors.NextPair | None:
    """pair_assign inside the transaction that has just recorded ``annotator``'s judgment of ``judged``
    (judgment_record(locked=True, keep_hold=True)): two statements in the usual case.

    The next pair is chosen and locked in one query (SKIP LOCKED: a pair another request holds locked is
    passed over, never waited for, so two such transactions cannot deadlock), and the annotator's hold
    moves to it with one UPDATE whose condition re-checks, in a snapshot taken after the lock, that the
    pair is still open to them. Returns None when this could not settle it (nothing unlocked is left,
    the queue mode is "pairs that matter most", or the pair was taken meanwhile): the hold on ``judged``
    is released, and the caller calls pair_assign once its transaction is committed."""
    if campaign.queue_mode != Campaign.QueueMode.MATTER:
        found = selectors.pair_next(
            campaign=campaign, annotator=annotator, current_query_id=current_query_id, exclude=exclude, lock=True
        )
        if found.pair is not None:
            moved = _hold_move(campaign=campaign, annotator=annotator, pair_id=found.pair.id)
            # No hold to move (the annotator's first pair here, or one released): take one.
            if moved or _hold(campaign=campaign, annotator=annotator, pair_id=found.pair.id):
                return found
    hold_release(annotator=annotator, pair=judged)
    return None


def _hold_move(*, campaign: Campaign, annotator: User, pair_id: int) -> int:
    """Move the annotator's hold in the campaign to ``pair_id`` if that pair is still open to them (one
    UPDATE, compiled once per process: judging.compiled); how many holds moved (0 or 1)."""
    overlap = bool(campaign.overlap_percent)

    def build():
        args = Slots({**selectors.QUEUE_FIELDS, "expires_at": DateTimeField()})
        holds = Assignment.objects.filter(campaign_id=args["campaign_id"], annotator_id=args["annotator_id"])
        is_open = Exists(selectors.open_pair_of(args, overlap=overlap))
        return holds.filter(is_open), {"pair_id": args["pair_id"], "expires_at": args["expires_at"]}

    values = selectors.queue_values(campaign=campaign, annotator_id=annotator.id, pair_id=pair_id)
    values["expires_at"] = values["now"] + timedelta(minutes=ASSIGNMENT_MINUTES)
    return compiled_update(("hold_move", overlap), build).rowcount(values)


def hold_release(*, annotator: User, pair: Pair) -> None:
    """Release the annotator's hold on ``pair`` (judged now: it must not count twice toward redundancy)."""
    hold_delete(annotator_id=annotator.id, pair_id=pair.id)
