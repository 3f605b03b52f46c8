"""Real servers for the serving tests and the load benchmark: a migrated database, gunicorn, db_worker.

Everything runs as it does in production — separate processes started the way scripts/serve.sh starts
them, with the production settings module — against a database of its own (a SQLite file, or a fresh
PostgreSQL database beside the test database), so nothing depends on the test runner's transactions.
Every start and stop has a bounded timeout, and every process started is stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import requests

ROOT = Path(__file__).resolve().parents[2]
# The ports this project's servers may use on a shared machine.
PORTS = range(
    int(os.environ.get("RELJUDGE_TEST_PORT_FIRST", "8130")), int(os.environ.get("RELJUDGE_TEST_PORT_LAST", "8149")) + 1
)


def free_port() -> int:
    for port in PORTS:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {PORTS.start}-{PORTS.stop - 1}")


class Site:
    """One database with the app's schema, and the processes serving it."""

    def __init__(self, *, database_url: str, extra_env: dict | None = None):
        self.database_url = database_url
        self.env = {
            # The runner's own settings and Redis stay out unless a test asks for them.
            **{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_SETTINGS", "REDIS_URL"))},
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": database_url,
            "DJANGO_DEBUG": "0",
            "RELJUDGE_ALLOW_DEV_SECRET": "1",
            "RELJUDGE_TESTING": "0",
            "PYTHONUNBUFFERED": "1",
            **(extra_env or {}),
        }
        self.processes: list[subprocess.Popen] = []

    # ---- database

    @classmethod
    def create(cls, name: str, *, tmp_dir: Path) -> Site:
        """A fresh database named after ``name``: PostgreSQL when DATABASE_URL points there, else SQLite."""
        url = os.environ.get("DATABASE_URL", "")
        if url.startswith(("postgres://", "postgresql://")):
            import psycopg

            parsed = urlparse(url)
            dbname = f"{parsed.path.lstrip('/')}_{name}"
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [dbname])
                conn.execute(f'DROP DATABASE IF EXISTS "{dbname}"')
                conn.execute(f'CREATE DATABASE "{dbname}"')
            site = cls(database_url=parsed._replace(path="/" + dbname).geturl())
        else:
            path = tmp_dir / f"{name}.sqlite3"
            site = cls(database_url=f"sqlite:///{path}")
        site.manage("migrate", "--noinput", timeout=180)
        site.manage("collectstatic", "--noinput", "-v", "0", timeout=120)
        return site

    @property
    def vendor(self) -> str:
        return "sqlite" if self.database_url.startswith("sqlite") else "postgresql"

    def sql(self, query: str, params: tuple = ()) -> list[tuple]:
        """Run one query on the site's database (``%s`` placeholders) from the test process."""
        if self.vendor == "sqlite":
            with sqlite3.connect(urlparse(self.database_url).path, timeout=30) as conn:
                return conn.execute(query.replace("%s", "?"), params).fetchall()
        import psycopg

        with psycopg.connect(self.database_url, autocommit=True) as conn:
            return conn.execute(query, params).fetchall()

    def count(self, table: str, where: str = "1=1", params: tuple = ()) -> int:
        return self.sql(f"SELECT COUNT(*) FROM {table} WHERE {where}", params)[0][0]

    @contextlib.contextmanager
    def connection_peak(self, interval: float = 0.05):
        """Sample the number of PostgreSQL connections to this database while the block runs; yields a
        one-item list holding the highest count seen (the sampler's own connection excluded). One
        connection for all samples: reconnecting would count backends that are still shutting down."""
        import psycopg

        peak = [0]
        stop = threading.Event()
        dbname = urlparse(self.database_url).path.lstrip("/")

        def sample():
            with psycopg.connect(self.database_url, autocommit=True) as conn:
                while not stop.is_set():
                    (n,) = conn.execute(
                        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                        [dbname],
                    ).fetchone()
                    peak[0] = max(peak[0], n)
                    time.sleep(interval)

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            yield peak
        finally:
            stop.set()
            thread.join(timeout=10)

    def manage(self, *args: str, timeout: float = 120, env: dict | None = None) -> str:
        out = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if out.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
        return out.stdout

    def python(self, code: str, timeout: float = 120) -> object:
        """Run Python with Django set up on the site's database; returns what the code prints as JSON."""
        return json.loads(self.manage("shell", "-c", code, timeout=timeout).strip().splitlines()[-1])

    def seed(self, *, slug: str, leads=("lead",), annotators=(), topics="", docs="", runs=()) -> None:
        """A campaign with users (password ``pw-<name>``) and files imported through the services."""
        code = f"""
import json
from django.contrib.auth import get_user_model
from judging.services import campaign_create, membership_add, queries_import, documents_import, run_import
User = get_user_model()
c = campaign_create(slug={slug!r}, name={slug!r}, pool_depth=10)
for name, role in {[(n, "lead") for n in leads] + [(n, "annotator") for n in annotators]!r}:
    u = User.objects.filter(username=name).first() or User.objects.create_user(username=name, password="pw-" + name)
    membership_add(campaign=c, user=u, role=role)
if {topics!r}:
    queries_import(campaign=c, data={topics.encode()!r}, filename="topics.tsv")
if {docs!r}:
    documents_import(campaign=c, data={docs.encode()!r}, filename="docs.jsonl")
for i, run in enumerate({list(runs)!r}):
    run_import(campaign=c, data=run.encode(), filename=f"run{{i}}.txt")
print(json.dumps(c.pk))
"""
        self.python(code)

    def tokens(self, usernames) -> dict[str, str]:
        """API tokens for these users, made directly (the token endpoint throttles logins by IP)."""
        code = f"""
import json
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
users = get_user_model().objects.filter(username__in={list(usernames)!r})
print(json.dumps({{u.username: Token.objects.get_or_create(user=u)[0].key for u in users}}))
"""
        return self.python(code)

    # ---- processes

    def _start(self, args: list[str], env: dict, log: Path) -> subprocess.Popen:
        handle = open(log, "ab")  # noqa: SIM115 - kept open for the process's lifetime
        proc = subprocess.Popen(
            args, cwd=ROOT, env={**self.env, **env}, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )
        proc.log = log  # type: ignore[attr-defined]
        self.processes.append(proc)
        return proc

    def gunicorn(
        self,
        *,
        log: Path,
        workers: int = 2,
        threads: int = 4,
        env: dict | None = None,
        port: int | None = None,
        config: str | None = None,
    ) -> str:
        """Start gunicorn as scripts/serve.sh does; return its base URL once /healthz answers 200. ``config``: a
        gunicorn config (``--config``, e.g. the load bench's ``python:bench.statement_cpu``)."""
        port = port or free_port()
        args = [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--worker-class",
            "gthread",
            "--threads",
            str(threads),
            "--no-control-socket",
            "--graceful-timeout",
            "5",
            *(["--config", config] if config else []),
        ]
        self._start(args, {"GUNICORN_THREADS": str(threads), "MALLOC_ARENA_MAX": "2", **(env or {})}, log)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(url + "/healthz", timeout=15).status_code == 200:
                    return url
            except requests.RequestException:
                pass
            time.sleep(0.25)
        raise RuntimeError(f"gunicorn did not answer on {url} within 60 s:\n{log.read_text()[-3000:]}")

    def worker(self, *, log: Path, env: dict | None = None, queue: str | None = None) -> subprocess.Popen:
        """Start one task worker (manage.py db_worker), of the default queue or of ``queue``."""
        args = [sys.executable, "manage.py", "db_worker", "--no-reload", "--interval", "0.2", "--no-startup-delay"]
        if queue:
            args += ["--queue-name", queue]
        return self._start(args, {"DATABASE_POOL_MAX": "2", **(env or {})}, log)

    def stop(self, proc: subprocess.Popen, *, kill: bool = False, timeout: float = 20) -> None:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        if proc in self.processes:
            self.processes.remove(proc)

    def stop_all(self) -> None:
        for proc in list(self.processes):
            self.stop(proc)

    def drop(self) -> None:
        self.stop_all()
        if self.vendor == "postgresql":
            import psycopg

            parsed = urlparse(self.database_url)
            admin = parsed._replace(path="/postgres").geturl()
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                    [parsed.path.lstrip("/")],
                )
                conn.execute(f'DROP DATABASE IF EXISTS "{parsed.path.lstrip("/")}"')


def login(base: str, username: str, password: str) -> requests.Session:
    """A browser-like session: GET the login form for its CSRF cookie, POST it, keep the session cookie."""
    s = requests.Session()
    s.get(base + "/accounts/login/", timeout=30).raise_for_status()
    r = s.post(
        base + "/accounts/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": s.cookies["csrftoken"]},
        headers={"Referer": base + "/accounts/login/"},
        allow_redirects=False,
        timeout=30,
    )
    assert r.status_code == 302, f"login of {username} failed: {r.status_code}"
    s.headers["X-CSRFToken"] = s.cookies["csrftoken"]
    s.headers["Referer"] = base + "/"
    return s


def run_text(*, tag: str, queries: int, depth: int, bad_line: int | None = None) -> str:
    """A TREC run of queries x depth lines (docids shared across queries); ``bad_line`` gets a bad score."""
    lines = []
    for q in range(queries):
        for r in range(depth):
            n = len(lines) + 1
            score = "abc" if n == bad_line else f"{depth - r}.0"
            lines.append(f"q{q} Q0 d{(q * 7 + r) % (depth * 3)} {r + 1} {score} {tag}")
    return "\n".join(lines) + "\n"
