"""Uploads: a ceiling on the size of a request's body, checked before a byte of it is read, and files that
stream to a temporary file on disk instead of memory.

A request whose declared Content-Length passes ``RELJUDGE_MAX_UPLOAD_BYTES`` is answered 413 at once, in the
reader's language (JSON under /api/, a page elsewhere), and no view runs. Behind it, UploadLimitHandler counts
the bytes of uploaded files as the multipart parser streams them, for a body whose length was not declared:
past the limit it stops the upload and the middleware answers 413 all the same. The upload handlers after it
write files to disk (settings.FILE_UPLOAD_HANDLERS), so a large upload never sits whole in a worker's memory.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import render
from django.utils.translation import gettext as _

MEGABYTE = 1024 * 1024


def _megabytes(size: int) -> str:
    """A size in MB for a message: whole when it is, else to one decimal ("64", "1.5")."""
    return f"{size // MEGABYTE:,}" if size % MEGABYTE == 0 else f"{size / MEGABYTE:,.1f}"


def too_large_message(size: int | None) -> str:
    """Why the request was refused, in the reader's language; ``size`` is the declared body size, if known."""
    limit = _megabytes(settings.RELJUDGE_MAX_UPLOAD_BYTES)
    if size is None:
        return _("This upload is larger than %(limit)s MB, the most an upload may be. Nothing was imported.") % {
            "limit": limit
        }
    return _("This upload is %(size)s MB; an upload may be at most %(limit)s MB. Nothing was imported.") % {
        "size": _megabytes(size),
        "limit": limit,
    }


def too_large_response(request: HttpRequest, size: int | None) -> HttpResponse:
    message = too_large_message(size)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message, "limit_bytes": settings.RELJUDGE_MAX_UPLOAD_BYTES}, status=413)
    return render(request, "413.html", {"message": message}, status=413)


def _declared_length(request: HttpRequest) -> int:
    try:
        return max(int(request.META.get("CONTENT_LENGTH") or 0), 0)
    except ValueError:
        return 0


class UploadLimitMiddleware:
    """Answer 413 to a body over the upload limit before anything reads it (see the module's docstring).

    Last in MIDDLEWARE: every other middleware has set the language and the user by then, and none of them
    reads the body before the views (CsrfViewMiddleware reads a form in process_view, after this)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        declared = _declared_length(request)
        if declared > settings.RELJUDGE_MAX_UPLOAD_BYTES:
            return too_large_response(request, declared)
        response = self.get_response(request)
        if getattr(request, "upload_too_large", False):
            # The view ran without the file (UploadLimitHandler dropped it): whatever it answered, the answer
            # is that the upload was too large.
            return too_large_response(request, None)
        return response


class UploadLimitHandler(FileUploadHandler):
    """Count the bytes of a request's files as they stream in; past the upload limit, stop reading them and
    mark the request for UploadLimitMiddleware. First in FILE_UPLOAD_HANDLERS: it passes every chunk on."""

    def __init__(self, request: HttpRequest | None = None) -> None:
        super().__init__(request)
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        if self.received > settings.RELJUDGE_MAX_UPLOAD_BYTES:
            if self.request is not None:
                self.request.upload_too_large = True  # type: ignore[attr-defined]  # read by the middleware
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None
