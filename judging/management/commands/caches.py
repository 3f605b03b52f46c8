"""manage.py caches: what a worker keeps between requests (judging.runtime's registry), with each size and bound."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from judging import runtime


class Command(BaseCommand):
    help = (
        "List every per-process cache and piece of state registered in judging.runtime: its name, the module "
        "that keeps it, its size in this process against its bound, and what invalidates it. A command runs in "
        "a process of its own, so the sizes are this process's; --markdown prints the "
        "table of ARCHITECTURE.md's 'What a worker keeps'."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--markdown", action="store_true", help="print the registry as ARCHITECTURE.md's table")

    def handle(self, *args: object, markdown: bool = False, **options: Any) -> None:
        runtime.load_all()
        if markdown:
            self.stdout.write(runtime.table_markdown())
            return
        entries = runtime.registered()
        width = max(len(k.name) for k in entries)
        for k in entries:
            unit = "B" if k.unit == "bytes" else ""
            kind = "" if k.clear is not None else "  (not a cache: never cleared)"
            self.stdout.write(f"{k.name:<{width}}  {k.size():>10,}{unit:<1}  of {k.bound_text:<40}  {k.module}{kind}")
