"""A database locked past the busy timeout (SQLite while a long import holds its write lock) answers 503 with
Retry-After, never 500, wherever the write was: a view, the API, or the session saved by its middleware."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.db import OperationalError
from django.test import Client

from judging.db_busy import database_busy

ROOT = Path(__file__).resolve().parents[2]


def locked(*args, **kwargs):
    raise OperationalError("database is locked")


@pytest.fixture
def client_500():
    """A test client that answers what a server would (Django's test client raises a view's exception)."""
    return Client(raise_request_exception=False)


def test_a_login_while_the_database_is_locked_is_503_with_retry_after(db, annotator, client_500, monkeypatch):
    monkeypatch.setattr(SessionStore, "save", locked)  # login writes the session (and last_login)
    response = client_500.post("/accounts/login/", {"username": "ann", "password": "pw-ann"})
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "The database is busy with a long task" in response.content.decode()


def test_the_api_answers_json_503(db, annotator, client_500, monkeypatch):
    import judging.api.views.tokens as tokens

    monkeypatch.setattr(tokens, "api_token_get", locked)
    response = client_500.post(
        "/api/auth/token/", {"username": "ann", "password": "pw-ann"}, content_type="application/json"
    )
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert response.json()["detail"].startswith("The database is busy")


def test_a_korean_reader_is_told_in_korean(db, annotator, client_500, monkeypatch):
    monkeypatch.setattr(SessionStore, "save", locked)
    response = client_500.post("/accounts/login/", {"username": "ann", "password": "pw-ann"}, HTTP_ACCEPT_LANGUAGE="ko")
    assert response.status_code == 503 and "데이터베이스" in response.content.decode()


def test_other_errors_stay_500(db, annotator, client_500, monkeypatch):
    def broken(*args, **kwargs):
        raise OperationalError("no such table: judging_campaign")

    monkeypatch.setattr(SessionStore, "save", broken)
    response = client_500.post("/accounts/login/", {"username": "ann", "password": "pw-ann"})
    assert response.status_code == 500 and "Retry-After" not in response


def test_sqlites_own_lock_error_is_recognised(tmp_path):
    path = tmp_path / "busy.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    waiter = sqlite3.connect(path, timeout=0.1, isolation_level=None)
    try:
        with pytest.raises(sqlite3.OperationalError) as refused:
            waiter.execute("BEGIN IMMEDIATE")
        assert database_busy(OperationalError(*refused.value.args))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        waiter.close()


@pytest.mark.parametrize(("command", "seconds"), [("runserver", 5.0), ("db_worker", 600.0)])
def test_requests_wait_seconds_and_the_task_worker_longer(command, seconds):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELJUDGE_SQLITE", "DATABASE_URL"))}
    env.update(DJANGO_SETTINGS_MODULE="config.settings", RELJUDGE_ALLOW_DEV_SECRET="1")
    code = (
        f"import sys; sys.argv = ['manage.py', {command!r}]; from django.conf import settings; "
        "print(settings.DATABASES['default']['OPTIONS']['timeout'])"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert float(out.stdout.strip()) == seconds
