"""Online figures of systems (CSV): what A/B tests measured, beside what the judgments score."""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from typing import BinaryIO

from django.utils.translation import gettext as _

from judging.formats import ONLINE_METRIC_MAX_LENGTH, QID_MAX_LENGTH, SYSTEM_NAME_MAX_LENGTH
from judging.imports.errors import FormatError
from judging.imports.parse.text import (
    BAD_CHAR,
    char_error,
    columns_message,
    decode_lines,
    empty_file,
    not_finite_message,
    show,
)

# --------------------------------------------------------------------------- online metrics

ONLINE_COLUMNS = "system,metric,value[,ci_low,ci_high][,qid]"
_ONLINE_FIELDS = ("system", "metric", "value", "ci_low", "ci_high", "qid")
# Column layouts by count when there is no header: the CI comes before the qid, as the format names them.
_ONLINE_LAYOUTS = {
    3: ("system", "metric", "value"),
    4: ("system", "metric", "value", "qid"),
    5: ("system", "metric", "value", "ci_low", "ci_high"),
    6: _ONLINE_FIELDS,
}
# Plain ASCII decimals only: float() also takes "nan", "inf", "1_000" and non-ASCII digits such as "١".
_ASCII_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


@dataclass(frozen=True, slots=True)
class OnlineFigure:
    """One online figure of a system: campaign-wide when ``qid`` is empty."""

    system: str
    metric: str
    value: float
    ci_low: float | None = None
    ci_high: float | None = None
    qid: str = ""
    line: int = field(default=0, compare=False)  # where it came from, for the importer's errors


def _online_number(value: str, name: str, filename: str, line: int, *, required: bool) -> float | None:
    value = value.strip()
    if not value and not required:
        return None
    if not _ASCII_NUMBER.fullmatch(value):
        raise FormatError(
            _("not a number: %(value)s") % {"value": show(value)}, filename=filename, line=line, field=name
        )
    number = float(value)
    if not math.isfinite(number):
        raise FormatError(not_finite_message() % {"value": show(value)}, filename=filename, line=line, field=name)
    return number


def parse_online(data: bytes | BinaryIO, *, filename: str) -> list[OnlineFigure]:
    """Parse online figures, CSV ``system,metric,value[,ci_low,ci_high][,qid]`` (an optional header row
    naming these columns may reorder them).

    Without a header, 3 columns are ``system,metric,value``, 4 add the ``qid``, 5 add the confidence
    interval, 6 have both; empty ``ci_low``/``ci_high``/``qid`` cells mean "none". Numbers are plain ASCII
    decimals. Which systems and queries exist is the caller's business.

    One function: one pass over the rows, each row's checks in the order its error message names them.

    Raises
    ------
    FormatError
        A row with another number of columns, an empty system or metric, a value that is not a finite
        number, half a confidence interval or one that does not bracket the value, a (system, metric, qid)
        given twice, an empty file.
    """
    lines = decode_lines(data, filename=filename)
    rows = list(csv.reader(lines))
    numbered = [(i + 1, [cell.strip() for cell in row]) for i, row in enumerate(rows) if any(c.strip() for c in row)]
    if not numbered:
        raise empty_file(filename)
    layout: tuple[str, ...] | None = None
    first_line, first = numbered[0]
    # A header names at least one of the columns and holds no number (a data row always has its value).
    if {c.lower() for c in first} & {"system", "metric", "value"} and not any(map(_ASCII_NUMBER.fullmatch, first)):
        names = tuple(cell.lower() for cell in first)
        unknown = next((n for n in names if n not in _ONLINE_FIELDS), None)
        if unknown is not None:
            raise FormatError(
                _("unknown column %(name)s (expected %(columns)s)")
                % {"name": show(unknown), "columns": ONLINE_COLUMNS},
                filename=filename,
                line=first_line,
            )
        missing = next((n for n in ("system", "metric", "value") if n not in names), None)
        if missing is not None:
            raise FormatError(
                _("the header has no %(name)s column") % {"name": repr(missing)}, filename=filename, line=first_line
            )
        if len(set(names)) != len(names):
            raise FormatError(_("a column is named twice in the header"), filename=filename, line=first_line)
        if ("ci_low" in names) != ("ci_high" in names):
            raise FormatError(_("ci_low and ci_high go together"), filename=filename, line=first_line)
        layout = names
        numbered = numbered[1:]
    figures: list[OnlineFigure] = []
    seen: dict[tuple[str, str, str], int] = {}
    for line, cells in numbered:
        cols = layout or _ONLINE_LAYOUTS.get(len(cells))
        if cols is None or len(cells) != len(cols):
            expected = _("%(n)s (as the header says)") % {"n": len(layout)} if layout else _("3 to 6")
            raise FormatError(columns_message(expected, ONLINE_COLUMNS, len(cells)), filename=filename, line=line)
        row = dict(zip(cols, cells, strict=True))
        system, metric, qid = row["system"], row["metric"], row.get("qid", "")
        for name, value, limit in (
            ("system", system, SYSTEM_NAME_MAX_LENGTH),
            ("metric", metric, ONLINE_METRIC_MAX_LENGTH),
            ("qid", qid, QID_MAX_LENGTH),
        ):
            if not value and name != "qid":
                raise FormatError(_("empty"), filename=filename, line=line, field=name)
            if BAD_CHAR.search(value):
                raise char_error(value, name, filename, line)
            if len(value) > limit:
                raise FormatError(
                    _("longer than %(limit)s characters") % {"limit": limit}, filename=filename, line=line, field=name
                )
        number = _online_number(row["value"], "value", filename, line, required=True)
        figure = 0.0 if number is None else number  # never None: the value is required
        low = _online_number(row.get("ci_low", ""), "ci_low", filename, line, required=False)
        high = _online_number(row.get("ci_high", ""), "ci_high", filename, line, required=False)
        if (low is None) != (high is None):
            raise FormatError(
                _("give both ends of the confidence interval or neither"),
                filename=filename,
                line=line,
                field="ci_high" if high is None else "ci_low",
            )
        if low is not None and high is not None and not low <= figure <= high:
            raise FormatError(
                _("the interval [%(low)s, %(high)s] does not contain the value %(value)s")
                % {"low": f"{low:g}", "high": f"{high:g}", "value": f"{figure:g}"},
                filename=filename,
                line=line,
                field="ci_low" if low > figure else "ci_high",
            )
        key = (system, metric, qid)
        if key in seen:
            where = {"metric": repr(metric), "system": repr(system), "qid": show(qid), "first": seen[key]}
            message = (
                _("%(metric)s of system %(system)s for qid %(qid)s given twice (first on line %(first)s)")
                if qid
                else _("%(metric)s of system %(system)s given twice (first on line %(first)s)")
            )
            raise FormatError(
                message % where,
                filename=filename,
                line=line,
                field="metric",
            )
        seen[key] = line
        figures.append(OnlineFigure(system, metric, figure, low, high, qid, line))
    if not figures:
        raise FormatError(_("no figures, only a header"), filename=filename)
    return figures
