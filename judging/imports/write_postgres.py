"""Rows into PostgreSQL: COPY, lines made by one %-format per row, ids drawn from the table's sequence."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from django.db import connection

_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
COPY_STEP = 50_000  # rows per COPY write (and per progress report)


def copy_rows(table: str, columns: str, rows: Iterable[Sequence], progress: Callable[[int], None] | None) -> int:
    """COPY ``rows`` into ``table`` (quoted; ``columns`` the quoted column list), converted value by value.

    COPY streams rows without a round trip per row: several times faster than executemany."""
    total = 0
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
            total += 1
            if progress and total % 10_000 == 0:
                progress(10_000)
    return total


def copy_literal(value) -> str:
    """One value in COPY's text format: NULL, a boolean, a number, a timestamp or text."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, float):
        return repr(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value).translate(_COPY_ESCAPES)


def copy_values(values: list) -> tuple[str, list] | None:
    """The %-conversion of a column of values in a COPY line, and the values it takes (text escaped); None
    for a column with anything but whole numbers or anything but text in it (a NULL, say)."""
    kinds = set(map(type, values))
    if kinds <= {int}:
        return "%d", values
    if kinds == {str}:
        joined = "".join(values)
        if any(c in joined for c in "\\\t\n\r"):
            values = [v.translate(_COPY_ESCAPES) for v in values]
        return "%s", values
    return None


def copy_lines(
    table: str, columns: str, line: str, varying: Sequence[list], progress: Callable[[int], None] | None
) -> int:
    """COPY one row per ``zip(*varying)``, each made by ``line % row`` (see write.insert_columns)."""
    count = len(varying[0]) if varying else 0
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for start in range(0, count, COPY_STEP):
            copy.write("".join(map(line.__mod__, zip(*(c[start : start + COPY_STEP] for c in varying), strict=True))))
            if progress:
                progress(min(COPY_STEP, count - start))
    return count


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


def foreign_keys_check(tables: Sequence[str]) -> None:
    """Run the foreign-key checks PostgreSQL has queued for the rows of ``tables`` written in this transaction
    (Django makes foreign keys DEFERRABLE INITIALLY DEFERRED, so they would wait for the commit), then defer
    those constraints again for whatever the transaction writes next."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT quote_ident(n.nspname) || '.' || quote_ident(c.conname) FROM pg_constraint c "
            "JOIN pg_namespace n ON n.oid = c.connamespace "
            "WHERE c.contype = 'f' AND c.condeferrable AND c.condeferred AND c.conrelid = ANY(%s::regclass[])",
            [list(tables)],
        )
        names = ", ".join(row[0] for row in cursor.fetchall())
        if not names:
            return
        cursor.execute(f"SET CONSTRAINTS {names} IMMEDIATE")
        cursor.execute(f"SET CONSTRAINTS {names} DEFERRED")


def missing_parent(error: Exception) -> str | None:
    """The table named by a foreign-key violation's detail ("Key (document_id)=(7) is not present in table
    "judging_document"."), or None."""
    cause = error.__cause__
    detail = getattr(getattr(cause, "diag", None), "message_detail", None) or ""
    found = _MISSING_PARENT.search(detail)
    return found.group(1) if found else None
