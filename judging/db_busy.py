"""A database that stays locked longer than a request may wait: 503 with Retry-After, never a 500.

SQLite has one writer at a time. A long import holds the write lock for its whole transaction (one per import:
nothing half-written), and a request that must write meanwhile (a login, a judgment) waits for it up to
``RELJUDGE_SQLITE_BUSY_SECONDS`` (SQLite's busy timeout: 5 s by default, where it waited 20 s) and then gets
``database is locked``. That is the server being busy, not a fault: it is answered 503 with ``Retry-After`` and
a page (or JSON under /api/) saying so, in the reader's language, with a warning in the log. The task worker
(``manage.py db_worker``) waits longer (``RELJUDGE_SQLITE_WORKER_BUSY_SECONDS``): a job must not fail because
another job writes.

Django calls the 500 handler (``config.urls.handler500``) for any exception no view or middleware handled,
inside the ``except`` block: :func:`server_error` finds the exception there, whichever layer raised it (a
session saved by its middleware too).
"""

from __future__ import annotations

import logging
import sys

from django.conf import settings
from django.db import OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views import defaults

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5


def database_busy(exc: BaseException | None) -> bool:
    """Whether ``exc`` is the database refusing for a lock held too long (SQLite's "database is locked", or "...
    table is locked" of its shared cache)."""
    return isinstance(exc, OperationalError) and "locked" in str(exc).lower()


def busy_response(request: HttpRequest) -> HttpResponse:
    message = _(
        "The database is busy with a long task (an import, most likely). Nothing was saved: try again in a few seconds."
    )
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"detail": message}, status=503)
    else:
        response = render(request, "503.html", {"message": message}, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def server_error(request: HttpRequest, template_name: str = defaults.ERROR_500_TEMPLATE_NAME) -> HttpResponse:
    """The 500 handler: 503 + Retry-After for a locked database, else Django's own 500 page."""
    exc = sys.exc_info()[1]
    if database_busy(exc):
        logger.warning(
            "%s %s: the database stayed locked past the busy timeout (%s s): answered 503",
            request.method,
            request.path,
            getattr(settings, "RELJUDGE_SQLITE_BUSY_SECONDS", "?"),
        )
        return busy_response(request)
    return defaults.server_error(request, template_name)
