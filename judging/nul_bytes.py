"""NUL characters in a request's address, query string or form: refused with 400 naming where, before any view.

PostgreSQL's text types cannot hold U+0000, so a NUL reaching a query there raised ValueError deep in a view (a 500:
the web assignments form's annotator, qids and tag, ``/leaderboard/queries/q%00/``, ``?q=x%00``), while the API's
serializers already refused one with 400. Nothing RelJudge takes is written with a NUL: this middleware refuses it
at the door on both databases, the same way everywhere (JSON under /api/, a page elsewhere). The API's own bodies
(JSON, forms) are checked by its serializers, which name the field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import render
from django.utils.translation import gettext as _


def _nul_in(params: QueryDict) -> str | None:
    """The first parameter of ``params`` whose name or a value holds a NUL, else None."""
    for name, values in params.lists():
        if "\x00" in name or any("\x00" in value for value in values if isinstance(value, str)):
            return name
    return None


def nul_response(request: HttpRequest, field: str | None) -> HttpResponse:
    """400: where the NUL was (``field`` None: the address)."""
    if field is None:
        message = _("The address holds a NUL character, which no page or resource has.")
    else:
        message = _("%(field)s holds a NUL character, which no field accepts.") % {"field": repr(field)}
    if request.path.startswith("/api/"):
        body: dict[str, str | list[str]] = (
            {"detail": message} if field is None else {field.replace("\x00", "\\x00"): [message]}
        )
        return JsonResponse(body, status=400)
    return render(request, "400.html", {"message": message}, status=400)


class NulBytesMiddleware:
    """After the language and the user are known (its page is translated) and after CsrfViewMiddleware, which
    reads a page's form in its process_view: this reads only what was parsed by then."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path_info:
            return nul_response(request, None)
        field = _nul_in(request.GET)
        if field is not None:
            return nul_response(request, field)
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponse | None:
        if request.method != "POST" or request.path.startswith("/api/"):
            return None
        field = _nul_in(request.POST)
        return nul_response(request, field) if field is not None else None
