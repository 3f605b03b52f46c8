"""An internal error's log line: which campaign, which parameters, who, and the stack.

Django answers an exception a view did not handle with a 500 and logs "Internal Server Error: PATH" (the path
without its query string). That is not enough to reproduce a broken invariant of the scoring (judging.errors: only
a request's own parameters answer 400): this middleware logs the method, the path, the query string (the
parameters of a GET: never a body, which may hold a password), the campaign's slug, the user's id and the stack,
on the logger ``judging.internal``, before Django's handler answers 500 as always.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse

from config.log_redaction import redact

logger = logging.getLogger("judging.internal")

QUERY_CHARS = 500  # the query string as logged, at most


class InternalErrorLog:
    """Logs every exception a view raises and nothing handled (see the module); never changes the answer."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> None:
        if isinstance(exception, Http404 | PermissionDenied | SuspiciousOperation):
            return None  # Django answers these 404, 403 and 400: not internal errors
        match = getattr(request, "resolver_match", None)
        slug = match.kwargs.get("slug") if match is not None else None
        user = getattr(request, "user", None)
        logger.error(
            "internal error on %s %s: campaign %s, parameters %r, user %s: %s: %s",
            request.method,
            redact(request.path),
            slug if slug is not None else "-",
            request.META.get("QUERY_STRING", "")[:QUERY_CHARS],
            user.pk if user is not None and user.is_authenticated else "anonymous",
            type(exception).__name__,
            exception,
            exc_info=exception,
        )
        return None
