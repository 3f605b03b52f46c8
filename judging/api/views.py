"""API views: thin DRF viewsets over the selectors (reads) and the services (writes)."""

from __future__ import annotations

import re

from django.contrib.auth import authenticate
from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import CharField, OuterRef, Q, Subquery, Value
from django.http import HttpResponse, StreamingHttpResponse
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.authtoken.models import Token
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, NotAuthenticated, NotFound, PermissionDenied
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle, ScopedRateThrottle
from rest_framework.views import APIView, exception_handler

from judging import formats
from judging.access import LEAD, Member
from judging.api import serializers
from judging.api.filters import (
    DocumentFilter,
    JudgmentFilter,
    PairFilter,
    QueryFilter,
    SystemFilter,
)
from judging.api.jobs import JobStartedSerializer, JudgeRunSerializer, job_accepted, upload_as_job
from judging.api.pagination import JudgmentCursorPagination
from judging.api.permissions import CanCreateCampaign, IsCampaignLead, access
from judging.api.renderers import (
    CSVRenderer,
    JSONLinesRenderer,
    LeaderboardCSVRenderer,
    PlainTextRenderer,
    batched_text,
    judgments_csv,
    judgments_jsonl,
    leaderboard_csv,
    leaderboard_json,
    qrels_text,
)
from judging.jobs import KINDS as JOB_KINDS
from judging.jobs import (
    JobError,
    job_needed,
    model_endpoint_configured,
    model_judge_job_start,
    policy_job_pending,
    policy_job_start,
    significance_get,
)
from judging.models import Campaign, Document, Membership, Pair, Query, System, User
from judging.scoring import (
    TESTS,
    Params,
    leaderboard,
    leaderboard_data,
    measure_names,
    threshold_check,
    trust,
)
from judging.selectors import (
    JUDGMENT_EXPORT_COLUMNS,
    annotators_progress,
    campaign_progress,
    grade_top,
    judgment_export_chunks,
    judgment_export_row,
    judgments_visible,
    membership_get,
    pair_with_scale,
    qrels_chunks,
    system_rankings,
)
from judging.selectors.calibration import UnknownJudge, judge_calibration
from judging.selectors.online import offline_vs_online, online_figures, per_query_for_page
from judging.services import (
    ImportRefused,
    adjudication_set,
    campaign_create,
    campaign_update,
    documents_import,
    judgment_record,
    member_add,
    membership_remove,
    policy_switch_needs_job,
    qrels_import,
    queries_import,
    run_import,
    scale_from_values,
    set_password_link_issue,
)
from judging.services.model_judge import model_judge_upload_annotator
from judging.services.online import online_import
from metrics import Measure

SLUG_PATH = r"[-a-zA-Z0-9_]+"
ID_PATH = r"[0-9]+"
JSON_ONLY = ("application/json",)
# Actions on one object differ from the list defaults: their own query parameters (k, gain, format...)
# must not reach the list filters while get_object() looks the object up, and there is no page to cut.
ONE_OBJECT = {"filter_backends": [], "pagination_class": None}


class DRFConflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with work under way."
    default_code = "conflict"


def api_exception_handler(exc, context):
    """DRF's handler, plus the services' Django ValidationError as a 400 that names the field."""
    if isinstance(exc, DjangoValidationError):
        if hasattr(exc, "error_dict"):
            detail = {
                ("non_field_errors" if name == NON_FIELD_ERRORS else name): messages
                for name, messages in exc.message_dict.items()
            }
        else:
            detail = {"non_field_errors": exc.messages}
        exc = DRFValidationError(detail)
    return exception_handler(exc, context)


def _not_member(username: str, campaign: Campaign) -> str:
    names = {"username": repr(username), "campaign": repr(campaign.slug)}
    return _("%(username)s is not a member of %(campaign)s.") % names


def _download_name(*parts: str) -> str:
    """A file name from parts: letters (Hangul too), digits, ".", "_" and "-" kept, anything else "_"."""
    return re.sub(r"[^\w.-]+", "_", "-".join(parts)).strip("_") or "export"


def _attachment(filename: str) -> str:
    """Content-Disposition for a download; a non-ASCII name ("demo-형태소-bm25.run") goes as RFC 6266 filename*."""
    return content_disposition_header(True, filename)


def _base_url(request) -> str:
    """Scheme and host the caller reached us at: links handed back must work for them."""
    return request.build_absolute_uri("/").rstrip("/")


# ``?bom=1`` on a CSV export: Excel reads a UTF-8 CSV without a byte order mark as the system's legacy code page
# (Korean notes come out as mojibake); with the BOM it reads UTF-8. Off by default: scripts and other tools
# expect plain UTF-8, and the BOM would stick to the first column's name for them.
_BOM_VALUES = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False, "": False}


def _bom_param(request) -> bool:
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


def _with_bom(chunks, bom: bool):
    if bom:
        yield "\ufeff"
    yield from chunks


def _streamed(chunks, *, content_type: str, filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse((c.encode() for c in chunks), content_type=content_type)
    response["Content-Disposition"] = _attachment(filename)
    response["Cache-Control"] = "no-store"
    return response


class ApiMixin:
    """What every API view shares beyond settings.REST_FRAMEWORK (authentication, filters, pagination,
    schema and exception handler come from there): the anonymous throttle, checked before permissions,
    the caller's access in the serializer context, JSON errors for streamed formats, role lookups."""

    # Not in settings: the schema and its docs (drf-spectacular's views) stay unthrottled and need no
    # database, while every API endpoint counts anonymous requests.
    throttle_classes = [AnonRateThrottle]

    def check_permissions(self, request):
        # Throttle first: DRF checks permissions before throttles, so a refused anonymous request
        # (every one, on a protected endpoint) would otherwise never be counted.
        self.check_throttles(request)
        super().check_permissions(request)

    def check_throttles(self, request):
        if getattr(request, "_reljudge_throttle_checked", False):
            return
        request._reljudge_throttle_checked = True
        super().check_throttles(request)

    def get_serializer_context(self):
        context = super().get_serializer_context()
        context["access"] = access(self.request)
        return context

    def finalize_response(self, request, response, *args, **kwargs):
        # A streamed format was negotiated but the view answered with data (an error): send JSON.
        renderer = getattr(request, "accepted_renderer", None)
        if isinstance(response, Response) and isinstance(renderer, (CSVRenderer, JSONLinesRenderer, PlainTextRenderer)):
            request.accepted_renderer, request.accepted_media_type = JSONRenderer(), "application/json"
        return super().finalize_response(request, response, *args, **kwargs)

    def campaign_param(self, *, lead: bool = False, what: str | None = None):
        """The campaign named by ``?campaign=``, checked: 404 for non-members, 403 if ``lead`` is needed."""
        slug = self.request.query_params.get("campaign")
        if slug is None:
            return None
        campaign = access(self.request).campaign(slug)
        if lead:
            access(self.request).require_lead(campaign, what or _("see this"))
        return campaign


# --------------------------------------------------------------------------- auth


class AuthTokenView(ApiMixin, APIView):
    """Trade a username and password for the API token a script sends as `Authorization: Token ...`."""

    # Differs: anyone may ask for a token (it is how one logs in), under the stricter login rate.
    permission_classes = [AllowAny]
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "login"

    @extend_schema(
        operation_id="auth_token_create",
        request=serializers.TokenRequestSerializer,
        responses={200: serializers.TokenSerializer},
        auth=[],
        description=(
            "Returns your API token, creating it on first use. Failed logins are counted per username and per "
            "client address: after too many, 429 with `Retry-After` until the lockout ends."
        ),
    )
    def post(self, request):
        credentials = serializers.TokenRequestSerializer(data=request.data)
        credentials.is_valid(raise_exception=True)
        # The Django request, not DRF's wrapper: django-axes marks a locked-out client on it, and its
        # middleware then answers 429 with when to retry (judging.api.account.lockout_response).
        user = authenticate(request._request, **credentials.validated_data)
        if user is None or not user.is_active:
            raise DRFValidationError(
                {"non_field_errors": [_("Unable to log in with the given username and password.")]}
            )
        token, _created = Token.objects.get_or_create(user=user)
        return Response({"token": token.key}, headers={"Cache-Control": "no-store"})

    @extend_schema(
        operation_id="auth_token_destroy",
        request=None,
        responses={204: None},
        description="Revoke your API token; scripts using it get 401 from now on.",
    )
    def delete(self, request):
        if not request.user.is_authenticated:
            raise NotAuthenticated()
        Token.objects.filter(user=request.user).delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


# --------------------------------------------------------------------------- campaigns

UPLOAD_RESPONSES = {
    200: serializers.ImportSummarySerializer,
    202: OpenApiResponse(
        JobStartedSerializer, description="A file above RELJUDGE_JOB_THRESHOLD_BYTES: imported by a background job."
    ),
    400: OpenApiResponse(serializers.UploadErrorSerializer, description="Bad input: nothing of the file was written."),
    409: OpenApiResponse(
        serializers.UploadErrorSerializer,
        description="Conflicts with what the campaign holds (e.g. a different run for an existing system).",
    ),
}


@extend_schema_view(
    list=extend_schema(description="The campaigns you belong to, with your role in each."),
    create=extend_schema(description="Create a campaign (leads only); you become its first lead."),
    retrieve=extend_schema(description="One of your campaigns."),
    partial_update=extend_schema(
        description=(
            "Change settings or the scale (leads only). The scale's values are fixed once judging has started. "
            "A new `aggregation` on a campaign with more than RELJUDGE_POLICY_JOB_PAIRS judged pairs is switched "
            "by a background job: 202 with the job's URL in Location (the other settings are saved at once)."
        ),
        responses={
            200: serializers.CampaignSerializer,
            202: JobStartedSerializer,
            409: OpenApiResponse(description="A switch of the aggregation policy is already under way."),
        },
    ),
)
class CampaignViewSet(
    ApiMixin,
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = serializers.CampaignSerializer
    permission_classes = [IsAuthenticated, CanCreateCampaign]  # differs: only some users may create
    lookup_field = "slug"
    lookup_value_regex = SLUG_PATH
    ordering_fields = ["slug", "name", "created_at"]
    ordering = ["slug"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):
        acc = access(self.request)
        if not self.request.user.is_authenticated:  # e.g. while the schema is generated
            return Campaign.objects.none()
        if acc.superuser:
            role = Value(Membership.Role.LEAD, output_field=CharField())
        else:
            role = Subquery(
                Membership.objects.filter(campaign=OuterRef("pk"), user=self.request.user).values("role")[:1]
            )
        return acc.campaigns().annotate(role=role).prefetch_related("grades")

    def _reloaded(self, campaign):
        return self.get_queryset().get(pk=campaign.pk)

    @staticmethod
    def _scale(data: dict, campaign=None) -> list[dict] | None:
        """The scale the request asks for, from `scale` (named grades) or `grades` (values)."""
        scale, values = data.pop("grades", None), data.pop("grade_values", None)
        if scale is not None:
            return [dict(g) for g in scale]
        if values is None:
            return None
        if campaign is not None and sorted(set(values)) == sorted(g.value for g in campaign.grades.all()):
            return None  # the same values: keep the grades' names and descriptions
        try:
            return scale_from_values(values)
        except DjangoValidationError as exc:
            raise DRFValidationError({"grades": exc.messages}) from None

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        scale = self._scale(data)
        campaign = campaign_create(lead=request.user, scale=scale, **data)
        body = self.get_serializer(self._reloaded(campaign)).data
        location = reverse("api:campaign-detail", args=[campaign.slug])
        return Response(body, status=status.HTTP_201_CREATED, headers={"Location": location})

    def update(self, request, *args, **kwargs):
        campaign = self.get_object()
        access(request).require_lead(campaign, _("change its settings"))
        serializer = self.get_serializer(campaign, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        data.pop("slug", None)
        scale = self._scale(data, campaign)
        # A large campaign's policy switch goes to the task worker (202 + Location); the rest is saved now.
        switch = None
        if data.get("aggregation", campaign.aggregation) != campaign.aggregation and policy_switch_needs_job(
            campaign=campaign
        ):
            switch = data.pop("aggregation")
            if policy_job_pending(campaign=campaign) is not None:
                raise DRFConflict("a switch of the aggregation policy is already under way; wait for it to finish")
        campaign_update(campaign=campaign, scale=scale, **data)
        if switch is not None:
            try:
                job = policy_job_start(campaign=campaign, user=request.user, policy=switch)
            except JobError as exc:
                raise DRFConflict(str(exc)) from None
            return job_accepted(request, job)
        return Response(self.get_serializer(self._reloaded(campaign)).data)

    # ---- progress, leaderboard, qrels

    @extend_schema(
        responses=serializers.ProgressSerializer,
        description=(
            "Pool totals, the review queue and judgments per annotator (an annotator sees only their own row)."
        ),
    )
    @action(detail=True, methods=["get"], **ONE_OBJECT)
    def progress(self, request, slug=None):
        campaign = self.get_object()
        data = dict(campaign_progress(campaign=campaign), campaign=campaign.slug)
        rows = annotators_progress(campaign=campaign)
        if not access(request).is_lead(campaign.id):
            rows = [row for row in rows if row["user"].pk == request.user.pk]
        data["annotators"] = rows
        return Response(serializers.ProgressSerializer(data).data)

    @extend_schema(
        parameters=[serializers.LeaderboardQuerySerializer, BOM_PARAMETER],
        responses=serializers.LeaderboardSerializer,
        description=(
            "Every system's mean measures (and per-query values) on the current labels; the same JSON as "
            "`manage.py scores --json`. Leads only, unless the campaign shows the leaderboard to annotators: "
            "they get what the leaderboard page shows them, the means only (no `per_query`, 403 if asked for) "
            "with the page's limits on the parameters (`threshold` up to the scale's top grade)."
        ),
    )
    @action(
        detail=True,
        methods=["get"],
        renderer_classes=[JSONRenderer, BrowsableAPIRenderer, LeaderboardCSVRenderer],
        **ONE_OBJECT,
    )
    def leaderboard(self, request, slug=None):
        campaign = self.get_object()
        is_lead = access(request).is_lead(campaign.id)
        if not is_lead and not campaign.leaderboard_visible_to_annotators:
            access(request).require_lead(campaign, _("see its leaderboard"))
        params = serializers.LeaderboardQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        if not is_lead:
            self._annotator_params(campaign, params.validated_data, asked_per_query="per_query" in request.query_params)
        as_csv = isinstance(request.accepted_renderer, LeaderboardCSVRenderer)
        if as_csv:
            params.validated_data["per_query"] = False
            bom = _bom_param(request)
        try:
            if type(request.accepted_renderer) is JSONRenderer and params.validated_data["per_query"]:
                # Every per-query value of every system: written as JSON text directly (leaderboard_json).
                text = leaderboard_json(campaign=campaign, **params.validated_data)
                if text is not None:
                    return HttpResponse(text, content_type="application/json")
            data = leaderboard_data(campaign=campaign, **params.validated_data)
        except ValueError as exc:
            raise DRFValidationError({"non_field_errors": [str(exc)]}) from None
        if as_csv:
            response = HttpResponse(
                ("\ufeff" if bom else "") + leaderboard_csv(data), content_type="text/csv; charset=utf-8"
            )
            stem = _download_name(campaign.slug, "leaderboard", f"k{data['k']}", data["gain"], f"t{data['threshold']}")
            response["Content-Disposition"] = _attachment(f"{stem}.csv")
            response["Cache-Control"] = "no-store"
            return response
        return Response(data)

    @staticmethod
    def _annotator_params(campaign: Campaign, params: dict, *, asked_per_query: bool) -> None:
        """Hold an annotator to what the leaderboard page shows them: the per-query drill-down is the leads'
        (the page answers 403 there), and the parameters are checked as the page checks them."""
        if asked_per_query and params["per_query"]:
            raise PermissionDenied(
                _("Only a lead of campaign %(campaign)s can see per-query values; annotators get the means.")
                % {"campaign": repr(campaign.slug)}
            )
        params["per_query"] = False
        try:
            threshold_check(params["threshold"], top=grade_top(campaign=campaign))
        except DjangoValidationError as exc:
            raise DRFValidationError({"threshold": exc.messages}) from None

    def _trust_board(self, request):
        """The campaign's leaderboard under the request's parameters, for the trust endpoints below."""
        campaign = self.get_object()
        if not campaign.leaderboard_visible_to_annotators:
            access(request).require_lead(campaign, _("see its leaderboard"))
        params = serializers.TrustQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        d = params.validated_data
        try:
            p = Params.from_settings(d)
            lb = leaderboard(campaign, p)
        except ValueError as exc:
            raise DRFValidationError({"non_field_errors": [str(exc)]}) from None
        return campaign, lb, d

    @extend_schema(
        parameters=[serializers.TrustQuerySerializer],
        responses=OpenApiTypes.OBJECT,
        description=(
            "Each system's mean `measure` (P, R, F1, Hit or nDCG) at every cutoff k = 1..k_max (default: the "
            'pool depth, at most 100): `{"measure", "k": [...], "systems": [{"name", "values": [...]}]}`.'
        ),
    )
    @action(detail=True, methods=["get"], url_path="leaderboard/curves", **ONE_OBJECT)
    def leaderboard_curves(self, request, slug=None):
        campaign, lb, d = self._trust_board(request)
        measure = d["measure"].partition("@")[0]
        k_max = d["k_max"] or trust.curve_k_default(lb)
        try:
            values = trust.curves(lb, measure, k_max)
        except ValueError as exc:
            raise DRFValidationError({"non_field_errors": [str(exc)]}) from None
        systems = [{"name": n, "values": values[i].tolist()} for i, n in enumerate(lb.cube.system_names)]
        return Response(
            {
                "campaign": campaign.slug,
                "measure": measure,
                "k": list(range(1, k_max + 1)),
                "queries": lb.n_scored,
                "systems": systems,
            }
        )

    @extend_schema(
        parameters=[serializers.TrustQuerySerializer],
        responses=OpenApiTypes.OBJECT,
        description=(
            "Each query tag's leaderboard: every system's mean `measure` over the segment's scored queries, its "
            "95% bootstrap CI and the Holm-corrected randomization test against the segment's best system; "
            f"`few_queries` marks segments of fewer than {10} scored queries."
        ),
    )
    @action(detail=True, methods=["get"], url_path="leaderboard/segments", **ONE_OBJECT)
    def leaderboard_segments(self, request, slug=None):
        campaign, lb, d = self._trust_board(request)
        try:
            measure = trust.resolve_measure(d["measure"], lb.params.k)
            segments = trust.segments(lb, measure)
        except ValueError as exc:
            raise DRFValidationError({"non_field_errors": [str(exc)]}) from None
        return Response(
            {
                "campaign": campaign.slug,
                "measure": measure,
                "segments": [trust.segment_json(seg, lb.cube.system_names) for seg in segments],
            }
        )

    @extend_schema(
        parameters=[serializers.TrustQuerySerializer],
        responses=OpenApiTypes.OBJECT,
        description=(
            "Leave one run out: each system's means when the pool pairs only it contributed count as unjudged "
            "(same query set), the drop from its real means, and how many of its top-k documents (summed over "
            "the queries) and pool pairs only it contributed."
        ),
    )
    @action(detail=True, methods=["get"], url_path="leaderboard/pool-bias", **ONE_OBJECT)
    def leaderboard_pool_bias(self, request, slug=None):
        campaign, lb, d = self._trust_board(request)
        result = trust.pool_bias(lb)
        return Response({"campaign": campaign.slug, **trust.pool_bias_json(result, lb)})

    @extend_schema(
        responses={(200, "text/plain"): OpenApiTypes.STR},
        description=(
            "TREC qrels (`qid 0 docid label`) of the aggregated labels: exactly what the leaderboard scores. "
            "Streamed. Leads only."
        ),
    )
    @action(detail=True, methods=["get"], **ONE_OBJECT, renderer_classes=[PlainTextRenderer])
    def qrels(self, request, slug=None):
        campaign = self.get_object()
        access(request).require_lead(campaign, _("export its labels"))
        return _streamed(
            qrels_text(qrels_chunks(campaign=campaign)),
            content_type="text/plain; charset=utf-8",
            filename=_download_name(campaign.slug) + ".qrels",
        )

    # ---- members

    @extend_schema(
        methods=["GET"],
        responses=serializers.MemberSerializer(many=True),
        description="The campaign's members and their roles (leads only).",
    )
    @extend_schema(
        methods=["POST"],
        request=serializers.MemberAddSerializer,
        responses={200: serializers.MemberAddedSerializer, 201: serializers.MemberAddedSerializer},
        description=(
            'Add a user as annotator or lead, or change their role. With `"create": true` an unknown username '
            "becomes a new account (201) and the answer carries `set_password_url`, a one-time link (valid a "
            "few days) with which the person sets their own password; it is also e-mailed when the account has "
            "an address and the server has an e-mail backend."
        ),
    )
    @action(detail=True, methods=["get", "post"], **ONE_OBJECT)
    def members(self, request, slug=None):
        campaign = self.get_object()
        access(request).require_lead(campaign, _("manage its members"))
        if request.method == "POST":
            form = serializers.MemberAddSerializer(data=request.data)
            form.is_valid(raise_exception=True)
            added = member_add(campaign=campaign, by=request.user, base_url=_base_url(request), **form.validated_data)
            data = dict(
                serializers.MemberSerializer(added.membership).data,
                created=added.created,
                set_password_url=added.url(_base_url(request)),
                emailed=added.emailed,
            )
            return Response(data, status=status.HTTP_201_CREATED if added.created else status.HTTP_200_OK)
        memberships = campaign.memberships.select_related("user").order_by("user__username")
        return Response(serializers.MemberSerializer(memberships, many=True).data)

    @extend_schema(
        parameters=[OpenApiParameter("username", str, OpenApiParameter.PATH)],
        request=None,
        responses={204: None},
        description="Take a user off the campaign; their judgments stay.",
    )
    @action(
        detail=True,
        methods=["delete"],
        url_path=r"members/(?P<username>[^/]+)",
        **ONE_OBJECT,
    )
    def member_remove(self, request, slug=None, username=None):
        campaign = self.get_object()
        access(request).require_lead(campaign, _("manage its members"))
        membership = membership_get(campaign=campaign, username=username)
        if membership is None:
            raise NotFound(_not_member(username, campaign))
        membership_remove(campaign=campaign, user=membership.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        parameters=[OpenApiParameter("username", str, OpenApiParameter.PATH)],
        request=None,
        responses={200: serializers.MemberAddedSerializer},
        description=(
            'A fresh one-time set-password link for a member who has not set a password yet ("resend"). '
            "Refused (400) for accounts that already have a password, administrators, and accounts that also "
            "belong to campaigns you do not lead."
        ),
    )
    @action(
        detail=True,
        methods=["post"],
        url_path=r"members/(?P<username>[^/]+)/link",
        **ONE_OBJECT,
    )
    def member_link(self, request, slug=None, username=None):
        campaign = self.get_object()
        access(request).require_lead(campaign, _("manage its members"))
        membership = membership_get(campaign=campaign, username=username)
        if membership is None:
            raise NotFound(_not_member(username, campaign))
        added = set_password_link_issue(
            campaign=campaign, by=request.user, user=membership.user, base_url=_base_url(request)
        )
        return Response(
            dict(
                serializers.MemberSerializer(added.membership).data,
                created=False,
                set_password_url=added.url(_base_url(request)),
                emailed=added.emailed,
            )
        )

    # ---- uploads

    def _upload(self, request, serializer_class, importer, *, kind: str, **options):
        """Run one import on the uploaded file. Every importer is one transaction: on error, nothing of
        the file is written, and the answer names the file, line and field."""
        campaign = self.get_object()
        access(request).require_lead(campaign, _("upload files"))
        form = serializer_class(data=request.data)
        if not form.is_valid():
            name, messages = next(iter(form.errors.items()))
            upload = request.data.get("file")
            return Response(
                {
                    "detail": " ".join(map(str, messages)),
                    "file": getattr(upload, "name", "") or "",
                    "line": None,
                    "field": name,
                },
                status=status.HTTP_400_BAD_REQUEST,
            )
        upload = form.validated_data.pop("file")
        filename = upload.name or "upload"
        # large files are imported by the task worker: 202 + Location (online figures are always small)
        if kind in JOB_KINDS and job_needed(size=upload.size):
            return upload_as_job(request, campaign=campaign, kind=kind, upload=upload, fields=form.validated_data)
        try:
            summary = importer(
                campaign=campaign, data=upload.read(), filename=filename, **options, **form.validated_data
            )
        except ImportRefused as exc:
            return Response(exc.as_dict(), status=exc.status)
        return Response(serializers.ImportSummarySerializer(summary.as_dict()).data)

    @extend_schema(
        request={"multipart/form-data": serializers.TopicsUploadSerializer},
        responses=UPLOAD_RESPONSES,
        description="Import topics (leads only); re-importing the same file changes nothing.",
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="upload/topics",
        parser_classes=[MultiPartParser],
        **ONE_OBJECT,
    )
    def upload_topics(self, request, slug=None):
        return self._upload(request, serializers.TopicsUploadSerializer, queries_import, kind="topics")

    @extend_schema(
        request={"multipart/form-data": serializers.DocumentsUploadSerializer},
        responses=UPLOAD_RESPONSES,
        description="Import documents (leads only); re-importing the same file changes nothing.",
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="upload/documents",
        parser_classes=[MultiPartParser],
        **ONE_OBJECT,
    )
    def upload_documents(self, request, slug=None):
        return self._upload(request, serializers.DocumentsUploadSerializer, documents_import, kind="docs")

    @extend_schema(
        request={"multipart/form-data": serializers.RunUploadSerializer},
        responses=UPLOAD_RESPONSES,
        description="Import a run as a system and pool its top documents (leads only). Unknown "
        "queries and documents become stubs.",
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="upload/run",
        parser_classes=[MultiPartParser],
        **ONE_OBJECT,
    )
    def upload_run(self, request, slug=None):
        return self._upload(request, serializers.RunUploadSerializer, self._run_import, kind="run")

    @staticmethod
    def _run_import(*, system=None, **kwargs):
        return run_import(system_name=system or None, **kwargs)

    @extend_schema(
        request={"multipart/form-data": serializers.QrelsUploadSerializer},
        responses=UPLOAD_RESPONSES,
        description=(
            "Import TREC qrels as the confident judgments of `annotator` (leads only): a member, or a source "
            "such as trec-2019 (a non-login source account is created). Pairs that member already judged in "
            "the app keep their judgment (counted in `kept`); revisions name you, on behalf of the source."
        ),
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="upload/qrels",
        parser_classes=[MultiPartParser],
        **ONE_OBJECT,
    )
    def upload_qrels(self, request, slug=None):
        form = serializers.QrelsUploadSerializer(data=request.data)
        if form.is_valid() and form.validated_data.get("model"):
            # The model judge exists (a member of kind "model") before the import, or its background job, names
            # it: otherwise the import would record the labels under a new label source, counted as human.
            campaign = self.get_object()
            access(request).require_lead(campaign, _("upload files"))
            try:
                model_judge_upload_annotator(
                    name=form.validated_data.get("annotator", ""),
                    campaign=campaign,
                    filename=getattr(request.data.get("file"), "name", "") or "upload",
                    description=form.validated_data.get("description", ""),
                )
            except ImportRefused as exc:
                return Response(exc.as_dict(), status=exc.status)
        return self._upload(
            request, serializers.QrelsUploadSerializer, self._qrels_import, kind="qrels", user=request.user
        )

    @staticmethod
    def _qrels_import(*, user: User, annotator=None, model=False, description="", **kwargs):
        # The import checks the name (a member, a source account, or a new source); see qrels_import. A model
        # judge was made a member by upload_qrels before this runs.
        return qrels_import(annotator=annotator or user.get_username(), imported_by=user, **kwargs)

    # ---- online figures and model judges (issue 15)

    @extend_schema(
        request={"multipart/form-data": serializers.OnlineUploadSerializer},
        responses=UPLOAD_RESPONSES,
        description="Import online figures, CSV `system,metric,value[,ci_low,ci_high][,qid]` (leads only); "
        "a figure already stored for the same system, metric and qid is replaced.",
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="upload/online",
        parser_classes=[MultiPartParser],
        **ONE_OBJECT,
    )
    def upload_online(self, request, slug=None):
        return self._upload(request, serializers.OnlineUploadSerializer, online_import, kind="online")

    @extend_schema(
        parameters=[serializers.LeaderboardQuerySerializer],
        responses=serializers.OnlineSerializer,
        description=(
            "The imported online figures, and for each offline measure (at k, threshold, gain, labels) and "
            "online metric: Kendall's tau and Pearson's r across systems, how many systems, and the pairs of "
            "systems the two order differently; the same per query where per-query figures exist. Leads, or "
            "annotators when the campaign shows them the leaderboard (they get the page's per-query rows: each "
            "metric's best measure only)."
        ),
    )
    @action(detail=True, methods=["get"], **ONE_OBJECT)
    def online(self, request, slug=None):
        campaign = self.get_object()
        if not campaign.leaderboard_visible_to_annotators:
            access(request).require_lead(campaign, _("see its leaderboard"))
        params = serializers.LeaderboardQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        v = params.validated_data
        try:
            data = offline_vs_online(
                campaign=campaign,
                params=Params.from_settings(v),
            )
        except ValueError as exc:
            raise DRFValidationError({"non_field_errors": [str(exc)]}) from None
        data.pop("_points")
        if not access(request).is_lead(campaign.id):
            # the page's per-query table (each metric's best measure), not every measure's
            data["per_query"] = per_query_for_page(data)
        data["figures"] = online_figures(campaign=campaign)
        return Response(data)

    @extend_schema(
        parameters=[serializers.LeaderboardQuerySerializer],
        responses=serializers.CalibrationSerializer,
        description=(
            "A model judge against the human labels on the pairs both judged: Cohen's kappa (plain and "
            "quadratic) with 95% bootstrap intervals, the confusion matrix (rows humans, columns the model), "
            "leniency, agreement per query, the system ranking under the model's labels against the humans' "
            "and the biggest disagreements. Leads only."
        ),
    )
    @action(
        detail=True,
        methods=["get"],
        url_path=r"judges/(?P<name>[\w.@+-]+)/calibration",
        **ONE_OBJECT,
    )
    def calibration(self, request, slug=None, name=None):
        campaign = self.get_object()
        access(request).require_lead(campaign, _("see its model judges' calibration"))
        params = serializers.LeaderboardQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        v = params.validated_data
        try:
            data = judge_calibration(
                campaign=campaign,
                name=name,
                params=Params(k=v["k"], gain=v["gain"], threshold=v["threshold"], judged_only=v["judged_only"]),
            )
        except UnknownJudge as exc:
            raise NotFound(str(exc)) from None
        except ValueError as exc:
            raise DRFValidationError({"non_field_errors": [str(exc)]}) from None
        return Response(data)

    @extend_schema(
        request=JudgeRunSerializer,
        responses={
            202: JobStartedSerializer,
            409: OpenApiResponse(description="No model endpoint is configured on the server: nothing was started."),
        },
        description=(
            "Start a model judge's run as a background job (leads only): the server's configured endpoint "
            "(RELJUDGE_MODEL_ENDPOINT, key RELJUDGE_MODEL_API_KEY) grades the chosen pairs; poll the job for "
            "pairs done of total and the outcome (graded, unreadable answers stored as unsure, failed)."
        ),
    )
    @action(detail=True, methods=["post"], url_path="judges/run", **ONE_OBJECT)
    def judges_run(self, request, slug=None):
        campaign = self.get_object()
        access(request).require_lead(campaign, _("run a model judge on it"))
        body = JudgeRunSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if not model_endpoint_configured():
            return Response(
                {"detail": "no model endpoint is configured on this server (RELJUDGE_MODEL_ENDPOINT)"},
                status=status.HTTP_409_CONFLICT,
            )
        v = body.validated_data
        try:
            job = model_judge_job_start(
                campaign=campaign,
                user=request.user,
                model=v["model"],
                name=v.get("name"),
                pairs=v["pairs"],
                seed=v["seed"],
            )
        except DjangoValidationError as exc:
            raise DRFValidationError({"name": exc.messages}) from None
        except ValueError as exc:
            raise DRFValidationError({"pairs": [str(exc)]}) from None
        return job_accepted(request, job)

    @extend_schema(
        parameters=[serializers.SignificanceQuerySerializer],
        responses={200: OpenApiTypes.OBJECT, 202: JobStartedSerializer},
        description=(
            "Every pair of systems compared on one measure with the chosen test: `diff[i][j]` (mean of row "
            "minus column) and the adjusted `p[i][j]` (null on the diagonal), systems in `systems` order. "
            "Above RELJUDGE_STATS_JOB_CELLS (systems x queries x permutations) the test runs as a background "
            "job: 202 with its URL in Location; ask again once it is done (its result holds the matrix too). "
            "A matrix is only ever returned for the current labels (`state`)."
        ),
    )
    @action(detail=True, methods=["get"], url_path="leaderboard/significance", **ONE_OBJECT)
    def leaderboard_significance(self, request, slug=None):
        campaign = self.get_object()
        if not campaign.leaderboard_visible_to_annotators:
            access(request).require_lead(campaign, _("see its leaderboard"))
        params = serializers.SignificanceQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        d = params.validated_data
        # Any leaderboard measure but the coverage Judged@k, read as the leaderboard page reads it.
        tested = [n for n in measure_names(d["k"]) if Measure.parse(n).base != "Judged"]
        try:
            measure = trust.resolve_measure(d["measure"], d["k"])
        except ValueError as exc:
            raise DRFValidationError({"measure": [str(exc)]}) from None
        if measure not in tested:
            raise DRFValidationError(
                {
                    "measure": [
                        _("unknown measure %(measure)r; expected one of %(choices)s")
                        % {"measure": d["measure"][:40], "choices": ", ".join(Measure.parse(n).base for n in tested)}
                    ]
                }
            )
        try:
            lb = leaderboard(
                campaign,
                Params.from_settings(d),
            )
        except ValueError as exc:
            raise DRFValidationError({"non_field_errors": [str(exc)]}) from None
        pairwise, job = significance_get(lb=lb, measure=measure, test=d["test"], user=request.user)
        if pairwise is None:
            return job_accepted(request, job)
        return Response(
            {
                "campaign": campaign.slug,
                "measure": pairwise.measure,
                "test": pairwise.test,
                "test_label": TESTS[pairwise.test],
                "state": pairwise.state,
                "queries": pairwise.n_queries,
                "alpha": pairwise.alpha,
                "systems": list(lb.cube.system_names),
                "diff": [[round(float(x), 10) for x in row] for row in pairwise.diff],
                "p": [[None if x != x else float(x) for x in row] for row in pairwise.p],
                "computed_at": pairwise.computed_at,
            }
        )


# --------------------------------------------------------------------------- campaign contents


class CampaignContentViewSet(ApiMixin, viewsets.ReadOnlyModelViewSet):
    """Read-only objects of the caller's campaigns; ``?campaign=`` names one (404 for non-members)."""

    lookup_value_regex = ID_PATH

    def list(self, request, *args, **kwargs):
        self.campaign_param()
        return super().list(request, *args, **kwargs)


@extend_schema_view(
    list=extend_schema(description="Queries (topics) of your campaigns."),
    retrieve=extend_schema(description="One query."),
)
class QueryViewSet(CampaignContentViewSet):
    serializer_class = serializers.QuerySerializer
    filterset_class = QueryFilter
    ordering_fields = ["id", "qid"]
    ordering = ["qid", "id"]

    def get_queryset(self):
        return Query.objects.filter(campaign__in=access(self.request).campaigns()).select_related("campaign")


@extend_schema_view(
    list=extend_schema(description="Documents of your campaigns."),
    retrieve=extend_schema(description="One document. Its text may contain HTML: escape it when displaying."),
)
class DocumentViewSet(CampaignContentViewSet):
    serializer_class = serializers.DocumentSerializer
    filterset_class = DocumentFilter
    ordering_fields = ["id", "docid"]
    ordering = ["docid", "id"]

    def get_queryset(self):
        return Document.objects.filter(campaign__in=access(self.request).campaigns()).select_related("campaign")


@extend_schema_view(
    list=extend_schema(description="Systems of the campaigns you lead (annotators never see systems)."),
    retrieve=extend_schema(description="One system (leads only)."),
)
class SystemViewSet(CampaignContentViewSet):
    serializer_class = serializers.SystemSerializer
    filterset_class = SystemFilter
    permission_classes = [IsAuthenticated, IsCampaignLead]  # differs: annotators never see systems
    ordering_fields = ["id", "name", "imported_at"]
    ordering = ["name", "id"]

    def get_queryset(self):
        acc = access(self.request)
        systems = System.objects.filter(campaign__in=acc.campaigns()).select_related("campaign")
        if self.action == "list" and acc.led_ids is not None:
            systems = systems.filter(campaign_id__in=acc.led_ids)
        return systems

    def list(self, request, *args, **kwargs):
        self.campaign_param(lead=True, what=_("see its systems"))
        return super().list(request, *args, **kwargs)

    @extend_schema(
        responses={(200, "text/plain"): OpenApiTypes.STR},
        description="The system's run as TREC run text (`qid Q0 docid rank score tag`), streamed.",
    )
    @action(detail=True, methods=["get"], **ONE_OBJECT, renderer_classes=[PlainTextRenderer])
    def run(self, request, pk=None):
        system = self.get_object()
        # The tag column names the system as imported ("형태소-bm25" stays itself, so the run reads back
        # byte for byte); only whitespace, which would split the column, becomes "_". The file name is ASCII.
        tag = "_".join(system.name.split()) or "run"
        lines = formats.format_run(tag, system_rankings(system=system))
        return _streamed(
            batched_text(lines),
            content_type="text/plain; charset=utf-8",
            filename=_download_name(system.campaign.slug, system.name) + ".run",
        )


@extend_schema_view(
    list=extend_schema(description="Pool pairs of your campaigns. Annotators see pooled pairs without labels."),
    retrieve=extend_schema(description="One pair."),
)
class PairViewSet(CampaignContentViewSet):
    """Pairs are named by their public id: row ids (and creation times) follow run-import order and would
    tell annotators which system found a pair. The list is in public-id order, a random one."""

    serializer_class = serializers.PairSerializer
    filterset_class = PairFilter
    ordering_fields = ["public_id"]
    ordering = ["public_id"]
    lookup_field = "public_id"
    lookup_url_kwarg = "pk"

    def get_queryset(self):
        acc = access(self.request)
        pairs = Pair.objects.filter(campaign__in=acc.campaigns()).select_related("campaign", "query", "document")
        if acc.led_ids is not None:
            # Outside the campaigns they lead, members see only what they judge: the pool.
            pairs = pairs.filter(Q(campaign_id__in=acc.led_ids) | Q(pooled=True))
        return pairs

    @extend_schema(
        request=serializers.AdjudicationSerializer,
        responses=serializers.PairSerializer,
        description="Decide the pair's label as a lead; it wins over the judgments.",
    )
    @action(detail=True, methods=["post"], **ONE_OBJECT)
    def adjudicate(self, request, pk=None):
        pair = self.get_object()
        access(request).require_lead(pair.campaign, _("adjudicate its pairs"))
        decision = serializers.AdjudicationSerializer(data=request.data)
        decision.is_valid(raise_exception=True)
        adjudication_set(pair=pair, lead=request.user, **decision.validated_data)
        return Response(self.get_serializer(self.get_queryset().get(pk=pair.pk)).data)


# --------------------------------------------------------------------------- judgments


@extend_schema_view(
    list=extend_schema(
        description=(
            "Individual judgments: everything in the campaigns you lead, your own elsewhere. Cursor-paginated "
            "JSON; `format=csv` or `format=jsonl` streams every matching judgment as one file instead. Unsure "
            "judgments are left out unless `unsure=include` (or `only`)."
        ),
        parameters=[
            OpenApiParameter(
                "format",
                str,
                enum=["json", "csv", "jsonl"],
                description="json (paginated, default), csv or jsonl (the whole result, streamed).",
            ),
            BOM_PARAMETER,
        ],
        responses={
            (200, "application/json"): serializers.JudgmentSerializer(many=True),
            (200, "text/csv"): OpenApiTypes.STR,
            (200, "application/x-ndjson"): OpenApiTypes.STR,
        },
    ),
    retrieve=extend_schema(description="One judgment."),
    create=extend_schema(
        request=serializers.JudgmentRecordSerializer,
        responses={200: serializers.JudgmentSerializer, 201: serializers.JudgmentSerializer},
        description=(
            "Record (201) or change (200) your own judgment of a pair, with the same validation as the "
            "judging page. Recording the same values again changes nothing."
        ),
    ),
)
class JudgmentViewSet(
    ApiMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    serializer_class = serializers.JudgmentSerializer
    filterset_class = JudgmentFilter
    # Differs: judgments run into the millions; cursor pages seek by key where page numbers would OFFSET.
    pagination_class = JudgmentCursorPagination
    ordering_fields = ["id", "updated_at", "created_at"]
    ordering = ["id"]
    lookup_value_regex = ID_PATH

    def get_queryset(self):
        return judgments_visible(user=self.request.user).select_related(
            "pair__campaign", "pair__query", "pair__document", "annotator", "grade", "tentative_grade"
        )

    def get_renderers(self):
        renderers = super().get_renderers()
        if self.action == "list":
            renderers += [CSVRenderer(), JSONLinesRenderer()]
        return renderers

    def filter_queryset(self, queryset):
        # Filters and the unsure default are for lists; a judgment fetched by id is found whatever it is.
        if self.action != "list":
            return queryset
        return super().filter_queryset(queryset)

    def list(self, request, *args, **kwargs):
        campaign = self.campaign_param()
        renderer = request.accepted_renderer
        if isinstance(renderer, (CSVRenderer, JSONLinesRenderer)):
            judgments = self.filter_queryset(self.get_queryset())
            stem = _download_name(campaign.slug if campaign else "reljudge", "judgments")
            if isinstance(renderer, CSVRenderer):
                bom = _bom_param(request)
                return _streamed(
                    _with_bom(judgments_csv(judgment_export_chunks(judgments=judgments, missing_grade="")), bom),
                    content_type="text/csv; charset=utf-8",
                    filename=stem + ".csv",
                )
            return _streamed(
                judgments_jsonl(judgment_export_chunks(judgments=judgments, missing_grade="null")),
                content_type="application/x-ndjson; charset=utf-8",
                filename=stem + ".jsonl",
            )
        # Pages are read as plain rows, the very rows the streamed formats write (the same fields and values
        # as JudgmentSerializer): building six related model instances per judgment cost 10x more.
        rows = self.filter_queryset(self.get_queryset()).values(*(path for _, path in JUDGMENT_EXPORT_COLUMNS))
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(
            [{name: row[path] for name, path in JUDGMENT_EXPORT_COLUMNS} for row in page]
        )

    def create(self, request, *args, **kwargs):
        form = serializers.JudgmentRecordSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        values = dict(form.validated_data)
        member, pair = self._pair(values)
        # 201 only for the call that created the judgment: the service decides that under the pair lock,
        # so of many identical posts racing for one pair exactly one is answered 201 and the rest 200.
        recorded = judgment_record(
            pair=pair,
            annotator=request.user,
            grade=values.get("grade"),
            unsure=values["unsure"],
            tentative_grade=values.get("tentative_grade"),
            note=values["note"],
            seconds_spent=values["seconds_spent"],
            member=member,
        )
        # The judgment as stored, written from memory: the pair, campaign, query, document and grades are
        # the ones just read, the caller is the annotator (no second read of what was just written).
        body = judgment_export_row(recorded.judgment)
        return Response(body, status=status.HTTP_201_CREATED if recorded.created else status.HTTP_200_OK)

    def _pair(self, values: dict) -> tuple[Member, Pair]:
        """The pair a judgment is for, among those the caller may judge (404 otherwise), with the caller's
        Member of its campaign (role and scale) and its campaign, query and document loaded."""
        acc = access(self.request)
        if "pair" in values:
            found = pair_with_scale(public_id=values["pair"])
            pair, grades = found if found is not None else (None, None)
            role = acc.role(pair.campaign_id) if pair is not None else None
            if role is None or not (pair.pooled or role == LEAD):
                raise NotFound(_("No pair %(pair)s in your campaigns.") % {"pair": values["pair"]})
            return Member(pair.campaign, role, grades), pair
        campaign = acc.campaign(values["campaign"])
        pair = (
            Pair.objects.filter(campaign=campaign, query__qid=values["qid"], document__docid=values["docid"])
            .select_related("query", "document")
            .first()
        )
        if pair is not None and (pair.pooled or acc.is_lead(campaign.id)):
            pair.campaign = campaign
            return Member(campaign, acc.role(campaign.id)), pair
        names = {"campaign": repr(campaign.slug), "qid": repr(values["qid"]), "docid": repr(values["docid"])}
        if not campaign.queries.filter(qid=values["qid"]).exists():
            raise DRFValidationError({"qid": [_("Campaign %(campaign)s has no query %(qid)s.") % names]})
        if not campaign.documents.filter(docid=values["docid"]).exists():
            raise DRFValidationError({"docid": [_("Campaign %(campaign)s has no document %(docid)s.") % names]})
        raise DRFValidationError({"docid": [_("%(docid)s is not in the pool of query %(qid)s.") % names]})

    @extend_schema(
        responses=serializers.JudgmentRevisionSerializer(many=True),
        description="Every change to this judgment, oldest first: who, when, old and new values.",
    )
    @action(detail=True, methods=["get"], **ONE_OBJECT)
    def history(self, request, pk=None):
        judgment = self.get_object()
        revisions = judgment.revisions.select_related("changed_by", "on_behalf_of").order_by("changed_at", "id")
        return Response(serializers.JudgmentRevisionSerializer(revisions, many=True).data)
