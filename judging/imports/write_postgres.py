"""Rows into PostgreSQL: binary COPY made from whole columns (pgcopy), ids drawn from the table's sequence."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import islice, repeat
from typing import Any

from django.db import connection

from judging import pgcopy

COPY_STEP = 50_000  # rows per COPY block (and per progress report)
# Rows given one by one (documents with their text, judgment revisions) go in blocks of 50: pgcopy builds a block
# with an index array of 8 bytes per byte of text, so a block of 1,000 documents of a few kB each took more memory
# than a 12 MB file (tests/security/test_upload_size.py). The large tables go through copy_columns.
ROWS_STEP = 50


@contextmanager
def _binary_copy(table: str, columns: str) -> Iterator[Any]:
    """The COPY of rows in PostgreSQL's binary format into ``table`` (quoted; ``columns`` the quoted column list)."""
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as copy,
    ):
        yield copy


def _column_blocks(kinds: Sequence[str], values: Sequence[Any], count: int) -> Iterator[tuple[bytes, int]]:
    """The rows given as columns in binary COPY blocks of COPY_STEP rows, each with its number of rows."""
    for start in range(0, count, COPY_STEP):
        stop = min(count, start + COPY_STEP)
        block = [v if isinstance(v, repeat) else v[start:stop] for v in values]
        yield pgcopy.rows_bytes(kinds, block, stop - start), stop - start


def copy_columns(
    table: str,
    columns: str,
    kinds: Sequence[str],
    values: Sequence[Any],
    count: int,
    progress: Callable[[int], None] | None,
) -> int:
    """COPY ``count`` rows given as columns into ``table`` (quoted; ``columns`` the quoted column list) in
    PostgreSQL's binary format, a block of rows at a time: the rows are made by numpy (see pgcopy), the server
    reads them without parsing text. ``values``: per column a list or numpy array (None for NULL) or
    ``repeat(value)``; ``kinds`` their COPY types (pgcopy.pg_type)."""
    with _binary_copy(table, columns) as copy:
        copy.write(pgcopy.SIGNATURE)
        for rows, n in _column_blocks(kinds, values, count):
            copy.write(rows)
            if progress:
                progress(n)
        copy.write(pgcopy.TRAILER)
    return count


def copy_payload(table: str, columns: str, payload: bytes) -> None:
    """COPY a whole binary COPY stream (signature, rows, trailer: see encode_columns) into ``table``."""
    with _binary_copy(table, columns) as copy:
        copy.write(payload)


def encode_columns(kinds: Sequence[str], values: Sequence[Any], count: int) -> bytes:
    """The binary COPY stream of ``count`` rows given as columns (see copy_columns), made without the connection:
    an import's thread makes it while another sends the one before (see behind.WriteBehind)."""
    blocks = (rows for rows, _ in _column_blocks(kinds, values, count))
    return b"".join([pgcopy.SIGNATURE, *blocks, pgcopy.TRAILER])


def copy_rows(
    table: str,
    columns: str,
    kinds: Sequence[str],
    rows: Iterable[Sequence[Any]],
    progress: Callable[[int], None] | None,
) -> int:
    """copy_columns for rows given one by one (a block of them turned into columns at a time)."""
    total = 0
    with _binary_copy(table, columns) as copy:
        copy.write(pgcopy.SIGNATURE)
        iterator = iter(rows)
        while block := list(islice(iterator, ROWS_STEP)):
            copy.write(pgcopy.rows_bytes(kinds, [list(c) for c in zip(*block, strict=True)], len(block)))
            total += len(block)
            if progress:
                progress(len(block))
        copy.write(pgcopy.TRAILER)
    return total


def reserve_ids(table: str, count: int) -> list[int]:
    """``count`` ids drawn from the table's sequence, as the inserts themselves would (other writers may draw
    between them: the ids are distinct, not always consecutive)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table])
        (sequence,) = cursor.fetchone()
        cursor.execute("SELECT array_agg(nextval(%s::regclass)) FROM generate_series(1, %s)", [sequence, count])
        return sorted(cursor.fetchone()[0])


def analyze(tables: Sequence[str]) -> None:
    """Statistics for what this transaction just wrote (as autovacuum would after the commit): without them the
    planner takes a million new rows for a handful and joins them in nested loops."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE " + ", ".join(connection.ops.quote_name(t) for t in tables))


_MISSING_PARENT = re.compile(r'is not present in table "([^"]+)"')


def deferred_foreign_keys(tables: Sequence[str]) -> str:
    """The deferred foreign-key constraints of ``tables``, as a list for SET CONSTRAINTS ("" if none)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT quote_ident(n.nspname) || '.' || quote_ident(c.conname) FROM pg_constraint c "
            "JOIN pg_namespace n ON n.oid = c.connamespace "
            "WHERE c.contype = 'f' AND c.condeferrable AND c.condeferred AND c.conrelid = ANY(%s::regclass[]) "
            "ORDER BY 1",
            [list(tables)],
        )
        return ", ".join(row[0] for row in cursor.fetchall())


def constraints_check(names: str) -> None:
    """Run the checks PostgreSQL has queued for the deferred constraints ``names`` (deferred_foreign_keys) now,
    then defer them again for whatever the transaction writes next."""
    if not names:
        return
    with connection.cursor() as cursor:
        cursor.execute(f"SET CONSTRAINTS {names} IMMEDIATE")
        cursor.execute(f"SET CONSTRAINTS {names} DEFERRED")


def foreign_keys_check(tables: Sequence[str]) -> None:
    """Run the foreign-key checks PostgreSQL has queued for the rows of ``tables`` written in this transaction
    (Django makes foreign keys DEFERRABLE INITIALLY DEFERRED, so they would wait for the commit), then defer
    those constraints again for whatever the transaction writes next."""
    constraints_check(deferred_foreign_keys(tables))


def missing_parent(error: Exception) -> str | None:
    """The table named by a foreign-key violation's detail ("Key (document_id)=(7) is not present in table
    "judging_document"."), or None."""
    cause = error.__cause__
    detail = getattr(getattr(cause, "diag", None), "message_detail", None) or ""
    found = _MISSING_PARENT.search(detail)
    return found.group(1) if found else None
