"""What a worker keeps between requests: every per-process cache registered by name, and work run after the answer.

**Caches.** A module that keeps something in process memory between requests (a run cube, score tables, texts
already written) registers it here with :func:`keep`, at import time: its name, its bound (entries or bytes, or
what the number of entries grows with when the data bounds it), what makes an entry stale, and how to clear it.
:func:`keep` hands the container back unchanged, so a request reads and writes the module's own dict under the
module's own lock as before: the registry costs nothing per request. :func:`caches_clear` (what
``judging.scoring.process_caches_clear`` calls: tests and benchmarks that play a freshly started process) walks it;
``manage.py caches`` lists each cache's size against its bound. State that is not a cache (work in flight that a
running thread still needs, such as a job's endpoint) is registered with :func:`hold`: listed, never cleared.
``tests/test_runtime.py`` fails when a module of ``judging/`` keeps a module-level mutable container that is
neither registered nor in its commented allow-list, and ARCHITECTURE.md's table "What a worker keeps" is checked
against :func:`table_markdown`.

**Work after the answer.** :func:`later` runs a function in a daemon thread that logs its failure and closes the
thread's own database connections at the end. ``settings.RELJUDGE_BACKGROUND_INLINE`` (tests set it once) runs it
in the caller instead, raising what it raises, so that a test sees its effect at once. :func:`timer` is the one
delayed task (the memory trim's): a timer cannot run inline, and it touches no database.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from django.conf import settings
from django.db import connections

import judging

logger = logging.getLogger(__name__)

S = TypeVar("S", bound="_Store")


class _Store(Protocol):
    def __len__(self) -> int: ...
    def clear(self) -> None: ...


@dataclass(frozen=True)
class Kept:
    """One registered piece of per-process state."""

    name: str  # "<area>.<what>", unique
    store: Any  # the container itself (what the module reads and writes)
    module: str  # the module that keeps it
    bound: int | None  # at most this many entries (or bytes); None: bounded by the data, see grows_with
    unit: Literal["entries", "bytes"]
    grows_with: str  # when bound is None: what the entries follow ("campaigns"); else empty
    invalidated_by: str  # what makes an entry stale (and how it goes)
    size: Callable[[], int]  # entries (or bytes) held now
    clear: Callable[[], None] | None  # None: not a cache (see hold), never cleared
    group: str  # caches cleared together by a module's own *_clear() (e.g. "trust")

    @property
    def bound_text(self) -> str:
        if self.bound is None:
            return f"one per {self.grows_with}"
        if self.unit == "bytes":
            return f"{self.bound / 2**20:g} MB"
        return f"{self.bound:,} entries"


_REGISTRY: dict[str, Kept] = {}  # the registry itself: filled at import, read by caches_clear and the command
_REGISTRY_LOCK = threading.Lock()


def _register(entry: Kept) -> None:
    with _REGISTRY_LOCK:
        old = _REGISTRY.get(entry.name)
        if old is not None and old.module != entry.module:
            raise ValueError(f"runtime: {entry.name!r} is kept by {old.module} already")
        _REGISTRY[entry.name] = entry


def keep(
    name: str,
    store: S,
    *,
    bound: int | None,
    invalidated_by: str,
    unit: Literal["entries", "bytes"] = "entries",
    grows_with: str = "",
    lock: Any = None,
    clear: Callable[[], None] | None = None,
    size: Callable[[], int] | None = None,
    group: str = "",
) -> S:
    """Register ``store`` (a dict, OrderedDict, set, or an object with ``__len__`` and ``clear``) as the
    per-process cache ``name`` and return it unchanged. ``clear`` defaults to ``store.clear()`` under ``lock``
    (the lock the module takes around the store, if any); ``size`` to ``len(store)``. A ``bound`` of None needs
    ``grows_with``: what the entries follow, one each (a cache bounded by the data, not by a number)."""
    if bound is None and not grows_with:
        raise ValueError(f"runtime: {name!r} needs a bound or what it grows with")
    if clear is None:

        def clear() -> None:
            if lock is None:
                store.clear()
            else:
                with lock:
                    store.clear()

    _register(
        Kept(
            name=name,
            store=store,
            module=_caller_module(),
            bound=bound,
            unit=unit,
            grows_with=grows_with,
            invalidated_by=invalidated_by,
            size=size or store.__len__,
            clear=clear,
            group=group,
        )
    )
    return store


def hold(name: str, store: S, *, grows_with: str, why: str) -> S:
    """Register ``store`` as per-process state that is not a cache (``why``: what needs it); listed with the
    caches, never cleared by :func:`caches_clear`. Returns it unchanged."""
    _register(
        Kept(
            name=name,
            store=store,
            module=_caller_module(),
            bound=None,
            unit="entries",
            grows_with=grows_with,
            invalidated_by=why,
            size=store.__len__,
            clear=None,
            group="",
        )
    )
    return store


def _caller_module() -> str:
    return str(sys._getframe(2).f_globals.get("__name__", "?"))


def load_all() -> None:
    """Import every module of the app (not its migrations), so that every cache is registered: what a listing of
    the registry needs in a process that has not served every kind of request yet."""
    for info in pkgutil.walk_packages(judging.__path__, "judging."):
        if ".migrations" not in info.name:
            importlib.import_module(info.name)


def registered() -> list[Kept]:
    """Every registered entry, by name."""
    with _REGISTRY_LOCK:
        return sorted(_REGISTRY.values(), key=lambda k: k.name)


def kept(name: str) -> Kept:
    """The registered entry ``name`` (its module imported already): how tests and tools reach a module's container
    without importing its private name."""
    with _REGISTRY_LOCK:
        return _REGISTRY[name]


def caches_clear(group: str | None = None) -> None:
    """Clear every registered cache (of ``group`` only, when given), as a freshly started process has none."""
    for entry in registered():
        if entry.clear is not None and (group is None or entry.group == group):
            entry.clear()


def table_markdown() -> str:
    """The registry as the Markdown table of ARCHITECTURE.md's "What a worker keeps"."""
    lines = ["| name | kept by | bound | invalidated by |", "|---|---|---|---|"]
    for k in registered():
        what = k.bound_text if k.clear is not None else f"{k.bound_text} (not a cache: never cleared)"
        lines.append(f"| `{k.name}` | `{k.module}` | {what} | {k.invalidated_by} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- work after the answer


def background_inline() -> bool:
    """Whether :func:`later` runs its work in the caller (settings.RELJUDGE_BACKGROUND_INLINE: tests)."""
    return bool(getattr(settings, "RELJUDGE_BACKGROUND_INLINE", False))


def later(fn: Callable[..., object], *args: object, name: str | None = None) -> None:
    """Run ``fn(*args)`` in a daemon thread (named ``name``, else after ``fn``: what a log line or a thread dump
    shows): a failure is logged with its traceback, and the thread's own database connections are closed at its
    end. Inline (``RELJUDGE_BACKGROUND_INLINE``) it runs in the caller and raises what it raises."""
    if background_inline():
        fn(*args)
        return
    name = name or getattr(fn, "__name__", "background")

    def run() -> None:
        try:
            fn(*args)
        except Exception:
            logger.exception("background work %s failed", name)
        finally:
            connections.close_all()  # this thread's own connections

    threading.Thread(target=run, name=name, daemon=True).start()


def timer(seconds: float, fn: Callable[[], object], *, name: str) -> threading.Timer:
    """Start a daemon timer running ``fn()`` after ``seconds`` (a failure logged); returned so that it can be
    cancelled. Never inline: it is what runs when no request comes, and it must touch no database."""

    def run() -> None:
        try:
            fn()
        except Exception:
            logger.exception("timer %s failed", name)

    t = threading.Timer(seconds, run)
    t.name, t.daemon = name, True
    t.start()
    return t
