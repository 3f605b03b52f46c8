"""The campaigns' contents, read-only: queries, documents, systems (leads only) and pool pairs."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from judging import formats
from judging.api import serializers
from judging.api.filters import DocumentFilter, PairFilter, QueryFilter, SystemFilter
from judging.api.permissions import IsCampaignLead, access
from judging.api.renderers import PlainTextRenderer, batched_text
from judging.api.views.base import ID_PATH, ONE_OBJECT, ApiMixin, download_name, streamed
from judging.models import Document, Pair, Query, System
from judging.selectors import system_rankings
from judging.services import adjudication_set


class CampaignContentViewSet(ApiMixin, viewsets.ReadOnlyModelViewSet):
    """Read-only objects of the caller's campaigns; ``?campaign=`` names one (404 for non-members)."""

    lookup_value_regex = ID_PATH

    def list(self, request: Request, *args: object, **kwargs: Any) -> Response:
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

    def get_queryset(self) -> QuerySet[Query]:
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

    def get_queryset(self) -> QuerySet[Document]:
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

    def get_queryset(self) -> QuerySet[System]:
        acc = access(self.request)
        systems = System.objects.filter(campaign__in=acc.campaigns()).select_related("campaign")
        if self.action == "list" and acc.led_ids is not None:
            systems = systems.filter(campaign_id__in=acc.led_ids)
        return systems

    def list(self, request: Request, *args: object, **kwargs: Any) -> Response:
        self.campaign_param(lead=True, what=_("see its systems"))
        return super().list(request, *args, **kwargs)

    @extend_schema(
        responses={(200, "text/plain"): OpenApiTypes.STR},
        description="The system's run as TREC run text (`qid Q0 docid rank score tag`), streamed.",
    )
    @action(detail=True, methods=["get"], **ONE_OBJECT, renderer_classes=[PlainTextRenderer])
    def run(self, request: Request, pk: str | None = None) -> StreamingHttpResponse:
        system = self.get_object()
        # The tag column names the system as imported ("형태소-bm25" stays itself, so the run reads back
        # byte for byte); only whitespace, which would split the column, becomes "_". The file name is ASCII.
        tag = "_".join(system.name.split()) or "run"
        lines = formats.format_run(tag, system_rankings(system=system))
        return streamed(
            batched_text(lines),
            content_type="text/plain; charset=utf-8",
            filename=download_name(system.campaign.slug, system.name) + ".run",
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

    def get_queryset(self) -> QuerySet[Pair]:
        return access(self.request).pairs().select_related("campaign", "query", "document")

    @extend_schema(
        request=serializers.AdjudicationSerializer,
        responses=serializers.PairSerializer,
        description="Decide the pair's label as a lead; it wins over the judgments.",
    )
    @action(detail=True, methods=["post"], **ONE_OBJECT)
    def adjudicate(self, request: Request, pk: str | None = None) -> Response:
        pair = self.get_object()
        access(request).require_lead(pair.campaign, _("adjudicate its pairs"))
        decision = serializers.AdjudicationSerializer(data=request.data)
        decision.is_valid(raise_exception=True)
        adjudication_set(pair=pair, lead=request.user, **decision.validated_data)
        return Response(self.get_serializer(self.get_queryset().get(pk=pair.pk)).data)
