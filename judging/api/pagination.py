"""Pagination of the API's lists: pages of up to 1,000, and cursors for judgments (millions of rows)."""

from rest_framework.pagination import CursorPagination, PageNumberPagination


class PagePagination(PageNumberPagination):
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000


class JudgmentCursorPagination(CursorPagination):
    """Cursor pages stay fast at any depth (a keyset seek, no OFFSET). Ordering defaults to id, which
    never changes; order by updated_at for an incremental sync together with updated_since."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
    ordering = "id"
