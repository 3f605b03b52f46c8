"""Rows into the database, whichever it is: the writers the importers call, each handing the rows to
write_postgres or write_sqlite."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from itertools import repeat

import numpy as np
from django.db import connection

from judging.imports import write_postgres, write_sqlite

Progress = Callable[[int], None] | None


def _names(model, fields: Sequence[str]) -> tuple[str, str]:
    meta = model._meta
    table = connection.ops.quote_name(meta.db_table)
    return table, ", ".join(connection.ops.quote_name(meta.get_field(f).column) for f in fields)


def insert_rows(model, fields: Sequence[str], rows: Iterable[Sequence], progress: Progress = None) -> int:
    """Insert plain rows in one statement stream; returns how many.

    Imports create hundreds of thousands of stub documents, pairs and rankings: building a model instance per
    row made the ORM's bulk_create the slowest step of a 1M-line run import (about 60% of the time), while the
    driver takes the values directly. Constraints still hold: the database checks them on every row.
    """
    table, columns = _names(model, fields)
    if connection.vendor == "postgresql":
        return write_postgres.copy_rows(table, columns, rows, progress)
    return write_sqlite.staged_insert(table, columns, rows, progress)


def insert_columns(model, fields: Sequence[str], columns: Sequence, progress: Progress = None) -> int:
    """insert_rows for rows given as columns: each a list or numpy array of values, or ``repeat(value)`` for a
    value every row shares.

    On PostgreSQL each COPY line is made by one %-format, the shared values written into the format once:
    write_row converts value by value, which took a third of a 1M-label qrels import's time (7 to 13 us a row
    against about 1). A column with a NULL among its values, or values other than whole numbers or text, sends
    the rows through insert_rows, as on SQLite."""
    if len(fields) != len(columns):
        raise ValueError("one column per field")
    columns = [c if isinstance(c, repeat) else (c.tolist() if isinstance(c, np.ndarray) else list(c)) for c in columns]
    varying = [c for c in columns if not isinstance(c, repeat)]
    count = len(varying[0]) if varying else 0
    if any(len(c) != count for c in varying):
        raise ValueError("columns of different lengths")
    if not count:
        return 0
    conversions: list[str] | None = None
    if connection.vendor == "postgresql":
        conversions, varying = [], []
        for column in columns:
            if isinstance(column, repeat):
                conversions.append(write_postgres.copy_literal(next(column)).replace("%", "%%"))
                continue
            converted = write_postgres.copy_values(column)
            if converted is None:  # a NULL among the values, or a type %-formats cannot write as COPY reads it
                conversions = None
                break
            conversions.append(converted[0])
            varying.append(converted[1])
    if conversions is None:
        # zip ends with the lists of values; the repeat()s are endless.
        return insert_rows(model, fields, zip(*columns, strict=False), progress=progress)
    table, names = _names(model, fields)
    return write_postgres.copy_lines(table, names, "\t".join(conversions) + "\n", varying, progress)


def reserve_ids(model, count: int) -> list[int]:
    """Row ids for ``count`` rows about to be inserted, increasing, so that the caller knows each row's id
    without reading the rows back (a million new pairs would otherwise be read again to find their ids).
    Call inside the import's transaction (see each engine's reserve_ids for how they are drawn)."""
    if count <= 0:
        return []
    if connection.vendor == "postgresql":
        return write_postgres.reserve_ids(model._meta.db_table, count)
    return write_sqlite.reserve_ids(model._meta.db_table, count)


def fetch(queryset) -> list[tuple]:
    """All rows of a values_list() queryset at once, through the cursor: no per-row ORM work (a million
    pairs or judgments are read in about a second instead of several)."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def roomy_cache():
    """A context in which a large import's index pages stay in memory (SQLite's page cache; PostgreSQL's shared
    buffers are the server's business)."""
    return write_sqlite.roomy_cache() if connection.vendor == "sqlite" else nullcontext()


def foreign_keys_check(models: Sequence) -> None:
    """Check the deferred foreign keys of the rows written to ``models`` so far in this transaction, now: an
    IntegrityError here names a row that refers to one that does not exist (any more). SQLite checks them at
    the commit, under the write lock an import holds from its start, so no other session can delete a row the
    import refers to."""
    if connection.vendor == "postgresql":
        write_postgres.foreign_keys_check([m._meta.db_table for m in models])


def missing_parent(error: Exception) -> str | None:
    """The table a foreign-key violation found a row missing from, where the database says (PostgreSQL)."""
    return write_postgres.missing_parent(error) if connection.vendor == "postgresql" else None
