"""The head of a queue mode's priority list (judging.selectors.strategies): how far it is closed, to everyone
(complete) or to one annotator (complete, or judged by them), so that the queue's first-open check
(selectors.queue_lists.pair_of_priority) starts past it; and the chunks its candidates go to the database in.

Every annotator is served from the head of the list, which trails the judgments (judging.scoring.selection
computes it again every few seconds): without these, each request read every pair judged since, again."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connection

from judging import runtime
from judging.compiled import compiled_sql, id_list_slot, int_slot
from judging.models import Campaign, Judgment, Pair
from judging.scoring.selection import note_asking

# Candidate pairs of a priority list passed to the database per statement: first PRIORITY_FIRST_CHUNK (the first open
# pair, or the end of a prefix, is nearly always among them: each statement's ids are written out and parsed as one
# array, ~0.1 ms of the app's CPU and the database's for 500), then PRIORITY_CHUNK at a time. In a busy campaign the
# open pairs start past those the other annotators hold, one each (passed over on their own row:
# selectors.queue_lists.priority_open_of): with 50 annotators and a first chunk of 50, a second statement followed
# at a third of the checks on the load bench.
PRIORITY_FIRST_CHUNK = 200
PRIORITY_CHUNK = 500


def chunks(start: int, end: int) -> Iterator[tuple[int, int]]:
    """(from, to) positions of the candidates from ``start`` to ``end``, PRIORITY_FIRST_CHUNK then PRIORITY_CHUNK."""
    at, size = start, PRIORITY_FIRST_CHUNK
    while at < end:
        yield at, min(at + size, end)
        at, size = at + size, PRIORITY_CHUNK


def spread(campaign_id: int, annotator_id: int) -> int:
    """The place among the first open pairs of a priority list this annotator takes (0: the first), noting that they
    asked now (judging.scoring.selection.note_asking). Annotators asking at the same moment all start from the head
    of the same list, and all but one lose the race for its first open pair (services.queue.pair_assign checks again
    under the pair's lock) and ask again: on the load bench (50 annotators, no think time) 2.8 lost races a judgment
    in mtc, each a few more statements and commits. In a busy campaign each takes the (id mod SPREAD_WIDTH)-th of
    the first SPREAD_WIDTH open pairs instead: the order bends by a few places among pairs of nearly the same
    priority, and a team of one or a few is served in its exact order."""
    busy = note_asking(campaign_id, annotator_id)
    return annotator_id % SPREAD_WIDTH if busy else 0


SPREAD_WIDTH = 8


@dataclass
class _Prefix:
    """How far the head of one priority list is closed (see complete_prefix, own_prefix)."""

    ids: np.ndarray  # the list (the very array the queue mode returned)
    redundancy: int
    end: int  # ids[:end] are closed: pairs with at least ``redundancy`` judgments (or judged by the annotator),
    # or pairs that no longer exist


# (campaign id, created, queue mode) -> _Prefix, per process.
_PREFIX_LOCK = threading.Lock()
_PREFIXES: dict[tuple[int, Any, str], _Prefix] = runtime.keep(
    "queue.complete_prefixes",
    {},
    bound=None,
    grows_with="campaign and queue mode or lead's focus",
    invalidated_by="a new list object of the mode (its prefix starts again)",
    lock=_PREFIX_LOCK,
)


def complete_prefix(ids: np.ndarray, *, campaign: Campaign, end: int, list_name: str | None = None) -> int:
    """How many pairs at the head of the priority list ``ids`` (up to ``end``) are complete: judged by as many
    annotators as the campaign asks for, so open to nobody (outside an overlap sample, which keeps them open:
    there the answer is 0). A mode's list trails the judgments (judging.scoring.selection computes it again
    every few seconds, and every annotator is served from its head), so its head fills with pairs judged since:
    without this every request of every annotator read each of them again, hundreds of pair rows a judgment.

    A pair's judgment count never falls while its judgments stay (only a deleted judgment lowers it, and that
    moves the labels, so the modes compute a new list), so what was found complete stays complete for this list:
    the prefix is kept per process for the list object and the campaign's redundancy, and only the pairs past
    it are read, once, by one compiled statement that stops at the first pair still open to someone. Which pair
    the queue serves does not change: the annotator is given the first open pair of ids[:end] as before.
    ``list_name``: the list's name when it is not the queue mode's (a lead's focus)."""
    if campaign.overlap_percent or not ids.size:
        return 0
    key = (campaign.id, campaign.created_at, list_name or campaign.queue_mode)
    return _extended(_PREFIXES, key, ids, campaign=campaign, start=0, end=end, annotator_id=None)


# (campaign id, created, queue mode, annotator id) -> _Prefix of the pairs closed to that annotator, per process.
_OWN_PREFIXES: dict[tuple[int, Any, str, int], _Prefix] = runtime.keep(
    "queue.own_prefixes",
    {},
    bound=None,
    grows_with="campaign, queue mode or lead's focus, and annotator",
    invalidated_by="a new list object of the mode (its prefix starts again)",
    lock=_PREFIX_LOCK,
)


def own_prefix(
    ids: np.ndarray, *, campaign: Campaign, annotator_id: int, start: int, end: int, list_name: str | None = None
) -> int:
    """How many pairs at the head of the priority list ``ids`` (up to ``end``; the first ``start`` are known
    complete) are closed to this annotator for as long as the list lasts: complete (outside an overlap sample),
    or judged by them. With a redundancy above one the list's head fills with pairs the annotator has judged and
    others have not yet: every request of theirs read each of those again (a few hundred pair and judgment rows
    once they had judged a few hundred pairs, bench/judge_bench.py), where now only the pairs past this prefix
    are read, once.

    Sound for the same reason as complete_prefix: a judgment stays until it is deleted, which moves the labels,
    so the modes compute a new list (kept per process for the list object, the annotator and the redundancy).
    ``list_name``: as for complete_prefix."""
    if not ids.size:
        return start
    if campaign.redundancy <= 1 and not campaign.overlap_percent:
        # One judgment a pair: a pair the annotator judged has a judgment (theirs counts, a model judge's does not:
        # services.judgments) and is complete, so the complete prefix is theirs too; one statement a request less.
        return start
    key = (campaign.id, campaign.created_at, list_name or campaign.queue_mode, annotator_id)
    return _extended(_OWN_PREFIXES, key, ids, campaign=campaign, start=start, end=end, annotator_id=annotator_id)


def _extended(
    store: dict[Any, _Prefix],
    key: tuple[Any, ...],
    ids: np.ndarray,
    *,
    campaign: Campaign,
    start: int,
    end: int,
    annotator_id: int | None,
) -> int:
    """The prefix of ``ids`` kept in ``store`` under ``key`` for this list and redundancy, read on from where it
    ended (or from ``start``, known to be in it) up to ``end`` and kept again: closed to everyone, or with
    ``annotator_id`` to that annotator."""
    redundancy = campaign.redundancy
    with _PREFIX_LOCK:
        kept = store.get(key)
    kept_end = kept.end if kept is not None and kept.ids is ids and kept.redundancy == redundancy else 0
    if annotator_id is None:
        query = compiled_sql(("priority_incomplete",), lambda: _first_open_sql(annotator=False))
        values: dict[str, Any] = {"redundancy": redundancy}
    else:
        query = compiled_sql(("priority_open_to",), lambda: _first_open_sql(annotator=True))
        # In an overlap sample a complete pair stays open to those who have not judged it: only their judgment
        # closes it to them.
        values = {"redundancy": _INT_MAX if campaign.overlap_percent else redundancy, "annotator_id": annotator_id}
    at = _prefix_end(query, values, ids, start=max(start, min(kept_end, end)), end=end)
    with _PREFIX_LOCK:
        now = store.get(key)
        if now is None or now.ids is not ids or now.redundancy != redundancy or now.end < at:
            if len(store) > 10_000:
                store.clear()
            store[key] = _Prefix(ids, redundancy, at)
    return at


_INT_MAX = 2**31 - 1


def _prefix_end(query: Any, values: dict[str, Any], ids: np.ndarray, *, start: int, end: int) -> int:
    """Where the prefix of ``ids`` that ``query`` passes over ends, looking from ``start`` (known to be in it)
    up to ``end``: ``query`` gives the position in a chunk of candidates of the first that ends it."""
    for at, to in chunks(start, end):
        found = query.first({**values, "candidates": ids[at:to]})
        if found is not None:
            return at + int(found[0])
    return max(start, end)


def _first_open_sql(*, annotator: bool) -> tuple[str, tuple[Any, ...]]:
    """The prefixes' statement: the position (from 0) in ``candidates`` of the first pair that exists and has fewer
    than ``redundancy`` judgments (and, with ``annotator``, none by ``annotator_id``: looked up by the judgments'
    unique key). Each candidate is tested by a scalar subquery (a pair's row by its key), which the database
    evaluates in the list's order, stopping at the first that passes: written as EXISTS, the planner was free to
    join the list to the pairs (a hash join on a small table) and lose its order."""
    table, count = Pair._meta.db_table, Pair._meta.get_field("judgment_count").column
    if connection.vendor == "postgresql":
        source, position, ref = "unnest(%s::bigint[]) WITH ORDINALITY AS c(id, n)", "c.n - 1", "c.id"
    else:
        source, position, ref = "json_each(%s) AS c", "c.key", "c.value"
    test = f'(SELECT p."{count}" FROM "{table}" p WHERE p."id" = {ref}) < %s'
    params = [id_list_slot("candidates"), int_slot("redundancy")]
    if annotator:
        judgments = Judgment._meta.db_table
        # a scalar subquery too: NOT EXISTS let PostgreSQL's plan made without values read the annotator's every
        # judgment into a hash (an anti-join) instead of probing the one key per candidate
        mine = f'SELECT 1 FROM "{judgments}" j WHERE j."pair_id" = {ref} AND j."annotator_id" = %s LIMIT 1'
        test += f" AND ({mine}) IS NULL"
        params.append(int_slot("annotator_id"))
    return f"SELECT {position} FROM {source} WHERE {test} LIMIT 1", tuple(params)
