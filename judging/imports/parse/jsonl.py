"""JSON Lines: one object per line, read with errors that name the line and the key."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import PureWindowsPath
from typing import Any

from django.utils.translation import gettext as _

from judging.imports.errors import FormatError
from judging.imports.parse.text import (
    JSONL_SUFFIXES,
    MAX_LENGTH,
    check_id,
    check_value,
    json_type,
    length_error,
)

_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_JSON_BAD_ESCAPE = re.compile(r"\\u(?:0000|[dD][89abcdefABCDEF])")


def json_may_hold_bad_chars(text: str) -> bool:
    """Whether JSON text may decode to a NUL or a lone surrogate: only a \\u0000 or \\uD800-\\uDFFF escape
    makes one (a raw NUL is a JSON error). One scan of the file spares a scan of every value."""
    return _JSON_BAD_ESCAPE.search(text) is not None


def is_jsonl(lines: Sequence[str], filename: str) -> bool:
    if PureWindowsPath(filename).suffix.lower() in JSONL_SUFFIXES:
        return True
    first = next((line.lstrip() for line in lines if line.strip()), "")
    return first.startswith("{")


def _space_end(line: str, start: int) -> int:
    """Where the JSON whitespace from ``start`` on ends (the pattern matches the empty string too)."""
    found = _JSON_SPACE.match(line, start)
    return found.end() if found else start


def _culprit_key(line: str) -> tuple[str | None, int | None]:
    """The top-level key whose value json cannot read (too deep, an integer too long), and where that
    value starts; (None, None) when the line is no object or the failure is elsewhere. Error path only."""
    decoder = json.JSONDecoder()
    try:
        i = _space_end(line, 0)
        if line[i] != "{":
            return None, None
        i = _space_end(line, i + 1)
        while line[i] == '"':
            key, i = decoder.raw_decode(line, i)
            i = _space_end(line, i)
            if line[i] != ":":
                return None, None
            start = _space_end(line, i + 1)
            try:
                _, i = decoder.raw_decode(line, start)
            except (RecursionError, ValueError):
                return key, start
            i = _space_end(line, i)
            if line[i] != ",":
                return None, None
            i = _space_end(line, i + 1)
    except (IndexError, ValueError, RecursionError):
        pass
    return None, None


def _json_array_message() -> str:
    return _("expected JSON Lines (one object per line), found a JSON array")


def _json_error(exc: Exception, line: str, filename: str, lineno: int) -> FormatError:
    """The FormatError for a line json.loads rejected (error path only)."""
    if isinstance(exc, json.JSONDecodeError):
        if line.lstrip().startswith("["):
            message = _json_array_message()
        else:
            message = _("invalid JSON: %(error)s (column %(column)s)") % {"error": exc.msg, "column": exc.colno}
        return FormatError(message, filename=filename, line=lineno)
    # A RecursionError (arrays or objects nested thousands deep) or Python's 4,300-digit limit on
    # integers: neither is a JSONDecodeError, and both would otherwise escape as a traceback.
    key, start = _culprit_key(line)
    if isinstance(exc, RecursionError):
        return FormatError(_("invalid JSON: nested too deeply"), filename=filename, line=lineno, field=key)
    digits = re.match(r"-?[0-9]+", line[start:]) if start is not None else None
    if digits is None:  # the long integer sits deeper, inside an array or object
        return FormatError(
            _("invalid JSON: an integer of more than %(digits)s digits")
            % {"digits": f"{sys.get_int_max_str_digits():,}"},
            filename=filename,
            line=lineno,
            field=key,
        )
    length = len(digits.group())
    if key in MAX_LENGTH:
        return length_error(length, key, filename, lineno)
    return FormatError(
        _("integer too long: %(digits)s digits") % {"digits": f"{length:,}"}, filename=filename, line=lineno, field=key
    )


def json_objects(numbered: Iterable[tuple[int, str]], filename: str) -> Iterator[tuple[int, dict[str, Any], bool]]:
    """Each non-blank numbered line as (its number, its object, whether its values may hold a NUL or a lone
    surrogate: see json_may_hold_bad_chars)."""
    for lineno, line in numbered:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise _json_error(exc, line, filename, lineno) from None
        if isinstance(obj, list):
            raise FormatError(_json_array_message(), filename=filename, line=lineno)
        if not isinstance(obj, dict):
            raise FormatError(
                _("expected a JSON object, found %(found)s") % {"found": json_type(obj)},
                filename=filename,
                line=lineno,
            )
        yield lineno, obj, json_may_hold_bad_chars(line)


def json_id(obj: dict[str, Any], key: str, filename: str, line: int, *, chars: bool = True) -> str:
    if key not in obj:
        raise FormatError(_("missing key"), filename=filename, line=line, field=key)
    value = obj[key]
    if isinstance(value, int) and not isinstance(value, bool):
        return check_value(str(value), key, filename, line)
    if not isinstance(value, str):
        found = f"{value!r}" if isinstance(value, float) else json_type(value)
        raise FormatError(
            _("expected a string or an integer, found %(found)s") % {"found": found},
            filename=filename,
            line=line,
            field=key,
        )
    return check_id(value.strip(), key, filename, line, chars=chars)


def expected_string(value: object) -> str:
    return _("expected a string, found %(found)s") % {"found": json_type(value)}


def json_text(obj: dict[str, Any], key: str, filename: str, line: int, *, required: bool, chars: bool = True) -> str:
    if key not in obj and required:
        raise FormatError(_("missing key"), filename=filename, line=line, field=key)
    value = obj.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise FormatError(expected_string(value), filename=filename, line=line, field=key)
    value = value.strip()
    if required and not value:
        raise FormatError(_("empty"), filename=filename, line=line, field=key)
    return check_value(value, key, filename, line, chars=chars)
