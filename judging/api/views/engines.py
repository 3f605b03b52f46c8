"""Systems made of live search engines under /api/campaigns/SLUG/: saving one (``engine-systems/``) and fetching a
snapshot of it (``systems/NAME/fetch/``, 202 + a job). Leads only, as run imports are."""

from __future__ import annotations

from collections.abc import Mapping
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
from judging.selectors.engines import FocusStatus, engine_systems, focus_status
from judging.services.engine_client import TemplateError, template_parse
from judging.services.engines import engine_system_save, focus_start, focus_stop, snapshot_system_name


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


class FocusRequestSerializer(serializers.Serializer):
    k = serializers.IntegerField(min_value=1, max_value=DEPTH_MAX, default=10, help_text="The top k compared.")
    # "from" is a Python keyword: the field is named in the constructor of the class below
    against = serializers.IntegerField(
        min_value=1,
        required=False,
        allow_null=True,
        help_text="The snapshot compared with (default: the one before; null: none, all of the top k is new).",
    )


class FocusSerializer(serializers.Serializer):
    on = serializers.BooleanField(help_text="Whether the queue serves this snapshot's new pairs first now.")
    k = serializers.IntegerField(allow_null=True)
    against = serializers.IntegerField(allow_null=True, help_text="The snapshot compared with.")
    pairs = serializers.IntegerField(help_text="The new unjudged pooled pairs the focus holds.")
    left = serializers.IntegerField(help_text="Of them, those still needing a judgment.")


def _focus_body(status_now: FocusStatus | None, snapshot: EngineSnapshot) -> dict[str, Any]:
    if status_now is None or status_now.focus.snapshot_id != snapshot.pk:
        return {"on": False, "k": None, "against": None, "pairs": 0, "left": 0}
    focus = status_now.focus
    against = focus.against.number if focus.against_id is not None and focus.against is not None else None
    return {"on": True, "k": focus.k, "against": against, "pairs": status_now.total, "left": status_now.left}


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

    @extend_schema(
        methods=["GET"],
        request=None,
        responses={200: FocusSerializer, 404: OpenApiResponse(description="No such snapshot.")},
        description="Whether the judging queue serves this snapshot's new unjudged pairs first (leads only).",
    )
    @extend_schema(
        methods=["POST"],
        request=FocusRequestSerializer,
        responses={
            200: FocusSerializer,
            400: OpenApiResponse(description="A bad k or snapshot to compare with."),
            404: OpenApiResponse(description="No such snapshot."),
        },
        description=(
            "Judge what is new first (leads only): the judging queue serves the pooled pairs waiting for a label "
            'that this snapshot brought in its top `k` (not in the top `k` of snapshot `"from"`, by default the one '
            "before) before any other pair, to every annotator in every queue mode, until they are judged; then "
            "it goes on as before. Replaces the campaign's focus if it had one. Annotators are never told where "
            "a pair comes from."
        ),
    )
    @extend_schema(
        methods=["DELETE"],
        request=None,
        responses={200: FocusSerializer, 404: OpenApiResponse(description="No such snapshot.")},
        description="Turn this snapshot's focus off (leads only): the queue serves pairs in its mode's order.",
    )
    @action(
        detail=True,
        methods=["get", "post", "delete"],
        url_path=r"systems/(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,63})/snapshots/(?P<number>[0-9]{1,9})/focus",
        **ONE_OBJECT,
    )
    def engine_focus(
        self, request: Request, slug: str | None = None, name: str | None = None, number: str | None = None
    ) -> Response:
        campaign = self.get_object()
        access(request).require_lead(campaign, _("choose what the judging queue serves first"))
        snapshots = {
            s.number: s
            for s in EngineSnapshot.objects.filter(engine_system__campaign=campaign, engine_system__name=name)
        }
        snapshot = snapshots.get(int(number or 0))
        if snapshot is None:
            raise NotFound(_("No such snapshot."))
        if request.method == "POST":
            data: Any = request.data
            if isinstance(data, Mapping):
                data = {("against" if key == "from" else key): data[key] for key in data}
            body = FocusRequestSerializer(data=data)
            body.is_valid(raise_exception=True)
            v = body.validated_data
            before = [n for n in snapshots if n < snapshot.number]
            if "against" not in v:
                against = snapshots[max(before)] if before else None
            elif v["against"] is None:
                against = None
            else:
                against = snapshots.get(v["against"])
                if against is None or against.pk == snapshot.pk:
                    raise DRFValidationError({"from": [_("No such snapshot to compare with.")]})
            focus_start(campaign=campaign, snapshot=snapshot, against=against, k=v["k"], user=request.user)
        elif request.method == "DELETE":
            current = focus_status(campaign=campaign)
            if current is not None and current.focus.snapshot_id == snapshot.pk:
                focus_stop(campaign=campaign)
        return Response(_focus_body(focus_status(campaign=campaign), snapshot))
