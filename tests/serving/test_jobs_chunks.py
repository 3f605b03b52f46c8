"""An import job's file is stored and read back a piece at a time (JobChunk): the process that starts the job
never holds the whole file, the worker imports it across piece boundaries, and the pieces go when the job ends."""

from __future__ import annotations

import json
import tracemalloc
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.core.files.uploadedfile import TemporaryUploadedFile
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

from tests.data import RUN_BM25, TINY_QRELS

pytestmark = pytest.mark.django_db(transaction=False)


def _docs_upload(name: str, *, docs: int) -> TemporaryUploadedFile:
    """A JSONL collection of ``docs`` documents of about 2 kB each, in a file on disk as a large upload is."""
    upload = TemporaryUploadedFile(name, "application/octet-stream", 0, "utf-8")
    for i in range(docs):
        record = {"docid": f"d{i}", "title": f"item {i}", "text": f"lambswool {i} " * 150}
        upload.write((json.dumps(record) + "\n").encode())
    upload.size = upload.tell()
    upload.seek(0)
    return upload


def _stored(job) -> bytes:
    return b"".join(bytes(data) for data in job.chunks.order_by("seq").values_list("data", flat=True))


def _peak_while(start) -> tuple[object, int]:
    tracemalloc.start()
    try:
        job = start()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return job, peak


@pytest.mark.parametrize("via", ["form", "api"])
def test_starting_a_job_holds_a_piece_of_the_file_not_the_file(campaign, lead, monkeypatch, via):
    """A 12 MB upload becomes a job while the process's traced memory stays under a quarter of the file; the
    worker then imports every document from the stored pieces and leaves none behind."""
    from judging.api.jobs import upload_as_job
    from judging.jobs import imports, job_run, job_start_from_form
    from judging.models import Document, Job

    upload = _docs_upload("big.jsonl", docs=5500)
    size = upload.size
    assert size > 12 * 10**6
    monkeypatch.setattr(imports, "job_enqueue", lambda job: None)  # measure the request's work only
    reverse("api:job-detail", args=[1])  # the URLconf is imported before measuring, as in a serving process
    if via == "form":
        form = SimpleNamespace(cleaned_data={"file": upload})
        _, peak = _peak_while(lambda: job_start_from_form(kind="docs", campaign=campaign, user=lead, form=form))
    else:
        request = RequestFactory().post("/api/campaigns/demo/upload/docs/")
        request.user = lead
        _, peak = _peak_while(lambda: upload_as_job(request, campaign=campaign, kind="docs", upload=upload, fields={}))
    assert peak < size / 4, f"peak {peak:,} bytes to start a job for a {size:,}-byte file"
    from judging.jobs import chunks

    job = Job.objects.get(campaign=campaign)
    assert (job.size, job.total, job.status) == (size, 5500, "queued")
    assert job.chunks.count() == -(-size // chunks.CHUNK_BYTES) > 5
    assert job_run(job_id=job.pk)["status"] == "done"
    job.refresh_from_db()
    assert job.status == "done" and job.result["added"] == 5500 and not job.chunks.exists()
    assert Document.objects.filter(campaign=campaign).count() == 5500
    assert Document.objects.get(campaign=campaign, docid="d5499").text.startswith("lambswool 5499 ")


def test_run_and_qrels_split_into_many_small_pieces_import_as_the_whole_file(campaign, lead, monkeypatch):
    """Lines cut across piece boundaries are joined again: a run and qrels stored 7 bytes a piece import as
    they would from the file itself, with the line count of the file."""
    from judging.jobs import chunks, job_run, job_start
    from judging.models import Job, Judgment, System

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 7)
    run = job_start(kind="run", campaign=campaign, user=lead, data=RUN_BM25.encode(), filename="a.run")
    assert run.chunks.count() == -(-len(RUN_BM25.encode()) // 7) and run.total == RUN_BM25.count("\n")
    assert _stored(run) == RUN_BM25.encode()
    assert job_run(job_id=run.pk)["status"] == "done"
    qrels = TINY_QRELS.rstrip("\n")  # a last line without its newline still counts
    job = job_start(kind="qrels", campaign=campaign, user=lead, data=qrels.encode(), filename="a.qrels")
    assert job.total == qrels.count("\n") + 1
    assert job_run(job_id=job.pk)["status"] == "done"
    job.refresh_from_db()
    assert job.result["added"] == 8 and Job.objects.filter(campaign=campaign, status="done").count() == 2
    assert System.objects.filter(campaign=campaign).count() == 1 and Judgment.objects.count() == 8


def test_a_failed_job_whose_worker_died_keeps_its_pieces_and_a_retry_reads_them_again(campaign, lead, settings):
    from judging.jobs import chunks, job_can_retry, job_get, job_retry, job_run, job_start
    from judging.models import Document, Job

    settings.RELJUDGE_JOB_STALE_SECONDS = 30
    upload = _docs_upload("docs.jsonl", docs=700)
    job = job_start(kind="docs", campaign=campaign, user=lead, data=upload.read(), filename="docs.jsonl")
    pieces = job.chunks.count()
    assert pieces == -(-upload.size // chunks.CHUNK_BYTES) > 1
    Job.objects.filter(pk=job.pk).update(
        status="running", attempts=1, heartbeat_at=timezone.now() - timedelta(seconds=31)
    )
    seen = job_get(job_id=job.pk, user=lead)
    assert seen.status == "failed" and job_can_retry(seen) and seen.chunks.count() == pieces
    job_retry(job=seen)
    assert job_run(job_id=job.pk)["status"] == "done"
    assert Document.objects.filter(campaign=campaign).count() == 700
    assert not Job.objects.get(pk=job.pk).chunks.exists()


def test_a_job_failed_on_bad_input_drops_its_pieces_and_cannot_be_retried(campaign, lead):
    from judging.jobs import JobError, job_can_retry, job_retry, job_run, job_start
    from judging.models import Job, JobChunk

    job = job_start(kind="run", campaign=campaign, user=lead, data=b"q1 Q0 d1 1 oops bm25\n", filename="b.run")
    assert job_run(job_id=job.pk)["status"] == "failed"
    job = Job.objects.get(pk=job.pk)
    assert job.error["line"] == 1 and not JobChunk.objects.filter(job=job).exists() and not job_can_retry(job)
    with pytest.raises(JobError):
        job_retry(job=job)


def test_a_job_over_the_queued_limit_stores_no_pieces(campaign, lead, settings):
    from judging.jobs import JobLimit, job_start
    from judging.models import Job, JobChunk

    settings.RELJUDGE_JOBS_QUEUED_PER_USER = 0
    with pytest.raises(JobLimit):
        job_start(kind="run", campaign=campaign, user=lead, data=RUN_BM25.encode(), filename="c.run")
    assert not Job.objects.exists() and not JobChunk.objects.exists()
