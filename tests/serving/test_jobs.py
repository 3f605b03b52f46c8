"""judging/jobs.py in process: starting, running, reaping and retrying jobs (the worker's code, called directly)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.data import RUN_BM25

pytestmark = pytest.mark.django_db(transaction=False)


@pytest.fixture
def run_job(campaign, lead):
    from judging.jobs import job_start

    def start(text: str, **options):
        return job_start(
            kind="run", campaign=campaign, user=lead, data=text.encode(), filename="x.run", options=options
        )

    return start


def test_job_start_queues_the_upload_with_its_line_count(run_job):
    job = run_job(RUN_BM25)
    job.refresh_from_db()
    assert (job.status, job.done, job.total, job.size) == ("queued", 0, 5, len(RUN_BM25))
    assert bytes(job.upload) == RUN_BM25.encode() and job.task_id


def test_job_run_imports_marks_done_and_drops_the_upload(run_job, campaign):
    from judging.jobs import job_run
    from judging.models import Job, System

    job = run_job(RUN_BM25, system_name="renamed")
    assert job_run(job_id=job.pk)["status"] == "done"
    job = Job.objects.get(pk=job.pk)
    assert job.status == "done" and job.upload is None and job.finished_at
    assert job.result["systems"] == ["renamed"] and job.error is None
    assert list(System.objects.filter(campaign=campaign).values_list("name", flat=True)) == ["renamed"]
    # A second delivery of the same task does nothing.
    assert job_run(job_id=job.pk) == {"status": "skipped"}


def test_job_run_failure_names_file_line_field_and_writes_nothing(run_job, campaign):
    from judging.jobs import job_run
    from judging.models import Job, Pair, System

    job = run_job(RUN_BM25 + "q2 Q0 d9 3 notanumber bm25\n")
    job_run(job_id=job.pk)
    job = Job.objects.get(pk=job.pk)
    assert job.status == "failed"
    assert {k: job.error[k] for k in ("file", "line", "field")} == {"file": "x.run", "line": 6, "field": "score"}
    assert not System.objects.filter(campaign=campaign).exists() and not Pair.objects.filter(campaign=campaign).exists()


def test_running_job_without_heartbeat_is_reaped_and_can_be_retried(run_job, lead, settings):
    from judging.jobs import job_can_retry, job_get, job_retry, job_run
    from judging.models import Job

    settings.RELJUDGE_JOB_STALE_SECONDS = 30
    job = run_job(RUN_BM25)
    # A worker claimed it, then died 31 s ago.
    Job.objects.filter(pk=job.pk).update(
        status="running", attempts=1, heartbeat_at=timezone.now() - timedelta(seconds=31)
    )
    seen = job_get(job_id=job.pk, user=lead)
    assert seen.status == "failed" and "stopped" in seen.error["detail"] and job_can_retry(seen)
    job_retry(job=seen)
    assert Job.objects.get(pk=job.pk).status == "queued"
    job_run(job_id=job.pk)
    assert Job.objects.get(pk=job.pk).status == "done"


def test_running_job_with_a_recent_heartbeat_is_left_alone(run_job, lead):
    from judging.jobs import job_get
    from judging.models import Job

    job = run_job(RUN_BM25)
    Job.objects.filter(pk=job.pk).update(status="running", attempts=1, heartbeat_at=timezone.now())
    assert job_get(job_id=job.pk, user=lead).status == "running"


def test_a_reaped_job_whose_worker_still_finishes_commits_nothing(run_job, campaign, monkeypatch):
    """If a slow worker was taken for dead, its late import must not land beside a retry's."""
    from judging import services
    from judging.jobs import job_run
    from judging.models import Job, System

    job = run_job(RUN_BM25)
    real = services.run_import

    def import_then_get_reaped(**kwargs):
        summary = real(**kwargs)
        Job.objects.filter(pk=job.pk).update(status="failed", error={"detail": "reaped"})
        return summary

    monkeypatch.setattr(services, "run_import", import_then_get_reaped)
    assert job_run(job_id=job.pk) == {"status": "superseded"}
    assert not System.objects.filter(campaign=campaign).exists()
    # (the reaping UPDATE ran on the import's own connection here, so it rolled back with it)
    assert Job.objects.get(pk=job.pk).status != "done"


def test_job_is_hidden_from_annotators_and_other_campaigns_leads(run_job, annotator, make_user):
    from judging.jobs import job_get
    from judging.models import Job

    job = run_job(RUN_BM25)
    for outsider in (annotator, make_user("stranger")):
        with pytest.raises(Job.DoesNotExist):
            job_get(job_id=job.pk, user=outsider)


def test_api_upload_above_threshold_answers_202_with_location(client, campaign, lead, settings):
    settings.RELJUDGE_JOB_THRESHOLD_BYTES = 10
    client.force_login(lead)
    from django.core.files.uploadedfile import SimpleUploadedFile

    r = client.post(
        "/api/campaigns/demo/upload/run/", {"file": SimpleUploadedFile("b.run", RUN_BM25.encode())}, format="multipart"
    )
    assert r.status_code == 202
    assert r.json() == {"job": r["Location"], "status": "queued"}
    body = client.get(r["Location"]).json()
    assert body["status"] == "queued" and body["progress"] == {"done": 0, "total": 5}
    assert body["result"] == {} and body["error"] == {}


def test_api_upload_below_threshold_is_imported_in_the_request(client, campaign, lead):
    client.force_login(lead)
    from django.core.files.uploadedfile import SimpleUploadedFile

    r = client.post("/api/campaigns/demo/upload/run/", {"file": SimpleUploadedFile("b.run", RUN_BM25.encode())})
    assert r.status_code == 200 and r.json()["systems"] == ["bm25"]


def test_healthz_needs_no_login(client, db):
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json()["database"] == "ok"
