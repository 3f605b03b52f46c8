"""TREC runs (TREC, TSV or JSON Lines) and qrels, parsed a whole column at a time."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PureWindowsPath
from typing import Any, BinaryIO, TypeVar

import numpy as np
from django.utils.translation import gettext as _

from judging.formats import QRELS_COLUMNS, RUN_COLUMNS, SYSTEM_NAME_MAX_LENGTH, RankedList
from judging.imports.errors import FormatError
from judging.imports.parse.jsonl import expected_string, json_id, json_objects
from judging.imports.parse.text import (
    JSONL_SUFFIXES,
    SHORTEST_LIMIT,
    check_columns,
    check_id,
    check_lengths,
    columns_message,
    decode,
    empty_file,
    gc_paused,
    has_other_space,
    not_finite_message,
    show,
    split_lines,
    tsv_rows,
)

Id = TypeVar("Id", str, bytes)  # a docid, as text or as its UTF-8

_RUN_TSV_HEADERS = frozenset({("qid", "docid", "rank"), ("qid", "docid", "rank", "score")})


@dataclass(frozen=True, slots=True)
class Qrel:
    qid: str
    docid: str
    label: int


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


def column_numbers(
    name: str,
    tokens: Sequence[str],
    convert: Callable[[str], object],
    line_of: Callable[[int], int],
    filename: str,
    *,
    loose: bool = True,
) -> tuple[list[Any], FormatError | None]:
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
    return [], FormatError(message % {"value": show(tokens[i])}, filename=filename, line=line_of(i), field=name)


def nonfinite_error(
    scores: np.ndarray, tokens: Sequence[object], line_of: Callable[[int], int], filename: str
) -> FormatError | None:
    bad = np.flatnonzero(~np.isfinite(scores))
    if not len(bad):
        return None
    i = int(bad[0])
    return FormatError(
        not_finite_message() % {"value": show(str(tokens[i]))}, filename=filename, line=line_of(i), field="score"
    )


def raise_first(*errors: FormatError | None) -> None:
    found = [error for error in errors if error is not None]
    if found:
        raise min(found, key=lambda error: error.line or 0)


def score_key(scores: np.ndarray) -> np.ndarray:
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
    codes: dict[Any, int] = {}
    keys = qids if single_tag else zip(tags, qids, strict=True)
    group = np.fromiter((codes.setdefault(key, len(codes)) for key in keys), dtype=np.intp, count=n)
    order = np.lexsort((sortkey, group))
    tie_breaks(order, group, sortkey, docids)

    ordered_docids = list(map(docids.__getitem__, order.tolist()))
    ordered_scores = scores[order]
    stops = np.cumsum(np.bincount(group, minlength=len(codes))).tolist()
    result: dict[str, list[RankedList]] = {}
    start = 0
    for key, stop in zip(codes, stops, strict=True):
        tag, qid = (tags[0], key) if single_tag else key
        ranked = ordered_docids[start:stop]
        if len(set(ranked)) != len(ranked):
            raise_duplicate_docid(qids, docids, tags, line_of, filename)
        result.setdefault(tag, []).append(RankedList(qid, ranked, ordered_scores[start:stop]))
        start = stop
    return result


def tie_breaks(order: np.ndarray, group: np.ndarray, sortkey: np.ndarray, docids: Sequence[Id]) -> None:
    """Put the rows of ``order`` (sorted by group, then sortkey) that tie on both in descending docid order, in
    place: trec_eval's rule for equal scores."""
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


def raise_duplicate_docid(
    qids: Sequence[str],
    docids: Sequence[str],
    tags: Sequence[str],
    line_of: Callable[[int], int],
    filename: str,
    *,
    certain: bool = True,
) -> None:
    """Raise for the first line (in file order) that repeats a docid of its query (error path only); when not
    ``certain`` (a hash matched), return if no line does."""
    first: dict[tuple[str, str, str], int] = {}
    for i, key in enumerate(zip(tags, qids, docids, strict=True)):
        if key in first:
            raise FormatError(
                _("duplicate docid %(docid)s for qid %(qid)s (first on line %(first)s)")
                % {"docid": show(key[2]), "qid": show(key[1]), "first": line_of(first[key])},
                filename=filename,
                line=line_of(i),
                field="docid",
            )
        first[key] = i
    if certain:
        raise AssertionError("unreachable: a ranking had a duplicate docid but no line repeats one")


def _by_rank(
    ranks: Sequence[int | None], filename: str, line_of: Callable[[int], int]
) -> tuple[np.ndarray, np.ndarray]:
    """Sort key and scores of a rank-only run: rank ascending, and score = -rank."""
    try:
        rank_array = np.array(ranks, dtype=np.int64)
    except OverflowError:
        i = next(i for i, rank in enumerate(ranks) if rank is not None and not -(2**63) < rank < 2**63)
        raise FormatError(
            _("out of range: %(value)s") % {"value": ranks[i]}, filename=filename, line=line_of(i), field="rank"
        ) from None
    return rank_array, -rank_array.astype(np.float64)


def _default_tag(filename: str) -> str:
    stem = PureWindowsPath(filename).stem
    # Cut to the system name's width: a long file name is no error in the file.
    return "_".join(stem.split())[:SYSTEM_NAME_MAX_LENGTH] or "run"


def first_data_line(text: str) -> str | None:
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
    lines = split_lines(text)
    nul, spaces = "\x00" in text, has_other_space(text)
    if nul or spaces:
        check_columns(lines, RUN_COLUMNS.split(), filename, exact=False, nul=nul, spaces=spaces)
    # No column can pass a length limit when no line does (the usual case): one pass instead of three.
    long_lines = max(map(len, lines), default=0) > SHORTEST_LIMIT
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
        raise FormatError(columns_message(6, RUN_COLUMNS, counts[i]), filename=filename, line=i + 1)
    long = np.flatnonzero(counts > 6)
    if len(long):
        for i in long.tolist():  # extra trailing columns are ignored
            lines[i] = " ".join(lines[i].split()[:6])
        text = "\n".join(lines)
    del lines
    tokens = text.split()
    if not tokens:
        raise empty_file(filename)
    qids, docids, rank_tokens, score_tokens, tags = (tokens[c::6] for c in (0, 2, 3, 4, 5))
    del tokens
    if long_lines:
        check_lengths((("qid", qids), ("docid", docids), ("tag", tags)), line_of, filename)
    _, rank_error = column_numbers("rank", rank_tokens, int, line_of, filename, loose=loose)
    score_list, score_error = column_numbers("score", score_tokens, float, line_of, filename, loose=loose)
    scores = np.array(score_list, dtype=np.float64)
    raise_first(rank_error, score_error, nonfinite_error(scores, score_tokens, line_of, filename))
    return _rankings(qids, docids, tags, score_key(scores), scores, line_of, filename)


def _parse_tsv_run(lines: list[str], filename: str) -> dict[str, list[RankedList]]:
    qids: list[str] = []
    docids: list[str] = []
    rank_tokens: list[str] = []
    score_tokens: list[str] = []
    linenos: list[int] = []
    width = None
    nul = any("\x00" in line for line in lines)
    for line, cols in tsv_rows(enumerate(lines, 1), _RUN_TSV_HEADERS):
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
        qids.append(check_id(cols[0], "qid", filename, line, chars=nul))
        docids.append(check_id(cols[1], "docid", filename, line, chars=nul))
        rank_tokens.append(cols[2])
        if width == 4:
            score_tokens.append(cols[3])
        linenos.append(line)
    if not qids:
        raise empty_file(filename)
    line_of = linenos.__getitem__
    ranks, rank_error = column_numbers("rank", rank_tokens, int, line_of, filename)
    if width == 4:
        score_list, score_error = column_numbers("score", score_tokens, float, line_of, filename)
        scores = np.array(score_list, dtype=np.float64)
        raise_first(rank_error, score_error, nonfinite_error(scores, score_tokens, line_of, filename))
        sortkey = score_key(scores)
    else:
        raise_first(rank_error)
        sortkey, scores = _by_rank(ranks, filename, line_of)
    tags = [_default_tag(filename)] * len(qids)
    return _rankings(qids, docids, tags, sortkey, scores, line_of, filename)


def _parse_jsonl_run(lines: list[str], filename: str) -> dict[str, list[RankedList]]:
    default_tag = _default_tag(filename)
    qids: list[str] = []
    docids: list[str] = []
    tags: list[str] = []
    ranks: list[int | None] = []
    scores: list[float | None] = []
    linenos: list[int] = []
    scored: bool | None = None  # whether the file gives scores; decided by its first record
    for line, obj, chars in json_objects(enumerate(lines, 1), filename):
        qid = json_id(obj, "qid", filename, line, chars=chars)
        docid = json_id(obj, "docid", filename, line, chars=chars)
        tag = obj.get("tag")
        if tag is None:
            tag = default_tag
        elif not isinstance(tag, str):
            raise FormatError(expected_string(tag), filename=filename, line=line, field="tag")
        else:
            tag = check_id(tag.strip(), "tag", filename, line, chars=chars)
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
                raise FormatError(
                    not_finite_message() % {"value": repr(score)}, filename=filename, line=line, field="score"
                )
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
        raise empty_file(filename)
    line_of = linenos.__getitem__
    if scored:
        score_array = np.array(scores, dtype=np.float64)
        return _rankings(qids, docids, tags, score_key(score_array), score_array, line_of, filename)
    sortkey, score_array = _by_rank(ranks, filename, line_of)
    return _rankings(qids, docids, tags, sortkey, score_array, line_of, filename)


@gc_paused
def parse_run(data: bytes | BinaryIO, *, filename: str) -> dict[str, list[RankedList]]:
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
    text = decode(data, filename)
    first = first_data_line(text)
    if first is None:
        raise empty_file(filename)
    if first.lstrip().startswith("{") or PureWindowsPath(filename).suffix.lower() in JSONL_SUFFIXES:
        return _parse_jsonl_run(split_lines(text), filename)
    if "\t" in first and len(first.strip().split("\t")) in (3, 4):
        return _parse_tsv_run(split_lines(text), filename)
    return _parse_trec_run(text, filename)


# --------------------------------------------------------------------------- qrels


def parse_qrels(data: bytes | BinaryIO, *, filename: str) -> list[Qrel]:
    """Parse TREC qrels ``qid iteration docid label`` (iteration ignored, ``#`` lines are comments).

    Labels are integers and may be negative (trec_eval keeps them); checking them against a grading
    scale is the caller's business.

    Raises
    ------
    FormatError
        A line without exactly 4 columns, a label that is not an integer, a (qid, docid) judged twice,
        an empty file.
    """
    return list(map(Qrel, *parse_qrels_columns(data, filename=filename)))


@gc_paused
def parse_qrels_columns(data: bytes | BinaryIO, *, filename: str) -> tuple[list[str], list[str], list[int]]:
    """``parse_qrels`` as three columns (qids, docids, labels) in file order, with the same checks and errors:
    the import of a million labels works on whole columns and needs no object per line."""
    text = decode(data, filename)
    lines = split_lines(text)
    if "#" in text:
        for i, line in enumerate(lines):
            if line.lstrip().startswith("#"):
                lines[i] = ""
        text = "\n".join(lines)
    nul, spaces = "\x00" in text, has_other_space(text)
    if nul or spaces:
        check_columns(lines, QRELS_COLUMNS.split(), filename, exact=True, nul=nul, spaces=spaces)
    long_lines = max(map(len, lines), default=0) > SHORTEST_LIMIT
    loose = not text.isascii() or "_" in text
    counts = np.fromiter(map(len, map(str.split, lines)), dtype=np.intp, count=len(lines))
    wrong = np.flatnonzero((counts > 0) & (counts != 4))
    if len(wrong):
        i = int(wrong[0])
        raise FormatError(columns_message(4, QRELS_COLUMNS, counts[i]), filename=filename, line=i + 1)
    tokens = text.split()
    if not tokens:
        raise empty_file(filename)
    nonblank = (np.flatnonzero(counts) + 1).tolist()
    line_of = nonblank.__getitem__
    qids, docids, label_tokens = tokens[0::4], tokens[2::4], tokens[3::4]
    if long_lines:
        check_lengths((("qid", qids), ("docid", docids)), line_of, filename)
    labels, label_error = column_numbers("label", label_tokens, int, line_of, filename, loose=loose)
    raise_first(label_error)
    pairs = list(zip(qids, docids, strict=True))
    if len(set(pairs)) != len(pairs):
        first: dict[tuple[str, str], int] = {}
        for i, pair in enumerate(pairs):
            if pair in first:
                raise FormatError(
                    _("duplicate judgment of docid %(docid)s for qid %(qid)s (first on line %(first)s)")
                    % {"docid": show(pair[1]), "qid": show(pair[0]), "first": line_of(first[pair])},
                    filename=filename,
                    line=line_of(i),
                    field="docid",
                )
            first[pair] = i
    return qids, docids, labels
