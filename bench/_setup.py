"""Shared bench set-up: Django on the DATABASE_URL given (a throwaway SQLite file by default), migrated."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path


def machine_line() -> str:
    """A yardstick printed with every figure: the CPU time of a fixed pure-Python loop. Machines of one kind
    differ (one session's 2-core machine ran every benchmark here 2.3-3.1x slower than another's, the same
    code), so a figure from another machine compares by this ratio."""
    start, total = time.process_time(), 0
    for i in range(3_000_000):
        total += i
    return (
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
        f"yardstick (3M-step Python loop) {time.process_time() - start:.2f} s of CPU"
    )


def django_ready(default_name: str, *, migrate: bool = True, quiet: bool = False) -> str:
    """Point Django at DATABASE_URL (or a fresh SQLite file), migrate, and return a label for the output.
    ``migrate=False, quiet=True``: a bench's child process on the database its parent made ready."""
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("RELJUDGE_ALLOW_DEV_SECRET", "1")
    if "DATABASE_URL" not in os.environ:
        path = Path(tempfile.gettempdir()) / f"{default_name}.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{path}"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    if migrate:
        call_command("migrate", verbosity=0)
    if not quiet:
        print(machine_line(), flush=True)
    return connection.vendor
