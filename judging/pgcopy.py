"""PostgreSQL's binary COPY format, built from whole columns with numpy: no Python work per row.

A binary COPY stream is a signature, then per row a 16-bit field count and per field a 32-bit length (-1 for
NULL) and the value in network byte order, then a trailer. Whole numbers, booleans, floats and timestamps have
one width, so a block of rows whose values all have one width is a matrix of bytes, one row of it per table row;
text and byte strings are placed by their offsets. The server reads binary values without parsing text (a
timestamp costs it a copy instead of a parse), and the client makes a million rows in a few numpy passes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import repeat
from typing import Any

import numpy as np

SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
TRAILER = b"\xff\xff"
PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)

# The binary width and byte order of the fixed-width types, and the range of the whole numbers.
_FIXED = {"int8": ">i8", "int4": ">i4", "int2": ">i2", "float8": ">f8", "bool": "u1", "timestamptz": ">i8"}
_RANGE = {"int8": (-(2**63), 2**63 - 1), "int4": (-(2**31), 2**31 - 1), "int2": (-(2**15), 2**15 - 1)}
_VARIABLE = frozenset({"text", "bytea", "jsonb"})
TYPES = frozenset(_FIXED) | _VARIABLE


def pg_type(db_type: str) -> str:
    """The COPY type of a column from its SQL type as Django spells it (``Field.db_type``)."""
    name = db_type.split("(")[0].strip().lower()
    found = {
        "bigint": "int8",
        "integer": "int4",
        "smallint": "int2",
        "double precision": "float8",
        "boolean": "bool",
        "timestamp with time zone": "timestamptz",
        "varchar": "text",
        "text": "text",
        "bytea": "bytea",
        "jsonb": "jsonb",
    }.get(name)
    if found is None:
        raise ValueError(f"no binary COPY encoding for the SQL type {db_type!r}")
    return found


@dataclass(frozen=True, slots=True)
class _Fixed:
    """Bytes of the same width in every row: a (rows, width) matrix (or one row, broadcast)."""

    matrix: np.ndarray


@dataclass(frozen=True, slots=True)
class _Variable:
    """Bytes of each row's own width: ``lengths[i]`` bytes of ``data`` for row i, one after another."""

    lengths: np.ndarray
    data: np.ndarray


def _micros(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - PG_EPOCH) // timedelta(microseconds=1)


def _prefix(lengths: np.ndarray | int, count: int) -> _Fixed:
    if isinstance(lengths, np.ndarray):
        return _Fixed(np.ascontiguousarray(lengths, dtype=">i4").view(np.uint8).reshape(count, 4))
    return _Fixed(np.broadcast_to(np.frombuffer(np.array([lengths], dtype=">i4").tobytes(), np.uint8), (count, 4)))


def _constant_bytes(kind: str, value: Any) -> bytes:
    """One value in binary (not None)."""
    if kind in _FIXED:
        if kind == "timestamptz":
            value = _micros(value)
        elif kind == "bool":
            value = 1 if value else 0
        elif kind in _RANGE:
            low, high = _RANGE[kind]
            if not low <= int(value) <= high:
                raise ValueError(f"{value} is out of range for {kind}")
        return np.array([value], dtype=_FIXED[kind]).tobytes()
    if kind == "bytea":
        return bytes(value)
    text = value if isinstance(value, str) else str(value)
    encoded = text.encode()
    return b"\x01" + encoded if kind == "jsonb" else encoded


def _fixed_values(kind: str, values: np.ndarray) -> np.ndarray:
    """A column of non-null fixed-width values as a (rows, width) byte matrix."""
    if kind == "timestamptz":
        values = np.fromiter(map(_micros, values.tolist()), dtype=np.int64, count=len(values))
    elif kind == "bool":
        values = values.astype(bool)
    elif kind in _RANGE and len(values):
        low, high = _RANGE[kind]
        as_int = values.astype(np.int64) if values.dtype.kind in "iub" else np.asarray(values.tolist(), dtype=np.int64)
        if int(as_int.min()) < low or int(as_int.max()) > high:
            raise ValueError(f"a value is out of range for {kind}")
        values = as_int
    encoded = np.ascontiguousarray(values, dtype=_FIXED[kind])
    return encoded.view(np.uint8).reshape(len(values), encoded.dtype.itemsize)


def _variable_values(kind: str, values: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Lengths and concatenated bytes of a column of text, byte strings or JSON text (no nulls)."""
    if kind == "bytea":
        encoded = [bytes(v) for v in values]
    else:
        encoded = (
            list(map(str.encode, values)) if all(type(v) is str for v in values) else [str(v).encode() for v in values]
        )
        if kind == "jsonb":
            encoded = [b"\x01" + e for e in encoded]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    return lengths, np.frombuffer(b"".join(encoded), dtype=np.uint8)


def _pieces(kind: str, column: Any, count: int) -> list[_Fixed | _Variable]:
    """A column's length prefixes and values. ``column``: ``repeat(value)``, or a list or numpy array of
    ``count`` values, None for NULL."""
    if kind not in TYPES:
        raise ValueError(f"unknown COPY type {kind!r}")
    if isinstance(column, repeat):
        value = next(column)
        if value is None:
            return [_prefix(-1, count)]
        raw = _constant_bytes(kind, value)
        return [
            _prefix(len(raw), count),
            _Fixed(np.broadcast_to(np.frombuffer(raw, dtype=np.uint8), (count, len(raw)))),
        ]
    if len(column) != count:
        raise ValueError("columns of different lengths")
    array = column if isinstance(column, np.ndarray) and column.dtype != object else None
    if array is None:
        values = list(column)
        nulls = np.fromiter((v is None for v in values), dtype=bool, count=count)
        if nulls.any():
            present = [v for v in values if v is not None]
            if kind in _FIXED:
                width = np.dtype(_FIXED[kind]).itemsize
                matrix = _fixed_values(kind, np.asarray(present, dtype=object if kind == "timestamptz" else None))
                lengths = np.where(nulls, 0, width)
                return [_prefix(np.where(nulls, -1, width), count), _Variable(lengths, matrix.reshape(-1))]
            sizes, data = _variable_values(kind, present)
            lengths = np.zeros(count, dtype=np.int64)
            lengths[~nulls] = sizes
            return [_prefix(np.where(nulls, -1, lengths), count), _Variable(lengths, data)]
        if kind in _FIXED:
            array = np.asarray(values, dtype=object if kind == "timestamptz" else None)
        else:
            sizes, data = _variable_values(kind, values)
            return [_prefix(sizes, count), _Variable(sizes, data)]
    if kind not in _FIXED:
        sizes, data = _variable_values(kind, array.tolist())
        return [_prefix(sizes, count), _Variable(sizes, data)]
    matrix = _fixed_values(kind, array)
    return [_prefix(matrix.shape[1], count), _Fixed(matrix)]


def _merged(pieces: Iterable[_Fixed | _Variable]) -> list[_Fixed | _Variable]:
    """Neighbouring fixed pieces as one matrix."""
    out: list[_Fixed | _Variable] = []
    run: list[np.ndarray] = []
    for piece in pieces:
        if isinstance(piece, _Fixed):
            run.append(piece.matrix)
            continue
        if run:
            out.append(_Fixed(np.hstack(run)))
            run = []
        out.append(piece)
    if run:
        out.append(_Fixed(np.hstack(run)))
    return out


def rows_bytes(kinds: Sequence[str], columns: Sequence[Any], count: int) -> bytes:
    """The binary COPY rows (without signature or trailer) of ``count`` rows given as ``columns``, one per COPY
    type in ``kinds`` (see _pieces for what a column may be)."""
    if len(kinds) != len(columns):
        raise ValueError("one column per type")
    if count == 0:
        return b""
    header = _Fixed(np.broadcast_to(np.frombuffer(np.array([len(kinds)], dtype=">i2").tobytes(), np.uint8), (count, 2)))
    pieces = _merged(
        [header, *(p for kind, column in zip(kinds, columns, strict=True) for p in _pieces(kind, column, count))]
    )
    if len(pieces) == 1 and isinstance(pieces[0], _Fixed):  # every row the same width: the matrix is the data
        return np.ascontiguousarray(pieces[0].matrix).tobytes()
    widths = sum(
        (p.matrix.shape[1] if isinstance(p, _Fixed) else p.lengths for p in pieces), start=np.zeros(count, np.int64)
    )
    starts = np.concatenate(([0], np.cumsum(widths)[:-1]))
    out = np.empty(int(widths.sum()), dtype=np.uint8)
    at = starts.copy()
    for piece in pieces:
        if isinstance(piece, _Fixed):
            width = piece.matrix.shape[1]
            if width:
                out[at[:, None] + np.arange(width)] = piece.matrix
                at += width
        else:
            before = np.concatenate(([0], np.cumsum(piece.lengths)[:-1]))
            out[np.repeat(at - before, piece.lengths) + np.arange(len(piece.data))] = piece.data
            at += piece.lengths
    return out.tobytes()
