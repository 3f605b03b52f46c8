"""Pagination of the API's lists: pages of up to 1,000, and cursors for judgments (millions of rows)."""

import datetime as dt
import re
from typing import cast

from django.core.paginator import Paginator as DjangoPaginator
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import Cursor, CursorPagination, PageNumberPagination
from rest_framework.request import Request

_INTEGER = re.compile(r"-?[0-9]{1,18}")  # ASCII digits that fit a 64-bit id column


def _ascii_number_param(request: Request, name: str) -> None:
    """A 400 naming ``name`` when it is not written in ASCII: DRF reads page numbers and sizes with int(),
    which takes "２" and "١٠" too."""
    raw = request.query_params.get(name)
    if raw is not None and not raw.isascii():
        message = _("must be a whole number written with the digits 0-9, not %(value)r") % {"value": raw[:40]}
        raise ValidationError({name: [message]})


class PagePagination(PageNumberPagination):
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000

    def get_page_number(self, request: Request, paginator: DjangoPaginator) -> int | str:
        _ascii_number_param(request, self.page_query_param)
        return super().get_page_number(request, paginator)

    def get_page_size(self, request: Request) -> int | None:
        _ascii_number_param(request, self.page_size_query_param)
        return super().get_page_size(request)


class JudgmentCursorPagination(CursorPagination):
    """Cursor pages stay fast at any depth (a keyset seek, no OFFSET). Ordering defaults to id, which
    never changes; order by updated_at for an incremental sync together with updated_since."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
    ordering = "id"

    def get_page_size(self, request: Request) -> int | None:
        _ascii_number_param(request, self.page_size_query_param)
        return super().get_page_size(request)

    invalid_cursor_message = cast(
        str, gettext_lazy("Invalid cursor: pass back the next or previous link of an earlier page unchanged.")
    )

    def decode_cursor(self, request: Request) -> Cursor | None:
        """DRF's decoding, plus a check of the position the cursor carries.

        A cursor is only base64 of ``o=&r=&p=``, so a client can send any position; DRF hands it to the
        database as it is, and ``p=1e999`` or a NUL fails there (a 500). Each position must read as a
        value of the field the page is ordered by; anything else is a 400 naming ``cursor``.
        """
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            raise ValidationError({self.cursor_query_param: [self.invalid_cursor_message]}) from None
        if cursor is None or cursor.position is None:
            return cursor
        field = self.ordering[0].lstrip("-") if isinstance(self.ordering, list | tuple) else self.ordering.lstrip("-")
        if not self._valid_position(field, str(cursor.position)):
            raise ValidationError({self.cursor_query_param: [self.invalid_cursor_message]})
        return cursor

    @staticmethod
    def _valid_position(field: str, position: str) -> bool:
        if field == "id":
            return _INTEGER.fullmatch(position) is not None
        try:
            value = parse_datetime(position)
            # A +14:00 offset on 0001-01-01 parses but has no UTC time: the query would overflow.
            return value is not None and value.astimezone(dt.UTC) is not None
        except (ValueError, OverflowError):
            return False
