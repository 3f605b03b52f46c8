"""What every API view shares: the ApiMixin, the exception handler, download and parameter helpers."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from django.apps import apps
from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponseBase, StreamingHttpResponse
from django.utils.http import content_disposition_header
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter
from rest_framework import status
from rest_framework.exceptions import APIException
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle, BaseThrottle
from rest_framework.views import exception_handler

from judging.api.jobs import job_limit_response
from judging.api.permissions import access
from judging.api.renderers import CSVRenderer, JSONLinesRenderer, PlainTextRenderer
from judging.errors import RequestError
from judging.jobs import JobLimit
from judging.models import Campaign
from judging.params import LeaderboardQuery, ParamErrors

SLUG_PATH = r"[-a-zA-Z0-9_]+"
ID_PATH = r"[0-9]+"
# Actions on one object differ from the list defaults: their own query parameters (k, gain, format...)
# must not reach the list filters while get_object() looks the object up, and there is no page to cut.
ONE_OBJECT: dict[str, Any] = {"filter_backends": [], "pagination_class": None}


class DRFConflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with work under way."
    default_code = "conflict"


# The detail of get_object_or_404 (Django's and DRF's), which Django leaves untranslated.
_NO_MATCH = re.compile(r"No (?P<model>\w+) matches the given query\.")


def not_found_detail(exc: Http404) -> str | None:
    """A translated detail for a 404 whose detail is Django's untranslated "No Query matches the given query."
    (or empty, as DRF's get_object_or_404 raises on an id of the wrong type); None keeps the view's own."""
    detail = str(exc.args[0]) if exc.args else ""
    if not detail:
        return _("Not found.")
    match = _NO_MATCH.fullmatch(detail)
    if match is None:
        return None
    try:
        model = apps.get_model("judging", match.group("model"))
    except LookupError:
        return _("Not found.")
    return _("No such %(thing)s.") % {"thing": model._meta.verbose_name}


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, plus the services' Django ValidationError and a request parameter the scoring refused
    (judging.errors.RequestError) as a 400 that names the field, and a job refused for the queued-jobs limits as a
    429; a 404 says what was not found in the caller's language. Anything else a view raises is a 500
    (judging.middleware logs it)."""
    if isinstance(exc, Http404) and (detail := not_found_detail(exc)) is not None:
        exc = Http404(detail)
    if isinstance(exc, JobLimit):
        return job_limit_response(exc)
    if isinstance(exc, RequestError):
        exc = DRFValidationError(exc.errors)
    if isinstance(exc, DjangoValidationError):
        if hasattr(exc, "error_dict"):
            errors = {
                ("non_field_errors" if name == NON_FIELD_ERRORS else name): messages
                for name, messages in exc.message_dict.items()
            }
        else:
            errors = {"non_field_errors": exc.messages}
        exc = DRFValidationError(errors)
    return exception_handler(exc, context)


def not_member(username: str, campaign: Campaign) -> str:
    names = {"username": repr(username), "campaign": repr(campaign.slug)}
    return _("%(username)s is not a member of %(campaign)s.") % names


def download_name(*parts: str) -> str:
    """A file name from parts: letters (Hangul too), digits, ".", "_" and "-" kept, anything else "_"."""
    return re.sub(r"[^\w.-]+", "_", "-".join(parts)).strip("_") or "export"


def attachment(filename: str) -> str:
    """Content-Disposition for a download; a non-ASCII name ("demo-형태소-bm25.run") goes as RFC 6266 filename*."""
    return cast(str, content_disposition_header(True, filename))  # a str whenever as_attachment is True


def base_url(request: Request) -> str:
    """Scheme and host the caller reached us at: links handed back must work for them."""
    return request.build_absolute_uri("/").rstrip("/")


# ``?bom=1`` on a CSV export: Excel reads a UTF-8 CSV without a byte order mark as the system's legacy code page
# (Korean notes come out as mojibake); with the BOM it reads UTF-8. Off by default: scripts and other tools
# expect plain UTF-8, and the BOM would stick to the first column's name for them.
_BOM_VALUES = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False, "": False}


def bom_param(request: Request) -> bool:
    value = request.query_params.get("bom", "").strip().lower()
    if value not in _BOM_VALUES:
        message = _("Expected 1 (add a UTF-8 byte order mark for Excel) or 0, not %(value)s.") % {"value": repr(value)}
        raise DRFValidationError({"bom": [message]})
    return _BOM_VALUES[value]


BOM_PARAMETER = OpenApiParameter(
    "bom",
    str,
    enum=["0", "1"],
    description="With `format=csv`: 1 starts the file with a UTF-8 byte order mark, so that Excel reads Korean "
    "and other non-ASCII text right (default 0: plain UTF-8).",
)


def with_bom(chunks: Iterable[str], bom: bool) -> Iterator[str]:
    if bom:
        yield "\ufeff"
    yield from chunks


def streamed(chunks: Iterable[str], *, content_type: str, filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse((c.encode() for c in chunks), content_type=content_type)
    response["Content-Disposition"] = attachment(filename)
    response["Cache-Control"] = "no-store"
    return response


def leaderboard_query(request: Request, campaign: Campaign, names: tuple[str, ...], **options: Any) -> LeaderboardQuery:
    """The request's leaderboard parameters ``names`` (LeaderboardQuery.parse), or a 400 naming each bad one."""
    try:
        return LeaderboardQuery.parse(request.query_params, campaign=campaign, names=names, **options)
    except ParamErrors as exc:
        raise DRFValidationError(exc.errors) from None


if TYPE_CHECKING:
    from rest_framework.generics import GenericAPIView

    #: What the API's mixins are mixed into (a GenericAPIView, through a viewset): their base for the type checker
    #: only, so that ``super()`` and ``self.get_object()`` are checked; at run time they stay plain mixins.
    ViewBase = GenericAPIView[Any]
else:
    ViewBase = object


class ApiMixin(ViewBase):
    """What every API view shares beyond settings.REST_FRAMEWORK (authentication, filters, pagination,
    schema and exception handler come from there): the anonymous throttle, checked before permissions,
    the caller's access in the serializer context, JSON errors for streamed formats, role lookups."""

    # Not in settings: the schema and its docs (drf-spectacular's views) stay unthrottled and need no
    # database, while every API endpoint counts anonymous requests.
    throttle_classes: Sequence[type[BaseThrottle]] = [AnonRateThrottle]
    request: Any  # the DRF Request, set by APIView.dispatch on the view this is mixed into

    def check_permissions(self, request: Request) -> None:
        # Throttle first: DRF checks permissions before throttles, so a refused anonymous request
        # (every one, on a protected endpoint) would otherwise never be counted.
        self.check_throttles(request)
        super().check_permissions(request)

    def check_throttles(self, request: Request) -> None:
        if getattr(request, "_reljudge_throttle_checked", False):
            return
        request._reljudge_throttle_checked = True  # type: ignore[attr-defined]  # a per-request mark DRF's Request does not declare
        super().check_throttles(request)

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        context["access"] = access(self.request)
        return context

    def dispatch(self, request: HttpRequest, *args: object, **kwargs: Any) -> HttpResponseBase:
        response = super().dispatch(request, *args, **kwargs)
        # DRF keeps the answer on the view (self.response), and the view and its Request refer to each other (the
        # Request's parser_context names the view): an answer kept there went only with the garbage collector's
        # full pass, not when the server had sent it. The leaderboard's per-query text of each labels state (16 MB
        # at 20 systems x 5,000 queries) stayed so: up to 156 MB in one worker after 45 judgments (tracemalloc in
        # bench/scale_bench.py's workers at 100M entries).
        self.response = None  # type: ignore[assignment]  # DRF's stubs say always a Response; gone once sent
        return response

    def finalize_response(self, request: Request, response: HttpResponseBase, *args: object, **kwargs: Any) -> Response:
        # A streamed format was negotiated but the view answered with data (an error): send JSON.
        renderer = getattr(request, "accepted_renderer", None)
        if isinstance(response, Response) and isinstance(renderer, (CSVRenderer, JSONLinesRenderer, PlainTextRenderer)):
            request.accepted_renderer, request.accepted_media_type = JSONRenderer(), "application/json"
        # DRF's stubs take only a Response; DRF itself finalizes any HttpResponseBase (the streamed exports).
        return super().finalize_response(request, response, *args, **kwargs)  # type: ignore[arg-type]

    def campaign_param(self, *, lead: bool = False, what: str | None = None) -> Campaign | None:
        """The campaign named by ``?campaign=``, checked: 404 for non-members, 403 if ``lead`` is needed."""
        slug = self.request.query_params.get("campaign")
        if slug is None:
            return None
        campaign = access(self.request).campaign(slug)
        if lead:
            access(self.request).require_lead(campaign, what or _("see this"))
        return campaign
