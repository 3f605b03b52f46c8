"""The page of a list a request asks for (``?page=N``), as every list page reads it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.paginator import Page, Paginator
from django.http import HttpRequest


def page_of(request: HttpRequest, items: Sequence[Any] | Any, size: int) -> Page:
    """The ``?page=`` page of ``items``, ``size`` a page. A number is read only in the digits 0-9, as everywhere
    else (Python's int() also reads "٢" and "２"): anything else, like a number past the end, gives Django's
    get_page answer (the first page, or the last)."""
    raw = request.GET.get("page")
    return Paginator(items, size).get_page(raw if raw and raw.isascii() else None)
