"""The leaderboard's JSON text for the API: each system's per-query values written once as JSON text and kept in
bounded LRUs (rows, blocks, and whole series patched where labels moved), so that a request after a judgment
rewrites only the moved queries' rows. The export streams (CSV, JSON lines, qrels) are judging.api.renderers'."""

from __future__ import annotations

import json
import re
import secrets
import sys
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Any, Generic, Protocol, TypeVar, cast

import numpy as np
from django.http import HttpResponse

from judging import runtime
from judging.models import Campaign
from judging.scoring import leaderboard_data
from judging.scoring.series_file import series_load, series_save_later

# --------------------------------------------------------------------------- the leaderboard's JSON text


_T = TypeVar("_T", str, bytes)


class SystemValues(Protocol):
    """A system's per-query values (Q_scored, M), as leaderboard_data hands them to per_query_text: every scored
    query's, or those of the scored queries at positions ``rows``."""

    def __call__(self, rows: np.ndarray | None = None) -> np.ndarray: ...


class TextLRU(Generic[_T]):
    """Text (or its UTF-8 bytes) kept in this process's memory, least recently used out first, bounded both by
    its number of entries and by the bytes its objects take (sys.getsizeof): whatever the campaigns and
    parameters asked for, a server process never keeps more than ``max_bytes`` of it. Thread-safe; the
    ``_many`` methods take the lock once for a whole batch (the per-query rows of a leaderboard are looked up by
    the thousand)."""

    def __init__(self, *, max_entries: int, max_bytes: int) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError(f"TextLRU bounds must be positive, not {max_entries} entries and {max_bytes} bytes")
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._texts: OrderedDict[Hashable, _T] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._texts)

    @property
    def bytes(self) -> int:
        """What the kept strings take in memory."""
        return self._bytes

    def get(self, key: Hashable) -> _T | None:
        return self.get_many([key])[0]

    def get_many(self, keys: Iterable[Hashable]) -> list[_T | None]:
        """The text of each key (None where there is none); those found become the most recently used."""
        texts, found = self._texts, cast("list[_T | None]", [])
        with self._lock:
            for key in keys:
                text = texts.get(key)
                if text is not None:
                    texts.move_to_end(key)
                found.append(text)
        return found

    def put(self, key: Hashable, text: _T) -> None:
        self.put_many([(key, text)])

    def put_many(self, items: Iterable[tuple[Hashable, _T]]) -> None:
        """Keep these texts (a text larger than the whole bound is not kept), dropping the least recently
        used ones beyond the bounds."""
        texts = self._texts
        with self._lock:
            for key, text in items:
                size = sys.getsizeof(text)
                if size > self.max_bytes:
                    continue
                old = texts.pop(key, None)
                if old is not None:
                    self._bytes -= sys.getsizeof(old)
                texts[key] = text
                self._bytes += size
            while len(texts) > self.max_entries or self._bytes > self.max_bytes:
                self._bytes -= sys.getsizeof(texts.popitem(last=False)[1])

    def clear(self) -> None:
        with self._lock:
            self._texts.clear()
            self._bytes = 0


# The leaderboard's per-query JSON is kept and joined as UTF-8 bytes: the 16 MB answer at 20 systems x 5,000
# queries is joined once from each system's object as it is kept, not joined into one string and encoded (that
# and the escaping passes over the whole text were a fifth of the request after a judgment, bench/scale_bench.py).
#
# Per-query rows already written as JSON, by measure names and the row's float64 bytes: the same values give
# the same text, so when the scored queries change (a query's first label) or a parameter set comes back, the
# rows are looked up rather than formatted again (after an ordinary judgment each system's latest rows,
# _SERIES below, are patched instead). A row is ~230 bytes of text and 160 of key: 100,000 rows (20 systems x
# 5,000 queries, one parameter set) in at most 24 MB of text, about 40 MB in all.
ROW_TEXTS: TextLRU[bytes] = runtime.keep(
    "api.row_texts",
    TextLRU(max_entries=100_000, max_bytes=24 * 2**20),
    bound=24 * 2**20,
    unit="bytes",
    invalidated_by="nothing: keyed by the values (least recently used out)",
    size=lambda: ROW_TEXTS.bytes,
)
# Whole per-query objects already written, by the scores' state (Leaderboard.state: runs, parameters and every
# query's labels version) and system: a poll with nothing changed since the last one sends them as they are. The
# latest object of each system is also _SERIES's (the same bytes), which answers an unchanged state after a
# comparison of its values, so this keeps only a few small campaigns' states: 20 systems x 5,000 queries is
# 16 MB a state, kept once, in _SERIES.
BLOCK_TEXTS: TextLRU[bytes] = runtime.keep(
    "api.block_texts",
    TextLRU(max_entries=1_000, max_bytes=4 * 2**20),
    bound=4 * 2**20,
    unit="bytes",
    invalidated_by="nothing: keyed by the scores' state (least recently used out)",
    size=lambda: BLOCK_TEXTS.bytes,
)


# The latest per-query object of each system, by series (score table and system; see leaderboard_data): the
# query names, their labels versions, the object's text and where each query's item starts in it (object_text).
# After a judgment only the rows of queries whose labels version moved are written again (a query's values move
# only with it), and the object is joined from the text between them as it was, instead of looking up 5,000 rows
# of ROW_TEXTS per system. The text is the object BLOCK_TEXTS keeps for the state (one copy); the versions array
# is one per state, shared by the table's systems (the values took 6.4 MB a table at 20 systems x 5,000 queries).
_Series = tuple[tuple[str, ...], np.ndarray, bytes, np.ndarray, int]  # queries, versions, text, starts, size
_SERIES_BYTES = 64 * 2**20  # texts kept, at most (20 systems x 5,000 queries: about 16 MB a table)
_SERIES_LOCK = threading.Lock()
_SERIES: OrderedDict[tuple[str, tuple[str, ...]], _Series] = runtime.keep(
    "api.series_texts",
    OrderedDict(),
    bound=_SERIES_BYTES,
    unit="bytes",
    invalidated_by="labels versions (the moved rows patched), least recently used out",
    lock=_SERIES_LOCK,
    size=lambda: sum(v[4] for v in list(_SERIES.values())),
)
# Up to this many moved rows a series is patched; more (a new parameter set, an import) go through ROW_TEXTS.
_SERIES_PATCH = 256


def text_caches_clear() -> None:
    """Forget the leaderboard texts this process keeps, as a freshly started server process would not have
    them: for tests and benchmarks."""
    ROW_TEXTS.clear()
    BLOCK_TEXTS.clear()
    with _SERIES_LOCK:
        _SERIES.clear()
        _KEYS.clear()


_KEYS_KEEP = 8
_KEYS: OrderedDict[tuple[str, ...], list[bytes]] = runtime.keep(
    "api.measure_keys",
    OrderedDict(),
    bound=_KEYS_KEEP,
    invalidated_by="nothing: keyed by the measure names (least recently used out)",
    lock=_SERIES_LOCK,
)


def _js_safe(text: str) -> str:
    """As DRF's JSONRenderer: U+2028/2029 are valid JSON but not valid JavaScript string literals."""
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _json_key(name: str) -> bytes:
    """'"name":' as the JSON text writes it (compact, UTF-8)."""
    return _js_safe(json.dumps(name, ensure_ascii=False)).encode() + b":"


def _query_keys(qids: list[str]) -> tuple[tuple[str, ...], list[bytes]]:
    """The query ids and their JSON keys ('"q1":'), kept for the last few sets of queries: 5,000 json.dumps
    calls a request otherwise."""
    names = tuple(qids)
    with _SERIES_LOCK:
        keys = _KEYS.get(names)
        if keys is not None:
            _KEYS.move_to_end(names)
            return names, keys
    keys = [_json_key(q) for q in qids]
    with _SERIES_LOCK:
        _KEYS[names] = keys
        while len(_KEYS) > _KEYS_KEEP:
            _KEYS.popitem(last=False)
    return names, keys


def object_text(items: list[bytes]) -> tuple[bytes, np.ndarray]:
    """The JSON object ``{item,item,...}`` of these items ('"q1":{...}'), and where each starts in it: item ``i``
    is ``text[starts[i] : starts[i + 1] - 1]`` (each is followed by one byte, a comma or the closing brace;
    ``starts[-1]`` is the text's length)."""
    starts = np.empty(len(items) + 1, dtype=np.int64)
    starts[0] = 1
    np.cumsum(np.fromiter(map(len, items), dtype=np.int64, count=len(items)) + 1, out=starts[1:])
    starts[1:] += 1
    text = b"{" + b",".join(items) + b"}"
    if not items:
        starts[0] = len(text)
    return text, starts


def object_patched(text: bytes, starts: np.ndarray, moved: np.ndarray, new: list[bytes]) -> tuple[bytes, np.ndarray]:
    """``text`` (object_text's) with the items at the sorted positions ``moved`` replaced by ``new``: one join of
    the text between them, and the starts shifted by the moved items' change of length."""
    if not moved.size:
        return text, starts
    begins, ends = starts[moved].tolist(), (starts[moved + 1] - 1).tolist()
    pieces: list[bytes] = []
    at = 0
    for begin, end, item in zip(begins, ends, new, strict=True):
        pieces += (text[at:begin], item)
        at = end
    pieces.append(text[at:])
    shift = np.zeros(starts.size, dtype=np.int64)
    shift[moved + 1] = np.fromiter(map(len, new), dtype=np.int64, count=len(new)) - (
        starts[moved + 1] - 1 - starts[moved]
    )
    return b"".join(pieces), starts + np.cumsum(shift)


class _NotFinite(Exception):
    pass


def _finite(values: np.ndarray) -> np.ndarray:
    """``values`` as float64, or _NotFinite where one is not finite (JSON has no NaN: the general path answers)."""
    values = np.ascontiguousarray(values, dtype=np.float64)
    if not np.isfinite(values).all():
        raise _NotFinite
    return values


class _PerQueryText:
    """Per-query values written straight to JSON text for leaderboard_json: a placeholder string stands in
    the data for each system's ``per_query`` object (leaderboard_data's ``per_query_text``) and is replaced
    by the object's UTF-8 text afterwards."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(8)
        self.parts: dict[str, bytes] = {}
        self.keys: tuple[tuple, list[bytes]] | None = None
        self._qids: list[str] | None = None  # the list self.keys was made of (the same for every system)
        self._formats: dict[tuple[str, ...], bytes] = {}

    def __call__(
        self,
        values: SystemValues,
        qids: list[str],
        names: list[str],
        *,
        block: str,
        series: str = "",
        campaign_pk: int = 0,
        versions: np.ndarray | None = None,
    ) -> str:
        """A placeholder for the JSON object {qid: {name: value}} of the system's values, the per-query block
        ``block`` names (the scores' state and the system): written once per state, from the rows of the same
        ``series`` (the system in the previous states of the score table, with the queries' labels ``versions``)
        where they did not move: this process's, or those another process of the machine saved
        (judging.scoring.series_file). ``values()`` gives every scored query's values (Q, M), ``values(rows)``
        those of the scored queries at positions ``rows`` only: after a judgment only the moved rows are read
        (and checked), not the system's whole table."""
        placeholder = f"per-query:{self.token}:{len(self.parts)}"
        text = BLOCK_TEXTS.get(block)
        if text is None:
            text = self._text(values, qids, names, series, campaign_pk, versions)
            BLOCK_TEXTS.put(block, text)
        self.parts[placeholder] = text
        return placeholder

    def _row_format(self, names: tuple[str, ...]) -> bytes:
        """b'{"P@10":%a,...}': %a (the ASCII of repr) writes a float exactly as json.dumps does."""
        got = self._formats.get(names)
        if got is None:
            got = self._formats[names] = (
                b"{" + b",".join(_json_key(n).replace(b"%", b"%%") + b"%a" for n in names) + b"}"
            )
        return got

    def _text(
        self,
        values: SystemValues,
        qids: list[str],
        names: list[str],
        series: str,
        campaign_pk: int = 0,
        versions: np.ndarray | None = None,
    ) -> bytes:
        if self.keys is None or self._qids is not qids:
            self.keys, self._qids = _query_keys(qids), qids
        names_key = tuple(names)
        row_format = self._row_format(names_key)
        got = None
        if series and versions is not None:
            got = self._patched(series, names_key, values, versions, row_format, campaign_pk)
        if got is None:  # each query's '"qid":{...}'
            whole = _finite(values())
            got = object_text(list(map(bytes.__add__, self.keys[1], self._rows(whole, names_key, row_format))))
        text, starts = got
        if series and campaign_pk:
            series_save_later(campaign_pk, series, names_key, self.keys[0], values, text, starts)
        if series and versions is not None:
            size = len(text) + starts.nbytes  # the text is the same object BLOCK_TEXTS keeps; versions are shared
            with _SERIES_LOCK:
                _SERIES[(series, names_key)] = (self.keys[0], versions, text, starts, size)
                _SERIES.move_to_end((series, names_key))
                while len(_SERIES) > 1 and sum(v[4] for v in _SERIES.values()) > _SERIES_BYTES:
                    _SERIES.popitem(last=False)
        return text

    def _patched(
        self,
        series: str,
        names_key: tuple[str, ...],
        values: SystemValues,
        versions: np.ndarray,
        row_format: bytes,
        campaign_pk: int = 0,
    ) -> tuple[bytes, np.ndarray] | None:
        """The series' latest object text with the rows that moved written again (and its items' starts), or
        None when the queries differ (a query joined the means) or too many rows moved. The latest text is this
        process's (its rows moved where the query's labels version did; only theirs are read), else that saved
        on the machine for the same queries (where the values did)."""
        assert self.keys is not None
        with _SERIES_LOCK:
            got = _SERIES.get((series, names_key))
        if got is not None:
            if got[0] != self.keys[0] or got[1].shape != versions.shape:
                return None
            moved = np.flatnonzero(got[1] != versions)
            if moved.size > _SERIES_PATCH:
                return None
            text, starts = got[2], got[3]
            rows = _finite(values(moved)) if moved.size else np.zeros((0, len(names_key)))
        else:
            saved = series_load(campaign_pk, series, names_key, self.keys[0]) if campaign_pk else None
            if saved is None:
                return None
            whole = _finite(values())
            if saved[0].shape != whole.shape:
                return None
            moved = np.flatnonzero((saved[0] != whole).any(axis=1))
            if moved.size > _SERIES_PATCH:
                return None
            text, starts, rows = saved[1], saved[2], whole[moved]
        keys = self.keys[1]
        new = [keys[i] + row_format % tuple(row) for i, row in zip(moved.tolist(), rows.tolist(), strict=True)]
        return object_patched(text, starts, moved, new)

    def _rows(self, values: np.ndarray, names_key: tuple[str, ...], row_format: bytes) -> list[bytes]:
        """Every row's text, from ROW_TEXTS where the same values were written before."""
        rows = values.view(np.dtype((np.void, values.shape[1] * 8))).ravel().tolist() if values.size else []
        keys = [(names_key, row) for row in rows]
        texts = ROW_TEXTS.get_many(keys)
        new: list[tuple[Hashable, bytes]] = []
        for i, row in enumerate(values.tolist()):
            if texts[i] is None:
                text = texts[i] = row_format % tuple(row)
                new.append((keys[i], text))
        ROW_TEXTS.put_many(new)
        return cast("list[bytes]", texts)

    def pieces(self, text: str) -> list[bytes]:
        """``text`` (JSON with the placeholders) in UTF-8 pieces with the per-query objects in their place, in
        order: the kept objects as they are, the text around them encoded."""
        pieces = re.split(f'"(per-query:{self.token}:[0-9]+)"', _js_safe(text))
        return [self.parts[p] if i % 2 else p.encode() for i, p in enumerate(pieces)]


def leaderboard_json_pieces(*, campaign: Campaign, **params: Any) -> list[bytes] | None:
    """leaderboard_data(..., per_query=True) as the API's JSON text in UTF-8 pieces (compact, what DRF's
    JSONRenderer writes, once joined), or None where only the general path applies (no per-query values, the
    diversity measures, a value that is not finite). Building a dict per query and system and encoding them
    took seconds for 20 systems x 5,000 queries; the per-query objects are written as text in one formatting
    step each, and kept. The API writes the pieces one after the other: joining them copied the 16 MB answer
    once more (10 ms of a request at 100M entries, bench/scale_bench.py)."""
    if not params.get("per_query", True) or params.get("attribute"):
        return None
    per_query_text = _PerQueryText()
    try:
        data = leaderboard_data(campaign=campaign, **params, per_query_text=per_query_text)
    except _NotFinite:
        return None
    return per_query_text.pieces(json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False))


def pieces_response(pieces: list[bytes], *, content_type: str) -> HttpResponse:
    """An answer whose body is these pieces, written one after the other (HttpResponse.write keeps each as it
    is), with its Content-Length set here: CommonMiddleware would otherwise read ``content``, which joins them."""
    response = HttpResponse(content_type=content_type)
    for piece in pieces:
        response.write(piece)
    response["Content-Length"] = str(sum(map(len, pieces)))
    return response


def leaderboard_json(*, campaign: Campaign, **params: Any) -> bytes | None:
    """leaderboard_json_pieces joined: the whole JSON text."""
    pieces = leaderboard_json_pieces(campaign=campaign, **params)
    return None if pieces is None else b"".join(pieces)
