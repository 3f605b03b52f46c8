"""A run file read a piece at a time: its rankings in blocks, never the whole file in memory.

TREC runs are written a ranking at a time (every line of one tag and qid together, as trec_eval and every
retrieval toolkit writes them): a piece of the file, cut at a line end, then holds whole rankings but for its
last one, which is carried over to the next piece. Each piece is checked as ``parse_run`` checks a whole file,
with the same messages and the file's own line numbers, and its rankings come out in trec_eval's order.

A file whose rankings are not written together (a ranking's lines scattered), or one in the TSV or JSON Lines
layouts, is read whole by ``parse_run`` instead (``NotGrouped`` says so, for the importer to start again).
"""

from __future__ import annotations

import codecs
import gc
import io
import queue
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import ne
from pathlib import PureWindowsPath
from typing import BinaryIO, cast

import numpy as np
from django.utils import translation

from judging.formats import RUN_COLUMNS
from judging.imports.errors import FormatError
from judging.imports.parse.text import (
    JSONL_SUFFIXES,
    SHORTEST_LIMIT,
    check_columns,
    check_lengths,
    columns_message,
    decode,
    empty_file,
    has_other_space,
    split_lines,
)
from judging.imports.parse.trec import (
    column_numbers,
    first_data_line,
    nonfinite_error,
    parse_run,
    raise_duplicate_docid,
    raise_first,
    score_key,
    tie_breaks,
)

PIECE_BYTES = 2 * 1024 * 1024  # bytes read at a time (about 60,000 lines of a typical run)


class NotGrouped(Exception):
    """The file's rankings are not each written in one stretch of lines: it has to be read whole."""


@dataclass(frozen=True, slots=True)
class RunBlock:
    """Whole rankings of a run: ranking i is ``tags[i]``/``qids[i]``, its documents ``docids[order[a:b]]`` with
    ``scores[a:b]``, best first, where ``a:b`` is its stretch of ``stops`` (``stops[i - 1]:stops[i]``).
    ``lines``: how many lines of the file the block covers (blank ones included), for progress."""

    tags: list[str]
    qids: list[str]
    stops: np.ndarray
    docids: np.ndarray | list[bytes]  # fixed-width byte strings (S dtype), or a list when one is wide
    order: np.ndarray
    scores: np.ndarray
    lines: int
    row_lines: np.ndarray | None = None
    filename: str = ""

    def __len__(self) -> int:
        return len(self.qids)

    def duplicates_check(self, codes: np.ndarray) -> None:
        """Raise FormatError for the first line that repeats a docid of its ranking, given a code per docid
        (``codes[i]`` for ``docids[i]``; equal codes for equal docids, such as their document ids)."""
        if self.row_lines is None or not len(codes):
            return  # read whole: parse_run checked
        group = np.repeat(np.arange(len(self.stops)), np.diff(self.stops, prepend=0))
        low, high = int(codes.min()), int(codes.max())
        if high - low < 2**62 // max(len(self.stops), 1):  # (ranking, code) as one whole number: one sort
            keys = np.sort(group * (high - low + 1) + (codes - low))
            if not (keys[1:] == keys[:-1]).any():
                return
        else:
            by_code = np.lexsort((codes, group))
            same = (group[by_code][1:] == group[by_code][:-1]) & (codes[by_code][1:] == codes[by_code][:-1])
            if not same.any():
                return
        lines = self.row_lines
        raise_duplicate_docid(
            [self.qids[g] for g in group.tolist()],
            [d.decode() for d in self.docids],
            [self.tags[g] for g in group.tolist()],
            lambda i: int(lines[i]),
            self.filename,
        )


def _shifted(error: FormatError, lines_before: int) -> FormatError:
    """An error found in a piece, with the line numbered in the whole file."""
    if error.line is None:
        return error
    return type(error)(error.message, filename=error.filename, line=error.line + lines_before, field=error.field)


# Bytes whose presence sends a piece to the exact path: NUL, the ASCII characters str.split() takes for spaces
# and trec_eval does not (U+001C..U+001F), the line-end marker, and "_" (which int() and float() would take).
_ODD_BYTES = (b"\x00", b"\x1c", b"\x1d", b"\x1e", b"\x1f", b"\x01", b"_")


# The bytes str.split() and trec_eval's isspace() take for spaces in an ASCII piece.
_SPACE = np.zeros(256, dtype=bool)
_SPACE[list(b" \t\n\r\x0b\x0c")] = True
WIDE_DOCID = 100  # docids longer than this (bytes) stay a list: a block's docids as one array is as wide as its widest


@dataclass(frozen=True, slots=True)
class _FastColumns:
    """A piece read by numpy: the byte spans of each line's qid and tag, where a line starts a new (tag, qid)
    stretch, the docids (one fixed-width byte string each), and the scores."""

    qid_spans: np.ndarray  # (lines, 2) start and stop in the piece
    tag_spans: np.ndarray
    changed: np.ndarray  # changed[i]: line i + 1 has another qid or tag than line i
    docids: np.ndarray  # dtype S<width>
    scores: np.ndarray


def _token_matrix(data: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """The tokens ``data[starts[i]:stops[i]]`` as rows of a (tokens, widest) byte matrix, padded with zeros."""
    lengths = stops - starts
    width = int(lengths.max(initial=1))
    columns = np.arange(width)
    matrix = data[np.minimum(starts[:, None] + columns, len(data) - 1)]
    matrix[columns >= lengths[:, None]] = 0
    return matrix


def _columns_fast(raw: bytes) -> _FastColumns | None:
    """The columns of a piece in which every line is ASCII with exactly six columns, ranks of digits only and
    scores that float() reads; None for any other piece (the exact path then finds what is wrong, or reads what
    this one does not). numpy finds the tokens (runs of non-space bytes) of the whole piece at once: no Python
    object per line but a docid's bytes and a score."""
    if not raw.isascii() or any(odd in raw for odd in _ODD_BYTES):
        return None
    if not raw.endswith(b"\n"):
        raw += b"\n"
    data = np.frombuffer(raw, dtype=np.uint8)
    edges = np.diff(_SPACE[data].view(np.int8), prepend=np.int8(1), append=np.int8(1))
    starts, stops = np.flatnonzero(edges == -1), np.flatnonzero(edges == 1)
    ends = np.flatnonzero(data == 10)
    lines = len(ends)
    # Six tokens a line: token 6j starts after line j - 1's end, and token 6j + 5 stops before line j's end.
    if not lines or len(starts) != 6 * lines:
        return None
    if not ((starts[6::6] > ends[:-1]).all() and (stops[5::6] <= ends).all()):
        return None
    if int(np.diff(ends, prepend=-1).max()) > SHORTEST_LIMIT:
        return None  # a line long enough to hold a value past its column's width: the exact path checks
    ranks = _token_matrix(data, starts[3::6], stops[3::6])
    if int(((ranks >= 48) & (ranks <= 57)).sum()) != int((stops[3::6] - starts[3::6]).sum()):
        return None
    qids = _token_matrix(data, starts[0::6], stops[0::6])
    tags = _token_matrix(data, starts[5::6], stops[5::6])
    docs = _token_matrix(data, starts[2::6], stops[2::6])
    score_matrix = _token_matrix(data, starts[4::6], stops[4::6])
    try:
        scores = np.array(
            list(map(float, score_matrix.view(f"S{score_matrix.shape[1]}").ravel().tolist())), dtype=np.float64
        )
    except ValueError:
        return None
    return _FastColumns(
        qid_spans=np.stack([starts[0::6], stops[0::6]], axis=1),
        tag_spans=np.stack([starts[5::6], stops[5::6]], axis=1),
        changed=(qids[1:] != qids[:-1]).any(axis=1) | (tags[1:] != tags[:-1]).any(axis=1),
        docids=docs.view(f"S{docs.shape[1]}").ravel(),
        scores=scores,
    )


def _docid_array(docids: list[bytes]) -> np.ndarray | list[bytes]:
    """Docids as one fixed-width byte-string array, or the list when one is wider than WIDE_DOCID."""
    if not docids:
        return np.empty(0, dtype="S1")
    if max(map(len, docids)) > WIDE_DOCID:
        return docids
    return np.array(docids, dtype=bytes)


def _columns_exact(text: str, filename: str) -> tuple[list[str], list[str], list[str], list[float], np.ndarray, int]:
    """The columns of any piece, checked as parse_run checks a file: qids, docids, tags, scores, the line of
    each row, and the lines of the piece."""
    lines = split_lines(text)
    nul, spaces = "\x00" in text, has_other_space(text)
    if nul or spaces:
        check_columns(lines, RUN_COLUMNS.split(), filename, exact=False, nul=nul, spaces=spaces)
    counts = np.fromiter(map(len, map(str.split, lines)), dtype=np.intp, count=len(lines))
    nonblank = np.flatnonzero(counts) + 1

    def line_of(i: int) -> int:
        return int(nonblank[i])

    short = np.flatnonzero((counts > 0) & (counts < 6))
    if len(short):
        i = int(short[0])
        raise FormatError(columns_message(6, RUN_COLUMNS, counts[i]), filename=filename, line=i + 1)
    for i in np.flatnonzero(counts > 6).tolist():  # extra trailing columns are ignored
        lines[i] = " ".join(lines[i].split()[:6])
    tokens = "\n".join(lines).split()
    qids, docids, rank_tokens, score_tokens, tags = (tokens[c::6] for c in (0, 2, 3, 4, 5))
    del tokens
    if qids:
        check_lengths((("qid", qids), ("docid", docids), ("tag", tags)), line_of, filename)
    loose = not text.isascii() or "_" in text
    _, rank_error = column_numbers("rank", rank_tokens, int, line_of, filename, loose=loose)
    score_list, score_error = column_numbers("score", score_tokens, float, line_of, filename, loose=loose)
    scores = np.array(score_list, dtype=np.float64)
    raise_first(rank_error, score_error, nonfinite_error(scores, score_tokens, line_of, filename))
    return qids, docids, tags, score_list, nonblank, len(lines)


def _parse_piece(raw: bytes, filename: str) -> tuple[RunBlock, list[int]]:
    """The rankings of one piece (lines numbered from 1), and the piece's line of each ranking's first line."""
    fast = _columns_fast(raw)
    keys: list[tuple[str, str]]
    if fast is not None:
        count = line_count = len(fast.docids)
        nonblank = np.arange(1, count + 1)
        docids: np.ndarray | list[bytes] = fast.docids
        scores = fast.scores
        changed = fast.changed
    else:
        text = decode(raw, filename)
        qid_strs, doc_strs, tag_strs, score_list, nonblank, line_count = _columns_exact(text, filename)
        docids = _docid_array(list(map(str.encode, doc_strs)))
        qid_bytes, tag_bytes = list(map(str.encode, qid_strs)), list(map(str.encode, tag_strs))
        count = len(doc_strs)
        scores = np.array(score_list, dtype=np.float64)
        del score_list
        changed = np.fromiter(map(ne, qid_bytes[1:], qid_bytes[:-1]), dtype=bool, count=max(count - 1, 0))
        if count and tag_bytes.count(tag_bytes[0]) != count:
            changed |= np.fromiter(map(ne, tag_bytes[1:], tag_bytes[:-1]), dtype=bool, count=count - 1)
    if not np.isfinite(scores).all():
        text = decode(raw, filename)
        _columns_exact(text, filename)  # names the line
    if not count:
        empty = np.empty(0, dtype=np.int64)
        return RunBlock([], [], empty, np.empty(0, dtype="S1"), empty, np.empty(0), line_count), []

    # Rankings: stretches of lines with one tag and qid.
    starts = np.concatenate(([0], np.flatnonzero(changed) + 1))
    first = starts.tolist()
    if fast is not None:
        q, t = fast.qid_spans[starts].tolist(), fast.tag_spans[starts].tolist()
        keys = [(raw[a:b].decode(), raw[c:d].decode()) for (c, d), (a, b) in zip(q, t, strict=True)]
    else:
        keys = [(tag_bytes[i].decode(), qid_bytes[i].decode()) for i in first]
    if len(set(keys)) != len(keys):
        raise NotGrouped
    stops = np.append(starts[1:], count)
    group = np.repeat(np.arange(len(starts)), stops - starts)
    sortkey = score_key(scores)
    order = np.lexsort((sortkey, group))
    tie_breaks(order, group, sortkey, cast(Sequence[bytes], docids))  # an S array indexes as bytes do
    block = RunBlock(
        tags=[tag for tag, _ in keys],
        qids=[qid for _, qid in keys],
        stops=stops.astype(np.int64),
        docids=docids,
        order=order,
        scores=scores[order],
        lines=line_count,
        row_lines=nonblank,
        filename=filename,
    )
    return block, nonblank[starts].tolist()


def _take(block: RunBlock, rankings: int, lines: int, lines_before: int) -> RunBlock:
    """The first ``rankings`` rankings of ``block``, covering its first ``lines`` lines."""
    stop = int(block.stops[rankings - 1]) if rankings else 0
    return RunBlock(
        tags=block.tags[:rankings],
        qids=block.qids[:rankings],
        stops=block.stops[:rankings],
        docids=block.docids[:stop],
        order=block.order[:stop],
        scores=block.scores[:stop],
        lines=lines,
        row_lines=None if block.row_lines is None else block.row_lines[:stop] + lines_before,
        filename=block.filename,
    )


def _whole(data: bytes | BinaryIO, filename: str) -> RunBlock:
    """The whole file through parse_run, as one block."""
    runs = parse_run(data, filename=filename)
    tags: list[str] = []
    qids: list[str] = []
    docids: list[bytes] = []
    lengths: list[int] = []
    scores: list[np.ndarray] = []
    for tag, rankings in runs.items():
        for ranking in rankings:
            tags.append(tag)
            qids.append(ranking.qid)
            docids.extend(map(str.encode, ranking.docids))
            lengths.append(len(ranking.docids))
            scores.append(ranking.scores)
    return RunBlock(
        tags=tags,
        qids=qids,
        stops=np.cumsum(np.array(lengths, dtype=np.int64)),
        docids=_docid_array(docids),
        order=np.arange(len(docids)),
        scores=np.concatenate(scores) if scores else np.empty(0),
        lines=0,
    )


def stream_run(
    data: bytes | BinaryIO, *, filename: str, piece_bytes: int | None = None, whole: bool = False
) -> Iterator[RunBlock]:
    """The rankings of a run file (see parse_run for the layouts and checks), a block of whole rankings at a
    time, read ``piece_bytes`` at a time. Raises FormatError as parse_run does (an error may be found once the
    rankings before it have come out: the caller writes nothing until the end), and NotGrouped when a ranking's
    lines turn out not to be together; ``whole=True`` then reads the file whole (one block). ``piece_bytes``:
    PIECE_BYTES, read when the reading starts.

    One function: the reading loop carries the piece, the partial last line and the open ranking from one piece to
    the next; split, that state would travel through every call of the parser's hottest loop.
    """
    if piece_bytes is None:
        piece_bytes = PIECE_BYTES
    stream: BinaryIO | None = None
    if isinstance(data, bytes | bytearray | memoryview):
        content = bytes(data)
    else:
        stream, content = data, b""
        if stream.seekable():
            stream.seek(0)
    if not whole:
        head = content[:piece_bytes] if stream is None else stream.read(piece_bytes)
        first = first_data_line(head.decode("utf-8", errors="replace"))
        jsonl = PureWindowsPath(filename).suffix.lower() in JSONL_SUFFIXES
        tsv = first is not None and "\t" in first and len(first.strip().split("\t")) in (3, 4)
        whole = jsonl or tsv or (first is not None and first.lstrip().startswith("{"))
        if stream is not None and stream.seekable():
            stream.seek(0)
        elif stream is not None:  # a stream read once cannot be read again: take it whole
            content, stream, whole = head + stream.read(), None, True
    if whole:
        yield _whole(data if stream is not None or isinstance(data, bytes) else content, filename)
        return

    position = 0

    def read() -> bytes:
        nonlocal position
        if stream is not None:
            return stream.read(piece_bytes)
        piece = content[position : position + piece_bytes]
        position += len(piece)
        return piece

    seen: set[tuple[str, str]] = set()
    lines_before = 0  # lines of the file before ``carry``
    carry = b""
    started = False
    rankings = 0
    while True:
        piece = read()
        at_end = not piece
        buffer = carry + piece
        if not started:
            if at_end or len(buffer) >= 4 or b"\n" in buffer:
                started = True
                if buffer.startswith(codecs.BOM_UTF8):
                    buffer = buffer[len(codecs.BOM_UTF8) :]
            elif not at_end:
                carry = buffer
                continue
        cut = len(buffer) if at_end else buffer.rfind(b"\n") + 1
        if cut == 0 and not at_end:  # no line ends in what was read yet
            carry = buffer
            continue
        raw, rest = buffer[:cut], buffer[cut:]
        if not raw:
            break
        if b"\r" in raw and raw.count(b"\r") != raw.count(b"\r\n"):
            raise NotGrouped  # lines ended by a lone CR: numbered as parse_run numbers them, read whole
        collecting = gc.isenabled()
        gc.disable()  # a piece makes a million small objects, and no cycle (see text.gc_paused)
        try:
            block, first_lines = _parse_piece(raw, filename)
        except FormatError as exc:
            raise _shifted(exc, lines_before) from None
        finally:
            if collecting:
                gc.enable()
        keep = len(block) if at_end or not len(block) else len(block) - 1  # the last may go on in the next piece
        if keep <= 0 and len(block) and not at_end:
            carry = raw + rest
            piece_bytes *= 2  # one ranking longer than a piece: read more before parsing again
            continue
        done = block.lines if at_end or keep == len(block) else first_lines[keep] - 1
        out = _take(block, keep, done, lines_before)
        for key in zip(out.tags, out.qids, strict=True):
            if key in seen:
                raise NotGrouped
            seen.add(key)
        rankings += len(out)
        if len(out):
            yield out
        if at_end:
            break
        # The lines of the kept rankings are done; the rest of the piece is read again with the next one.
        skip = _line_offset(raw, done)
        carry = raw[skip:] + rest
        lines_before += done
        del raw, block, out
    if not rankings:
        raise empty_file(filename)


def _line_offset(raw: bytes, lines: int) -> int:
    """The byte where line ``lines + 1`` of ``raw`` starts."""
    if lines <= 0:
        return 0
    ends = np.flatnonzero(np.frombuffer(raw, dtype=np.uint8) == 10)
    return int(ends[lines - 1]) + 1


def readable_apart(data: bytes | BinaryIO) -> bool:
    """Whether ``data`` can be read from another thread: bytes, a file in memory, or a file of the operating
    system. A job's upload is read from the database on the import's own connection, which is not."""
    if isinstance(data, bytes | bytearray | memoryview | io.BytesIO):
        return True
    try:
        data.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True


class ReadAhead:
    """The blocks of ``blocks`` parsed by a thread of their own, up to ``depth`` ahead of the caller: while the
    caller waits for the database (its COPY, stubs and pool merges), the next piece is being parsed (psycopg
    releases the GIL while it waits). The blocks come out in order; an error of the parser (FormatError,
    NotGrouped) comes out where its block would have. Use as a context manager: leaving it stops the thread,
    whatever the caller raised. The thread speaks the caller's language (its error messages are translated)."""

    _END = object()

    def __init__(self, blocks: Iterator[RunBlock], depth: int = 2) -> None:
        self._blocks = blocks
        self._queue: queue.Queue[tuple[bool, object]] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._language = translation.get_language()
        self._thread = threading.Thread(target=self._work, name="reljudge-run-parse", daemon=True)

    def _put(self, item: tuple[bool, object]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _work(self) -> None:
        with translation.override(self._language):
            try:
                for block in self._blocks:
                    if not self._put((True, block)):
                        return
                self._put((True, self._END))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
                self._put((False, exc))

    def __enter__(self) -> Iterator[RunBlock]:
        self._thread.start()
        return self._iterate()

    def _iterate(self) -> Iterator[RunBlock]:
        while True:
            ok, item = self._queue.get()
            if not ok:
                assert isinstance(item, BaseException)
                raise item
            if item is self._END:
                return
            yield cast(RunBlock, item)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        close = getattr(self._blocks, "close", None)
        if close is not None:
            close()
