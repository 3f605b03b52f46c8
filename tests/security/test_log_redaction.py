"""The token of a set-password link never reaches a log: gunicorn's access log (the logger class and format
scripts/serve.sh starts it with) and Django's request warnings write ``[token]`` in its place."""

from __future__ import annotations

import logging
import re
import shlex
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.test import Client
from gunicorn.config import Config
from gunicorn.glogging import Logger

from config.log_redaction import GunicornLogger, SecretPathFilter, redact

SERVE = Path(__file__).resolve().parents[2] / "scripts" / "serve.sh"
TOKEN = "3-d1y5zd-9e5c6643979ea00b9db8bb21a01e90cd"
LINK = f"/accounts/set-password/Mw/{TOKEN}/"


def serve_options() -> dict[str, str]:
    """The --option value pairs scripts/serve.sh passes to gunicorn."""
    command = SERVE.read_text().split("-m gunicorn", 1)[1].split("&\n", 1)[0].replace("\\\n", " ")
    words = shlex.split(command)
    return {w: words[i + 1] for i, w in enumerate(words) if w.startswith("--") and i + 1 < len(words)}


def access_line(tmp_path, logger_class, path: str, referer: str = "-") -> str:
    options = serve_options()
    cfg = Config()
    cfg.set("accesslog", str(tmp_path / "access.log"))
    cfg.set("access_log_format", options["--access-logformat"])
    log = logger_class(cfg)
    environ = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": path,
        "PATH_INFO": path.split("?")[0],
        "QUERY_STRING": "",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "10.0.0.7",
        "HTTP_REFERER": referer,
    }
    response = SimpleNamespace(status="302 Found", sent=0, headers=[("Location", path)])
    log.access(response, SimpleNamespace(headers=[("REFERER", referer)]), environ, timedelta(milliseconds=3))
    for handler in log.access_log.handlers:
        handler.flush()
    return (tmp_path / "access.log").read_text()


def test_serve_sh_starts_gunicorn_with_the_redacting_logger():
    assert serve_options()["--logger-class"] == "config.log_redaction.GunicornLogger"


def test_gunicorn_access_log_writes_the_path_without_the_token(tmp_path):
    line = access_line(tmp_path, GunicornLogger, LINK, referer=f"https://mail.example/{LINK}")
    assert TOKEN not in line
    assert '"GET /accounts/set-password/Mw/[token]/ HTTP/1.1" 302' in line


def test_plain_gunicorn_logger_would_write_the_token(tmp_path):
    """The check above can fail: the format serve.sh uses carries the request line."""
    assert TOKEN in access_line(tmp_path, Logger, LINK)


@pytest.mark.parametrize(
    ("path", "logged"),
    [
        (LINK, "/accounts/set-password/Mw/[token]/"),
        (f"/accounts/reset/Mw/{TOKEN}/", "/accounts/reset/Mw/[token]/"),
        ("/accounts/set-password/Mw/set-password/", "/accounts/set-password/Mw/set-password/"),
        ("/accounts/set-password/done/", "/accounts/set-password/done/"),
        ("/campaigns/demo/", "/campaigns/demo/"),
    ],
)
def test_redact(path, logged):
    assert redact(path) == logged


def test_django_request_warnings_leave_the_token_out(campaign, lead, caplog):
    """A refused link is logged by Django ("Forbidden: <path>"); the configured handler filters it."""
    from django.contrib.auth import get_user_model

    client = Client()
    client.force_login(lead)
    page = client.post(
        "/campaigns/demo/members/", {"action": "add", "username": "newboss", "role": "annotator", "create": "on"}
    )
    link = re.search(r"/accounts/set-password/[^\s\"<]+/", page.content.decode()).group(0)
    get_user_model().objects.filter(username="newboss").update(is_staff=True)
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert Client().get(link).status_code == 403
    record = next(r for r in caplog.records if r.name == "django.request")
    SecretPathFilter().filter(record)
    assert "/accounts/set-password/" in record.getMessage() and link.split("/")[-2] not in record.getMessage()
    filters = [f for h in logging.getLogger().handlers for f in h.filters if isinstance(f, SecretPathFilter)]
    assert filters  # settings.LOGGING puts the filter on the handler every log goes through
