"""File imports under /api/campaigns/SLUG/upload/: topics, documents, runs, qrels, online figures."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer

from judging.api import serializers
from judging.api.jobs import JobStartedSerializer, upload_as_job
from judging.api.permissions import access
from judging.api.views.base import ONE_OBJECT, ViewBase
from judging.imports.service.summary import ImportSummary
from judging.jobs import KINDS as JOB_KINDS
from judging.jobs import job_needed
from judging.models import User
from judging.services import ImportRefused, documents_import, qrels_import, queries_import, run_import
from judging.services.model_judge import model_judge_upload_annotator
from judging.services.online import online_import

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


class UploadActions(ViewBase):
    """CampaignViewSet's upload actions (leads only)."""

    get_object: Any  # CampaignViewSet's (GenericAPIView.get_object)

    def _upload(
        self,
        request: Request,
        serializer_class: type[Serializer],
        importer: Callable[..., ImportSummary],
        *,
        kind: str,
        **options: Any,
    ) -> Response:
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
    def upload_topics(self, request: Request, slug: str | None = None) -> Response:
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
    def upload_documents(self, request: Request, slug: str | None = None) -> Response:
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
    def upload_run(self, request: Request, slug: str | None = None) -> Response:
        return self._upload(request, serializers.RunUploadSerializer, self._run_import, kind="run")

    @staticmethod
    def _run_import(*, system: str | None = None, **kwargs: Any) -> ImportSummary:
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
    def upload_qrels(self, request: Request, slug: str | None = None) -> Response:
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
    def _qrels_import(
        *, user: User, annotator: str | None = None, model: bool = False, description: str = "", **kwargs: Any
    ) -> ImportSummary:
        # The import checks the name (a member, a source account, or a new source); see qrels_import. A model
        # judge was made a member by upload_qrels before this runs.
        return qrels_import(annotator=annotator or user.get_username(), imported_by=user, **kwargs)

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
    def upload_online(self, request: Request, slug: str | None = None) -> Response:
        return self._upload(request, serializers.OnlineUploadSerializer, online_import, kind="online")
