"""An import's database work run by a thread of its own, while the import prepares what comes next.

A run import spends its time in two places that a single thread takes one after the other: the app's (parsing,
looking up ids, encoding rows for COPY) and the database server's (the COPYs, the pool merges, their foreign-key
checks). ``WriteBehind`` hands the second to a thread that runs it, in the order given, on the import's own
connection and in its transaction, so that the server works on block N while the app prepares block N + 1
(psycopg releases the GIL while it waits for the server). On a machine with a core for each, the import then
takes about as long as the slower of the two instead of their sum.

Rules that keep it one transaction, undone whole on any error:

- while the thread runs, the import's thread uses the connection only through it (``later``, ``now``);
- the work queued is bounded (QUEUE_BYTES of payload, QUEUE_ITEMS items): memory stays flat;
- an error in the thread's work is raised in the import's thread at its next ``later``, ``now`` or on leaving
  the ``with`` block, and the work queued after it is dropped; an error in the import's thread drops the queued
  work and waits for the statement running, so that the rollback finds the connection idle. No thread outlives
  the ``with`` block.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import translation

T = TypeVar("T")

QUEUE_BYTES = 8 * 1024 * 1024  # payload queued for the thread at most (about 8 blocks of a run's rankings)
QUEUE_ITEMS = 256


class Dropped(Exception):
    """The work was not run: an earlier piece of work, or the import itself, failed."""


class WriteBehind:
    """Run callables on the import's database connection in a thread of their own, in order. Use as a context
    manager around the part of the import that writes; ``inline=True`` runs each callable at once on the
    caller's thread instead (the same code path, no thread)."""

    def __init__(self, *, inline: bool = False, name: str = "reljudge-import-write") -> None:
        self.inline = inline
        self._name = name
        self._items: deque[tuple[Callable[..., Any], tuple[Any, ...], Future[Any], int]] = deque()
        self._bytes = 0
        self._lock = threading.Condition()
        self._closed = False
        self._stop = False
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._wrapper: Any = None
        self._language = translation.get_language()

    # ------------------------------------------------------------------ the import's side

    def later(self, func: Callable[..., T], *args: Any, size: int = 0) -> Future[T]:
        """Queue ``func(*args)``; its future. ``size``: the bytes its arguments hold (what the queue bounds).
        Waits while the queue is full; raises the thread's error if an earlier piece of work failed."""
        future: Future[T] = Future()
        if self.inline:
            future.set_result(func(*args))
            return future
        with self._lock:
            while not self._error and self._full(size):
                self._lock.wait()
            self._raise_error()
            self._items.append((func, args, future, size))
            self._bytes += size
            self._lock.notify_all()
        return future

    def _full(self, size: int) -> bool:
        return len(self._items) >= QUEUE_ITEMS or bool(self._items) and self._bytes + size > QUEUE_BYTES

    def now(self, func: Callable[..., T], *args: Any) -> T:
        """``func(*args)`` run after the work queued before it; its result (or its error)."""
        return self.result(self.later(func, *args))

    def result(self, future: Future[T]) -> T:
        """The result of work queued by ``later``, once done (the error that stopped the thread, if it did)."""
        try:
            return future.result()
        except Dropped:
            self._raise_error()
            raise

    def drain(self) -> None:
        """Wait until the work queued so far is done; raise its error if any failed."""
        self.now(lambda: None)

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def __enter__(self) -> WriteBehind:
        if self.inline:
            return self
        self._wrapper = connections[DEFAULT_DB_ALIAS]
        self._wrapper.inc_thread_sharing()
        self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if self.inline or self._thread is None:
            return
        with self._lock:
            self._closed = True
            if kind is not None:  # the import failed: what is queued is not wanted
                self._stop = True
            self._lock.notify_all()
        self._thread.join()
        self._thread = None
        self._wrapper.dec_thread_sharing()
        if kind is None:
            self._raise_error()

    # ------------------------------------------------------------------ the thread's side

    def _work(self) -> None:
        connections[DEFAULT_DB_ALIAS] = self._wrapper  # this thread's "connection" is the import's
        try:
            translation.activate(self._language)  # its messages in the import's language
            while True:
                with self._lock:
                    while not self._items and not self._closed:
                        self._lock.wait()
                    if not self._items:
                        return
                    func, args, future, size = self._items.popleft()
                    skip = self._stop or self._error is not None
                if skip or not future.set_running_or_notify_cancel():
                    future.set_exception(Dropped())
                else:
                    try:
                        future.set_result(func(*args))
                    except BaseException as error:  # noqa: BLE001 - handed to the import's thread, which raises it
                        future.set_exception(error)
                        with self._lock:
                            self._error = error
                with self._lock:
                    self._bytes -= size
                    self._lock.notify_all()
        finally:
            translation.deactivate()
            del connections[DEFAULT_DB_ALIAS]  # never closed here: it is the import's
