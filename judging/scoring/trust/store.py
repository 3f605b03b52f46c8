"""What the trust measures keep in process memory: results per labels state, per-query parts patched per judgment.

Everything here is derived from the database and cheap to rebuild, so it lives in this process only and is
forgotten by ``caches_clear`` (tests and benchmarks) or, entry by entry, as newer labels states push it out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import numpy as np

from judging import runtime
from judging.scoring.cache import Leaderboard
from judging.scoring.memory import built_large

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D", bound="dict[Any, Any]")

LOCK = threading.Lock()
_KEEP_RESULTS = 64
_RESULTS: OrderedDict[tuple[object, ...], object] = runtime.keep(
    "trust.results",
    OrderedDict(),
    bound=_KEEP_RESULTS,
    invalidated_by="a newer labels state of the table (only the latest state's are kept)",
    lock=LOCK,
    group="trust",
)


def remember(store: OrderedDict[K, V], key: K, value: V, keep: int) -> V:
    """Keep ``value`` under ``key``, forgetting the least recently used entries beyond ``keep``."""
    built_large()  # what it replaces, and the temporaries it was made from, are memory to give back
    with LOCK:
        store[key] = value
        store.move_to_end(key)
        while len(store) > keep:
            store.popitem(last=False)
    return value


def recall(store: OrderedDict[K, V], key: K) -> V | None:
    """The value kept under ``key`` (now the most recently used), or None."""
    with LOCK:
        value = store.get(key)
        if value is not None:
            store.move_to_end(key)
        return value


# The labels state whose results are kept, per score table (Leaderboard.key), the tables most recent last. A
# result may hold a whole state's per-query parts (the bounds' (S, Q) arrays of every measure, 12.8 MB at 20
# systems x 5,000 queries): kept for every state up to _KEEP_RESULTS entries, one process held 184 MB of past
# states' parts after 25 judgments, each followed by the API's leaderboard (10M entries, the sizes of this
# module's stores). Labels only move forward, so a past state's results serve only a request that read the labels
# just before a judgment (which then computes its own again, from the latest per-query parts patched): only the
# latest state's are kept.
_KEEP_TABLES = 32
_LATEST: OrderedDict[str, str] = runtime.keep(
    "trust.latest_states",
    OrderedDict(),
    bound=_KEEP_TABLES,
    invalidated_by="a newer labels state of the table",
    lock=LOCK,
    group="trust",
)


def _state_seen(table: str, state: str) -> None:
    """Note ``state`` as the latest of ``table``, forgetting the results of its state before, and those of the
    tables beyond the latest :data:`_KEEP_TABLES` (under LOCK)."""
    before = _LATEST.pop(table, state)
    _LATEST[table] = state
    gone = {before} - {state}
    while len(_LATEST) > _KEEP_TABLES:
        gone.add(_LATEST.popitem(last=False)[1])
    if gone:
        for key in [k for k in _RESULTS if k[0] in gone]:
            del _RESULTS[key]


def cached(lb: Leaderboard, what: tuple[object, ...], compute: Callable[[], T]) -> T:
    """``compute()`` once per labels state (``lb.state``) and ``what``; kept for the table's (``lb.key``) latest
    labels state only."""
    state = lb.state
    key = (state, *what)
    got = recall(_RESULTS, key)
    if got is None:
        got = remember(_RESULTS, key, compute(), _KEEP_RESULTS)
        with LOCK:
            _state_seen(lb.key, state)
    return cast(T, got)


def recall_cached(lb: Leaderboard, what: tuple[object, ...]) -> bool:
    """Whether :func:`cached` holds a value of ``lb``'s labels state and ``what``."""
    with LOCK:
        return (lb.state, *what) in _RESULTS


@dataclass(frozen=True)
class _PerQuery:
    versions: np.ndarray  # (Q,) the labels versions the value was made for
    token: object
    value: object


_KEEP_PER_QUERY = 32
_PER_QUERY: OrderedDict[tuple[object, ...], _PerQuery] = runtime.keep(
    "trust.per_query_parts",
    OrderedDict(),
    bound=_KEEP_PER_QUERY,
    invalidated_by="labels versions (patched where they moved), or its token",
    lock=LOCK,
    group="trust",
)


def per_query(
    lb: Leaderboard,
    what: tuple[object, ...],
    *,
    token: object,
    build: Callable[[], T],
    patch: Callable[[T, np.ndarray], T],
    patch_queries: int,
) -> T:
    """A value made of one part per query of the campaign (every query, segment or not), at ``lb``'s labels.

    A new label changes its query's part only: the value kept for the table's latest labels versions
    is patched where they moved (``patch(old, dirty cube positions)``, which returns a new value and
    leaves ``old`` as it is, as other threads may be reading it) when at most ``patch_queries`` queries
    moved, and built whole (``build()``) otherwise, or when ``token`` (whatever else the parts depend on,
    compared with ==) changed. Kept per unsegmented table (``lb.base_key``) and ``what``, the latest only.
    """
    key = (lb.base_key, *what)
    versions = lb.table.versions
    got = recall(_PER_QUERY, key)
    if got is not None and got.token == token and got.versions.shape == versions.shape:
        dirty = np.flatnonzero(got.versions != versions)
        if not dirty.size:
            return cast(T, got.value)
        value = patch(cast(T, got.value), dirty) if dirty.size <= patch_queries else build()
    else:
        value = build()
    remember(_PER_QUERY, key, _PerQuery(versions.copy(), token, value), _KEEP_PER_QUERY)
    return value


# A part built for every query at once holds temporaries of several bytes per ranked entry for all of them (the
# ranked documents' ids of every system and query copied, float scores of every rank): 1.9 GB at 100M entries,
# in each worker that built its parts. Built this many ranked entries' queries at a time, the same parts (each
# query's is its own) take a bounded share of that.
BUILD_ENTRIES = 8_000_000


def query_chunks(n_queries: int, entries_per_query: int, align: int = 1) -> list[np.ndarray]:
    """The campaign's query positions in consecutive chunks of about :data:`BUILD_ENTRIES` ranked entries (a
    multiple of ``align`` queries each, at least one ``align``): what a whole build computes at a time."""
    size = max(BUILD_ENTRIES // max(entries_per_query, 1), 1)
    size = max(size // align, 1) * align
    return [np.arange(start, min(start + size, n_queries)) for start in range(0, n_queries, size)] or [np.arange(0)]


def caches_clear() -> None:
    """Forget every array and result the trust measures keep (the registry's group "trust": tests and
    benchmarks)."""
    runtime.caches_clear(group="trust")
