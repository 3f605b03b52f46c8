"""Request body parsers of the API: JSON and form bodies are bounded before they are read and parsed."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import IO, Any

from django.utils.translation import gettext as _
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import FormParser, JSONParser

from judging.json_depth import JSONTooDeep, json_depth_check

# A judgment is a few hundred bytes (a 5,000-character note is at most 20 KB); campaign settings with
# long guidelines stay far below this. Files go through the multipart upload endpoints, which keep
# Django's own limits (DATA_UPLOAD_MAX_MEMORY_SIZE, FILE_UPLOAD_MAX_MEMORY_SIZE).
BODY_MAX_BYTES = 1024 * 1024


class RequestTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "request_too_large"


def _too_large(size: str) -> RequestTooLarge:
    return RequestTooLarge(
        _(
            "The request body is %(size)s bytes; a JSON or form body may be at most %(limit)s bytes. "
            "Send files to the upload endpoints (multipart/form-data)."
        )
        % {"size": size, "limit": f"{BODY_MAX_BYTES:,}"}
    )


class BoundedBodyMixin:
    """Refuse a body over BODY_MAX_BYTES before parsing it.

    DRF's parsers read the whole stream, and Django's DATA_UPLOAD_MAX_MEMORY_SIZE guards only
    ``request.body`` and ``request.POST``, not that stream: a 60 MB JSON body was read and parsed whole.
    The declared Content-Length settles most requests without reading a byte; the stream is then read at
    most one byte past the limit, in case the declared length understates it.
    """

    def parse(
        self, stream: IO[Any] | None, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        request = (parser_context or {}).get("request")
        meta = getattr(request, "META", {})
        try:
            declared = int(meta.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        if declared > BODY_MAX_BYTES:
            raise _too_large(f"{declared:,}")
        data = stream.read(BODY_MAX_BYTES + 1) if stream is not None else b""
        if len(data) > BODY_MAX_BYTES:
            raise _too_large(f"more than {BODY_MAX_BYTES:,}")
        return self._parse_bytes(data, media_type, parser_context)

    def _parse_bytes(self, data: bytes, media_type: str | None, parser_context: Mapping[str, Any] | None) -> Any:
        return super().parse(io.BytesIO(data), media_type, parser_context)  # type: ignore[misc]


class BoundedJSONParser(BoundedBodyMixin, JSONParser):
    """JSON bodies, bounded in size (BoundedBodyMixin) and in depth: a body nested deeper than
    judging.json_depth.JSON_DEPTH_MAX levels is refused with 400 before the recursive parser sees it
    (1,000 levels of ``[`` raised RecursionError: a 500 without login)."""

    def _parse_bytes(self, data: bytes, media_type: str | None, parser_context: Mapping[str, Any] | None) -> Any:
        try:
            json_depth_check(data)
        except JSONTooDeep as exc:
            raise ParseError(
                _("JSON parse error - the body nests %(depth)d levels deep; at most %(limit)d are accepted.")
                % {"depth": exc.depth, "limit": exc.limit}
            ) from None
        return super()._parse_bytes(data, media_type, parser_context)


class BoundedFormParser(BoundedBodyMixin, FormParser):
    pass
