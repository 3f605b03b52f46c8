"""What the trust measures keep in process memory: results per labels state, per-query parts patched per judgment.

Everything here is derived from the database and cheap to rebuild, so it lives in this process only and is
forgotten by ``caches_clear`` (tests and benchmarks) or, entry by entry, as newer labels states push it out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

from judging.scoring.cache import Leaderboard

T = TypeVar("T")

LOCK = threading.Lock()
_RESULTS: OrderedDict[tuple, object] = OrderedDict()
_KEEP_RESULTS = 64
_STORES: list[dict] = []  # every store made by process_store(), for caches_clear


def process_store(store: dict | None = None) -> dict:
    """A dict (or the given one) that ``caches_clear`` empties: a module's own process-memory cache."""
    store = {} if store is None else store
    _STORES.append(store)
    return store


def remember(store: OrderedDict, key, value: T, keep: int) -> T:
    """Keep ``value`` under ``key``, forgetting the least recently used entries beyond ``keep``."""
    with LOCK:
        store[key] = value
        store.move_to_end(key)
        while len(store) > keep:
            store.popitem(last=False)
    return value


def recall(store: OrderedDict, key):
    """The value kept under ``key`` (now the most recently used), or None."""
    with LOCK:
        value = store.get(key)
        if value is not None:
            store.move_to_end(key)
        return value


def cached(lb: Leaderboard, what: tuple, compute: Callable[[], T]) -> T:
    """``compute()`` once per labels state (``lb.state``) and ``what``."""
    key = (lb.state, *what)
    got = recall(_RESULTS, key)
    if got is None:
        got = remember(_RESULTS, key, compute(), _KEEP_RESULTS)
    return got


def caches_clear() -> None:
    """Forget every array and result kept here (for tests and benchmarks)."""
    with LOCK:
        _RESULTS.clear()
        for store in _STORES:
            store.clear()
