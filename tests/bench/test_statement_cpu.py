"""bench/statement_cpu.py: the load bench's PostgreSQL CPU per statement."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from bench import statement_cpu
from judging.models import Campaign


def test_each_statement_is_charged_its_backends_cpu_and_written_out(db, tmp_path, capsys, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("a PostgreSQL backend's CPU (/proc/PID/schedstat; CI runs the suite there too)")
    monkeypatch.setattr(statement_cpu, "_totals", {})
    before = statement_cpu.totals(tmp_path)
    with connection.execute_wrapper(statement_cpu._wrapper()):
        for slug in ("a", "b", "c"):
            list(Campaign.objects.filter(slug=slug))
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM generate_series(1, 200000)")
    statement_cpu._flush(tmp_path)  # what a worker's thread does every FLUSH_EVERY seconds
    after = statement_cpu.totals(tmp_path)
    [(lookup, (calls, ns))] = [(k, v) for k, v in after.items() if "judging_campaign" in k]
    assert calls == 3 and ns >= 0  # one statement, its three values taken out of the key
    [(_k, (series_calls, series_ns))] = [(k, v) for k, v in after.items() if "generate_series" in k]
    assert series_calls == 1 and series_ns > 1_000_000  # 200,000 rows counted: over a millisecond of the backend's
    assert json.loads(next(tmp_path.glob("[0-9]*.json")).read_text())
    statement_cpu.report(before, after, judgments=3, top=2)
    printed = capsys.readouterr().out
    assert "generate_series" in printed and "ms per judgment" in printed


def test_a_connection_without_a_backend_pid_is_run_as_it_is(tmp_path, monkeypatch):
    monkeypatch.setattr(statement_cpu, "_totals", {})

    class NoInfo:
        connection = None

    ran = []
    wrapper = statement_cpu._wrapper()
    assert wrapper(lambda *a: ran.append(a) or "done", "SELECT 1", None, False, {"connection": NoInfo()}) == "done"
    assert ran and statement_cpu._totals == {}
