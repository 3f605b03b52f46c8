"""Streamed export formats: judgments as CSV or JSON Lines, any text as chunks, all in constant memory."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from itertools import islice

from rest_framework.renderers import BaseRenderer, JSONRenderer

from judging.selectors import JUDGMENT_EXPORT_COLUMNS

ROWS_PER_CHUNK = 1000
COLUMN_NAMES = [name for name, _ in JUDGMENT_EXPORT_COLUMNS]


def _wire(value):
    """A database value as the JSON API shows it (timestamps as DRF writes them: ISO 8601, 'Z' for UTC)."""
    if isinstance(value, datetime):
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    return value


# A text cell starting with one of these is read by Excel, LibreOffice and Google Sheets as a formula
# (OWASP "CSV Injection"): "=HYPERLINK(...)" in a note would run on the lead's machine when they open the file.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# ...unless the whole cell is a plain number, which a spreadsheet reads as that number, not a formula.
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def csv_cell(value):
    """One CSV cell, safe to open in a spreadsheet: text that would start a formula gets a leading
    apostrophe (shown as text, the apostrophe hidden); numbers, and text that is a plain number such as
    "-0.5", are left as they are. Every CSV the app writes goes through here."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


_FORMULA_FIRST = frozenset(_FORMULA_STARTS)


def _csv_column(values: tuple) -> Sequence:
    """One column of a chunk of rows as csv.writer should write it. The column's type (one database column)
    decides the conversion once per chunk: numbers and None go out as they are (csv writes None as an
    empty cell), booleans as true/false, timestamps as the API writes them, and only the text cells that
    start like a formula go through csv_cell."""
    sample = next((v for v in values if v is not None), None)
    if sample is None or type(sample) in (int, float):
        return values
    if type(sample) is bool:
        return [None if v is None else "true" if v else "false" for v in values]
    if type(sample) is str:
        return [csv_cell(v) if v and v[0] in _FORMULA_FIRST else v for v in values]
    if isinstance(sample, datetime):
        return [None if v is None else _wire(v) for v in values]
    return [None if v is None else csv_cell(_wire(v)) for v in values]


def judgments_csv(rows: Iterable[tuple]) -> Iterator[str]:
    """CSV with a header line; empty cells for missing grades, true/false for the unsure flag; text that a
    spreadsheet would run as a formula is neutralized (``csv_cell``). Converted a chunk of rows at a time,
    column by column (``_csv_column``): a million rows in seconds."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMN_NAMES)
    rows = iter(rows)
    while chunk := list(islice(rows, ROWS_PER_CHUNK)):
        writer.writerows(zip(*map(_csv_column, zip(*chunk, strict=True)), strict=True))
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    if buffer.getvalue():  # the header alone, when there is no row
        yield buffer.getvalue()


def judgments_jsonl(rows: Iterable[tuple]) -> Iterator[str]:
    """JSON Lines: one object per judgment with the same fields and values as the JSON API."""
    chunk: list[str] = []
    for row in rows:
        chunk.append(json.dumps(dict(zip(COLUMN_NAMES, map(_wire, row), strict=True)), ensure_ascii=False))
        if len(chunk) == ROWS_PER_CHUNK:
            yield "\n".join(chunk) + "\n"
            chunk = []
    if chunk:
        yield "\n".join(chunk) + "\n"


def leaderboard_csv(data: dict) -> str:
    """The leaderboard JSON (SPEC §4 shape) as CSV: one row per system in leaderboard order, one column per
    measure (full precision: this is for spreadsheets and scripts, not for reading)."""
    measures: list[str] = []
    for system in data["systems"]:
        measures += [m for m in system["measures"] if m not in measures]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["system", *measures, "queries"])
    for system in data["systems"]:
        # A system is named by a run file's tag or by whoever uploaded it: text like any other cell.
        writer.writerow(
            [
                csv_cell(system["name"]),
                *(repr(float(system["measures"][m])) if m in system["measures"] else "" for m in measures),
            ]
            + [data["queries"]]
        )
    return buffer.getvalue()


def batched_text(lines: Iterable[str], size: int = ROWS_PER_CHUNK) -> Iterator[str]:
    """Join lines into chunks so a streamed response does not make one write per line."""
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == size:
            yield "".join(chunk)
            chunk = []
    if chunk:
        yield "".join(chunk)


class _StreamRenderer(BaseRenderer):
    """Selects a streamed format in content negotiation (``?format=`` or Accept). The view streams the
    body itself; what reaches render() is an error, which goes out as JSON."""

    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return JSONRenderer().render(data, "application/json", renderer_context)


class CSVRenderer(_StreamRenderer):
    media_type = "text/csv"
    format = "csv"


class LeaderboardCSVRenderer(CSVRenderer):
    """Selects the leaderboard's CSV table (``?format=csv``); the view writes it with leaderboard_csv."""


class JSONLinesRenderer(_StreamRenderer):
    media_type = "application/x-ndjson"
    format = "jsonl"


class PlainTextRenderer(_StreamRenderer):
    """TREC qrels and runs: whitespace-separated text."""

    media_type = "text/plain"
    format = "txt"
