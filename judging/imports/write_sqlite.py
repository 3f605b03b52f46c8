"""Rows into SQLite: a staging table per insert, a page cache sized for large imports, rows made in SQL."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import islice
from typing import Any

from django.db import connection

IMPORT_CACHE_KIB = 1024 * 1024  # the page cache while an import runs (see roomy_cache)


def staged_insert(
    table: str, columns: str, rows: Iterable[Sequence[Any]], progress: Callable[[int], None] | None
) -> int:
    """Insert ``rows`` into ``table`` (quoted) through a temporary table with no index.

    Each executemany step of an INSERT opens the table and every index of it again; one INSERT ... SELECT
    opens them once (a million pairs: 8 s -> 3 s of CPU). ``columns`` is the quoted column list.
    """
    marks = ", ".join(["%s"] * (columns.count(",") + 1))
    staging = connection.ops.quote_name("reljudge_import_rows")
    total = 0
    batch: list[Sequence[Any]] = []
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS temp.{staging}")
        cursor.execute(f"CREATE TEMP TABLE {staging} ({columns})")
        try:
            staged = f"INSERT INTO temp.{staging} ({columns}) VALUES ({marks})"

            def flush() -> None:
                nonlocal total, batch
                cursor.executemany(staged, batch)
                total += len(batch)
                if progress:
                    progress(len(batch))
                batch = []

            for row in rows:
                batch.append(row)
                if len(batch) >= 10_000:
                    flush()
            if batch:
                flush()
            cursor.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM temp.{staging} ORDER BY rowid")
        finally:
            cursor.execute(f"DROP TABLE IF EXISTS temp.{staging}")
    return total


def append_rows(table: str, columns: str, rows: Iterable[Sequence[Any]]) -> None:
    """Append rows to a staging table (quoted), 10,000 to an executemany."""
    marks = ", ".join(["%s"] * (columns.count(",") + 1))
    statement = f"INSERT INTO {table} ({columns}) VALUES ({marks})"
    iterator = iter(rows)
    with connection.cursor() as cursor:
        while batch := list(islice(iterator, 10_000)):
            cursor.executemany(statement, batch)


def reserve_ids(table: str, count: int) -> list[int]:
    """The ids after the highest one ever used in ``table`` (AUTOINCREMENT's rule). An import holds the
    database's write lock (IMMEDIATE transactions), so no other writer can take them before the insert."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [table])
        row = cursor.fetchone()
        cursor.execute(f"SELECT max(id) FROM {connection.ops.quote_name(table)}")
        base = max(row[0] if row else 0, cursor.fetchone()[0] or 0)
    return list(range(base + 1, base + 1 + count))


@contextmanager
def roomy_cache() -> Iterator[None]:
    """A page cache big enough for a large import's indexes while it runs (the default 2 MB makes every insert
    into a million-row index go to the file; 1M qrels labels took four minutes). The pages are taken only as
    they are used; the setting is this connection's and is put back afterwards."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA cache_size")
        (before,) = cursor.fetchone()
        cursor.execute(f"PRAGMA cache_size = {-IMPORT_CACHE_KIB}")
        try:
            yield
        finally:
            cursor.execute(f"PRAGMA cache_size = {int(before)}")


def judgments_of_pairs(*, first: int, last: int, first_id: int, annotator: int, now: Any) -> None:
    """The judgments behind the labels of pairs ``first..last``, all just created by an import with their label,
    with ids from ``first_id`` on (see qrels_write)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO judging_judgment (id, pair_id, annotator_id, grade_id, unsure, tentative_grade_id, note, "
            "seconds_spent, created_at, updated_at) "
            "SELECT p.id - %s + %s, p.id, %s, g.id, %s, NULL, '', 0.0, %s, %s "
            "FROM judging_pair p JOIN judging_grade g ON g.campaign_id = p.campaign_id AND g.value = p.label "
            "WHERE p.id BETWEEN %s AND %s ORDER BY p.id",
            [first, first_id, annotator, False, now, now, first, last],
        )
        if cursor.rowcount != last - first + 1:
            raise AssertionError(f"{cursor.rowcount} judgments made for {last - first + 1} new pairs")


def revisions_of_range(*, first: int, last: int, by: int | None, source: int, name: str, now: Any) -> None:
    """The revisions of the judgments with ids ``first..last``, all just created by an import (SQLite)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO judging_judgmentrevision (judgment_id, changed_by_id, on_behalf_of_id, imported_from, "
            "changed_at, new_grade, new_unsure, old_note, new_note, seconds_spent) "
            "SELECT j.id, %s, %s, %s, %s, g.value, %s, '', '', 0.0 "
            "FROM judging_judgment j JOIN judging_grade g ON g.id = j.grade_id "
            "WHERE j.id BETWEEN %s AND %s ORDER BY j.id",
            [by, source, name, now, False, first, last],
        )
