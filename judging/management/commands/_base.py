"""Shared plumbing for RelJudge's management commands: campaign lookup, file reading, errors, progress."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, TextIO, cast

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from judging.imports.service.summary import ImportSummary
from judging.models import Campaign
from judging.services import ImportRefused

BASE_URL_ENV = "RELJUDGE_BASE_URL"


def site_link(path: str) -> str:
    """A page's address for a command to print: whole under RELJUDGE_BASE_URL (where people reach RelJudge;
    scripts/manage sets it), else the path, said to be one (a command has no request to take a host from)."""
    base = os.environ.get(BASE_URL_ENV, "").strip().rstrip("/")
    if base:
        return base + path
    return f"{path} (a path on this site: set {BASE_URL_ENV} for the whole address)"


class CampaignCommand(BaseCommand):
    """A command on one campaign: looks it up by slug, reads input files, and runs an import service
    (one transaction each) with a progress bar, turning bad input into a CommandError."""

    progress_unit = "rows"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the campaign's slug")
        parser.add_argument("file", help="path of the file to import")

    def campaign(self, slug: str) -> Campaign:
        try:
            return Campaign.objects.get(slug=slug)
        except Campaign.DoesNotExist:
            raise CommandError(f"unknown campaign {slug!r} (create it with create_campaign)") from None

    def read(self, path: str) -> tuple[bytes, str]:
        p = Path(path)
        if not p.is_file():
            raise CommandError(f"{path}: no such file")
        return p.read_bytes(), p.name

    def open(self, path: str) -> tuple[BinaryIO, str, int]:
        """The file opened to be read a piece at a time (the caller closes it), its name, and its line count
        (counted a piece at a time: a file of any size is never in memory whole)."""
        p = Path(path)
        if not p.is_file():
            raise CommandError(f"{path}: no such file")
        data = p.open("rb")
        lines = 0
        while piece := data.read(1 << 22):
            lines += piece.count(b"\n")
        data.seek(0)
        return data, p.name, lines

    def run_import(
        self, func: Callable[..., ImportSummary], *, total: int | None = None, **kwargs: Any
    ) -> ImportSummary:
        # OutputWrapper keeps the stream it wraps in _out (django-stubs types its other attributes as callables).
        stream = cast(TextIO, self.stderr._out)
        bar = tqdm(total=total, unit=self.progress_unit, disable=(total or 0) < 50_000, file=stream)
        try:
            summary = func(progress=bar.update, **kwargs)
        except ImportRefused as exc:
            raise CommandError(f"{exc.explained('command')} — nothing was imported") from None
        finally:
            bar.close()
        for line in summary.lines():
            self.stdout.write(line)
        return summary
