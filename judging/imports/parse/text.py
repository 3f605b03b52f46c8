"""What every parser shares: decoding, line splitting, and the checks of one field with its error."""

from __future__ import annotations

import codecs
import functools
import gc
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, BinaryIO, ParamSpec, TypeVar

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from judging.formats import DOCID_MAX_LENGTH, QID_MAX_LENGTH, SYSTEM_NAME_MAX_LENGTH, URL_MAX_LENGTH
from judging.imports.errors import FormatError

P = ParamSpec("P")
R = TypeVar("R")
MAX_LENGTH = {"qid": QID_MAX_LENGTH, "docid": DOCID_MAX_LENGTH, "tag": SYSTEM_NAME_MAX_LENGTH, "url": URL_MAX_LENGTH}
SHORTEST_LIMIT = min(MAX_LENGTH.values())
JSONL_SUFFIXES = frozenset({".jsonl", ".json", ".ndjson"})

# trec_eval splits columns with C's isspace(), i.e. these six characters. Python's str.split() also
# splits on Unicode spaces (no-break space, ideographic space, U+001C..U+001F ...), which would cut a
# docid holding one into two columns; those are found and named instead. (All of them lie below U+3001.)
ASCII_SPACE = " \t\n\r\x0b\x0c"
_OTHER_SPACES = "".join(c for c in map(chr, range(0x3001)) if c.isspace() and c not in ASCII_SPACE)
_OTHER_SPACE = re.compile(f"[{re.escape(_OTHER_SPACES)}]")
_ASCII_SPLIT = re.compile(f"[{re.escape(ASCII_SPACE)}]+")
# PostgreSQL text cannot hold NUL, and a lone surrogate (only a JSON escape can make one) is not Unicode
# that any database encodes.
BAD_CHAR = re.compile("[\x00\ud800-\udfff]")
JSONL_SUFFIXES = frozenset({".jsonl", ".json", ".ndjson"})
JSON_TYPES = {
    dict: gettext_lazy("an object"),
    list: gettext_lazy("an array"),
    str: gettext_lazy("a string"),
    bool: gettext_lazy("a boolean"),
    int: gettext_lazy("a number"),
    float: gettext_lazy("a number"),
    type(None): "null",
}


def json_type(value: object) -> str:
    """What a JSON value is, in words for an error message."""
    return str(JSON_TYPES.get(type(value)) or _("a value"))


# --------------------------------------------------------------------------- decoding


def gc_paused(parse: Callable[P, R]) -> Callable[P, R]:
    """Run a parser with the cyclic garbage collector paused.

    A parse builds lists of millions of strings and then many small objects; every collection those
    allocations trigger walks the young big lists again, which costs a third of a 1M-line run's parse
    time. Parsed data holds no reference cycles, so reference counting frees everything as usual.
    """

    @functools.wraps(parse)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return parse(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return wrapper


def decode(data: bytes | BinaryIO, filename: str) -> str:
    """UTF-8 text of the file (bytes, or a file object read whole) with any BOM removed and every line ending
    turned into "\\n"."""
    data = read_whole(data)
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


def split_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline ends the last line, it does not start another one
    return lines


def decode_lines(data: bytes | BinaryIO, *, filename: str) -> list[str]:
    """Split a UTF-8 file into lines; ``lines[i]`` is line ``i + 1``, without its line ending.

    A leading BOM is dropped; LF, CRLF and CR line endings are accepted. Blank lines are kept so that
    line numbers stay right; an empty file gives ``[]`` (each parser decides whether that is an error).

    Raises
    ------
    FormatError
        If the bytes are not UTF-8, naming the (1-based) line with the bad bytes.
    """
    return split_lines(decode(data, filename))


# --------------------------------------------------------------------------- field helpers


def read_whole(data: bytes | BinaryIO) -> bytes:
    """The bytes of an import's data: bytes as they are, a file object (an upload on disk) read from its start.
    For the formats parsed a whole column at a time (runs, qrels), whose checks need every row at once."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    if data.seekable():
        data.seek(0)
    return data.read()


def numbered_lines(data: bytes | BinaryIO, filename: str) -> Iterator[tuple[int, str]]:
    """``(number, line)`` for each line of a UTF-8 file, numbered and cut as decode_lines cuts them (a BOM
    dropped; LF, CRLF and a lone CR each end a line). A file object is read a line at a time: only the line
    at hand is in memory, never the file.

    Raises
    ------
    FormatError
        If a line is not UTF-8, naming it.
    """
    if isinstance(data, bytes | bytearray | memoryview):
        yield from enumerate(decode_lines(bytes(data), filename=filename), 1)
        return
    if data.seekable():
        data.seek(0)
    number = 0
    for raw in data:
        if number == 0 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8) :]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            if number == 0 and raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
                raise FormatError(_("the file is UTF-16; save it as UTF-8"), filename=filename) from None
            head = raw[: exc.start]
            line = number + 1 + head.count(b"\r") - head.count(b"\r\n")
            bad = " ".join(f"0x{byte:02x}" for byte in raw[exc.start : exc.end])
            raise FormatError(
                _("not valid UTF-8 (bad bytes %(bytes)s)") % {"bytes": bad}, filename=filename, line=line
            ) from None
        if text.endswith("\n"):
            text = text[:-1]
        if text.endswith("\r"):
            text = text[:-1]
        for part in text.split("\r") if "\r" in text else (text,):
            number += 1
            yield number, part


def show(value: str, limit: int = 60) -> str:
    return repr(value if len(value) <= limit else value[:limit] + "...")


def empty_file(filename: str) -> FormatError:
    return FormatError(_("empty file"), filename=filename)


def char_error(value: str, name: str | None, filename: str, line: int) -> FormatError:
    found = BAD_CHAR.search(value)
    char = found.group() if found else "\x00"
    if char == "\x00":
        message = _("contains a NUL character (U+0000)")
    else:
        message = _("contains a lone surrogate (U+%(code)04X), which is not valid Unicode") % {"code": ord(char)}
    return FormatError(message, filename=filename, line=line, field=name)


def length_error(length: int, name: str, filename: str, line: int) -> FormatError:
    return FormatError(
        _("too long: %(length)s characters (at most %(limit)s)")
        % {"length": f"{length:,}", "limit": f"{MAX_LENGTH[name]:,}"},
        filename=filename,
        line=line,
        field=name,
    )


def check_value(value: str, name: str, filename: str, line: int, *, chars: bool = True) -> str:
    """Any stored value: no NUL or lone surrogate, and no longer than its database column.

    ``chars=False`` skips the character scan where the parser saw that the file cannot hold such a
    character (the scan costs more than parsing a JSON line).
    """
    if chars and BAD_CHAR.search(value):
        raise char_error(value, name, filename, line)
    if name in MAX_LENGTH and len(value) > MAX_LENGTH[name]:
        raise length_error(len(value), name, filename, line)
    return value


def check_id(value: str, name: str, filename: str, line: int, *, chars: bool = True) -> str:
    """An identifier (qid, docid, tag) must survive the whitespace-separated TREC formats and fit its column."""
    if not value:
        raise FormatError(_("empty"), filename=filename, line=line, field=name)
    if len(value.split()) != 1 or value.strip() != value:
        raise FormatError(whitespace_message(value), filename=filename, line=line, field=name)
    return check_value(value, name, filename, line, chars=chars)


def whitespace_message(value: str) -> str:
    return _("contains whitespace: %(value)s") % {"value": show(value)}


def columns_message(expected: object, names: str, found: object) -> str:
    return _("expected %(expected)s columns (%(names)s), found %(found)s") % {
        "expected": expected,
        "names": names,
        "found": found,
    }


def has_other_space(text: str) -> bool:
    """Whether ``text`` holds a space that str.split() splits on but trec_eval does not (fast when absent)."""
    if text.isascii():  # a C-speed scan; then only U+001C..U+001F remain possible
        return any(char in text for char in _OTHER_SPACES[:4])
    return _OTHER_SPACE.search(text) is not None


def check_columns(
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
            raise FormatError(columns_message(len(names), " ".join(names), len(cols)), filename=filename, line=lineno)
        for name, col in zip(names, cols, strict=False):
            if "\x00" in col:
                raise char_error(col, name, filename, lineno)
            if _OTHER_SPACE.search(col):
                raise FormatError(whitespace_message(col), filename=filename, line=lineno, field=name)


def check_lengths(columns: Sequence[tuple[str, Sequence[str]]], line_of: Callable[[int], int], filename: str) -> None:
    """Length limits of whole id columns at C speed; the first line over a limit is found only on failure."""
    for name, values in columns:
        if values and max(map(len, values)) > MAX_LENGTH[name]:
            i = next(i for i, value in enumerate(values) if len(value) > MAX_LENGTH[name])
            raise length_error(len(values[i]), name, filename, line_of(i))


def tsv_rows(
    numbered: Iterable[tuple[int, str]], headers: frozenset[tuple[str, ...]]
) -> Iterator[tuple[int, list[str]]]:
    """Tab-split non-blank numbered lines, skipping a first line that is a header."""
    first = True
    for lineno, line in numbered:
        if not line.strip():
            continue
        # Stripped of ASCII whitespace only: a trailing no-break space stays, for check_id to report.
        cols = [col.strip(ASCII_SPACE) for col in line.split("\t")]
        if first:
            first = False
            if tuple(col.lower() for col in cols) in headers:
                continue
        yield lineno, cols


def claim(seen: dict[Any, int], key: object, *, what: str, field: str, filename: str, line: int) -> None:
    first = seen.setdefault(key, line)
    if first != line:
        raise FormatError(
            _("duplicate %(what)s (first on line %(first)s)") % {"what": what, "first": first},
            filename=filename,
            line=line,
            field=field,
        )


def not_finite_message() -> str:
    return _("not a finite number: %(value)s")
