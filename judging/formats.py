"""Parse and write the files RelJudge exchanges: TREC runs and qrels, topics, documents (pure, no ORM)."""

from __future__ import annotations

import codecs
import csv
import functools
import gc
import json
import math
import operator
import re
import sys
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import PureWindowsPath

import numpy as np
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

__all__ = [
    "Doc",
    "FormatError",
    "ImportRefused",
    "OnlineFigure",
    "Qrel",
    "RankedList",
    "Topic",
    "DOCID_MAX_LENGTH",
    "QID_MAX_LENGTH",
    "SYSTEM_NAME_MAX_LENGTH",
    "URL_MAX_LENGTH",
    "decode_lines",
    "format_qrels",
    "format_run",
    "parse_docs",
    "parse_online",
    "parse_qrels",
    "parse_run",
    "parse_query_tags",
    "parse_topics",
]

RUN_COLUMNS = "qid Q0 docid rank score tag"
QRELS_COLUMNS = "qid iteration docid label"

# Widths of the database columns these values go to: the models take their max_length from here, so
# that a parse rejects exactly what the database could not store (SQLite would store it anyway,
# PostgreSQL would fail the whole import with a DataError).
QID_MAX_LENGTH = 100
DOCID_MAX_LENGTH = 200
SYSTEM_NAME_MAX_LENGTH = 100  # a run's tag names its system
URL_MAX_LENGTH = 2000
_MAX_LENGTH = {"qid": QID_MAX_LENGTH, "docid": DOCID_MAX_LENGTH, "tag": SYSTEM_NAME_MAX_LENGTH, "url": URL_MAX_LENGTH}
_SHORTEST_LIMIT = min(_MAX_LENGTH.values())

# trec_eval splits columns with C's isspace(), i.e. these six characters. Python's str.split() also
# splits on Unicode spaces (no-break space, ideographic space, U+001C..U+001F ...), which would cut a
# docid holding one into two columns; those are found and named instead. (All of them lie below U+3001.)
_ASCII_SPACE = " \t\n\r\x0b\x0c"
_OTHER_SPACES = "".join(c for c in map(chr, range(0x3001)) if c.isspace() and c not in _ASCII_SPACE)
_OTHER_SPACE = re.compile(f"[{re.escape(_OTHER_SPACES)}]")
_ASCII_SPLIT = re.compile(f"[{re.escape(_ASCII_SPACE)}]+")
# PostgreSQL text cannot hold NUL, and a lone surrogate (only a JSON escape can make one) is not Unicode
# that any database encodes.
_BAD_CHAR = re.compile("[\x00\ud800-\udfff]")
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_JSON_BAD_ESCAPE = re.compile(r"\\u(?:0000|[dD][89abcdefABCDEF])")
_JSONL_SUFFIXES = frozenset({".jsonl", ".json", ".ndjson"})
# A first line that only names the columns is a header, not a record.
_TOPIC_HEADERS = frozenset({("qid", "text"), ("qid", "text", "description"), ("qid", "text", "description", "tags")})
_TAG_HEADERS = frozenset({("qid", "tags")})
TAG_MAX = 100  # characters of one query tag (QueryTag.tag)
_DOC_HEADERS = frozenset({("docid", "title", "text"), ("docid", "text")})
_RUN_TSV_HEADERS = frozenset({("qid", "docid", "rank"), ("qid", "docid", "rank", "score")})
_JSON_TYPES = {
    dict: gettext_lazy("an object"),
    list: gettext_lazy("an array"),
    str: gettext_lazy("a string"),
    bool: gettext_lazy("a boolean"),
    int: gettext_lazy("a number"),
    float: gettext_lazy("a number"),
    type(None): "null",
}


def _json_type(value: object) -> str:
    """What a JSON value is, in words for an error message."""
    return str(_JSON_TYPES.get(type(value)) or _("a value"))


class ImportRefused(ValueError):
    """An import that cannot go ahead; nothing of the file was written.

    Every interface reports it the same way: the page and the command print ``str()`` (which names the file,
    and the line and field when known), the API answers ``as_dict()`` with ``status``.
    """

    status = 400

    def __init__(self, message: str, *, filename: str, line: int | None = None, field: str | None = None):
        self.message = message
        self.filename = filename
        self.line = line
        self.field = field
        # File, line and field stay as they are (the field is the format's own name); only the words translate.
        where = {"file": filename, "line": line, "field": field, "message": message}
        if line is not None and field is not None:
            text = _("%(file)s, line %(line)s, field '%(field)s': %(message)s") % where
        elif line is not None:
            text = _("%(file)s, line %(line)s: %(message)s") % where
        elif field is not None:
            text = _("%(file)s, field '%(field)s': %(message)s") % where
        else:
            text = f"{filename}: {message}"
        super().__init__(text)

    def __reduce__(self):
        # The keyword-only constructor defeats BaseException's default pickling (used by task queues).
        return type(self)._rebuilt, (self.message, self.filename, self.line, self.field)

    @classmethod
    def _rebuilt(cls, message: str, filename: str, line: int | None, field: str | None) -> ImportRefused:
        return cls(message, filename=filename, line=line, field=field)

    def as_dict(self) -> dict:
        return {"detail": str(self), "file": self.filename, "line": self.line, "field": self.field}


class FormatError(ImportRefused):
    """Bad input in an imported file; ``str()`` names the file, and the line and field when known."""


@dataclass(frozen=True, slots=True)
class Topic:
    qid: str
    text: str
    description: str = ""
    tags: tuple[str, ...] | None = None  # None: the file says nothing about tags (existing ones stay)


@dataclass(frozen=True, slots=True)
class Doc:
    docid: str
    text: str
    title: str = ""
    url: str = ""
    attributes: dict | None = None  # None: the file says nothing about attributes (existing ones stay)


@dataclass(frozen=True, slots=True)
class Qrel:
    qid: str
    docid: str
    label: int


@dataclass
class RankedList:
    """One query's ranked documents, best first, in the order trec_eval scores them."""

    qid: str
    docids: list[str]
    scores: np.ndarray

    def __post_init__(self) -> None:
        self.scores = np.asarray(self.scores, dtype=np.float64)
        if self.scores.shape != (len(self.docids),):
            raise ValueError(
                f"ranking of qid {self.qid!r}: {len(self.docids)} docids but scores of shape {self.scores.shape}"
            )

    def __eq__(self, other: object) -> bool:
        # The generated __eq__ would compare arrays with ==, whose truth value is ambiguous.
        if not isinstance(other, RankedList):
            return NotImplemented
        return (
            self.qid == other.qid
            and list(self.docids) == list(other.docids)
            and np.array_equal(self.scores, other.scores)
        )


# --------------------------------------------------------------------------- decoding


def _gc_paused(parse):
    """Run a parser with the cyclic garbage collector paused.

    A parse builds lists of millions of strings and then many small objects; every collection those
    allocations trigger walks the young big lists again, which costs a third of a 1M-line run's parse
    time. Parsed data holds no reference cycles, so reference counting frees everything as usual.
    """

    @functools.wraps(parse)
    def wrapper(*args, **kwargs):
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return parse(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return wrapper


def _decode(data: bytes, filename: str) -> str:
    """UTF-8 text of the file with any BOM removed and every line ending turned into "\\n"."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            raise FormatError(_("the file is UTF-16; save it as UTF-8"), filename=filename) from None
        # Only the error path needs the line: count the line breaks before the bad byte, the way
        # the happy path below splits lines (CRLF, LF and a lone CR each end one line).
        head = data[: exc.start]
        line = head.count(b"\n") + head.count(b"\r") - head.count(b"\r\n") + 1
        bad = " ".join(f"0x{byte:02x}" for byte in data[exc.start : exc.end])
        raise FormatError(
            _("not valid UTF-8 (bad bytes %(bytes)s)") % {"bytes": bad}, filename=filename, line=line
        ) from None
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _split_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline ends the last line, it does not start another one
    return lines


def nfc(text: str) -> str:
    """Text in Unicode NFC, the form keyboards and browsers produce: Hangul typed on a Mac or copied out of a
    file name there can be decomposed (NFD, "패딩" as six jamo instead of two syllables), which displays the same
    but does not match the query a browser sends, sorts apart and can be cut inside a syllable. Imported text
    (query text and description, document title and body) is stored in NFC; identifiers (qid, docid, tags,
    system names) are kept exactly as written so that exports match the files other tools hold byte for byte."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def decode_lines(data: bytes, *, filename: str) -> list[str]:
    """Split a UTF-8 file into lines; ``lines[i]`` is line ``i + 1``, without its line ending.

    A leading BOM is dropped; LF, CRLF and CR line endings are accepted. Blank lines are kept so that
    line numbers stay right; an empty file gives ``[]`` (each parser decides whether that is an error).

    Raises
    ------
    FormatError
        If the bytes are not UTF-8, naming the (1-based) line with the bad bytes.
    """
    return _split_lines(_decode(data, filename))


# --------------------------------------------------------------------------- field helpers


def _show(value: str, limit: int = 60) -> str:
    return repr(value if len(value) <= limit else value[:limit] + "...")


def _empty_file(filename: str) -> FormatError:
    return FormatError(_("empty file"), filename=filename)


def _char_error(value: str, name: str | None, filename: str, line: int) -> FormatError:
    char = _BAD_CHAR.search(value).group()
    if char == "\x00":
        message = _("contains a NUL character (U+0000)")
    else:
        message = _("contains a lone surrogate (U+%(code)04X), which is not valid Unicode") % {"code": ord(char)}
    return FormatError(message, filename=filename, line=line, field=name)


def _length_error(length: int, name: str, filename: str, line: int) -> FormatError:
    return FormatError(
        _("too long: %(length)s characters (at most %(limit)s)")
        % {"length": f"{length:,}", "limit": f"{_MAX_LENGTH[name]:,}"},
        filename=filename,
        line=line,
        field=name,
    )


def _check_value(value: str, name: str, filename: str, line: int, *, chars: bool = True) -> str:
    """Any stored value: no NUL or lone surrogate, and no longer than its database column.

    ``chars=False`` skips the character scan where the parser saw that the file cannot hold such a
    character (the scan costs more than parsing a JSON line).
    """
    if chars and _BAD_CHAR.search(value):
        raise _char_error(value, name, filename, line)
    if name in _MAX_LENGTH and len(value) > _MAX_LENGTH[name]:
        raise _length_error(len(value), name, filename, line)
    return value


def _check_id(value: str, name: str, filename: str, line: int, *, chars: bool = True) -> str:
    """An identifier (qid, docid, tag) must survive the whitespace-separated TREC formats and fit its column."""
    if not value:
        raise FormatError(_("empty"), filename=filename, line=line, field=name)
    if len(value.split()) != 1 or value.strip() != value:
        raise FormatError(_whitespace(value), filename=filename, line=line, field=name)
    return _check_value(value, name, filename, line, chars=chars)


def _whitespace(value: str) -> str:
    return _("contains whitespace: %(value)s") % {"value": _show(value)}


def _columns(expected: object, names: str, found: object) -> str:
    return _("expected %(expected)s columns (%(names)s), found %(found)s") % {
        "expected": expected,
        "names": names,
        "found": found,
    }


def _has_other_space(text: str) -> bool:
    """Whether ``text`` holds a space that str.split() splits on but trec_eval does not (fast when absent)."""
    if text.isascii():  # a C-speed scan; then only U+001C..U+001F remain possible
        return any(char in text for char in _OTHER_SPACES[:4])
    return _OTHER_SPACE.search(text) is not None


def _check_columns(
    lines: Sequence[str], names: Sequence[str], filename: str, *, exact: bool, nul: bool, spaces: bool
) -> None:
    """Error path of the whitespace-separated formats: name the column holding a NUL or a non-ASCII space.

    Columns are split as trec_eval splits them (ASCII whitespace). Columns past ``names`` are ignored
    (runs may carry extra ones), unless ``exact``: then a line with another column count is the error.
    """
    for lineno, line in enumerate(lines, 1):
        if not ((nul and "\x00" in line) or (spaces and _OTHER_SPACE.search(line))):
            continue
        cols = [col for col in _ASCII_SPLIT.split(line) if col]
        if exact and len(cols) != len(names):
            raise FormatError(_columns(len(names), " ".join(names), len(cols)), filename=filename, line=lineno)
        for name, col in zip(names, cols, strict=False):
            if "\x00" in col:
                raise _char_error(col, name, filename, lineno)
            if _OTHER_SPACE.search(col):
                raise FormatError(_whitespace(col), filename=filename, line=lineno, field=name)


def _check_lengths(columns: Sequence[tuple[str, Sequence[str]]], line_of: Callable[[int], int], filename: str) -> None:
    """Length limits of whole id columns at C speed; the first line over a limit is found only on failure."""
    for name, values in columns:
        if values and max(map(len, values)) > _MAX_LENGTH[name]:
            i = next(i for i, value in enumerate(values) if len(value) > _MAX_LENGTH[name])
            raise _length_error(len(values[i]), name, filename, line_of(i))


def _json_may_hold_bad_chars(text: str) -> bool:
    """Whether JSON text may decode to a NUL or a lone surrogate: only a \\u0000 or \\uD800-\\uDFFF escape
    makes one (a raw NUL is a JSON error). One scan of the file spares a scan of every value."""
    return _JSON_BAD_ESCAPE.search(text) is not None


def _is_jsonl(lines: Sequence[str], filename: str) -> bool:
    if PureWindowsPath(filename).suffix.lower() in _JSONL_SUFFIXES:
        return True
    first = next((line.lstrip() for line in lines if line.strip()), "")
    return first.startswith("{")


def _culprit_key(line: str) -> tuple[str | None, int | None]:
    """The top-level key whose value json cannot read (too deep, an integer too long), and where that
    value starts; (None, None) when the line is no object or the failure is elsewhere. Error path only."""
    decoder = json.JSONDecoder()
    try:
        i = _JSON_SPACE.match(line).end()
        if line[i] != "{":
            return None, None
        i = _JSON_SPACE.match(line, i + 1).end()
        while line[i] == '"':
            key, i = decoder.raw_decode(line, i)
            i = _JSON_SPACE.match(line, i).end()
            if line[i] != ":":
                return None, None
            start = _JSON_SPACE.match(line, i + 1).end()
            try:
                _, i = decoder.raw_decode(line, start)
            except (RecursionError, ValueError):
                return key, start
            i = _JSON_SPACE.match(line, i).end()
            if line[i] != ",":
                return None, None
            i = _JSON_SPACE.match(line, i + 1).end()
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
    if key in _MAX_LENGTH:
        return _length_error(length, key, filename, lineno)
    return FormatError(
        _("integer too long: %(digits)s digits") % {"digits": f"{length:,}"}, filename=filename, line=lineno, field=key
    )


def _json_objects(lines: Sequence[str], filename: str) -> Iterator[tuple[int, dict]]:
    for lineno, line in enumerate(lines, 1):
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
                _("expected a JSON object, found %(found)s") % {"found": _json_type(obj)},
                filename=filename,
                line=lineno,
            )
        yield lineno, obj


def _json_id(obj: dict, key: str, filename: str, line: int, *, chars: bool = True) -> str:
    if key not in obj:
        raise FormatError(_("missing key"), filename=filename, line=line, field=key)
    value = obj[key]
    if isinstance(value, int) and not isinstance(value, bool):
        return _check_value(str(value), key, filename, line)
    if not isinstance(value, str):
        found = f"{value!r}" if isinstance(value, float) else _json_type(value)
        raise FormatError(
            _("expected a string or an integer, found %(found)s") % {"found": found},
            filename=filename,
            line=line,
            field=key,
        )
    return _check_id(value.strip(), key, filename, line, chars=chars)


def _expected_string(value: object) -> str:
    return _("expected a string, found %(found)s") % {"found": _json_type(value)}


def _json_text(obj: dict, key: str, filename: str, line: int, *, required: bool, chars: bool = True) -> str:
    if key not in obj and required:
        raise FormatError(_("missing key"), filename=filename, line=line, field=key)
    value = obj.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise FormatError(_expected_string(value), filename=filename, line=line, field=key)
    value = value.strip()
    if required and not value:
        raise FormatError(_("empty"), filename=filename, line=line, field=key)
    return _check_value(value, key, filename, line, chars=chars)


def _tsv_rows(lines: Sequence[str], headers: frozenset[tuple[str, ...]]) -> Iterator[tuple[int, list[str]]]:
    """Tab-split non-blank lines, skipping a first line that is a header."""
    first = True
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        # Stripped of ASCII whitespace only: a trailing no-break space stays, for _check_id to report.
        cols = [col.strip(_ASCII_SPACE) for col in line.split("\t")]
        if first:
            first = False
            if tuple(col.lower() for col in cols) in headers:
                continue
        yield lineno, cols


def _claim(seen: dict, key: object, *, what: str, field: str, filename: str, line: int) -> None:
    first = seen.setdefault(key, line)
    if first != line:
        raise FormatError(
            _("duplicate %(what)s (first on line %(first)s)") % {"what": what, "first": first},
            filename=filename,
            line=line,
            field=field,
        )


# --------------------------------------------------------------------------- topics and documents


def _check_tag(value: str, filename: str, line: int, field: str, *, chars: bool = False) -> str:
    """A query tag: non-empty, at most TAG_MAX characters, no comma (the TSV separator) or tab (and, with
    ``chars``, no NUL or lone surrogate: see _check_value)."""
    if chars and _BAD_CHAR.search(value):
        raise _char_error(value, field, filename, line)
    if not value:
        raise FormatError(_("empty tag"), filename=filename, line=line, field=field)
    if len(value) > TAG_MAX:
        raise FormatError(
            _("tag longer than %(limit)s characters: %(value)s") % {"limit": TAG_MAX, "value": _show(value)},
            filename=filename,
            line=line,
            field=field,
        )
    if "," in value or "\t" in value or "\n" in value:
        raise FormatError(
            _("a tag may not contain a comma or tab: %(value)s") % {"value": _show(value)},
            filename=filename,
            line=line,
            field=field,
        )
    return value


def _tag_list(raw: str, filename: str, line: int, field: str) -> tuple[str, ...]:
    """Comma-separated tags; blanks around them ignored, duplicates kept once, an empty column no tag."""
    if not raw.strip():
        return ()
    tags = [_check_tag(t.strip(), filename, line, field, chars=True) for t in raw.split(",")]
    return tuple(dict.fromkeys(tags))


def _json_tags(obj: dict, filename: str, line: int, *, chars: bool = True) -> tuple[str, ...] | None:
    if "tags" not in obj or obj["tags"] is None:
        return None
    value = obj["tags"]
    if not isinstance(value, list):
        raise FormatError(
            _("expected an array of strings, found %(found)s") % {"found": _json_type(value)},
            filename=filename,
            line=line,
            field="tags",
        )
    tags = []
    for i, tag in enumerate(value):
        if not isinstance(tag, str):
            raise FormatError(_expected_string(tag), filename=filename, line=line, field=f"tags[{i}]")
        tags.append(_check_tag(tag.strip(), filename, line, f"tags[{i}]", chars=chars))
    return tuple(dict.fromkeys(tags))


def _json_attributes(obj: dict, filename: str, line: int, *, chars: bool = True) -> dict | None:
    """``"attributes"``: an object of scalar facets (string, number or boolean), e.g. {"brand": "acme"}."""
    if "attributes" not in obj or obj["attributes"] is None:
        return None
    value = obj["attributes"]
    if not isinstance(value, dict):
        raise FormatError(
            _("expected an object, found %(found)s") % {"found": _json_type(value)},
            filename=filename,
            line=line,
            field="attributes",
        )
    for key, item in value.items():
        if not key.strip():
            raise FormatError(_("empty attribute name"), filename=filename, line=line, field="attributes")
        if isinstance(item, (dict, list)):
            raise FormatError(
                _("expected a string, number or boolean, found %(found)s") % {"found": _json_type(item)},
                filename=filename,
                line=line,
                field=f"attributes.{key[:40]}",
            )
        for v in (key, item):
            if chars and isinstance(v, str) and _BAD_CHAR.search(v):
                raise _char_error(v, f"attributes.{key[:40]}", filename, line)
    return value


@_gc_paused
def parse_topics(data: bytes, *, filename: str) -> list[Topic]:
    """Parse topics: TSV ``qid<TAB>text[<TAB>description[<TAB>tags]]`` or JSONL
    ``{"qid", "text", "description"?, "tags"?}``.

    JSONL is recognised by a ``.jsonl``/``.json``/``.ndjson`` name or a first record starting with ``{``.
    A TSV first line naming the columns is taken as a header and skipped; a JSON ``qid`` may be an
    integer. Tags (query segments such as ``head``/``tail``) are a comma-separated fourth TSV column or a
    JSON array of strings; a topic without them leaves the query's tags as they are.
    """
    raw = _decode(data, filename)
    lines = _split_lines(raw)
    topics: list[Topic] = []
    seen: dict[str, int] = {}
    if _is_jsonl(lines, filename):
        chars = _json_may_hold_bad_chars(raw)
        for line, obj in _json_objects(lines, filename):
            qid = _json_id(obj, "qid", filename, line, chars=chars)
            text = _json_text(obj, "text", filename, line, required=True, chars=chars)
            description = _json_text(obj, "description", filename, line, required=False, chars=chars)
            tags = _json_tags(obj, filename, line, chars=chars)
            _claim(seen, qid, what=f"qid {_show(qid)}", field="qid", filename=filename, line=line)
            topics.append(Topic(qid, nfc(text), nfc(description), tags))
    else:
        nul = "\x00" in raw
        for line, cols in _tsv_rows(lines, _TOPIC_HEADERS):
            if len(cols) not in (2, 3, 4):
                raise FormatError(
                    _("expected 2 to 4 tab-separated columns (qid, text[, description[, tags]]), found %(found)s")
                    % {"found": len(cols)},
                    filename=filename,
                    line=line,
                )
            qid = _check_id(cols[0], "qid", filename, line, chars=nul)
            if not cols[1]:
                raise FormatError(_("empty"), filename=filename, line=line, field="text")
            if nul:
                for name, col in zip(("text", "description", "tags"), cols[1:], strict=False):
                    _check_value(col, name, filename, line)
            tags = _tag_list(cols[3], filename, line, "tags") if len(cols) == 4 else None
            _claim(seen, qid, what=f"qid {_show(qid)}", field="qid", filename=filename, line=line)
            topics.append(Topic(qid, nfc(cols[1]), nfc(cols[2]) if len(cols) >= 3 else "", tags))
    if not topics:
        raise _empty_file(filename)
    return topics


@_gc_paused
def parse_docs(data: bytes, *, filename: str) -> list[Doc]:
    """Parse documents: JSONL ``{"docid", "title"?, "text", "url"?, "attributes"?}`` or TSV
    ``docid<TAB>title<TAB>text``. ``attributes`` is an object of facets (``{"brand": ..., "category": ...}``)
    whose values are strings, numbers or booleans.

    TSV also accepts two columns ``docid<TAB>text`` (the MS MARCO collection layout) and skips a header
    line naming the columns; a JSON ``docid`` may be an integer.
    """
    raw = _decode(data, filename)
    lines = _split_lines(raw)
    docs: list[Doc] = []
    seen: dict[str, int] = {}
    if _is_jsonl(lines, filename):
        chars = _json_may_hold_bad_chars(raw)
        for line, obj in _json_objects(lines, filename):
            docid = _json_id(obj, "docid", filename, line, chars=chars)
            title = _json_text(obj, "title", filename, line, required=False, chars=chars)
            text = _json_text(obj, "text", filename, line, required=True, chars=chars)
            url = _json_text(obj, "url", filename, line, required=False, chars=chars)
            attributes = _json_attributes(obj, filename, line, chars=chars)
            _claim(seen, docid, what=f"docid {_show(docid)}", field="docid", filename=filename, line=line)
            docs.append(Doc(docid, nfc(text), title=nfc(title), url=url, attributes=attributes))
    else:
        nul = "\x00" in raw
        for line, cols in _tsv_rows(lines, _DOC_HEADERS):
            if len(cols) not in (2, 3):
                raise FormatError(
                    _("expected 3 tab-separated columns (docid, title, text) or 2 (docid, text), found %(found)s")
                    % {"found": len(cols)},
                    filename=filename,
                    line=line,
                )
            docid = _check_id(cols[0], "docid", filename, line, chars=nul)
            title, text = ("", cols[1]) if len(cols) == 2 else (cols[1], cols[2])
            if not text:
                raise FormatError(_("empty"), filename=filename, line=line, field="text")
            if nul:
                _check_value(title, "title", filename, line)
                _check_value(text, "text", filename, line)
            _claim(seen, docid, what=f"docid {_show(docid)}", field="docid", filename=filename, line=line)
            docs.append(Doc(docid, nfc(text), title=nfc(title)))
    if not docs:
        raise _empty_file(filename)
    return docs


@_gc_paused
def parse_query_tags(data: bytes, *, filename: str) -> list[tuple[str, tuple[str, ...]]]:
    """Parse query tags: TSV ``qid<TAB>tag,tag,...`` (a header ``qid<TAB>tags`` is skipped).

    An empty second column means "no tags" for that query; a qid may appear once.
    """
    lines = decode_lines(data, filename=filename)
    rows: list[tuple[str, tuple[str, ...]]] = []
    seen: dict[str, int] = {}
    for line, cols in _tsv_rows(lines, _TAG_HEADERS):
        if len(cols) not in (1, 2):
            raise FormatError(
                _("expected 2 tab-separated columns (qid, comma-separated tags), found %(found)s")
                % {"found": len(cols)},
                filename=filename,
                line=line,
            )
        qid = _check_id(cols[0], "qid", filename, line)
        _claim(seen, qid, what=f"qid {_show(qid)}", field="qid", filename=filename, line=line)
        rows.append((qid, _tag_list(cols[1] if len(cols) == 2 else "", filename, line, "tags")))
    if not rows:
        raise _empty_file(filename)
    return rows


# --------------------------------------------------------------------------- runs


def _ascii_number(convert: Callable[[str], object], token: str) -> object:
    if not token.isascii() or "_" in token:
        raise ValueError(token)
    return convert(token)


def _first_failure(values: Sequence[str], convert: Callable[[str], object]) -> int:
    """Index of the first value ``convert`` rejects (error path only)."""
    for i, value in enumerate(values):
        try:
            convert(value)
        except ValueError:
            return i
    raise AssertionError("unreachable: a value failed to convert in bulk but not one by one")


def _column_numbers(
    name: str,
    tokens: Sequence[str],
    convert: Callable[[str], object],
    line_of: Callable[[int], int],
    filename: str,
    *,
    loose: bool = True,
) -> tuple[list, FormatError | None]:
    """Convert a whole column at C speed; on failure, the error for its first bad value.

    Numbers are ASCII, as trec_eval reads them: int() and float() would also take "1_000", full-width
    and other Unicode digits ("１０", "٣"), which the one join-and-scan below turns away. A caller that
    saw the whole file is ASCII without "_" passes ``loose=False`` and skips that scan.
    """
    try:
        values = list(map(convert, tokens))
        if not loose:
            return values, None
        joined = "".join(tokens)
        if joined.isascii() and "_" not in joined:
            return values, None
    except ValueError:
        pass
    i = _first_failure(tokens, functools.partial(_ascii_number, convert))
    message = _("not an integer: %(value)s") if convert is int else _("not a number: %(value)s")
    return [], FormatError(message % {"value": _show(tokens[i])}, filename=filename, line=line_of(i), field=name)


def _not_finite() -> str:
    return _("not a finite number: %(value)s")


def _nonfinite_error(
    scores: np.ndarray, tokens: Sequence[object], line_of: Callable[[int], int], filename: str
) -> FormatError | None:
    bad = np.flatnonzero(~np.isfinite(scores))
    if not len(bad):
        return None
    i = int(bad[0])
    return FormatError(
        _not_finite() % {"value": _show(str(tokens[i]))}, filename=filename, line=line_of(i), field="score"
    )


def _raise_first(*errors: FormatError | None) -> None:
    found = [error for error in errors if error is not None]
    if found:
        raise min(found, key=lambda error: error.line or 0)


def _score_key(scores: np.ndarray) -> np.ndarray:
    """Sort key for score-descending order, compared as trec_eval compares: it keeps scores as C floats
    (float32), so scores equal in float32 tie and fall back to the docid rule."""
    return -np.asarray(scores, dtype=np.float64).astype(np.float32)


def _rankings(
    qids: Sequence[str],
    docids: Sequence[str],
    tags: Sequence[str],
    sortkey: np.ndarray,
    scores: np.ndarray,
    line_of: Callable[[int], int],
    filename: str,
) -> dict[str, list[RankedList]]:
    """Group rows by (tag, qid) and order each group by ``sortkey`` ascending, ties by docid descending.

    ``sortkey`` is ``-score`` (trec_eval: score descending, then docid descending in byte order, which for
    UTF-8 is code point order, i.e. Python's ``str`` order) or the rank for rank-only runs.
    Groups come out in the order their first line appears in the file.
    """
    n = len(qids)
    single_tag = len(set(tags)) == 1
    codes: dict = {}
    keys = qids if single_tag else zip(tags, qids, strict=True)
    group = np.fromiter((codes.setdefault(key, len(codes)) for key in keys), dtype=np.intp, count=n)
    order = np.lexsort((sortkey, group))

    sorted_group = group[order]
    sorted_key = sortkey[order]
    tied = np.flatnonzero((sorted_group[1:] == sorted_group[:-1]) & (sorted_key[1:] == sorted_key[:-1]))
    if len(tied):
        # tied[i] means positions tied[i] and tied[i] + 1 are tied: merge consecutive pairs into runs.
        breaks = np.flatnonzero(np.diff(tied) != 1)
        starts = np.concatenate(([tied[0]], tied[breaks + 1]))
        stops = np.concatenate((tied[breaks], [tied[-1]])) + 2
        for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
            order[start:stop] = sorted(order[start:stop].tolist(), key=docids.__getitem__, reverse=True)

    ordered_docids = list(map(docids.__getitem__, order.tolist()))
    ordered_scores = scores[order]
    stops = np.cumsum(np.bincount(group, minlength=len(codes))).tolist()
    result: dict[str, list[RankedList]] = {}
    start = 0
    for key, stop in zip(codes, stops, strict=True):
        tag, qid = (tags[0], key) if single_tag else key
        ranked = ordered_docids[start:stop]
        if len(set(ranked)) != len(ranked):
            _raise_duplicate_docid(qids, docids, tags, line_of, filename)
        result.setdefault(tag, []).append(RankedList(qid, ranked, ordered_scores[start:stop]))
        start = stop
    return result


def _raise_duplicate_docid(
    qids: Sequence[str],
    docids: Sequence[str],
    tags: Sequence[str],
    line_of: Callable[[int], int],
    filename: str,
) -> None:
    """Raise for the first line (in file order) that repeats a docid of its query (error path only)."""
    first: dict[tuple[str, str, str], int] = {}
    for i, key in enumerate(zip(tags, qids, docids, strict=True)):
        if key in first:
            raise FormatError(
                _("duplicate docid %(docid)s for qid %(qid)s (first on line %(first)s)")
                % {"docid": _show(key[2]), "qid": _show(key[1]), "first": line_of(first[key])},
                filename=filename,
                line=line_of(i),
                field="docid",
            )
        first[key] = i
    raise AssertionError("unreachable: a ranking had a duplicate docid but no line repeats one")


def _by_rank(ranks: list[int], filename: str, line_of: Callable[[int], int]) -> tuple[np.ndarray, np.ndarray]:
    """Sort key and scores of a rank-only run: rank ascending, and score = -rank."""
    try:
        rank_array = np.array(ranks, dtype=np.int64)
    except OverflowError:
        i = next(i for i, rank in enumerate(ranks) if not -(2**63) < rank < 2**63)
        raise FormatError(
            _("out of range: %(value)s") % {"value": ranks[i]}, filename=filename, line=line_of(i), field="rank"
        ) from None
    return rank_array, -rank_array.astype(np.float64)


def _default_tag(filename: str) -> str:
    stem = PureWindowsPath(filename).stem
    # Cut to the system name's width: a long file name is no error in the file.
    return "_".join(stem.split())[:SYSTEM_NAME_MAX_LENGTH] or "run"


def _first_data_line(text: str) -> str | None:
    start = 0
    while start < len(text):
        stop = text.find("\n", start)
        if stop < 0:
            stop = len(text)
        if not text[start:stop].isspace() and stop > start:
            return text[start:stop]
        start = stop + 1
    return None


def _parse_trec_run(text: str, filename: str) -> dict[str, list[RankedList]]:
    # Hot path (runs have millions of lines): no per-line Python loop beyond C-level map/split calls.
    lines = _split_lines(text)
    nul, spaces = "\x00" in text, _has_other_space(text)
    if nul or spaces:
        _check_columns(lines, RUN_COLUMNS.split(), filename, exact=False, nul=nul, spaces=spaces)
    # No column can pass a length limit when no line does (the usual case): one pass instead of three.
    long_lines = max(map(len, lines), default=0) > _SHORTEST_LIMIT
    loose = not text.isascii() or "_" in text
    counts = np.fromiter(map(len, map(str.split, lines)), dtype=np.intp, count=len(lines))
    nonblank: list[int] | None = None

    def line_of(i: int) -> int:
        nonlocal nonblank
        if nonblank is None:
            nonblank = (np.flatnonzero(counts) + 1).tolist()
        return nonblank[i]

    short = np.flatnonzero((counts > 0) & (counts < 6))
    if len(short):
        i = int(short[0])
        raise FormatError(_columns(6, RUN_COLUMNS, counts[i]), filename=filename, line=i + 1)
    long = np.flatnonzero(counts > 6)
    if len(long):
        for i in long.tolist():  # extra trailing columns are ignored
            lines[i] = " ".join(lines[i].split()[:6])
        text = "\n".join(lines)
    del lines
    tokens = text.split()
    if not tokens:
        raise _empty_file(filename)
    qids, docids, rank_tokens, score_tokens, tags = (tokens[c::6] for c in (0, 2, 3, 4, 5))
    del tokens
    if long_lines:
        _check_lengths((("qid", qids), ("docid", docids), ("tag", tags)), line_of, filename)
    _, rank_error = _column_numbers("rank", rank_tokens, int, line_of, filename, loose=loose)
    score_list, score_error = _column_numbers("score", score_tokens, float, line_of, filename, loose=loose)
    scores = np.array(score_list, dtype=np.float64)
    _raise_first(rank_error, score_error, _nonfinite_error(scores, score_tokens, line_of, filename))
    return _rankings(qids, docids, tags, _score_key(scores), scores, line_of, filename)


def _parse_tsv_run(lines: list[str], filename: str) -> dict[str, list[RankedList]]:
    qids: list[str] = []
    docids: list[str] = []
    rank_tokens: list[str] = []
    score_tokens: list[str] = []
    linenos: list[int] = []
    width = None
    nul = any("\x00" in line for line in lines)
    for line, cols in _tsv_rows(lines, _RUN_TSV_HEADERS):
        if width is None:
            width = len(cols)
        if len(cols) != width:
            layout = "qid, docid, rank, score" if width == 4 else "qid, docid, rank"
            raise FormatError(
                _("expected %(expected)s tab-separated columns (%(names)s) like the first line, found %(found)s")
                % {"expected": width, "names": layout, "found": len(cols)},
                filename=filename,
                line=line,
            )
        qids.append(_check_id(cols[0], "qid", filename, line, chars=nul))
        docids.append(_check_id(cols[1], "docid", filename, line, chars=nul))
        rank_tokens.append(cols[2])
        if width == 4:
            score_tokens.append(cols[3])
        linenos.append(line)
    if not qids:
        raise _empty_file(filename)
    line_of = linenos.__getitem__
    ranks, rank_error = _column_numbers("rank", rank_tokens, int, line_of, filename)
    if width == 4:
        score_list, score_error = _column_numbers("score", score_tokens, float, line_of, filename)
        scores = np.array(score_list, dtype=np.float64)
        _raise_first(rank_error, score_error, _nonfinite_error(scores, score_tokens, line_of, filename))
        sortkey = _score_key(scores)
    else:
        _raise_first(rank_error)
        sortkey, scores = _by_rank(ranks, filename, line_of)
    tags = [_default_tag(filename)] * len(qids)
    return _rankings(qids, docids, tags, sortkey, scores, line_of, filename)


def _parse_jsonl_run(lines: list[str], filename: str, *, chars: bool) -> dict[str, list[RankedList]]:
    default_tag = _default_tag(filename)
    qids: list[str] = []
    docids: list[str] = []
    tags: list[str] = []
    ranks: list[int] = []
    scores: list[float] = []
    linenos: list[int] = []
    scored: bool | None = None  # whether the file gives scores; decided by its first record
    for line, obj in _json_objects(lines, filename):
        qid = _json_id(obj, "qid", filename, line, chars=chars)
        docid = _json_id(obj, "docid", filename, line, chars=chars)
        tag = obj.get("tag")
        if tag is None:
            tag = default_tag
        elif not isinstance(tag, str):
            raise FormatError(_expected_string(tag), filename=filename, line=line, field="tag")
        else:
            tag = _check_id(tag.strip(), "tag", filename, line, chars=chars)
        rank, score = obj.get("rank"), obj.get("score")
        if rank is not None and (not isinstance(rank, int) or isinstance(rank, bool)):
            raise FormatError(
                _("not an integer: %(value)s") % {"value": json.dumps(rank)}, filename=filename, line=line, field="rank"
            )
        if score is not None:
            if not isinstance(score, int | float) or isinstance(score, bool):
                raise FormatError(
                    _("not a number: %(value)s") % {"value": json.dumps(score)},
                    filename=filename,
                    line=line,
                    field="score",
                )
            try:
                score = float(score)
            except OverflowError:  # an integer past 1e308
                score = float("inf")
            if not np.isfinite(score):
                raise FormatError(_not_finite() % {"value": repr(score)}, filename=filename, line=line, field="score")
        if rank is None and score is None:
            raise FormatError(_("missing key: give a 'rank', a 'score' or both"), filename=filename, line=line)
        if scored is None:
            scored = score is not None
        elif scored != (score is not None):
            message = (
                _("missing key; the first record has a score, so every record needs one")
                if scored
                else _("unexpected key; the first record has no score, so no record may have one")
            )
            raise FormatError(message, filename=filename, line=line, field="score")
        qids.append(qid)
        docids.append(docid)
        tags.append(tag)
        ranks.append(rank)
        scores.append(score)
        linenos.append(line)
    if not qids:
        raise _empty_file(filename)
    line_of = linenos.__getitem__
    if scored:
        score_array = np.array(scores, dtype=np.float64)
        return _rankings(qids, docids, tags, _score_key(score_array), score_array, line_of, filename)
    sortkey, score_array = _by_rank(ranks, filename, line_of)
    return _rankings(qids, docids, tags, sortkey, score_array, line_of, filename)


@_gc_paused
def parse_run(data: bytes, *, filename: str) -> dict[str, list[RankedList]]:
    """Parse a run into ``{tag: [RankedList, ...]}``, one ranking per query, each in trec_eval order.

    Formats, recognised from the first non-blank line:

    - JSONL ``{"qid", "docid", "rank"?, "score"?, "tag"?}`` when it starts with ``{`` (or the name ends
      in ``.jsonl``/``.json``/``.ndjson``); every record has a score or none does;
    - TSV ``qid<TAB>docid<TAB>rank[<TAB>score]`` when it has 3 or 4 tab-separated fields (an optional
      header line naming them is skipped);
    - otherwise TREC ``qid Q0 docid rank score tag``, whitespace separated, extra columns ignored.

    TSV and JSONL runs without a tag take the file name's stem. Ordering follows trec_eval: score
    descending, ties by docid in descending byte order, the rank column ignored. A run without scores
    is ordered by rank ascending (ties by docid descending), with ``score = -rank``.

    Raises
    ------
    FormatError
        Wrong column count, a rank that is not an integer, a score that is not a finite number, a docid
        repeated within one query of one tag, bad JSON, missing or ill-typed keys, an empty file.
    """
    text = _decode(data, filename)
    first = _first_data_line(text)
    if first is None:
        raise _empty_file(filename)
    if first.lstrip().startswith("{") or PureWindowsPath(filename).suffix.lower() in _JSONL_SUFFIXES:
        return _parse_jsonl_run(_split_lines(text), filename, chars=_json_may_hold_bad_chars(text))
    if "\t" in first and len(first.strip().split("\t")) in (3, 4):
        return _parse_tsv_run(_split_lines(text), filename)
    return _parse_trec_run(text, filename)


# --------------------------------------------------------------------------- qrels


@_gc_paused
def parse_qrels(data: bytes, *, filename: str) -> list[Qrel]:
    """Parse TREC qrels ``qid iteration docid label`` (iteration ignored, ``#`` lines are comments).

    Labels are integers and may be negative (trec_eval keeps them); checking them against a grading
    scale is the caller's business.

    Raises
    ------
    FormatError
        A line without exactly 4 columns, a label that is not an integer, a (qid, docid) judged twice,
        an empty file.
    """
    text = _decode(data, filename)
    lines = _split_lines(text)
    if "#" in text:
        for i, line in enumerate(lines):
            if line.lstrip().startswith("#"):
                lines[i] = ""
        text = "\n".join(lines)
    nul, spaces = "\x00" in text, _has_other_space(text)
    if nul or spaces:
        _check_columns(lines, QRELS_COLUMNS.split(), filename, exact=True, nul=nul, spaces=spaces)
    long_lines = max(map(len, lines), default=0) > _SHORTEST_LIMIT
    loose = not text.isascii() or "_" in text
    counts = np.fromiter(map(len, map(str.split, lines)), dtype=np.intp, count=len(lines))
    wrong = np.flatnonzero((counts > 0) & (counts != 4))
    if len(wrong):
        i = int(wrong[0])
        raise FormatError(_columns(4, QRELS_COLUMNS, counts[i]), filename=filename, line=i + 1)
    tokens = text.split()
    if not tokens:
        raise _empty_file(filename)
    nonblank = (np.flatnonzero(counts) + 1).tolist()
    line_of = nonblank.__getitem__
    qids, docids, label_tokens = tokens[0::4], tokens[2::4], tokens[3::4]
    if long_lines:
        _check_lengths((("qid", qids), ("docid", docids)), line_of, filename)
    labels, label_error = _column_numbers("label", label_tokens, int, line_of, filename, loose=loose)
    _raise_first(label_error)
    pairs = list(zip(qids, docids, strict=True))
    if len(set(pairs)) != len(pairs):
        first: dict[tuple[str, str], int] = {}
        for i, pair in enumerate(pairs):
            if pair in first:
                raise FormatError(
                    _("duplicate judgment of docid %(docid)s for qid %(qid)s (first on line %(first)s)")
                    % {"docid": _show(pair[1]), "qid": _show(pair[0]), "first": line_of(first[pair])},
                    filename=filename,
                    line=line_of(i),
                    field="docid",
                )
            first[pair] = i
    return list(map(Qrel, qids, docids, labels))


# --------------------------------------------------------------------------- online metrics

ONLINE_COLUMNS = "system,metric,value[,ci_low,ci_high][,qid]"
ONLINE_METRIC_MAX_LENGTH = 100
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
            _("not a number: %(value)s") % {"value": _show(value)}, filename=filename, line=line, field=name
        )
    number = float(value)
    if not math.isfinite(number):
        raise FormatError(_not_finite() % {"value": _show(value)}, filename=filename, line=line, field=name)
    return number


def parse_online(data: bytes, *, filename: str) -> list[OnlineFigure]:
    """Parse online figures, CSV ``system,metric,value[,ci_low,ci_high][,qid]`` (an optional header row
    naming these columns may reorder them).

    Without a header, 3 columns are ``system,metric,value``, 4 add the ``qid``, 5 add the confidence
    interval, 6 have both; empty ``ci_low``/``ci_high``/``qid`` cells mean "none". Numbers are plain ASCII
    decimals. Which systems and queries exist is the caller's business.

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
        raise _empty_file(filename)
    layout: tuple[str, ...] | None = None
    first_line, first = numbered[0]
    # A header names at least one of the columns and holds no number (a data row always has its value).
    if {c.lower() for c in first} & {"system", "metric", "value"} and not any(map(_ASCII_NUMBER.fullmatch, first)):
        names = tuple(cell.lower() for cell in first)
        unknown = next((n for n in names if n not in _ONLINE_FIELDS), None)
        if unknown is not None:
            raise FormatError(
                _("unknown column %(name)s (expected %(columns)s)")
                % {"name": _show(unknown), "columns": ONLINE_COLUMNS},
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
            expected = _("%(n)s (as the header says)") % {"n": len(cols)} if layout else _("3 to 6")
            raise FormatError(_columns(expected, ONLINE_COLUMNS, len(cells)), filename=filename, line=line)
        row = dict(zip(cols, cells, strict=True))
        system, metric, qid = row["system"], row["metric"], row.get("qid", "")
        for name, value, limit in (
            ("system", system, SYSTEM_NAME_MAX_LENGTH),
            ("metric", metric, ONLINE_METRIC_MAX_LENGTH),
            ("qid", qid, QID_MAX_LENGTH),
        ):
            if not value and name != "qid":
                raise FormatError(_("empty"), filename=filename, line=line, field=name)
            if _BAD_CHAR.search(value):
                raise _char_error(value, name, filename, line)
            if len(value) > limit:
                raise FormatError(
                    _("longer than %(limit)s characters") % {"limit": limit}, filename=filename, line=line, field=name
                )
        value = _online_number(row["value"], "value", filename, line, required=True)
        low = _online_number(row.get("ci_low", ""), "ci_low", filename, line, required=False)
        high = _online_number(row.get("ci_high", ""), "ci_high", filename, line, required=False)
        if (low is None) != (high is None):
            raise FormatError(
                _("give both ends of the confidence interval or neither"),
                filename=filename,
                line=line,
                field="ci_high" if high is None else "ci_low",
            )
        if low is not None and not low <= value <= high:
            raise FormatError(
                _("the interval [%(low)s, %(high)s] does not contain the value %(value)s")
                % {"low": f"{low:g}", "high": f"{high:g}", "value": f"{value:g}"},
                filename=filename,
                line=line,
                field="ci_low" if low > value else "ci_high",
            )
        key = (system, metric, qid)
        if key in seen:
            names = {"metric": repr(metric), "system": repr(system), "qid": _show(qid), "first": seen[key]}
            message = (
                _("%(metric)s of system %(system)s for qid %(qid)s given twice (first on line %(first)s)")
                if qid
                else _("%(metric)s of system %(system)s given twice (first on line %(first)s)")
            )
            raise FormatError(
                message % names,
                filename=filename,
                line=line,
                field="metric",
            )
        seen[key] = line
        figures.append(OnlineFigure(system, metric, value, low, high, qid, line))
    if not figures:
        raise FormatError(_("no figures, only a header"), filename=filename)
    return figures


# --------------------------------------------------------------------------- writing


def _token(value: str, name: str) -> str:
    if not value or len(value.split()) != 1 or value.strip() != value:
        raise ValueError(f"{name} {value!r} cannot be written to a whitespace-separated TREC file")
    return value


def format_qrels(rows: Iterable[tuple[str, str, int]]) -> Iterator[str]:
    """Yield TREC qrels lines ``"qid 0 docid label\\n"`` from ``(qid, docid, label)`` rows, for streaming."""
    for qid, docid, label in rows:
        yield f"{_token(qid, 'qid')} 0 {_token(docid, 'docid')} {operator.index(label)}\n"


def format_run(tag: str, rankings: Iterable[RankedList]) -> Iterator[str]:
    """Yield TREC run lines ``"qid Q0 docid rank score tag\\n"``, ranks from 1 in each ranking's order.

    Scores are written with ``repr`` so that they read back bit for bit.
    """
    _token(tag, "tag")
    for ranking in rankings:
        qid = _token(ranking.qid, "qid")
        scores = np.asarray(ranking.scores, dtype=np.float64)
        if not np.isfinite(scores).all():
            raise ValueError(f"ranking of qid {qid!r} has a score that is not finite")
        for rank, (docid, score) in enumerate(zip(ranking.docids, scores.tolist(), strict=True), 1):
            yield f"{qid} Q0 {_token(docid, 'docid')} {rank} {score!r} {tag}\n"
