"""Systems made of live search engines under /api/campaigns/SLUG/: saving one (``engine-systems/``) and fetching a
snapshot of it (``systems/NAME/fetch/``, 202 + a job). Leads only, as run imports are."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from judging.api.jobs import JobStartedSerializer, job_accepted
from judging.api.permissions import access
from judging.api.views.base import ONE_OBJECT
from judging.engine_models import DEPTH_MAX, Engine, EngineSnapshot, EngineSystem
from judging.jobs import JobLimit, engine_fetch_job_start
from judging.selectors.engines import engine_systems
from judging.services.engine_client import TemplateError, template_parse
from judging.services.engines import engine_system_save, snapshot_system_name


class EngineSystemSerializer(serializers.Serializer):
    name = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z", help_text="The engine system's name.")
    engine = serializers.CharField(max_length=64, help_text="The name of an engine an administrator configured.")
    target = serializers.CharField(
        max_length=200, required=False, allow_blank=True, help_text="The index, collection or path under its URL."
    )
    method = serializers.ChoiceField(choices=EngineSystem.Method.choices, default="POST")
    template = serializers.CharField(
        trim_whitespace=False, help_text="JSON with {{query}} (and {{qid}}, {{description}}) in its strings."
    )
    hits_path = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    id_field = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    title_field = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    text_field = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    depth = serializers.IntegerField(min_value=1, max_value=DEPTH_MAX, default=100)


class EngineSystemSavedSerializer(serializers.Serializer):
    name = serializers.CharField()
    engine = serializers.CharField()
    version = serializers.IntegerField(help_text="The template's version (each change of the request is one).")


class EngineErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    field = serializers.CharField(required=False, help_text="The field at fault (absent for a body not parsed).")
    line = serializers.IntegerField(required=False, allow_null=True, help_text="A template's line at fault.")
    column = serializers.IntegerField(required=False, allow_null=True, help_text="A template's column at fault.")


class SnapshotSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    run = serializers.CharField(help_text="The system NAME@N holding the snapshot's run (empty: no query answered).")
    fetched_at = serializers.DateTimeField()
    template_version = serializers.IntegerField()
    queries_ok = serializers.IntegerField()
    queries_failed = serializers.IntegerField()
    failures = serializers.ListField(child=serializers.DictField(), help_text='[{"qid", "reason"}]')
    answer_ms = serializers.FloatField(allow_null=True, help_text="The engine's median answer time.")
    documents_added = serializers.IntegerField()
    pairs_added = serializers.IntegerField()


class EngineSystemListedSerializer(serializers.Serializer):
    name = serializers.CharField()
    engine = serializers.CharField()
    kind = serializers.CharField()
    target = serializers.CharField()
    version = serializers.IntegerField()
    depth = serializers.IntegerField()
    snapshots = SnapshotSerializer(many=True)


def _listed(system: EngineSystem) -> dict[str, Any]:
    snapshots: list[EngineSnapshot] = getattr(system, "snapshot_list", [])
    return {
        "name": system.name,
        "engine": system.engine.name,
        "kind": system.engine.kind,
        "target": system.target,
        "version": system.version,
        "depth": system.depth,
        "snapshots": [
            {
                "number": s.number,
                "run": snapshot_system_name(system.name, s.number) if s.system_id else "",
                "fetched_at": s.created_at,
                "template_version": s.template_version,
                "queries_ok": s.queries_ok,
                "queries_failed": s.queries_failed,
                "failures": s.failures,
                "answer_ms": s.answer_ms,
                "documents_added": s.documents_added,
                "pairs_added": s.pairs_added,
            }
            for s in snapshots
        ],
    }


def _refused(field: str, detail: str, line: int | None = None, column: int | None = None) -> Response:
    body = {"detail": detail, "field": field, "line": line, "column": column}
    return Response(body, status=status.HTTP_400_BAD_REQUEST)


class EngineActions:
    """CampaignViewSet's engine actions (leads only)."""

    get_object: Any  # CampaignViewSet's (GenericAPIView.get_object)

    @extend_schema(
        methods=["POST"],
        request=EngineSystemSerializer,
        responses={
            201: EngineSystemSavedSerializer,
            200: EngineSystemSavedSerializer,
            400: OpenApiResponse(EngineErrorSerializer, description="A bad field; a template's line and column."),
        },
        description=(
            "Create or change a system made of a configured engine (leads only): a changed request is a new "
            "template version. A template that is not JSON or lacks {{query}}: 400 naming the line and column."
        ),
    )
    @extend_schema(
        methods=["GET"],
        request=None,
        responses={200: EngineSystemListedSerializer(many=True)},
        description="The campaign's systems made of engines, each with its snapshots, newest first (leads only).",
    )
    @action(detail=True, methods=["get", "post"], url_path="engine-systems", **ONE_OBJECT)
    def engine_systems(self, request: Request, slug: str | None = None) -> Response:
        campaign = self.get_object()
        access(request).require_lead(campaign, _("make systems of search engines"))
        if request.method == "GET":
            return Response([_listed(system) for system in engine_systems(campaign=campaign)])
        body = EngineSystemSerializer(data=request.data)
        if not body.is_valid():
            field, messages = next(iter(body.errors.items()))
            return _refused(field, " ".join(map(str, messages)))
        v = dict(body.validated_data)
        try:
            template_parse(v["template"])
        except TemplateError as exc:
            return _refused("template", exc.message, exc.line, exc.column)
        engine = Engine.objects.filter(name=v.pop("engine"), enabled=True).first()
        if engine is None:
            return _refused("engine", _("no such engine: an administrator configures them"))
        existed = EngineSystem.objects.filter(campaign=campaign, name=v["name"]).exists()
        try:
            system = engine_system_save(campaign=campaign, user=request.user, engine=engine, **v)
        except DjangoValidationError as exc:
            field, messages = next(iter(exc.message_dict.items()))
            return _refused(field, " ".join(messages))
        return Response(
            {"name": system.name, "engine": engine.name, "version": system.version},
            status=status.HTTP_200_OK if existed else status.HTTP_201_CREATED,
        )

    @extend_schema(
        request=None,
        responses={202: JobStartedSerializer, 404: OpenApiResponse(description="No engine system of that name.")},
        description=(
            "Fetch a snapshot of an engine system as a background job (leads only): every campaign query is "
            "asked, the top hits stored as the system NAME@N and pooled; poll the job for queries done of total, "
            "then the snapshot (queries answered and failed, each failure with its qid and reason)."
        ),
    )
    @action(
        detail=True, methods=["post"], url_path=r"systems/(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,63})/fetch", **ONE_OBJECT
    )
    def engine_fetch(self, request: Request, slug: str | None = None, name: str | None = None) -> Response:
        campaign = self.get_object()
        access(request).require_lead(campaign, _("fetch runs from search engines"))
        system = EngineSystem.objects.select_related("engine").filter(campaign=campaign, name=name).first()
        if system is None:
            raise NotFound(_("no engine system of that name in this campaign"))
        try:
            job = engine_fetch_job_start(campaign=campaign, user=request.user, system=system)
        except JobLimit:
            raise  # 429 from the API's exception handler, as for every job-starting endpoint
        except ValueError as exc:
            raise DRFValidationError({"detail": [str(exc)]}) from None
        return job_accepted(request, job)
