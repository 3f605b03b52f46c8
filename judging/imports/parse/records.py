"""Topics, documents and query tags: TSV or JSON Lines, one record per line."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from django.utils.translation import gettext as _

from judging.formats import TAG_MAX, nfc
from judging.imports.errors import FormatError
from judging.imports.parse.jsonl import (
    expected_string,
    is_jsonl,
    json_id,
    json_objects,
    json_text,
)
from judging.imports.parse.text import (
    BAD_CHAR,
    char_error,
    check_id,
    check_value,
    claim,
    decode_lines,
    empty_file,
    gc_paused,
    json_type,
    not_finite_message,
    numbered_lines,
    show,
    tsv_rows,
)

# A first line that only names the columns is a header, not a record.
_TOPIC_HEADERS = frozenset({("qid", "text"), ("qid", "text", "description"), ("qid", "text", "description", "tags")})
_TAG_HEADERS = frozenset({("qid", "tags")})
_DOC_HEADERS = frozenset({("docid", "title", "text"), ("docid", "text")})


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
    attributes: dict[str, Any] | None = None  # None: the file says nothing about attributes (existing ones stay)


# --------------------------------------------------------------------------- topics and documents


def _check_tag(value: str, filename: str, line: int, field: str, *, chars: bool = False) -> str:
    """A query tag: non-empty, at most TAG_MAX characters, no comma (the TSV separator) or tab (and, with
    ``chars``, no NUL or lone surrogate: see check_value)."""
    if chars and BAD_CHAR.search(value):
        raise char_error(value, field, filename, line)
    if not value:
        raise FormatError(_("empty tag"), filename=filename, line=line, field=field)
    if len(value) > TAG_MAX:
        raise FormatError(
            _("tag longer than %(limit)s characters: %(value)s") % {"limit": TAG_MAX, "value": show(value)},
            filename=filename,
            line=line,
            field=field,
        )
    if "," in value or "\t" in value or "\n" in value:
        raise FormatError(
            _("a tag may not contain a comma or tab: %(value)s") % {"value": show(value)},
            filename=filename,
            line=line,
            field=field,
        )
    return value


def tag_list(raw: str, filename: str, line: int, field: str) -> tuple[str, ...]:
    """Comma-separated tags; blanks around them ignored, duplicates kept once, an empty column no tag."""
    if not raw.strip():
        return ()
    tags = [_check_tag(t.strip(), filename, line, field, chars=True) for t in raw.split(",")]
    return tuple(dict.fromkeys(tags))


def _json_tags(obj: dict[str, Any], filename: str, line: int, *, chars: bool = True) -> tuple[str, ...] | None:
    if "tags" not in obj or obj["tags"] is None:
        return None
    value = obj["tags"]
    if not isinstance(value, list):
        raise FormatError(
            _("expected an array of strings, found %(found)s") % {"found": json_type(value)},
            filename=filename,
            line=line,
            field="tags",
        )
    tags = []
    for i, tag in enumerate(value):
        if not isinstance(tag, str):
            raise FormatError(expected_string(tag), filename=filename, line=line, field=f"tags[{i}]")
        tags.append(_check_tag(tag.strip(), filename, line, f"tags[{i}]", chars=chars))
    return tuple(dict.fromkeys(tags))


def _json_attributes(obj: dict[str, Any], filename: str, line: int, *, chars: bool = True) -> dict[str, Any] | None:
    """``"attributes"``: an object of scalar facets (string, number or boolean), e.g. {"brand": "acme"}."""
    if "attributes" not in obj or obj["attributes"] is None:
        return None
    value = obj["attributes"]
    if not isinstance(value, dict):
        raise FormatError(
            _("expected an object, found %(found)s") % {"found": json_type(value)},
            filename=filename,
            line=line,
            field="attributes",
        )
    for key, item in value.items():
        if not key.strip():
            raise FormatError(_("empty attribute name"), filename=filename, line=line, field="attributes")
        if isinstance(item, (dict, list)):
            raise FormatError(
                _("expected a string, number or boolean, found %(found)s") % {"found": json_type(item)},
                filename=filename,
                line=line,
                field=f"attributes.{key[:40]}",
            )
        if isinstance(item, float) and not math.isfinite(item):
            # JSON has no NaN or infinity (Python's reader takes them, and 1e999 overflows to infinity):
            # neither database's JSON column stores one.
            raise FormatError(
                not_finite_message() % {"value": json.dumps(item)},
                filename=filename,
                line=line,
                field=f"attributes.{key[:40]}",
            )
        for v in (key, item):
            if chars and isinstance(v, str) and BAD_CHAR.search(v):
                raise char_error(v, f"attributes.{key[:40]}", filename, line)
    return value


def _first_record(numbered: Iterator[tuple[int, str]]) -> tuple[str, Iterator[tuple[int, str]]]:
    """The first non-blank line, and the lines again from the start (read once, a line at a time)."""
    head: list[tuple[int, str]] = []
    for item in numbered:
        head.append(item)
        if item[1].strip():
            return item[1], itertools.chain(head, numbered)
    return "", iter(head)


def _records_jsonl(numbered: Iterator[tuple[int, str]], filename: str) -> tuple[bool, Iterator[tuple[int, str]]]:
    """Whether a file of records is JSON Lines (by its name or a first record starting with ``{``)."""
    first, numbered = _first_record(numbered)
    return is_jsonl([first], filename), numbered


def iter_topics(data: bytes | BinaryIO, *, filename: str) -> Iterator[Topic]:
    """parse_topics one topic at a time, reading a file object a line at a time (see parse_topics)."""
    jsonl, numbered = _records_jsonl(numbered_lines(data, filename), filename)
    seen: dict[str, int] = {}
    if jsonl:
        for line, obj, chars in json_objects(numbered, filename):
            qid = json_id(obj, "qid", filename, line, chars=chars)
            text = json_text(obj, "text", filename, line, required=True, chars=chars)
            description = json_text(obj, "description", filename, line, required=False, chars=chars)
            tags = _json_tags(obj, filename, line, chars=chars)
            claim(seen, qid, what=f"qid {show(qid)}", field="qid", filename=filename, line=line)
            yield Topic(qid, nfc(text), nfc(description), tags)
    else:
        for line, cols in tsv_rows(numbered, _TOPIC_HEADERS):
            if len(cols) not in (2, 3, 4):
                raise FormatError(
                    _("expected 2 to 4 tab-separated columns (qid, text[, description[, tags]]), found %(found)s")
                    % {"found": len(cols)},
                    filename=filename,
                    line=line,
                )
            nul = any("\x00" in col for col in cols)
            qid = check_id(cols[0], "qid", filename, line, chars=nul)
            if not cols[1]:
                raise FormatError(_("empty"), filename=filename, line=line, field="text")
            if nul:
                for name, col in zip(("text", "description", "tags"), cols[1:], strict=False):
                    check_value(col, name, filename, line)
            tags = tag_list(cols[3], filename, line, "tags") if len(cols) == 4 else None
            claim(seen, qid, what=f"qid {show(qid)}", field="qid", filename=filename, line=line)
            yield Topic(qid, nfc(cols[1]), nfc(cols[2]) if len(cols) >= 3 else "", tags)
    if not seen:
        raise empty_file(filename)


@gc_paused
def parse_topics(data: bytes | BinaryIO, *, filename: str) -> list[Topic]:
    """Parse topics: TSV ``qid<TAB>text[<TAB>description[<TAB>tags]]`` or JSONL
    ``{"qid", "text", "description"?, "tags"?}``, from bytes or a file object.

    JSONL is recognised by a ``.jsonl``/``.json``/``.ndjson`` name or a first record starting with ``{``.
    A TSV first line naming the columns is taken as a header and skipped; a JSON ``qid`` may be an
    integer. Tags (query segments such as ``head``/``tail``) are a comma-separated fourth TSV column or a
    JSON array of strings; a topic without them leaves the query's tags as they are.
    """
    return list(iter_topics(data, filename=filename))


def iter_docs(data: bytes | BinaryIO, *, filename: str) -> Iterator[Doc]:
    """parse_docs one document at a time, reading a file object a line at a time: an import of a large
    collection holds one batch of documents in memory, never the file (see parse_docs)."""
    jsonl, numbered = _records_jsonl(numbered_lines(data, filename), filename)
    seen: dict[str, int] = {}
    if jsonl:
        for line, obj, chars in json_objects(numbered, filename):
            docid = json_id(obj, "docid", filename, line, chars=chars)
            title = json_text(obj, "title", filename, line, required=False, chars=chars)
            text = json_text(obj, "text", filename, line, required=True, chars=chars)
            url = json_text(obj, "url", filename, line, required=False, chars=chars)
            attributes = _json_attributes(obj, filename, line, chars=chars)
            claim(seen, docid, what=f"docid {show(docid)}", field="docid", filename=filename, line=line)
            yield Doc(docid, nfc(text), title=nfc(title), url=url, attributes=attributes)
    else:
        for line, cols in tsv_rows(numbered, _DOC_HEADERS):
            if len(cols) not in (2, 3):
                raise FormatError(
                    _("expected 3 tab-separated columns (docid, title, text) or 2 (docid, text), found %(found)s")
                    % {"found": len(cols)},
                    filename=filename,
                    line=line,
                )
            nul = any("\x00" in col for col in cols)
            docid = check_id(cols[0], "docid", filename, line, chars=nul)
            title, text = ("", cols[1]) if len(cols) == 2 else (cols[1], cols[2])
            if not text:
                raise FormatError(_("empty"), filename=filename, line=line, field="text")
            if nul:
                check_value(title, "title", filename, line)
                check_value(text, "text", filename, line)
            claim(seen, docid, what=f"docid {show(docid)}", field="docid", filename=filename, line=line)
            yield Doc(docid, nfc(text), title=nfc(title))
    if not seen:
        raise empty_file(filename)


@gc_paused
def parse_docs(data: bytes | BinaryIO, *, filename: str) -> list[Doc]:
    """Parse documents: JSONL ``{"docid", "title"?, "text", "url"?, "attributes"?}`` or TSV
    ``docid<TAB>title<TAB>text``, from bytes or a file object. ``attributes`` is an object of facets
    (``{"brand": ..., "category": ...}``) whose values are strings, numbers or booleans.

    TSV also accepts two columns ``docid<TAB>text`` (the MS MARCO collection layout) and skips a header
    line naming the columns; a JSON ``docid`` may be an integer.
    """
    return list(iter_docs(data, filename=filename))


@gc_paused
def parse_query_tags(data: bytes | BinaryIO, *, filename: str) -> list[tuple[str, tuple[str, ...]]]:
    """Parse query tags: TSV ``qid<TAB>tag,tag,...`` (a header ``qid<TAB>tags`` is skipped).

    An empty second column means "no tags" for that query; a qid may appear once.
    """
    lines = decode_lines(data, filename=filename)
    rows: list[tuple[str, tuple[str, ...]]] = []
    seen: dict[str, int] = {}
    for line, cols in tsv_rows(enumerate(lines, 1), _TAG_HEADERS):
        if len(cols) not in (1, 2):
            raise FormatError(
                _("expected 2 tab-separated columns (qid, comma-separated tags), found %(found)s")
                % {"found": len(cols)},
                filename=filename,
                line=line,
            )
        qid = check_id(cols[0], "qid", filename, line)
        claim(seen, qid, what=f"qid {show(qid)}", field="qid", filename=filename, line=line)
        rows.append((qid, tag_list(cols[1] if len(cols) == 2 else "", filename, line, "tags")))
    if not rows:
        raise empty_file(filename)
    return rows
