"""Streamed export formats: judgments as CSV or JSON Lines, any text as chunks, all in constant memory."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable, Iterator
from operator import itemgetter

from rest_framework.renderers import BaseRenderer, JSONRenderer

from judging.selectors import JUDGMENT_EXPORT_COLUMNS

ROWS_PER_CHUNK = 1000
COLUMN_NAMES = [name for name, _ in JUDGMENT_EXPORT_COLUMNS]


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


# Columns of an export row (selectors.judgment_export_chunks) that hold text someone typed or imported: the
# only ones where a cell can start like a formula or need escaping in JSON.
_TEXT_COLUMNS = tuple(
    i for i, name in enumerate(COLUMN_NAMES) if name in ("campaign", "qid", "docid", "annotator", "note")
)
# A cell starting like a formula, found in a chunk's column joined with NUL between the cells.
_FORMULA_CELL = re.compile("(?:^|\x00)[" + re.escape("".join(_FORMULA_STARTS)) + "]")


def _formula_safe(rows: list[tuple]) -> list[tuple]:
    """A chunk of export rows with every text cell that a spreadsheet would run as a formula neutralized
    (``csv_cell``). Whether a column has any such cell is one regular expression over the column joined
    together; only a column that has one is rewritten cell by cell, so clean chunks pass untouched."""
    columns = None
    for i in _TEXT_COLUMNS:
        column = list(map(itemgetter(i), rows))
        try:
            clean = not _FORMULA_CELL.search("\x00".join(column))
        except TypeError:  # a cell that is not text (None): checked cell by cell
            clean = False
        if not clean:
            columns = columns or list(zip(*rows, strict=True))
            columns[i] = [csv_cell(v) for v in column]
    return rows if columns is None else list(zip(*columns, strict=True))


def judgments_csv(chunks: Iterable[list[tuple]]) -> Iterator[str]:
    """CSV with a header line from chunks of export rows (selectors.judgment_export_chunks: timestamps and
    the unsure flag already in their wire form); empty cells for missing grades; text that a spreadsheet
    would run as a formula is neutralized (``csv_cell``). A chunk goes to csv.writer whole, with no
    per-row Python: a million rows in a few seconds."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMN_NAMES)
    for rows in chunks:
        writer.writerows(_formula_safe(rows))
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    if buffer.getvalue():  # the header alone, when there is no row
        yield buffer.getvalue()


# JSON escapes these in a string (ensure_ascii=False writes everything else as it is).
_JSON_ESCAPED = re.compile('["\\\x00-\x1f]')
_JSON_KIND = {
    "id": "number",
    "pair": "number",
    "grade": "grade",
    "tentative_grade": "grade",
    "unsure": "literal",  # "true"/"false" from the database
    "seconds_spent": "float",
    "created_at": "string",  # ISO 8601 text from the database
    "updated_at": "string",
}


def _json_column(name: str, column: list) -> tuple[str, list]:
    """A %-format for one column of a chunk and the column's values for it, so that the formatted text is
    what json.dumps writes for each value. Whether a column needs escaping (or holds a null or a float
    that JSON writes differently from repr) is checked for the column as a whole; only such a column is
    converted cell by cell."""
    kind = _JSON_KIND.get(name, "text")
    if kind == "text":
        try:
            if not _JSON_ESCAPED.search("".join(column)):
                return '"%s"', column
        except TypeError:  # not all text (None)
            pass
    elif kind in ("number", "literal"):
        return "%s", column
    elif kind == "string":
        return '"%s"', column
    elif kind == "grade":
        if None not in column:
            return "%s", column
        return "%s", ["null" if v is None else v for v in column]
    elif kind == "float":
        try:
            if math.isfinite(sum(column)):
                return "%r", column  # repr() is how json.dumps writes a finite float (and an int)
        except TypeError:
            pass
    return "%s", [json.dumps(v, ensure_ascii=False) for v in column]


def judgments_jsonl(chunks: Iterable[list[tuple]]) -> Iterator[str]:
    """JSON Lines: one object per judgment with the same fields and values as the JSON API, written
    byte for byte as ``json.dumps(row_dict, ensure_ascii=False)`` would, one %-format per chunk."""
    for rows in chunks:
        if not rows:
            continue
        formats, columns = zip(
            *(
                _json_column(name, list(column))
                for name, column in zip(COLUMN_NAMES, zip(*rows, strict=True), strict=True)
            ),
            strict=True,
        )
        line = "{" + ", ".join(f"{json.dumps(name)}: {f}" for name, f in zip(COLUMN_NAMES, formats, strict=True)) + "}"
        yield "\n".join(map(line.__mod__, zip(*columns, strict=True))) + "\n"


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
        writer.writerow(
            [system["name"], *(repr(float(system["measures"][m])) if m in system["measures"] else "" for m in measures)]
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
