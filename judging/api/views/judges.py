"""Model judges under /api/campaigns/SLUG/judges/: a judge's calibration, and starting a judge's run."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.response import Response

from judging import params
from judging.api import serializers
from judging.api.jobs import JobStartedSerializer, JudgeRunSerializer, job_accepted
from judging.api.permissions import access
from judging.api.views.base import ONE_OBJECT, leaderboard_query
from judging.jobs import JobLimit, model_endpoint_configured, model_judge_job_start
from judging.scoring import Params
from judging.selectors.calibration import UnknownJudge, judge_calibration


class ModelJudgeActions:
    """CampaignViewSet's model-judge actions (leads only)."""

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
        query = leaderboard_query(request, campaign, params.SCORING)
        try:
            data = judge_calibration(
                campaign=campaign,
                name=name,
                params=Params(k=query.k, gain=query.gain, threshold=query.threshold, judged_only=query.judged_only),
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
        except JobLimit:
            raise
        except ValueError as exc:
            raise DRFValidationError({"pairs": [str(exc)]}) from None
        return job_accepted(request, job)
