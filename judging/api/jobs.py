"""Background jobs in the API: an upload above the threshold answers 202, and /api/jobs/ID/ reports on it."""

from __future__ import annotations

from django.core.files.uploadedfile import UploadedFile
from django.urls import reverse
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from judging.access import signed_in
from judging.api.serializers import AsciiFloatField, AsciiIntegerField
from judging.jobs import JobError, JobLimit, job_get, job_rate, job_retry, job_start_upload
from judging.jobs.model_judge import SEED_MAX
from judging.models import Campaign, Job


def job_as_dict(job: Job) -> dict:
    """The job as the API returns it (SPEC §5)."""
    return {
        "id": job.pk,
        "kind": job.kind,
        "campaign": job.campaign.slug,
        "filename": job.filename,
        "status": job.status,
        "progress": {
            "done": job.total if job.status == Job.Status.DONE else job.done,
            "total": job.total,
            "per_second": job_rate(job),
        },
        "result": job.result or {},
        "error": job.error or {},
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
    }


def job_limit_response(exc: JobLimit) -> Response:
    """429 naming the queued-jobs limit reached (the API's exception handler answers every JobLimit so)."""
    return Response({"detail": str(exc)}, status=status.HTTP_429_TOO_MANY_REQUESTS)


class JobProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField(
        help_text="Work done so far: lines of the file read (imports), pairs judged (model judge), labels "
        "recomputed (policy switch), permutations drawn (significance)."
    )
    total = serializers.IntegerField(help_text="The work in all, in the same unit.")
    per_second = serializers.FloatField(
        allow_null=True, help_text="While the job runs: work done per second since it started (null otherwise)."
    )


class JobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=Job.Kind.choices)
    campaign = serializers.CharField(help_text="The campaign's slug.")
    filename = serializers.CharField()
    status = serializers.ChoiceField(choices=Job.Status.choices)
    progress = JobProgressSerializer()
    result = serializers.DictField(
        help_text="Once done: the import summary (as a synchronous upload returns it); a model judge's counts "
        "(pairs, graded, unsure, unchanged, failed); a policy switch's labels_changed; a significance matrix."
    )
    error = serializers.DictField(
        help_text='Once failed: {"detail", "file", "line", "field"}. A failed import or policy switch wrote '
        "nothing; a model judge's run keeps the pairs it judged before it failed (Retry judges the rest)."
    )
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class JobStartedSerializer(serializers.Serializer):
    job = serializers.URLField(help_text="Poll this URL (also in the Location header) for progress and outcome.")
    status = serializers.ChoiceField(choices=Job.Status.choices)


def job_accepted(request: Request, job: Job) -> Response:
    """202 with the job's URL in Location and the body: poll it for progress and outcome."""
    url = request.build_absolute_uri(reverse("api:job-detail", args=[job.pk]))
    return Response({"job": url, "status": job.status}, status=status.HTTP_202_ACCEPTED, headers={"Location": url})


class JudgeRunSerializer(serializers.Serializer):
    model = serializers.RegexField(
        r"^[\w.@+-]{1,150}\Z", max_length=150, help_text="The model name sent to the endpoint; the judge's name."
    )
    name = serializers.RegexField(
        r"^[\w.@+-]{1,150}\Z", max_length=150, required=False, help_text="The judge's name (default: the model)."
    )
    pairs = serializers.CharField(
        default="unjudged", max_length=40, help_text="unjudged (by this judge), all, or sample:N."
    )
    seed = AsciiIntegerField(
        default=0, min_value=0, max_value=SEED_MAX, help_text="Random seed of sample:N and the canary (0-4294967295)."
    )
    repeat = AsciiIntegerField(
        default=1, min_value=1, max_value=20, help_text="Ask each pair N times (self-consistency); the majority wins."
    )
    temperature = AsciiFloatField(default=0.0, min_value=0.0, max_value=2.0, help_text="Sampling temperature sent.")
    canary = AsciiIntegerField(
        default=0,
        min_value=0,
        max_value=200,
        help_text="After the pairs, the query-word-stuffing canary on N documents people graded not relevant.",
    )


def upload_as_job(request: Request, *, campaign: Campaign, kind: str, upload: UploadedFile, fields: dict) -> Response:
    """Queue the upload's import; answer 202 with the job's URL in Location and the body."""
    options: dict = {}
    if kind == "run":
        options = {"system_name": fields.get("system") or None, "replace": bool(fields.get("replace"))}
    elif kind == "qrels":
        # The source is checked by qrels_import itself (a bad one fails the job with the field named).
        options = {"annotator": fields.get("annotator") or request.user.get_username()}
    filename = upload.name
    assert filename is not None  # an uploaded file always has a name (the multipart part's filename)
    job = job_start_upload(
        kind=kind, campaign=campaign, user=signed_in(request.user), upload=upload, filename=filename, options=options
    )
    url = request.build_absolute_uri(reverse("api:job-detail", args=[job.pk]))
    return Response({"job": url, "status": job.status}, status=status.HTTP_202_ACCEPTED, headers={"Location": url})


class JobViewSet(viewsets.ViewSet):
    """Background jobs, read and retried by whom access.job_access lets (404 for anyone else)."""

    lookup_value_regex = r"[0-9]+"

    def _job(self, request: Request, pk: str, action: str = "read") -> Job:
        try:
            return job_get(job_id=int(pk), user=request.user, action=action)
        except Job.DoesNotExist:
            raise NotFound(_("No such job.")) from None

    @extend_schema(responses=JobSerializer, description="A job's status, progress, and result or error.")
    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(JobSerializer(job_as_dict(self._job(request, pk))).data)

    @extend_schema(
        request=None,
        responses={
            202: JobStartedSerializer,
            409: OpenApiResponse(description="The job cannot be retried."),
            429: OpenApiResponse(description="Too many jobs queued for the caller or the campaign."),
        },
        description="Queue a failed job again whose upload is still kept (its worker died).",
    )
    @action(detail=True, methods=["post"])
    def retry(self, request: Request, pk: str) -> Response:
        job = self._job(request, pk, "retry")
        try:
            job = job_retry(job=job)
        except JobLimit as exc:
            return job_limit_response(exc)
        except JobError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        url = request.build_absolute_uri(reverse("api:job-detail", args=[job.pk]))
        return Response({"job": url, "status": job.status}, status=status.HTTP_202_ACCEPTED, headers={"Location": url})
