"""A lead's team in the API: /api/campaigns/SLUG/assignments/, /jobs/ and /plan/ (CampaignViewSet's actions)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import QueryDict
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from judging.access import may_manage_assignments, signed_in
from judging.api.pagination import PagePagination
from judging.api.permissions import access
from judging.api.views.base import ONE_OBJECT, ViewBase
from judging.scoring.plan import DEFAULTS, campaign_plan, plan_params
from judging.selectors.assignments import assignments_list
from judging.selectors.jobs_list import campaign_jobs, job_row
from judging.selectors.pace import pace_medians
from judging.services.assignments import assignments_add, assignments_remove, queries_of_batch


def _qid() -> serializers.CharField:
    return serializers.CharField(max_length=200)


class AssignmentRequestSerializer(serializers.Serializer):
    annotator = serializers.CharField(max_length=150, help_text="The annotator's username.")
    qids = serializers.ListField(child=_qid(), required=False, max_length=100_000, help_text="Queries by qid.")
    tag = serializers.CharField(max_length=100, required=False, help_text="Every query carrying this tag.")
    # "from" is a Python keyword: the fields are named in the schema by their JSON keys
    qid_from = serializers.CharField(max_length=200, required=False, help_text="A range of qids: the first.")
    qid_to = serializers.CharField(max_length=200, required=False, help_text="A range of qids: the last.")

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, QueryDict):  # a form body: keep its lists (qids) as lists
            data = data.copy()
            for k in ("from", "to"):
                if k in data:
                    data.setlist(f"qid_{k}", data.getlist(k))
        elif hasattr(data, "get"):
            data = {**data, **{f"qid_{k}": data[k] for k in ("from", "to") if k in data}}
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as exc:
            # the errors name the fields as the request did: from and to
            detail = exc.detail
            if isinstance(detail, dict):
                detail = {_REQUEST_NAMES.get(k, k): v for k, v in detail.items()}
            raise serializers.ValidationError(detail) from None


_REQUEST_NAMES = {"qid_from": "from", "qid_to": "to"}
ID_MAX = 2**63 - 1  # the largest id a 64-bit key holds: SQLite raised OverflowError past it (a 500)


class AssignmentRemoveSerializer(serializers.Serializer):
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=ID_MAX), required=False, max_length=100_000
    )
    annotator = serializers.CharField(max_length=150, required=False)
    qids = serializers.ListField(child=_qid(), required=False, max_length=100_000)


class AssignmentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    annotator = serializers.CharField()
    qid = serializers.CharField()
    assigned_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    pairs = serializers.IntegerField(help_text="Pooled pairs of the query.")
    judged = serializers.IntegerField(help_text="Of those, judged by the assignee.")


class AssignmentsAddedSerializer(serializers.Serializer):
    annotator = serializers.CharField()
    added = serializers.IntegerField(help_text="Queries newly given.")
    already = serializers.IntegerField(help_text="Queries they had been given before.")


class JobRowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    status = serializers.CharField()
    filename = serializers.CharField()
    started_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    seconds = serializers.FloatField(allow_null=True, help_text="How long it ran (or has been running).")
    error = serializers.CharField(allow_null=True)


def _batch(data: dict) -> dict:
    return {k: data[k] for k in ("qids", "tag", "qid_from", "qid_to") if k in data}


def _field_names(exc: DjangoValidationError) -> DjangoValidationError:
    """The range's fields named as the request names them (from, to)."""
    if hasattr(exc, "error_dict"):
        renamed = {_REQUEST_NAMES.get(k, k): v for k, v in exc.message_dict.items()}
        return DjangoValidationError(renamed)
    return exc


class TeamActions(ViewBase):
    """CampaignViewSet's assignments, jobs and plan actions."""

    @extend_schema(
        methods=["GET"],
        responses=AssignmentSerializer(many=True),
        description="The queries given to annotators (an annotator sees the ones given to them).",
    )
    @extend_schema(
        methods=["POST"],
        request=AssignmentRequestSerializer,
        responses={201: AssignmentsAddedSerializer},
        description=(
            'Give queries to an annotator (leads only): `{"annotator": NAME, "qids": [...]}`, `{"annotator": '
            'NAME, "tag": T}` or `{"annotator": NAME, "from": QID, "to": QID}` (a range, inclusive, numeric when '
            "both ends are numbers). The queue serves them their own queries first; while they have not judged a "
            "pair of them it keeps a slot of the redundancy for them. 400 names an unknown annotator, qid or "
            "tag, an annotator who is a lead or a model judge, and a query with as many assignees as the "
            "redundancy."
        ),
    )
    @extend_schema(
        methods=["DELETE"],
        request=AssignmentRemoveSerializer,
        responses={200: None},
        description='Take assignments back (leads only): `{"ids": [...]}`, or `{"annotator": NAME}` with '
        'optional `"qids"`. Answers `{"removed": N}`; the queries go back to the shared queue.',
    )
    @action(detail=True, methods=["get", "post", "delete"], **ONE_OBJECT)
    def assignments(self, request: Request, slug: str | None = None) -> Response:
        campaign = self.get_object()
        role = access(request).role(campaign.id)
        manage = may_manage_assignments(role=role)
        if request.method == "GET":
            rows = assignments_list(campaign=campaign, annotator_id=None if manage else request.user.pk)
            return Response(AssignmentSerializer(rows, many=True).data)
        if not manage:
            raise PermissionDenied(
                _("Only a lead of campaign %(campaign)s can give queries to annotators.")
                % {"campaign": repr(campaign.slug)}
            )
        if request.method == "POST":
            form = AssignmentRequestSerializer(data=request.data)
            form.is_valid(raise_exception=True)
            data = form.validated_data
            try:
                queries = queries_of_batch(campaign=campaign, **_batch(data))
                added = assignments_add(
                    campaign=campaign, by=signed_in(request.user), annotator=data["annotator"], queries=queries
                )
            except DjangoValidationError as exc:
                raise _field_names(exc) from None
            body = {"annotator": added.annotator, "added": added.added, "already": added.already}
            return Response(body, status=status.HTTP_201_CREATED)
        removing = AssignmentRemoveSerializer(data=request.data)
        removing.is_valid(raise_exception=True)
        asked = removing.validated_data
        batch = None if asked.get("qids") is None else queries_of_batch(campaign=campaign, qids=asked["qids"])
        removed = assignments_remove(
            campaign=campaign, ids=asked.get("ids"), annotator=asked.get("annotator"), queries=batch
        )
        return Response({"removed": removed})

    @extend_schema(
        responses=JobRowSerializer(many=True),
        description="The campaign's jobs, newest first (imports, model runs, policy switches, significance "
        "tests): status, who started them, when, how long they ran. Leads only; paginated (`page`, `page_size`).",
    )
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=PagePagination)
    def jobs(self, request: Request, slug: str | None = None) -> Response:
        campaign = self.get_object()
        access(request).require_lead(campaign, _("see its jobs"))
        page = self.paginate_queryset(campaign_jobs(campaign=campaign)) or []
        return self.get_paginated_response(JobRowSerializer([job_row(j) for j in page], many=True).data)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "measure",
                str,
                description=f"Default {DEFAULTS['measure']}: P@k, R@k, F1@k, Hit@k, "
                "nDCG@k (k 1-1000), MRR, MAP or bpref.",
            ),
            OpenApiParameter("delta", float, description="The difference to detect, 0 < delta <= 1 (default 0.05)."),
            OpenApiParameter("power", float, description="alpha < power < 1 (default 0.8)."),
            OpenApiParameter("alpha", float, description="0 < alpha <= 0.5 (default 0.05), two-sided."),
        ],
        responses={200: None},
        description=(
            "The budget planner (leads only): queries, judgments and hours (at the team's median seconds per "
            "judgment) a paired t-test needs to detect `delta` at `power` (Sakai's topic set size design from "
            "the campaign's own per-query variance), and each adjacent leaderboard pair's power now. "
            '`"status": "needs_labels"` until two systems are scored on two labelled queries. 400 names a '
            "parameter out of range."
        ),
    )
    @action(detail=True, methods=["get"], **ONE_OBJECT)
    def plan(self, request: Request, slug: str | None = None) -> Response:
        campaign = self.get_object()
        access(request).require_lead(campaign, _("plan its budget"))
        try:
            params = plan_params(request.query_params)
        except DjangoValidationError as exc:
            raise DRFValidationError(exc.message_dict) from None
        _medians, team = pace_medians(campaign)
        return Response(campaign_plan(campaign=campaign, params=params, seconds_per_judgment=team))
