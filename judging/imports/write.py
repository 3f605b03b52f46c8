"""Rows into the database, whichever it is: the writers the importers call, each handing the rows to
write_postgres or write_sqlite."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from itertools import islice, repeat
from typing import Any

import numpy as np
from django.db import connection, models

from judging import pgcopy
from judging.imports import write_postgres, write_sqlite

Progress = Callable[[int], None] | None
Model = type[models.Model]


def _field(model: Model, name: str) -> models.Field[Any, Any]:
    field = model._meta.get_field(name)
    if not isinstance(field, models.Field):
        raise ValueError(f"{model.__name__}.{name} is not a column")
    return field


def _names(model: Model, fields: Sequence[str]) -> tuple[str, str]:
    table = connection.ops.quote_name(model._meta.db_table)
    return table, ", ".join(connection.ops.quote_name(_field(model, f).column) for f in fields)


def _kinds(model: Model, fields: Sequence[str]) -> list[str]:
    """The binary COPY type of each field's column."""
    return [pgcopy.pg_type(str(_field(model, f).db_type(connection))) for f in fields]


def insert_rows(model: Model, fields: Sequence[str], rows: Iterable[Sequence[Any]], progress: Progress = None) -> int:
    """Insert plain rows in one statement stream; returns how many.

    Imports create hundreds of thousands of stub documents, pairs and rankings: building a model instance per
    row made the ORM's bulk_create the slowest step of a 1M-line run import (about 60% of the time), while the
    driver takes the values directly. Constraints still hold: the database checks them on every row.
    """
    table, columns = _names(model, fields)
    if connection.vendor == "postgresql":
        return write_postgres.copy_rows(table, columns, _kinds(model, fields), rows, progress)
    return write_sqlite.staged_insert(table, columns, rows, progress)


def insert_columns(model: Model, fields: Sequence[str], columns: Sequence[Any], progress: Progress = None) -> int:
    """insert_rows for rows given as columns: each a list or numpy array of values (None for NULL), or
    ``repeat(value)`` for a value every row shares.

    On PostgreSQL the rows go as binary COPY made from the whole columns by numpy (pgcopy): no Python work per
    row, and no text for the server to parse. On SQLite they go through insert_rows."""
    if len(fields) != len(columns):
        raise ValueError("one column per field")
    varying = [c for c in columns if not isinstance(c, repeat)]
    count = len(varying[0]) if varying else 0
    if any(len(c) != count for c in varying):
        raise ValueError("columns of different lengths")
    if not count:
        return 0
    if connection.vendor != "postgresql":
        lists = [c if isinstance(c, repeat) else (c.tolist() if isinstance(c, np.ndarray) else c) for c in columns]
        # zip ends with the lists of values; the repeat()s are endless.
        return insert_rows(model, fields, zip(*lists, strict=False), progress=progress)
    table, names = _names(model, fields)
    return write_postgres.copy_columns(table, names, _kinds(model, fields), columns, count, progress)


@dataclass(frozen=True, slots=True)
class Encoded:
    """Rows made ready for ``table`` (quoted; ``columns`` its quoted column list) without the connection: a binary
    COPY stream on PostgreSQL, a list of row tuples on SQLite. ``size``: the bytes it holds, about."""

    table: str
    columns: str
    payload: bytes | list[tuple[Any, ...]]
    count: int
    size: int
    stage: bool = False  # for a Stage (appended as they come on SQLite)


def _encode(
    table: str, names: str, kinds: Sequence[str], columns: Sequence[Any], count: int, stage: bool = False
) -> Encoded:
    if connection.vendor == "postgresql":
        payload = write_postgres.encode_columns(kinds, columns, count)
        return Encoded(table, names, payload, count, len(payload), stage)
    lists = [c if isinstance(c, repeat) else (c.tolist() if isinstance(c, np.ndarray) else c) for c in columns]
    rows = list(islice(zip(*lists, strict=False), count))
    return Encoded(table, names, rows, len(rows), 64 * len(rows) * len(columns), stage)


def columns_encode(model: Model, fields: Sequence[str], columns: Sequence[Any]) -> Encoded:
    """insert_columns' rows made ready to be inserted later (encoded_insert), by a thread that may not use the
    connection."""
    varying = [c for c in columns if not isinstance(c, repeat)]
    count = len(varying[0]) if varying else 0
    if any(len(c) != count for c in varying) or len(fields) != len(columns):
        raise ValueError("one column per field, each of the same length")
    table, names = _names(model, fields)
    kinds = _kinds(model, fields) if connection.vendor == "postgresql" else []
    return _encode(table, names, kinds, columns, count)


def encoded_insert(encoded: Encoded) -> int:
    """Insert rows made by columns_encode (or Stage.encode); returns how many."""
    if not encoded.count:
        return 0
    if isinstance(encoded.payload, bytes):
        write_postgres.copy_payload(encoded.table, encoded.columns, encoded.payload)
    elif encoded.stage:
        write_sqlite.append_rows(encoded.table, encoded.columns, encoded.payload)
    else:
        write_sqlite.staged_insert(encoded.table, encoded.columns, encoded.payload, None)
    return encoded.count


class Stage:
    """A temporary table of this transaction (no index, no constraint, not logged) that rows are streamed into,
    to be merged into the real tables by one INSERT ... SELECT or UPDATE ... FROM: the database then checks
    every constraint and index once per merged row, and the import decides what to merge only once it has read
    the whole file. ``columns``: (name, SQL type) pairs; the SQL types are PostgreSQL's, which SQLite takes."""

    def __init__(self, name: str, columns: Sequence[tuple[str, str]]) -> None:
        self.name = connection.ops.quote_name(name)
        self.columns = [c for c, _ in columns]
        self.kinds = [pgcopy.pg_type(t) for _, t in columns]
        self._names = ", ".join(connection.ops.quote_name(c) for c in self.columns)
        self._sql_types = ", ".join(f"{connection.ops.quote_name(c)} {t}" for c, t in columns)
        self.rows = 0

    def __enter__(self) -> Stage:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {self.name}")
            cursor.execute(f"CREATE TEMPORARY TABLE {self.name} ({self._sql_types})")
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if kind is not None or connection.needs_rollback:  # the transaction is failing: its rollback drops it
            return
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {self.name}")

    def prepare(self, *columns: str) -> None:
        """Ready the stage to be merged on ``columns``: PostgreSQL gets its statistics (a temporary table has
        none, and the planner would take a million rows for a few), SQLite an index (it has no hash join)."""
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(f"ANALYZE {self.name}")
            else:
                index = connection.ops.quote_name(f"{self.name.strip(chr(34))}_{'_'.join(columns)}")
                names = ", ".join(connection.ops.quote_name(c) for c in columns)
                cursor.execute(f"CREATE INDEX IF NOT EXISTS {index} ON {self.name} ({names})")

    def clear(self) -> None:
        """Empty the stage for its next rows."""
        with connection.cursor() as cursor:
            cursor.execute(f"{'TRUNCATE' if connection.vendor == 'postgresql' else 'DELETE FROM'} {self.name}")
        self.rows = 0

    def add(self, columns: Sequence[Any], count: int) -> None:
        """Append ``count`` rows given as columns (see insert_columns)."""
        if not count:
            return
        if connection.vendor == "postgresql":
            write_postgres.copy_columns(self.name, self._names, self.kinds, columns, count, None)
        else:
            lists = [c if isinstance(c, repeat) else (c.tolist() if isinstance(c, np.ndarray) else c) for c in columns]
            write_sqlite.append_rows(self.name, self._names, zip(*lists, strict=False))
        self.rows += count

    def encode(self, columns: Sequence[Any], count: int) -> Encoded:
        """``count`` rows given as columns made ready for write (without the connection: see columns_encode)."""
        return _encode(self.name, self._names, self.kinds, columns, count, stage=True)

    def write(self, encoded: Encoded) -> None:
        """Append rows made by encode."""
        self.rows += encoded_insert(encoded)


def reserve_ids(model: Model, count: int) -> list[int]:
    """Row ids for ``count`` rows about to be inserted, increasing, so that the caller knows each row's id
    without reading the rows back (a million new pairs would otherwise be read again to find their ids).
    Call inside the import's transaction (see each engine's reserve_ids for how they are drawn)."""
    if count <= 0:
        return []
    if connection.vendor == "postgresql":
        return write_postgres.reserve_ids(model._meta.db_table, count)
    return write_sqlite.reserve_ids(model._meta.db_table, count)


def fetch(queryset: models.QuerySet[Any, Any]) -> list[tuple[Any, ...]]:
    """All rows of a values_list() queryset at once, through the cursor: no per-row ORM work (a million
    pairs or judgments are read in about a second instead of several)."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows


def roomy_cache() -> AbstractContextManager[None]:
    """A context in which a large import's index pages stay in memory (SQLite's page cache; PostgreSQL's shared
    buffers are the server's business)."""
    return write_sqlite.roomy_cache() if connection.vendor == "sqlite" else nullcontext()


def foreign_keys_check(tables: Sequence[Model]) -> None:
    """Check the deferred foreign keys of the rows written to ``models`` so far in this transaction, now: an
    IntegrityError here names a row that refers to one that does not exist (any more). SQLite checks them at
    the commit, under the write lock an import holds from its start, so no other session can delete a row the
    import refers to."""
    if connection.vendor == "postgresql":
        write_postgres.foreign_keys_check([m._meta.db_table for m in tables])


class KeyChecks:
    """The deferred foreign-key checks of rows written to ``tables``, run on demand: an import that writes in
    blocks runs them after each block, while its reader parses the next piece, instead of all at the commit
    (200,000 pool pairs queue 600,000 checks; see runs._run_write). A no-op on SQLite, which checks at the
    commit under the import's write lock."""

    def __init__(self, tables: Sequence[Model]) -> None:
        self._tables = [m._meta.db_table for m in tables]
        self._names: str | None = None

    def run(self) -> None:
        if connection.vendor != "postgresql":
            return
        if self._names is None:
            self._names = write_postgres.deferred_foreign_keys(self._tables)
        write_postgres.constraints_check(self._names)


def missing_parent(error: Exception) -> str | None:
    """The table a foreign-key violation found a row missing from, where the database says (PostgreSQL)."""
    return write_postgres.missing_parent(error) if connection.vendor == "postgresql" else None
