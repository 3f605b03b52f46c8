"""Judgments at /api/judgments/: list and export, record one's own, a judgment's history."""

from __future__ import annotations

from typing import Any, cast

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from judging.access import Member, pair_member
from judging.api import serializers
from judging.api.filters import JudgmentFilter
from judging.api.pagination import JudgmentCursorPagination
from judging.api.permissions import access
from judging.api.renderers import CSVRenderer, JSONLinesRenderer, judgments_csv, judgments_jsonl
from judging.api.views.base import (
    BOM_PARAMETER,
    ID_PATH,
    ONE_OBJECT,
    ApiMixin,
    bom_param,
    download_name,
    streamed,
    with_bom,
)
from judging.models import Judgment, Pair
from judging.selectors import (
    JUDGMENT_EXPORT_COLUMNS,
    judgment_export_chunks,
    judgment_export_row,
    judgments_visible,
)
from judging.services import judgment_record


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

    def get_queryset(self) -> QuerySet[Judgment]:
        return judgments_visible(user=self.request.user).select_related(
            "pair__campaign", "pair__query", "pair__document", "annotator", "grade", "tentative_grade"
        )

    def get_renderers(self) -> list[BaseRenderer]:
        renderers = super().get_renderers()
        if self.action == "list":
            renderers += [CSVRenderer(), JSONLinesRenderer()]
        return renderers

    def filter_queryset(self, queryset: QuerySet[Any, Any]) -> QuerySet[Any, Any]:
        # Filters and the unsure default are for lists; a judgment fetched by id is found whatever it is.
        if self.action != "list":
            return queryset
        return super().filter_queryset(queryset)

    # The CSV and JSON Lines exports stream (StreamingHttpResponse); DRF's stubs say a list is always a Response.
    def list(  # type: ignore[override]
        self, request: Request, *args: object, **kwargs: Any
    ) -> Response | StreamingHttpResponse:
        campaign = self.campaign_param()
        renderer = request.accepted_renderer
        if isinstance(renderer, (CSVRenderer, JSONLinesRenderer)):
            judgments = self.filter_queryset(self.get_queryset())
            stem = download_name(campaign.slug if campaign else "reljudge", "judgments")
            if isinstance(renderer, CSVRenderer):
                bom = bom_param(request)
                return streamed(
                    with_bom(judgments_csv(judgment_export_chunks(judgments=judgments, missing_grade="")), bom),
                    content_type="text/csv; charset=utf-8",
                    filename=stem + ".csv",
                )
            return streamed(
                judgments_jsonl(judgment_export_chunks(judgments=judgments, missing_grade="null")),
                content_type="application/x-ndjson; charset=utf-8",
                filename=stem + ".jsonl",
            )
        # Pages are read as plain rows, the very rows the streamed formats write (the same fields and values
        # as JudgmentSerializer): building six related model instances per judgment cost 10x more.
        rows = self.filter_queryset(self.get_queryset()).values(*(path for _, path in JUDGMENT_EXPORT_COLUMNS))
        page = self.paginate_queryset(rows) or []
        return self.get_paginated_response(
            [{name: row[path] for name, path in JUDGMENT_EXPORT_COLUMNS} for row in page]
        )

    def create(self, request: Request, *args: object, **kwargs: Any) -> Response:
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
        if "pair" in values:
            # The pair, its campaign and the caller's role there in one compiled query (judging.access.pair_member).
            found = pair_member(user=self.request.user, public_id=values["pair"])
            if found is None:
                raise NotFound(_("No pair %(pair)s in your campaigns.") % {"pair": values["pair"]})
            return found
        acc = access(self.request)
        campaign = acc.campaign(values["campaign"])
        pair = (
            Pair.objects.filter(campaign=campaign, query__qid=values["qid"], document__docid=values["docid"])
            .select_related("query", "document")
            .first()
        )
        if pair is not None and acc.may_see_pair(pair):
            pair.campaign = campaign
            return Member(campaign, cast(str, acc.role(campaign.id))), pair  # may see: a member
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
    def history(self, request: Request, pk: str | None = None) -> Response:
        judgment = self.get_object()
        revisions = judgment.revisions.select_related("changed_by", "on_behalf_of").order_by("changed_at", "id")
        return Response(serializers.JudgmentRevisionSerializer(revisions, many=True).data)
