"""Freed memory goes back to the system after requests that built scores' arrays.

A leaderboard request after a judgment makes and drops temporaries of tens of megabytes (ranked labels of the
judged queries, per-query parts, the JSON). glibc's allocator keeps what such requests freed inside its heaps
for reuse, so a worker's resident memory grew by 60 MB at 20M ranked entries over what it actually held
(tracemalloc against /proc/self/smaps_rollup, bench/scale_bench.py). ``malloc_trim(0)`` hands those pages back;
it took 6 ms there. It runs when a request has finished (the response is sent), at most every
:data:`TRIM_EVERY` seconds per process, and only after code here marked that it built something large.
On a system without glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
from typing import Any

TRIM_EVERY = 5.0  # seconds between two trims of one process

_LOCK = threading.Lock()
_state = {"built": False, "last": -TRIM_EVERY}


def _load_trim() -> Any:
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


_MALLOC_TRIM = _load_trim()


def built_large() -> None:
    """Note that this process built (and will drop) large arrays: the next finished request trims."""
    _state["built"] = True


def _trim() -> None:
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def request_finished_trim(sender: object = None, **kwargs: object) -> bool:
    """The request_finished receiver: trim when something large was built and the last trim is old enough.
    Returns whether it trimmed."""
    if not _state["built"]:
        return False
    now = time.monotonic()
    with _LOCK:
        if now - float(_state["last"]) < TRIM_EVERY:
            return False
        _state["last"], _state["built"] = now, False
    _trim()
    return True


def trim_after_build() -> None:
    """Trim at the end of a background build (judging.scoring.trust.shapes): no request may follow it for a while
    to do so, and what the build freed would stay with the process."""
    with _LOCK:
        _state["last"], _state["built"] = time.monotonic(), False
    _trim()
