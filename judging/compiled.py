"""ORM queries built and compiled once per process, then run as plain SQL with each call's values.

The judging queue asks the same few queries on every request; only their values change (the annotator,
the campaign's redundancy, the time, the pairs skipped). Building and compiling such a query with the ORM
(filters, subqueries, expressions) cost more CPU than everything else in "record + next" together, so a
query is built once per shape with a named placeholder (``Param``) wherever a value goes, compiled to SQL,
and kept with the layout of its parameters; a call only fills in its values and runs the SQL.

A builder takes an ``Args``: ``Slots`` (placeholders, to make the template) or ``Values`` (the call's own
values, for an ORM query run at once), so one builder serves both ways and the two cannot drift apart.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from django.db import connection
from django.db.models import Expression, Field, IntegerField, Q, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.db.models.sql import UpdateQuery

_INT = IntegerField()


class _IdListField(Field):
    """A list of ids bound as one parameter: a PostgreSQL array, or JSON text for SQLite's json_each."""

    def get_db_prep_value(self, value, connection, prepared=False):
        ids = [int(i) for i in value]
        return ids if connection.vendor == "postgresql" else json.dumps(ids)


_ID_LIST = _IdListField()


@dataclass(frozen=True)
class _Slot:
    """Where a named value goes among a compiled query's parameters."""

    name: str
    field: Field


class Param(Expression):
    """A named placeholder: compiles to one parameter, filled in by each call (Compiled.run)."""

    def __init__(self, name: str, output_field: Field):
        super().__init__(output_field=output_field)
        self.name = name

    def as_sql(self, compiler, connection):
        return "%s", [_Slot(self.name, self.output_field)]


class Slots:
    """Arguments of a template: every named value is a Param (an integer unless ``fields`` says otherwise)."""

    def __init__(self, fields: dict[str, Field] | None = None):
        self.fields = fields or {}

    def __getitem__(self, name: str) -> Expression:
        return Param(name, self.fields.get(name, _INT))

    def not_in(self, column: str, name: str) -> Q:
        """``column`` is none of the ids of ``name``: one parameter whatever their number, so the SQL stays
        the same (an array on PostgreSQL, a JSON list on SQLite)."""
        if connection.vendor == "postgresql":
            subquery = RawSQL("SELECT unnest(%s::bigint[])", [_Slot(name, _ID_LIST)])
        else:
            subquery = RawSQL("SELECT value FROM json_each(%s)", [_Slot(name, _ID_LIST)])
        return ~Q(**{f"{column}__in": subquery})


class Values:
    """Arguments of an ORM query run at once: each named value as itself."""

    def __init__(self, fields: dict[str, Field] | None = None, **values):
        self.fields = fields or {}
        self.values = values

    def __getitem__(self, name: str) -> Expression:
        return Value(self.values[name], output_field=self.fields.get(name, _INT))

    def not_in(self, column: str, name: str) -> Q:
        return ~Q(**{f"{column}__in": [int(i) for i in self.values[name]]})


Args = Slots | Values


@dataclass
class Compiled:
    """One compiled statement: its SQL, its parameters (constants, and slots for a call's values) and, for
    a SELECT, its columns' expressions (for the ORM's conversions of what the database returns)."""

    sql: str
    params: tuple
    columns: Sequence[Expression] = ()
    converters: dict = field(default_factory=dict)  # per database alias: [(column index, [converter])]

    def _execute(self, cursor, values: dict) -> None:
        params = [
            p.field.get_db_prep_value(values[p.name], connection, prepared=False) if isinstance(p, _Slot) else p
            for p in self.params
        ]
        cursor.execute(self.sql, params)

    def first(self, values: dict) -> list | None:
        """The first row for these values, each column converted as the ORM converts it, or None."""
        with connection.cursor() as cursor:
            self._execute(cursor, values)
            row = cursor.fetchone()
        if row is None:
            return None
        row = list(row)
        for i, fns in self._converters():
            value = row[i]
            for fn in fns:
                value = fn(value, self.columns[i], connection)
            row[i] = value
        return row

    def rowcount(self, values: dict) -> int:
        """Run an UPDATE or DELETE for these values: how many rows it changed."""
        with connection.cursor() as cursor:
            self._execute(cursor, values)
            return cursor.rowcount

    def _converters(self) -> list:
        found = self.converters.get(connection.alias)
        if found is None:
            found = self.converters[connection.alias] = [
                (i, fns)
                for i, col in enumerate(self.columns)
                if (fns := connection.ops.get_db_converters(col) + col.get_db_converters(connection))
            ]
        return found


_CACHE: dict[tuple, Compiled] = {}
_LOCK = threading.Lock()


def _once(key: tuple, compile_: Callable[[], Compiled]) -> Compiled:
    key = (connection.vendor, *key)
    found = _CACHE.get(key)
    if found is None:
        with _LOCK:
            found = _CACHE.get(key)
            if found is None:
                found = _CACHE[key] = compile_()
    return found


def compiled_select(key: tuple, build: Callable[[], QuerySet]) -> Compiled:
    """The SELECT of ``build()`` (a query built with Slots), compiled once per process for ``key``, which
    names everything that changes the query's shape (the database vendor is added to it). A query that
    locks rows (select_for_update) is compiled, like any, inside a transaction."""

    def compile_() -> Compiled:
        qs = build()
        compiler = qs.query.get_compiler(using=qs.db)
        sql, params = compiler.as_sql()
        return Compiled(sql, tuple(params), [col for col, _sql, _alias in compiler.select])

    return _once(key, compile_)


def compiled_update(key: tuple, build: Callable[[], tuple[QuerySet, dict]]) -> Compiled:
    """The UPDATE that ``qs.update(**values)`` runs, for ``qs, values = build()`` (built with Slots),
    compiled once per process for ``key`` as compiled_select's."""

    def compile_() -> Compiled:
        qs, values = build()
        query = qs.query.chain(UpdateQuery)
        query.add_update_values(values)
        sql, params = query.get_compiler(using=qs.db).as_sql()
        return Compiled(sql, tuple(params))

    return _once(key, compile_)
