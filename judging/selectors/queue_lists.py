"""The pairs the queue serves from a list before its own order: a lead's focus (the pairs a search engine's snapshot
brought, judging.engine_models.QueueFocus) and a queue mode's priority list (judging.selectors.strategies), each
checked in its order against the open-pair rules (judging.selectors.queue_rules)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from django.db.models import QuerySet

from judging import runtime
from judging.compiled import Args, Slots, compiled_first_of, compiled_select
from judging.models import Campaign, Pair, QueueFocus
from judging.selectors import priority
from judging.selectors.progress import campaign_done, judge_progress_of, with_progress
from judging.selectors.queue_rules import PAIR_COLUMNS, QUEUE_FIELDS, open_pairs_of, pair_from_row, queue_values

FOCUS_KEPT = 256  # lead's focus lists kept per process

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
    return pair_of_priority(
        ids,
        campaign=campaign,
        annotator_id=annotator_id,
        exclude=exclude,
        list_name=f"focus:{campaign.queue_focus_id}",
        candidates=ids.size,
    )


# Candidate pairs of a priority list checked per request before the shuffled order takes over.
PRIORITY_CANDIDATES = 2000


def priority_open_of(args: Args, *, overlap: bool, exclude: bool) -> QuerySet[Pair, Any]:
    """The candidate pair ``candidate`` of a priority list if it is still open to the annotator (see
    open_pairs_of): the test pair_of_priority runs on each candidate in turn. In a busy campaign most candidates it
    passes over are held by others or complete, told by the pair's row alone (open_pairs_of's ``taken_first``), not
    by a probe of the annotator's judgment too (tests/judging/test_judging_pace.py counts the probes)."""
    qs = open_pairs_of(args, overlap=overlap, exclude=exclude, taken_first=True).filter(id=args["candidate"])
    # order_by(): Pair's default ordering would join the campaign, query and document for each candidate.
    return qs.order_by().values("id")[:1]


def pair_of_priority(
    ids: np.ndarray,
    *,
    campaign: Campaign,
    annotator_id: int,
    exclude: Sequence[int],
    list_name: str | None = None,
    candidates: int = PRIORITY_CANDIDATES,
    progress: bool = False,
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
    prefixes are kept per name); ``candidates``: how many of the list are checked at most. ``progress``: the pair
    comes with the annotator's progress figures on its query (``pair.progress``), read in the same statement (the
    judging page's "record + next": one statement a judgment less)."""
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
            chosen = {"pair_id": found[place % len(found)][0], "annotator_id": annotator_id}
            row = compiled_select(("pooled_pair", progress), lambda: _pooled_pair_of(progress=progress)).first(chosen)
            if row is None:
                return None
            pair, at = pair_from_row(row)
            if progress:
                pair.progress = judge_progress_of(
                    campaign=campaign,
                    query_done=row[at],
                    query_total=row[at + 1],
                    done=campaign_done(campaign=campaign),
                )
            return pair
    return None


def _pooled_pair_of(*, progress: bool) -> QuerySet[Pair, Any]:
    """The pooled pair ``pair_id`` as a row of PAIR_COLUMNS (compiled once: the ORM builds it in ~2 ms), with
    ``progress`` followed by ``annotator_id``'s figures on its query: query_done, query_total."""
    slots = Slots()
    qs = Pair.objects.filter(id=slots["pair_id"], pooled=True).order_by()
    if progress:
        return with_progress(qs, slots).values_list(*PAIR_COLUMNS, "query_done", "query_total")[:1]
    return qs.values_list(*PAIR_COLUMNS)[:1]
