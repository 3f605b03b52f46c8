"""What the API writes as text: streamed exports (judgments as CSV or JSON Lines, any text as chunks, all in
constant memory). The leaderboard's JSON with its per-query values (bounded per-process text caches) is
judging.api.leaderboard_text's."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from _csv import Writer
from collections.abc import Iterable, Iterator, Mapping
from operator import itemgetter
from typing import Any, TypeVar

import numpy as np
from rest_framework.renderers import BaseRenderer, JSONRenderer

from judging import formats
from judging.scoring import Leaderboard
from judging.selectors import JUDGMENT_EXPORT_COLUMNS
from metrics.numbers import finite_array

ROWS_PER_CHUNK = 1000
_T = TypeVar("_T")  # a cell of any type, returned as it came unless it is text
COLUMN_NAMES = [name for name, _ in JUDGMENT_EXPORT_COLUMNS]


# A text cell starting with one of these is read by Excel, LibreOffice and Google Sheets as a formula
# (OWASP "CSV Injection"): "=HYPERLINK(...)" in a note would run on the lead's machine when they open the file.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# ...unless the whole cell is a plain number, which a spreadsheet reads as that number, not a formula.
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def csv_cell(value: _T) -> _T | str:
    """One CSV cell, safe to open in a spreadsheet: text that would start a formula gets a leading
    apostrophe (shown as text, the apostrophe hidden); numbers, and text that is a plain number such as
    "-0.5", are left as they are. Every CSV the app writes goes through here."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


# What each column of an export row (selectors.judgment_export_chunks) holds, for the formats below.
_KIND = {
    "id": "number",
    "pair": "number",
    "grade": "literal",  # the grade as text, or the format's text for a missing grade
    "tentative_grade": "literal",
    "unsure": "literal",  # "true"/"false"
    "seconds_spent": "float",
    "created_at": "string",  # ISO 8601 text
    "updated_at": "string",
}  # every other column is text someone typed or imported: campaign, qid, docid, annotator, note
_KINDS = [_KIND.get(name, "text") for name in COLUMN_NAMES]
_TEXT = [i for i, kind in enumerate(_KINDS) if kind == "text"]
_FLOAT = [i for i, kind in enumerate(_KINDS) if kind == "float"]
# A cell starting like a formula, in a column joined with NUL between the cells.
_FORMULA_INSIDE = tuple("\x00" + start for start in _FORMULA_STARTS)
# A row of cells as csv.writer writes them: str() of each, repr() of a float.
_CSV_LINE = ",".join("%r" if kind == "float" else "%s" for kind in _KINDS) + "\n"


def _with_columns(rows: list[tuple], replaced: dict[int, list]) -> list[tuple]:
    """The rows with some of their columns replaced."""
    if not replaced:
        return rows
    columns = [replaced[i] if i in replaced else list(map(itemgetter(i), rows)) for i in range(len(_KINDS))]
    return list(zip(*columns, strict=True))


def _csv_quoted(cell: str) -> str:
    """A text cell as csv.writer writes it (QUOTE_MINIMAL, doubled quotes): quoted when it holds the
    delimiter, a quote or a line feed."""
    if "," in cell or '"' in cell or "\n" in cell:
        return '"' + cell.replace('"', '""') + '"'
    return cell


def _csv_chunk(rows: list[tuple], writer: Writer, buffer: io.StringIO) -> str:
    """A chunk of export rows as CSV lines, byte for byte as csv.writer writes them, with the text cells
    that a spreadsheet would run as a formula neutralized (``csv_cell``). Each check is made on a text
    column as a whole (substring searches in the column joined together) and only a column that needs it
    is rewritten cell by cell: neutralized, and quoted where csv.writer would quote. The lines are then one
    %-format per row, 3x faster than csv.writer. A chunk with a carriage return in a text cell (quoted by
    some Python versions only) or a missing float goes to csv.writer itself."""
    replaced = {}
    to_quote = []
    for i in _TEXT:
        column = list(map(itemgetter(i), rows))
        try:
            text = "\x00".join(column)
        except TypeError:  # a cell that is not text (None): csv.writer
            return _csv_written(_formula_safe(rows), writer, buffer)
        if "\r" in text:
            return _csv_written(_formula_safe(rows), writer, buffer)
        if text.startswith(_FORMULA_STARTS) or any(start in text for start in _FORMULA_INSIDE):
            replaced[i] = [csv_cell(v) for v in column]
        if "," in text or '"' in text or "\n" in text:
            to_quote.append(i)
    if any(None in map(itemgetter(i), rows) for i in _FLOAT):
        return _csv_written(_formula_safe(rows), writer, buffer)
    for i in to_quote:
        replaced[i] = list(map(_csv_quoted, replaced[i] if i in replaced else map(itemgetter(i), rows)))
    return "".join(map(_CSV_LINE.__mod__, _with_columns(rows, replaced)))


def _formula_safe(rows: list[tuple]) -> list[tuple]:
    """The rows with every text cell passed through csv_cell."""
    return _with_columns(rows, {i: [csv_cell(v) for v in map(itemgetter(i), rows)] for i in _TEXT})


def _csv_written(rows: list[tuple], writer: Writer, buffer: io.StringIO) -> str:
    writer.writerows(rows)
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text


def judgments_csv(chunks: Iterable[list[Any]]) -> Iterator[str]:
    """CSV with a header line from chunks of export rows (selectors.judgment_export_chunks with
    ``missing_grade=""``), as csv.writer writes them: empty cells for missing grades, true/false for the
    unsure flag; text that a spreadsheet would run as a formula is neutralized (``csv_cell``). A chunk is
    converted whole, with no per-row Python (``_csv_chunk``): a million rows in a few seconds."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMN_NAMES)
    header = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    for rows in chunks:
        if rows:
            yield header + _csv_chunk(rows, writer, buffer)
            header = ""
    if header:  # the header alone, when there is no row
        yield header


# JSON escapes these in a string (ensure_ascii=False writes everything else as it is).
_JSON_ESCAPED = re.compile('["\\\x00-\x1f]')
# How json.dumps writes each column's values, unless a chunk's values need more (_jsonl_chunk).
_JSON_FORMATS = {"number": "%s", "literal": "%s", "string": '"%s"', "float": "%r", "text": '"%s"'}


def _jsonl_chunk(rows: list[tuple]) -> str:
    """A chunk of export rows as JSON Lines, byte for byte as ``json.dumps(row_dict, ensure_ascii=False)``
    writes each: one %-format per row. A text column with a character JSON escapes, or a float column with
    a value JSON writes otherwise than repr() (NaN, Infinity), is checked for the column as a whole and
    only then written cell by cell with json.dumps."""
    formats = [_JSON_FORMATS[kind] for kind in _KINDS]
    replaced = {}
    for i in _TEXT + _FLOAT:
        column = list(map(itemgetter(i), rows))
        try:
            if i in _TEXT and not _JSON_ESCAPED.search("".join(column)):
                continue
            if i in _FLOAT and math.isfinite(sum(column)):
                continue
        except TypeError:  # None, or not text
            pass
        formats[i], replaced[i] = "%s", [json.dumps(v, ensure_ascii=False) for v in column]
    line = "{" + ", ".join(f"{json.dumps(name)}: {f}" for name, f in zip(COLUMN_NAMES, formats, strict=True)) + "}\n"
    return "".join(map(line.__mod__, _with_columns(rows, replaced)))


def judgments_jsonl(chunks: Iterable[list[Any]]) -> Iterator[str]:
    """JSON Lines from chunks of export rows (selectors.judgment_export_chunks with ``missing_grade="null"``):
    one object per judgment with the same fields and values as the JSON API."""
    for rows in chunks:
        if rows:
            yield _jsonl_chunk(rows)


# What str.split() splits on, and so what a TREC identifier must not hold (formats._token).
_WHITESPACE = re.compile(r"\s")


def qrels_text(chunks: Iterable[list[Any]]) -> Iterator[str]:
    """TREC qrels from chunks of (qid, docid, label) rows (selectors.qrels_chunks), byte for byte as
    formats.format_qrels writes them: one %-format per row when the chunk's identifiers are all writable
    (checked for each column as a whole); otherwise format_qrels itself, which names the bad one."""
    for rows in chunks:
        qids, docids, labels = (list(map(itemgetter(i), rows)) for i in range(3))
        try:
            plain = (
                not _WHITESPACE.search("".join(qids))
                and not _WHITESPACE.search("".join(docids))
                and "" not in qids
                and "" not in docids
                and set(map(type, labels)) <= {int}
            )
        except TypeError:  # an identifier that is not text
            plain = False
        yield "".join(map("%s 0 %s %d\n".__mod__, rows)) if plain else "".join(formats.format_qrels(rows))


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


def leaderboard_per_query_csv(lb: Leaderboard, *, bom: bool = False) -> Iterator[str]:
    """Every system's per-query values as CSV (``?per_query=true&format=csv``): a header ``system,qid,<measure>...``
    then one row per system and scored query, systems in the JSON's order and queries in its order, values at full
    precision (``repr``, as the JSON writes them). Streamed ROWS_PER_CHUNK rows at a time from the score table, so
    that 20 systems x 5,000 queries never sit in memory as text at once; names and qids are CSV cells like any other
    text (``csv_cell``)."""
    names = lb.measures
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["system", "qid", *names])
    yield ("\ufeff" if bom else "") + buffer.getvalue()
    scored = np.flatnonzero(lb.table.labelled)
    qids = [_csv_quoted(csv_cell(q)) for q in lb.scored_qids()]
    for s, system in enumerate(lb.cube.system_names):  # over systems; each block a numpy slice
        prefix = _csv_quoted(csv_cell(system)) + ","
        for start in range(0, scored.size, ROWS_PER_CHUNK):
            block = finite_array(
                lb.table.scores[:, s, scored[start : start + ROWS_PER_CHUNK]].T, what=f"per-query values of {system}"
            )
            yield "".join(
                f"{prefix}{qid},{','.join(map(repr, row))}\n"
                for qid, row in zip(qids[start : start + ROWS_PER_CHUNK], block.tolist(), strict=True)
            )


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

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Mapping[str, Any] | None = None
    ) -> bytes:
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
