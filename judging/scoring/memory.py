"""Freed memory goes back to the system after requests that built scores' arrays.

A leaderboard request after a judgment makes and drops temporaries of tens of megabytes (ranked labels of the
judged queries, per-query parts, the JSON). glibc's allocator keeps what such requests freed inside its heaps
for reuse, so a worker's resident memory grew by 60 MB at 20M ranked entries over what it actually held
(tracemalloc against /proc/self/smaps_rollup, bench/scale_bench.py). ``malloc_trim(0)`` hands those pages back;
it took 6 ms there. It runs when a request has finished (the response is sent), at most every
:data:`TRIM_EVERY` seconds per process, and only after code here marked that it built something large. A request
that finishes sooner after the last trim leaves it to a timer at the end of those seconds: a worker that goes
quiet after a burst of judgments gives back what the last of them freed (it kept 50-100 MB otherwise).
On a system without glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
from typing import Any

from judging import runtime

TRIM_EVERY = 5.0  # seconds between two trims of one process

_LOCK = threading.Lock()
_state: dict[str, Any] = runtime.hold(
    "memory.trim_state",
    {"built": False, "last": -TRIM_EVERY, "timer": None},
    grows_with="flag (three: built, last trim, timer)",
    why="whether large arrays were built since the last trim, when it was, and its pending timer",
)


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
    """The request_finished receiver: trim when something large was built and the last trim is old enough, else
    have a timer trim when it is (one at a time). Returns whether it trimmed."""
    if not _state["built"]:
        return False
    now = time.monotonic()
    with _LOCK:
        wait = TRIM_EVERY - (now - float(_state["last"]))
        if wait > 0:
            if _state["timer"] is None:
                _state["timer"] = runtime.timer(wait, _trim_later, name="memory-trim")
            return False
        _state["last"], _state["built"] = now, False
    _trim()
    return True


def _trim_later() -> None:
    with _LOCK:
        _state["timer"] = None
        if not _state["built"]:
            return
        _state["last"], _state["built"] = time.monotonic(), False
    _trim()


def trim_after_build() -> None:
    """Trim at the end of a background build (judging.scoring.trust.shapes): no request may follow it for a while
    to do so, and what the build freed would stay with the process."""
    with _LOCK:
        _state["last"], _state["built"] = time.monotonic(), False
    _trim()
