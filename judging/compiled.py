"""The judging page's hottest reads, built with the ORM and compiled once per process, then run as plain SQL.

A shortcut around Django, kept only where it is measured: building and compiling these queries with the ORM
costs more CPU than everything else in "record + next" together (the queue's next-pair query alone, a
COALESCE of subqueries over the open pairs, takes ~20 ms to build and compile, where the whole request
takes ~12 ms with it compiled: bench/judge_bench.py). Its users, and nothing else (a test keeps this list):

- ``selectors.queue._pair_next``: the next pair of the queue (of the current query first, then the level
  probes), and with ``lock`` its progress figures; after a probe of whether the annotator has queries of their own,
  and followed by the chosen pair's query and document, read by key (``selectors.queue.pair_related``);
- ``selectors.progress.with_progress``: those progress figures, as parts of ``_pair_next``'s statement, and
  ``selectors.progress.judge_progress``: the query's figures on their own (a priority queue mode's next pair);
- ``selectors.queue_rules.pair_is_open``: the re-check, under the pair's lock, before a hold is taken or moved;
- ``selectors.queue.assigned_pair_next``: the next pair among the queries a lead gave the annotator, asked
  first in a queue mode with a priority list (the same template as ``_pair_next``, without the shared probes),
  after one probe of whether they have any;
- ``selectors.queue_lists.pair_of_priority``: the first open pair of a queue mode's priority list
  (``compiled_first_of``: the candidates checked in the list's order, stopping at the first open one; the pairs
  others hold or that are complete passed over on their own row), and the chosen one with its query and document (the
  ORM built ~200 model instances per request there);
- ``services.judgments.pair_state_rows``: the locked pair's label, policy, adjudication and judgments;
- ``services.judgments.pair_lock``: the pair's row lock, taken first by every writer of its judgments;
- ``selectors.priority.complete_prefix``: how far the head of a priority list is complete, and
  ``selectors.priority.own_prefix``: how far it is closed to one annotator (complete, or judged by them);
- ``access.campaign_member`` and ``access.campaign_member_pair``: the campaign (or pair) with the role;
- ``access.pair_member``: the pair an API judgment names, with its campaign and the caller's role there;
- ``access.token_owner``: the API token and its user, read at every API call (api.authentication);
- ``scoring.cache._labels_state``: the campaign's labels counters and the labels log's lines since those a
  process kept, in one statement, at every leaderboard request and queue list;
- ``scoring.cube.systems_key``: the campaign's systems and its queries' largest id and count (what its run
  cube depends on), in one statement, at every leaderboard request and queue list;
- ``scoring.hybrid.campaign_judge``: the campaign's model judges, at each next pair in queue mode hybrid (planned
  at each call through the ORM: 0.4-0.7 ms of PostgreSQL's CPU a judgment, ``load_bench.py --statements``);
- ``services.judgments._judgment_write``'s writes that every judgment makes, with ``compiled_update`` and
  ``compiled_delete``: the pair's label and count, its query's labels version, its campaign's labels counter
  and its labels log's line (``labels.labels_bump`` of one query), the hold
  (``services.judgments.hold_delete``).
  Building each with the ORM cost more CPU than running it (an API judgment: 9.3-9.6 -> 5.0-7.7 ms of the
  app's CPU with the token's read, bench/judge_bench.py), and PostgreSQL planned each anew.

Everything else reads and writes through the ORM. A query is built once per shape with a named placeholder
(``Param``) wherever a value goes, compiled to SQL, and kept with the layout of its parameters; a call only
fills in its values and runs the SQL, and rows become model instances through ``Model.from_db``, as the ORM
loads them. A builder takes an ``Args``: ``Slots`` (placeholders, to make the template) or ``Values`` (the
call's own values, for an ORM query run at once), so one builder serves both ways and the two cannot drift
apart. tests/judging/test_compiled.py checks every query kept here, and the instances built from its rows,
against the ORM: run it at every Django upgrade (this module relies on the SQL compiler's ``select`` and
``as_sql``).

On PostgreSQL these statements also run as prepared statements (``_PreparedCursor``, see PREPARE_THRESHOLD):
planning them cost PostgreSQL more CPU than running them. tests/judging/test_judging_pace.py checks that they
are prepared and what record + next reads.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from django.db import DEFAULT_DB_ALIAS, connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper
from django.db.models import BigIntegerField, Expression, Field, Model, Q, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.db.models.sql.compiler import SQLCompiler
from django.db.models.sql.subqueries import DeleteQuery, UpdateQuery

from judging import runtime

try:
    import psycopg
except ImportError:  # SQLite only
    psycopg = None  # type: ignore[assignment]

_INT: Field[Any, Any] = BigIntegerField()  # ids are bigint: a value is bound (on PostgreSQL, typed) as one
_INT64 = (-(2**63), 2**63 - 1)


class _IdListField(Field[Any, Any]):
    """A list of ids bound as one parameter: a PostgreSQL array, or JSON text for SQLite's json_each."""

    def get_db_prep_value(self, value: Any, connection: BaseDatabaseWrapper, prepared: bool = False) -> Any:
        ids = value.tolist() if isinstance(value, np.ndarray) else [int(i) for i in value]
        if connection.vendor == "postgresql":
            # The array's text ('{1,2,3}', cast by the statement): psycopg binds a list of 500 ids item by item,
            # ~6x the CPU of joining their digits (a priority list's chunk at every "record + next").
            return "{" + ",".join(map(str, ids)) + "}"
        return json.dumps(ids)


_ID_LIST = _IdListField()


@dataclass(frozen=True)
class _Slot:
    """Where a named value goes among a compiled query's parameters."""

    name: str
    field: Field[Any, Any]


class Param(Expression):
    """A named placeholder: compiles to one parameter, filled in by each call (Compiled.run)."""

    def __init__(self, name: str, output_field: Field[Any, Any]) -> None:
        super().__init__(output_field=output_field)
        self.name = name

    def as_sql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper) -> tuple[str, list[Any]]:
        return "%s", [_Slot(self.name, self.output_field)]


class Slots:
    """Arguments of a template: every named value is a Param (an integer unless ``fields`` says otherwise)."""

    def __init__(self, fields: dict[str, Field[Any, Any]] | None = None) -> None:
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

    def is_in(self, column: str, name: str) -> Q:
        """``column`` is one of the ids of ``name`` (as not_in, one parameter whatever their number)."""
        return ~self.not_in(column, name)


class Values:
    """Arguments of an ORM query run at once: each named value as itself."""

    def __init__(self, fields: dict[str, Field[Any, Any]] | None = None, **values: Any) -> None:
        self.fields = fields or {}
        self.values = values

    def __getitem__(self, name: str) -> Expression:
        return Value(self.values[name], output_field=self.fields.get(name, _INT))

    def not_in(self, column: str, name: str) -> Q:
        return ~Q(**{f"{column}__in": [int(i) for i in self.values[name]]})

    def is_in(self, column: str, name: str) -> Q:
        return Q(**{f"{column}__in": [int(i) for i in self.values[name]]})


Args = Slots | Values


@dataclass
class Compiled:
    """One compiled statement: its SQL, its parameters (constants, and slots for a call's values) and, for
    a SELECT, its columns' expressions (for the ORM's conversions of what the database returns)."""

    sql: str
    params: tuple[Any, ...]
    columns: Sequence[Expression] = ()
    prepare: bool = True  # run as a prepared statement on PostgreSQL
    # per database alias: [(column index, [converter])]
    converters: dict[str, list[tuple[int, list[Callable[..., Any]]]]] = field(default_factory=dict)

    def _params(self, values: Mapping[str, Any]) -> list[Any] | None:
        """The parameters for these values, or None when one is a whole number no column can hold: as the
        ORM, such a value matches nothing (it never reaches the database, which would refuse it)."""
        params = [
            p.field.get_db_prep_value(values[p.name], connection, prepared=False) if isinstance(p, _Slot) else p
            for p in self.params
        ]
        # isinstance: on PostgreSQL Django hands a bigint over as psycopg's Int8, a subclass of int.
        if any(isinstance(p, int) and not _INT64[0] <= p <= _INT64[1] for p in params):
            return None
        return params

    def first(self, values: Mapping[str, Any]) -> list[Any] | None:
        """The first row for these values, each column converted as the ORM converts it, or None."""
        params = self._params(values)
        if params is None:
            return None
        with _cursor(self.prepare) as cursor:
            cursor.execute(self.sql, params)
            row = cursor.fetchone()
        return None if row is None else self._converted(row, self._converters())

    def rows(self, values: Mapping[str, Any]) -> list[list[Any]]:
        """Every row for these values, converted as ``first``'s."""
        params = self._params(values)
        if params is None:
            return []
        with _cursor(self.prepare) as cursor:
            cursor.execute(self.sql, params)
            rows = cursor.fetchall()
        converters = self._converters()
        return [self._converted(row, converters) for row in rows]

    def run(self, values: Mapping[str, Any]) -> int:
        """Run a compiled write (compiled_update, compiled_delete, compiled_sql) with these values: the number
        of rows it changed."""
        params = self._params(values)
        if params is None:
            return 0
        with _cursor(self.prepare) as cursor:
            cursor.execute(self.sql, params)
            return int(cursor.rowcount)

    def _converted(self, row: Sequence[Any], converters: list[tuple[int, list[Callable[..., Any]]]]) -> list[Any]:
        out = list(row)
        for i, fns in converters:
            value = out[i]
            for fn in fns:
                value = fn(value, self.columns[i], connection)
            out[i] = value
        return out

    def _converters(self) -> list[tuple[int, list[Callable[..., Any]]]]:
        found = self.converters.get(connection.alias)
        if found is None:
            found = self.converters[connection.alias] = [
                (i, fns)
                for i, col in enumerate(self.columns)
                if (fns := connection.ops.get_db_converters(col) + col.get_db_converters(connection))
            ]
        return found


# On PostgreSQL the compiled statements run as prepared statements. Planning them cost PostgreSQL more CPU than
# running them: the queue's next-pair query took ~6 ms to plan and ~1 ms to run, and all of "record + next"
# ~9 ms of planning for ~2 ms of execution (bench/judge_bench.py, EXPLAIN's planning and execution times). A
# prepared statement is planned once per connection. Only these cursors bind parameters on the server: every
# other query of the app keeps Django's client-side binding, and is never prepared.
# psycopg prepares nothing while a connection's threshold is None (Django's setting). These cursors set one for
# their own runs only and put None back: with a threshold left on the pooled connection psycopg also counted every
# other query of it, keyed by its text, and Django's client-side binding puts the values in that text, so a 12 MB
# upload stored in pieces stayed in memory twice over (tests/serving/test_jobs_chunks.py).
PREPARE_THRESHOLD = 5
# PostgreSQL plans a prepared statement's first five runs with their values, then keeps one plan made without
# them when it is no dearer. A statement whose plan must see its values (the queue's level probes: without them
# PostgreSQL may join every pair of the campaign) is compiled with ``prepare=False``.


class _SqlText:
    """What Django's query log reads of a psycopg cursor after a query (``cursor._query.query``)."""

    def __init__(self, query: bytes) -> None:
        self.query = query


if psycopg is not None:

    class _PreparedCursor(psycopg.Cursor[Any]):
        """A cursor that binds parameters on the server and prepares every statement it runs (psycopg keeps the
        prepared statements of a connection, up to 100)."""

        log = False

        def execute(
            self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None
        ) -> _PreparedCursor:
            conn = self.connection
            kept = conn.prepare_threshold
            conn.prepare_threshold = PREPARE_THRESHOLD
            try:
                super().execute(query, params, prepare=True, binary=binary)
            finally:
                conn.prepare_threshold = kept
            if self.log:  # Django's query log (DEBUG, tests) shows the query with its values, as for any other
                text = psycopg.ClientCursor(self.connection).mogrify(query, params)
                self._query = _SqlText(text.encode())  # type: ignore[assignment]
            return self


def _cursor(prepare: bool = True) -> CursorWrapper:
    """A cursor for a compiled statement, wrapped as Django wraps its own cursors (database errors, thread
    checks, the query log): on PostgreSQL a _PreparedCursor on the request's connection."""
    if not prepare or connection.vendor != "postgresql" or psycopg is None:
        return connection.cursor()
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    raw = connection.connection
    cursor = _PreparedCursor(raw)
    cursor.log = connection.queries_logged
    wrap = connection.make_debug_cursor if cursor.log else connection.make_cursor
    return wrap(cursor)  # type: ignore[arg-type]  # Django wraps a database cursor, not a wrapper


_LOCK = threading.Lock()
_CACHE: dict[tuple[Any, ...], Compiled] = runtime.keep(
    "compiled.statements",
    {},
    bound=None,
    grows_with="compiled statement (a fixed set in the code)",
    invalidated_by="nothing: a statement's SQL depends on the code and the database vendor only",
    lock=_LOCK,
)


def _once(key: tuple[Any, ...], compile_: Callable[[], Compiled]) -> Compiled:
    key = (connection.vendor, *key)
    found = _CACHE.get(key)
    if found is None:
        with _LOCK:
            found = _CACHE.get(key)
            if found is None:
                found = _CACHE[key] = compile_()
    return found


def compiled_select(key: tuple[Any, ...], build: Callable[[], QuerySet[Any, Any]], *, prepare: bool = True) -> Compiled:
    """The SELECT of ``build()`` (a query built with Slots), compiled once per process for ``key``, which
    names everything that changes the query's shape (the database vendor is added to it). A query that
    locks rows (select_for_update) is compiled, like any, inside a transaction. ``prepare``: run it as a prepared
    statement on PostgreSQL (see PREPARE_THRESHOLD), or plan it with its values at every run."""

    def compile_() -> Compiled:
        qs = build()
        compiler = qs.query.get_compiler(using=qs.db)
        sql, params = compiler.as_sql()
        return Compiled(sql, tuple(params), [col for col, _sql, _alias in compiler.select], prepare=prepare)

    return _once(key, compile_)


_PLACEHOLDER = re.compile(r"%%|%s")


def compiled_update(key: tuple[Any, ...], build: Callable[[], tuple[QuerySet[Any, Any], dict[str, Any]]]) -> Compiled:
    """The UPDATE of ``qs.update(**values)`` for ``build()``'s (qs, values), built with Slots (in the filter and
    the values alike), compiled once per process for ``key`` as compiled_select; ``run`` it."""

    def compile_() -> Compiled:
        qs, values = build()
        query = cast(UpdateQuery, qs.query.chain(UpdateQuery))
        query.add_update_values(values)
        sql, params = query.get_compiler(using=qs.db).as_sql()
        return Compiled(sql, tuple(params))

    return _once(key, compile_)


def compiled_delete(key: tuple[Any, ...], build: Callable[[], QuerySet[Any, Any]]) -> Compiled:
    """The DELETE of ``build()``'s rows (a queryset built with Slots), compiled once per process for ``key`` as
    compiled_select; ``run`` it. As ``QuerySet._raw_delete``: no signals, no cascade (for a model nothing
    refers to)."""

    def compile_() -> Compiled:
        qs = build()
        if qs.model._meta.related_objects:
            raise ValueError(f"{qs.model.__name__} has rows referring to it: delete it through the ORM")
        query = qs.query.clone()
        query.__class__ = DeleteQuery
        sql, params = query.get_compiler(using=qs.db).as_sql()
        return Compiled(sql, tuple(params))

    return _once(key, compile_)


def compiled_first_of(
    key: tuple[Any, ...], build: Callable[[], QuerySet[Any, Any]], *, candidate: str, count: int = 1
) -> Compiled:
    """The first id of the list ``candidates`` (a call's value: ids in the caller's order) for which ``build()``
    has a row, where ``build()`` is a query built with Slots that names one candidate with the placeholder
    ``candidate``; compiled once per process for ``key`` and ``count``, as compiled_select. With ``count`` above
    one, the first ``count`` such ids (``rows``), in the list's order as the database checks it.

    One statement, ``SELECT c.id FROM unnest(candidates) c WHERE EXISTS (build() for c.id) LIMIT 1``:
    PostgreSQL (and SQLite, over json_each) checks the candidates one at a time in the list's order and stops at
    the first that qualifies (a nested-loop semi-join over the function scan), so it reads as many rows as
    candidates fail ahead of it, where ``id IN (candidates)`` reads every candidate's rows (and the ORM's
    IN query cannot stop early). SQL promises no order without ORDER BY, and ordering by the position would
    make the database check every candidate before it sorts: the executor's order is relied on here, and
    tests/judging/test_compiled.py checks it. A result out of that order would still be a qualifying id."""

    def compile_() -> Compiled:
        qs = build()
        compiler = qs.query.get_compiler(using=qs.db)
        inner, params = compiler.as_sql()
        ref = "c.id" if connection.vendor == "postgresql" else "c.value"
        kept: list[Any] = []
        pieces = iter(params)

        def placeholder(match: re.Match[str]) -> str:
            if match.group(0) == "%%":
                return "%%"
            param = next(pieces)
            if isinstance(param, _Slot) and param.name == candidate:
                return ref
            kept.append(param)
            return "%s"

        inner = _PLACEHOLDER.sub(placeholder, inner)
        if len(kept) == len(params):
            raise ValueError(f"the query names no candidate {candidate!r}")
        source = "unnest(%s::bigint[]) AS c(id)" if connection.vendor == "postgresql" else "json_each(%s) AS c"
        sql = f"SELECT {ref} FROM {source} WHERE EXISTS ({inner}) LIMIT {int(count)}"
        return Compiled(sql, (_Slot("candidates", _ID_LIST), *kept))

    return _once((*key, count), compile_)


def compiled_sql(key: tuple[Any, ...], build: Callable[[], tuple[str, tuple[Any, ...]]]) -> Compiled:
    """A statement written in SQL (``build()``: its text for this connection's vendor and its parameters, slots
    named with ``Slots``' fields), kept once per process for ``key`` like compiled_select's; for the few reads
    the ORM cannot state so that the database keeps the order they rely on."""
    return _once(key, lambda: Compiled(*build()))


def id_list_slot(name: str) -> Any:
    """The parameter of a list of ids named ``name`` (bound as one value: see Slots.not_in)."""
    return _Slot(name, _ID_LIST)


def int_slot(name: str) -> Any:
    """The parameter of a whole number named ``name``."""
    return _Slot(name, _INT)


def model_columns(model: type[Model], path: str = "") -> list[str]:
    """The values_list() names of every concrete field of ``model`` (reached through ``path``, e.g. "query__"),
    in the order model_from reads them."""
    return [f"{path}{f.attname}" for f in model._meta.concrete_fields]


def model_from(model: type[Model], row: Sequence[Any], start: int = 0) -> tuple[Model, int]:
    """The ``model`` instance of a row's columns from ``start`` on (model_columns' order), as the ORM loads
    one; and where its columns end."""
    end = start + len(model._meta.concrete_fields)
    return model.from_db(DEFAULT_DB_ALIAS, [f.attname for f in model._meta.concrete_fields], row[start:end]), end
