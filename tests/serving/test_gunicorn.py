"""The app served by gunicorn, as scripts/serve.sh serves it: pages, judgments, health and deploy checks."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import requests

from tests.data import DOCS, RUN_BM25, TOPICS
from tests.serving.servers import ROOT, free_port, login


def test_gunicorn_serves_login_page_static_files_and_a_judgment(site):
    site.seed(
        slug="smoke", leads=("smoke-lead",), annotators=("smoke-ann",), topics=TOPICS, docs=DOCS, runs=(RUN_BM25,)
    )
    base = site.gunicorn(log=site.logs / "gunicorn.log")

    page = requests.get(base + "/accounts/login/", timeout=30)
    assert page.status_code == 200 and 'name="username"' in page.text
    css = re.search(r'href="(/static/[^"]+\.css)"', page.text)
    assert css and requests.get(base + css.group(1), timeout=30).status_code == 200  # collected, served

    ann = login(base, "smoke-ann", "pw-smoke-ann")
    judge = ann.get(base + "/campaigns/smoke/judge/", timeout=30)
    assert judge.status_code == 200
    pair_id = int(re.search(r'data-pair-id="(\d+)"', judge.text).group(1))
    version = re.search(r'name="version" value="(\d*)"', judge.text).group(1)
    # What htmx sends when the annotator presses "2".
    saved = ann.post(
        f"{base}/campaigns/smoke/judge/{pair_id}/",
        data={"grade": "2", "version": version, "seconds": "3", "note": ""},
        headers={"HX-Request": "true"},
        timeout=30,
    )
    assert saved.status_code == 200, saved.text[:500]
    assert "Saved" in saved.text or "saved" in saved.text

    mine = ann.get(base + "/api/judgments/?campaign=smoke", timeout=30).json()
    assert [(j["pair"], j["grade"]) for j in mine["results"]] == [(pair_id, 2)]
    # the page and the API name the pair by its public id; the database row is found through it
    assert (
        site.count("judging_judgment", "pair_id = (SELECT id FROM judging_pair WHERE public_id = %s)", (pair_id,)) == 1
    )


def test_healthz_answers_without_login_and_reveals_no_data(site):
    base = site.gunicorn(log=site.logs / "gunicorn.log", workers=1, threads=2)
    r = requests.get(base + "/healthz", timeout=30)
    assert r.status_code == 200
    assert r.json()["database"] == "ok" and r.json()["cache"] == "ok"
    assert set(r.json()) == {"status", "database", "cache", "ms"}


def test_healthz_is_503_when_the_database_is_unreachable(site, tmp_path):
    # A server pointed at a database that does not answer: the balancer must see it as down.
    env = {"DATABASE_URL": "postgres://postgres@127.0.0.1:1/none", "DATABASE_POOL": "0"}
    if site.vendor == "sqlite":
        env = {"DATABASE_URL": f"sqlite:///{tmp_path}/missing-dir/db.sqlite3"}

    port = free_port()
    site._start(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "-w",
            "1",
            "--no-control-socket",
        ],
        env,
        site.logs / "down.log",
    )
    deadline = time.monotonic() + 60
    status = None
    while time.monotonic() < deadline:
        try:
            status = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code
            break
        except requests.ConnectionError:
            time.sleep(0.25)
    assert status == 503


PRODUCTION_ENV = {
    "DJANGO_SECRET_KEY": "k" * 20 + "-production-like-secret-for-check-deploy-0123456789",
    "DJANGO_ALLOWED_HOSTS": "reljudge.example.org",
    "DJANGO_SECURE_COOKIES": "1",
    "DJANGO_SECURE_SSL_REDIRECT": "1",
    "DJANGO_SECURE_HSTS_SECONDS": "31536000",
    "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "DJANGO_SECURE_HSTS_PRELOAD": "1",
    "DJANGO_SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
}


def _check_deploy(env: dict) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "RELJUDGE_"))}
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "config.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_under_the_documented_production_settings():
    out = _check_deploy(PRODUCTION_ENV)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    "dropped", ["DJANGO_SECURE_SSL_REDIRECT", "DJANGO_SECURE_HSTS_SECONDS", "DJANGO_SECURE_COOKIES"]
)
def test_check_deploy_flags_each_missing_https_setting(dropped):
    out = _check_deploy({k: v for k, v in PRODUCTION_ENV.items() if k != dropped})
    assert out.returncode != 0


def test_production_settings_refuse_to_start_without_a_secret():
    out = _check_deploy({k: v for k, v in PRODUCTION_ENV.items() if k != "DJANGO_SECRET_KEY"})
    assert out.returncode != 0 and "DJANGO_SECRET_KEY" in out.stderr


def _serve_sh(site, port, **env):
    return subprocess.Popen(
        ["bash", "scripts/serve.sh"],
        cwd=ROOT,
        env={
            **site.env,
            "PYTHON": sys.executable,
            "PORT": str(port),
            "WEB_CONCURRENCY": "1",
            "GUNICORN_THREADS": "2",
            **env,
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def test_serve_sh_starts_gunicorn_and_the_task_workers_and_stops_them(site):
    port = free_port()
    proc = _serve_sh(site, port)
    try:
        deadline, status = time.monotonic() + 90, None
        while time.monotonic() < deadline and status != 200:
            try:
                status = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code
            except requests.RequestException:
                time.sleep(0.3)
        assert status == 200
        children = subprocess.run(["pgrep", "-g", str(proc.pid), "-a"], capture_output=True, text=True).stdout
        assert "gunicorn" in children and "db_worker" in children
        # One worker for imports, policy switches and tests, one for model judges' runs.
        assert "--queue-name default" in children and "--queue-name models" in children
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert "Serving RelJudge at" in out and "with 1 x 2 threads, 1 task worker(s) and 1 model-run worker(s)" in out
    assert subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True).returncode == 1  # all gone


def test_serve_sh_refuses_a_database_without_migrations(site, tmp_path):
    empty = f"sqlite:///{tmp_path}/empty.sqlite3"
    if site.vendor == "postgresql":
        pytest.skip("the SQLite case shows the check; it does not depend on the database")
    proc = _serve_sh(site, free_port(), DATABASE_URL=empty)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "run 'python manage.py migrate' once" in out
