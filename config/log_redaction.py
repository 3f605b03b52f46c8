"""Secrets kept out of the logs: the token of a set-password (or password reset) link in a logged path.

Gunicorn's access log (``GunicornLogger``, chosen by scripts/serve.sh with ``--logger-class``) and Django's own
request warnings (``SecretPathFilter`` in settings.LOGGING) write the path as ``/accounts/set-password/<uid>/
[token]/``: whoever reads the log must not be able to open the link before the person it was meant for."""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import Any

from gunicorn import glogging  # type: ignore[import-untyped]

# /accounts/set-password/<uidb64>/<token>/ and /accounts/reset/<uidb64>/<token>/; not Django's placeholder
# "set-password" that the link becomes once its token moved into the session.
_LINK_TOKEN = re.compile(r"(/accounts/(?:set-password|reset)/[^/?#\s\"]+/)(?!set-password/)[^/?#\s\"]+")
REDACTED = "[token]"


def redact(text: str) -> str:
    """``text`` with the token of every set-password or reset link in it replaced by ``[token]``."""
    return _LINK_TOKEN.sub(rf"\g<1>{REDACTED}", text) if "/accounts/" in text else text


class GunicornLogger(glogging.Logger):
    """Gunicorn's logger, writing every access-log field (request line, path, referer, headers) redacted."""

    def atoms(self, resp: object, req: object, environ: dict[str, Any], request_time: timedelta) -> dict[str, Any]:
        atoms = super().atoms(resp, req, environ, request_time)
        return {key: redact(value) if isinstance(value, str) else value for key, value in atoms.items()}


class SecretPathFilter(logging.Filter):
    """Redacts the message of every record it sees (``Forbidden: /accounts/set-password/...``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
