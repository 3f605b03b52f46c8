"""Campaigns at /api/campaigns/: list, create, settings, progress, qrels; the mixins beside it add the rest."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import CharField, OuterRef, QuerySet, Subquery, Value
from django.http import StreamingHttpResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from judging.access import signed_in
from judging.api import report_serializers, serializers
from judging.api.jobs import JobStartedSerializer, job_accepted
from judging.api.permissions import CanCreateCampaign, access
from judging.api.renderers import PlainTextRenderer, qrels_text
from judging.api.views.audit import AuditActions
from judging.api.views.base import ONE_OBJECT, SLUG_PATH, ApiMixin, DRFConflict, download_name, streamed
from judging.api.views.engines import EngineActions
from judging.api.views.judges import ModelJudgeActions
from judging.api.views.leaderboard import LeaderboardActions
from judging.api.views.members import MemberActions
from judging.api.views.next import NextPairActions
from judging.api.views.team import TeamActions
from judging.api.views.uploads import UploadActions
from judging.jobs import JobError, policy_job_pending, policy_job_start
from judging.models import Campaign, Membership
from judging.selectors import annotators_progress, campaign_progress, qrels_chunks
from judging.selectors.pace import campaign_pace, pace_fields
from judging.services import campaign_create, campaign_update, policy_switch_needs_job, scale_from_values


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
    LeaderboardActions,
    MemberActions,
    UploadActions,
    ModelJudgeActions,
    EngineActions,
    AuditActions,
    TeamActions,
    NextPairActions,
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

    def get_queryset(self) -> QuerySet[Campaign]:
        acc = access(self.request)
        if not self.request.user.is_authenticated:  # e.g. while the schema is generated
            return Campaign.objects.none()
        role: Value | Subquery
        if acc.superuser:
            role = Value(Membership.Role.LEAD, output_field=CharField())
        else:
            role = Subquery(
                Membership.objects.filter(campaign=OuterRef("pk"), user=self.request.user).values("role")[:1]
            )
        return acc.campaigns().annotate(role=role).prefetch_related("grades")

    def _reloaded(self, campaign: Campaign) -> Campaign:
        return self.get_queryset().get(pk=campaign.pk)

    @staticmethod
    def _scale(data: dict, campaign: Campaign | None = None) -> list[dict] | None:
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

    def create(self, request: Request, *args: object, **kwargs: Any) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        scale = self._scale(data)
        campaign = campaign_create(lead=signed_in(request.user), scale=scale, **data)
        body = self.get_serializer(self._reloaded(campaign)).data
        location = reverse("api:campaign-detail", args=[campaign.slug])
        return Response(body, status=status.HTTP_201_CREATED, headers={"Location": location})

    def update(self, request: Request, *args: object, **kwargs: Any) -> Response:
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
                job = policy_job_start(campaign=campaign, user=signed_in(request.user), policy=switch)
            except JobError as exc:
                raise DRFConflict(str(exc)) from None
            return job_accepted(request, job)
        return Response(self.get_serializer(self._reloaded(campaign)).data)

    @extend_schema(
        responses=report_serializers.ProgressSerializer,
        description=(
            "Pool totals, the review queue and judgments per annotator (an annotator sees only their own row), "
            "with each annotator's pace and work left: `judged_today`, `judged`, `remaining` (assigned + shared "
            "pairs still open to them), `median_seconds` over their last 50 judgments, and `eta`; leads also get "
            "the campaign's `eta`."
        ),
    )
    @action(detail=True, methods=["get"], **ONE_OBJECT)
    def progress(self, request: Request, slug: str | None = None) -> Response:
        campaign = self.get_object()
        data = dict(campaign_progress(campaign=campaign), campaign=campaign.slug)
        rows = annotators_progress(campaign=campaign)
        pace = campaign_pace(campaign=campaign)
        rows = pace_fields(rows, pace)
        if not access(request).is_lead(campaign.id):
            rows = [row for row in rows if row["user"].pk == request.user.pk]
        else:
            data.update(eta=pace.eta, eta_seconds=pace.eta_seconds, median_seconds=pace.team_median_seconds)
        data["annotators"] = rows
        return Response(report_serializers.ProgressSerializer(data).data)

    @extend_schema(
        responses={(200, "text/plain"): OpenApiTypes.STR},
        description=(
            "TREC qrels (`qid 0 docid label`) of the aggregated labels: exactly what the leaderboard scores. "
            "Streamed. Leads only."
        ),
    )
    @action(detail=True, methods=["get"], **ONE_OBJECT, renderer_classes=[PlainTextRenderer])
    def qrels(self, request: Request, slug: str | None = None) -> StreamingHttpResponse:
        campaign = self.get_object()
        access(request).require_lead(campaign, _("export its labels"))
        return streamed(
            qrels_text(qrels_chunks(campaign=campaign)),
            content_type="text/plain; charset=utf-8",
            filename=download_name(campaign.slug) + ".qrels",
        )
