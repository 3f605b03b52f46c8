"""PostgreSQL's CPU per statement, as the load bench's gunicorn workers run them (``load_bench.py --statements N``).

A gunicorn config module (``--config python:bench.statement_cpu``): its ``post_worker_init`` hook wraps every
statement a worker's Django connections run (``connection.execute_wrappers``, added as each connection is made) and
reads the CPU time of the connection's PostgreSQL backend before and after it, from ``/proc/<pid>/schedstat`` (the
time on a CPU in nanoseconds, of the backend process alone: whatever else the machine runs, a statement is charged
only what its own backend spent). Linux only, with PostgreSQL on the same machine. Each worker writes its totals,
per statement with its numbers and values taken out, to ``$RELJUDGE_BENCH_STATEMENTS_DIR/<pid>.json`` once a
second (a thread of its own, so the last second of a phase is written too); the bench reads them at a phase's start
and end (:func:`totals`). COPY is not wrapped by Django, so the score reads' copies are not counted here (the
meter's total counts them).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DIR_ENV = "RELJUDGE_BENCH_STATEMENTS_DIR"
FLUSH_EVERY = 1.0
_NUMBER = re.compile(r"\b\d+\b")

_lock = threading.Lock()
_totals: dict[str, list[int]] = {}  # normalized statement -> [calls, nanoseconds]


def _backend_ns(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _flush(folder: Path) -> None:
    with _lock:
        data = json.dumps(_totals)
    tmp = folder / f".{os.getpid()}.json"
    tmp.write_text(data)
    tmp.replace(folder / f"{os.getpid()}.json")


def _wrapper() -> Callable[..., Any]:
    def wrapper(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        try:
            pid = context["connection"].connection.info.backend_pid
        except AttributeError:
            return execute(sql, params, many, context)
        before = _backend_ns(pid)
        try:
            return execute(sql, params, many, context)
        finally:
            spent = _backend_ns(pid) - before
            key = _NUMBER.sub("N", sql)
            with _lock:
                entry = _totals.setdefault(key, [0, 0])
                entry[0] += 1
                entry[1] += spent

    return wrapper


def post_worker_init(worker: Any) -> None:
    """gunicorn's hook, once the worker has loaded the app (Django is set up)."""
    from django.db.backends.signals import connection_created

    folder = Path(os.environ[DIR_ENV])
    wrapper = _wrapper()

    def created(sender: Any, connection: Any, **kwargs: Any) -> None:
        if wrapper not in connection.execute_wrappers:
            connection.execute_wrappers.append(wrapper)

    connection_created.connect(created, weak=False, dispatch_uid="bench_statement_cpu")

    def flush_every() -> None:
        while True:
            time.sleep(FLUSH_EVERY)
            _flush(folder)

    threading.Thread(target=flush_every, name="statement-cpu-flush", daemon=True).start()


def totals(folder: Path) -> dict[str, tuple[int, int]]:
    """Every worker's totals so far, summed: statement -> (calls, nanoseconds of its backends' CPU)."""
    summed: dict[str, list[int]] = {}
    for path in folder.glob("[0-9]*.json"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for key, (calls, ns) in data.items():
            entry = summed.setdefault(key, [0, 0])
            entry[0] += calls
            entry[1] += ns
    return {key: (calls, ns) for key, (calls, ns) in summed.items()}


def report(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], judgments: int, top: int) -> None:
    """Print the ``top`` statements by their backends' CPU between two :func:`totals`, per judgment."""
    n = max(1, judgments)
    moved = {}
    for key, (calls, ns) in after.items():
        calls0, ns0 = before.get(key, (0, 0))
        if calls > calls0:
            moved[key] = (calls - calls0, ns - ns0)
    total = sum(ns for _calls, ns in moved.values())
    print(
        f"  PostgreSQL CPU by statement (the backends' own, /proc/PID/schedstat): {total / n / 1e6:.2f} ms per "
        f"judgment over {sum(c for c, _ns in moved.values()) / n:.1f} statements a judgment; the {top} costliest:"
    )
    for key, (calls, ns) in sorted(moved.items(), key=lambda item: -item[1][1])[:top]:
        text = " ".join(key.split())
        print(f"    {ns / n / 1e3:7.1f} us/j  {calls / n:5.2f}/j  {ns / calls / 1e3:8.1f} us a call  {text[:110]}")
