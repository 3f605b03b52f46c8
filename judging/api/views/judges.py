"""Model judges under /api/campaigns/SLUG/judges/: a judge's calibration, its prompt template, and starting a
judge's run."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from judging import params
from judging.access import signed_in
from judging.api import report_serializers
from judging.api.jobs import JobStartedSerializer, JudgeRunSerializer, job_accepted
from judging.api.permissions import access
from judging.api.views.base import ONE_OBJECT, ViewBase, leaderboard_query
from judging.errors import RequestError
from judging.jobs import JobLimit, model_endpoint_configured, model_judge_job_start
from judging.scoring import Params
from judging.selectors.calibration import UnknownJudge, judge_calibration, model_judge_profile
from judging.selectors.judges import judge_templates, template_json
from judging.services.judge_templates import judge_template_draft, judge_template_save


class ModelJudgeActions(ViewBase):
    """CampaignViewSet's model-judge actions (leads only)."""

    @extend_schema(
        parameters=[report_serializers.LeaderboardQuerySerializer],
        responses=report_serializers.CalibrationSerializer,
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
    def calibration(self, request: Request, slug: str, name: str) -> Response:
        campaign = self.get_object()
        access(request).require_lead(campaign, _("see its model judges' calibration"))
        query = leaderboard_query(request, campaign, params.SCORING)
        try:
            data = judge_calibration(
                campaign=campaign,
                name=name,
                params=Params(k=query.k, gain=query.gain, threshold=query.threshold, judged_only=query.judged_only),
            )
        except UnknownJudge as exc:
            raise NotFound(str(exc)) from None
        except RequestError as exc:
            raise DRFValidationError(exc.errors) from None
        return Response(data)

    @extend_schema(
        methods=["GET"],
        responses={200: OpenApiResponse(description="The judge's template versions, newest first.")},
        description=(
            "A model judge's prompt template for this campaign, every version newest first: the system message "
            "(text), the answer line the code adds after it, the pairs quoted as examples, the model's scale and "
            "thresholds (null: the campaign's grades), and how many judgments each version made. The first "
            "version is built (guidelines, scale, examples from human judgments with notes) when there is none. "
            "Leads only."
        ),
    )
    @extend_schema(
        methods=["POST"],
        request=report_serializers.JudgeTemplateSerializer,
        responses={201: OpenApiResponse(description="The new current version.")},
        description=(
            "Save a new version of the judge's template and scale mapping (the current one is answered, 200, when "
            "nothing changed). A bad field answers 400 naming it. Leads only."
        ),
    )
    @action(
        detail=True,
        methods=["get", "post"],
        url_path=r"judges/(?P<name>[\w.@+-]+)/template",
        **ONE_OBJECT,
    )
    def judge_template(self, request: Request, slug: str, name: str) -> Response:
        campaign = self.get_object()
        access(request).require_lead(campaign, _("configure its model judges"))
        try:
            judge = model_judge_profile(name=name, campaign=campaign).user
        except UnknownJudge as exc:
            raise NotFound(str(exc)) from None
        if request.method == "GET":  # writes nothing: before the first version is saved, the draft of it
            versions = judge_templates(campaign=campaign, judge=judge)
            answer: dict[str, Any] = {"judge": judge.username, "versions": versions}
            if not versions:
                answer["draft"] = template_json(judge_template_draft(campaign=campaign, judge=judge))
            return Response(answer)
        body = report_serializers.JudgeTemplateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        v = body.validated_data
        try:
            saved, created = judge_template_save(
                campaign=campaign,
                judge=judge,
                text=v.get("text"),
                rebuild=v.get("rebuild", False),
                scale_low=v.get("scale_low"),
                scale_high=v.get("scale_high"),
                thresholds=v.get("thresholds") or [],
                user=signed_in(request.user),
            )
        except DjangoValidationError as exc:
            raise DRFValidationError(exc.message_dict) from None
        versions = judge_templates(campaign=campaign, judge=judge)
        return Response(
            {"judge": judge.username, "version": saved.version, "versions": versions},
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

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
    def judges_run(self, request: Request, slug: str | None = None) -> Response:
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
                user=signed_in(request.user),
                model=v["model"],
                name=v.get("name"),
                pairs=v["pairs"],
                seed=v["seed"],
                repeat=v["repeat"],
                temperature=v["temperature"],
                canary=v["canary"],
            )
        except DjangoValidationError as exc:
            raise DRFValidationError({"name": exc.messages}) from None
        except JobLimit:
            raise
        except ValueError as exc:
            raise DRFValidationError({"pairs": [str(exc)]}) from None
        return job_accepted(request, job)
