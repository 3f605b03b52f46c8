"""Import jobs: a large upload stored with its job (in pieces, see chunks) and imported by the task worker in one
transaction.

The import is the service the command line uses, inside one transaction, so a failure (bad input, a crash,
or the worker being killed) writes nothing of the file; the job is marked done *inside* that transaction,
so "done" and the imported rows commit together. A failure is recorded after the rollback, with the file,
line and field of the error.
"""

from __future__ import annotations

import io
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, BinaryIO

from django import forms
from django.conf import settings
from django.contrib.auth.models import User as Account
from django.core.exceptions import ValidationError
from django.db import transaction

from judging import services
from judging.imports.errors import FormatError, ImportRefused
from judging.imports.parse.stream import readable_apart
from judging.imports.service.summary import ImportSummary, Progress
from judging.jobs.chunks import CHUNK_BYTES, chunk_file, chunks_drop, chunks_store
from judging.jobs.runner import (
    Heartbeat,
    JobError,
    Superseded,
    job_create,
    job_enqueue,
    mark_done,
    mark_failed,
    runs,
    sidecar_remove,
)
from judging.models import Campaign, Job

logger = logging.getLogger(__name__)

KINDS = Job.IMPORTS  # the uploads that become jobs above the size threshold


def job_needed(*, size: int) -> bool:
    """Whether an upload of this many bytes goes to a background job rather than the request."""
    return size > settings.RELJUDGE_JOB_THRESHOLD_BYTES


def job_start(
    *, kind: str, campaign: Campaign, user: Account, data: bytes, filename: str, options: dict | None = None
) -> Job:
    """job_start_upload for a file already in memory."""
    return job_start_upload(
        kind=kind, campaign=campaign, user=user, upload=io.BytesIO(data), filename=filename, options=options
    )


def job_start_upload(
    *, kind: str, campaign: Campaign, user: Account, upload: IO[bytes], filename: str, options: dict | None = None
) -> Job:
    """Store the upload (a binary file object, read a piece at a time: see chunks_store) and queue its import.
    ``options``: ``system_name``/``replace`` for runs, ``annotator`` (the source's name, see qrels_import) for
    qrels. JobLimit past the queued-jobs limits."""
    if kind not in KINDS:
        raise JobError(f"unknown kind of import {kind!r} (one of {', '.join(KINDS)})")
    with transaction.atomic():  # the job and its file, or neither
        job = job_create(kind=kind, campaign=campaign, user=user, total=0, options=options or {}, filename=filename)
        job.size, job.total = chunks_store(job, upload)
        Job.objects.filter(pk=job.pk).update(size=job.size, total=job.total)
    job_enqueue(job)
    logger.info("job %s queued: %s import of %s (%d bytes, %d lines)", job.pk, kind, filename, job.size, job.total)
    return job


def job_start_from_form(*, kind: str, campaign: Campaign, user: Account, form: forms.Form) -> Job:
    """Start a job from the upload page's validated form (its fields name the import's options)."""
    data = form.cleaned_data
    upload = data["file"]
    options: dict = {"via": "form"}  # a refusal names the page's controls, not the API's fields
    if kind == Job.Kind.RUN:
        options |= {"system_name": data.get("system") or None, "replace": bool(data.get("replace"))}
    elif kind == Job.Kind.QRELS:
        options |= {"annotator": data.get("annotator") or user.get_username()}
    return job_start_upload(
        kind=kind, campaign=campaign, user=user, upload=upload, filename=upload.name, options=options
    )


@runs(*KINDS)
def import_run(job: Job, *, progress: Callable[[int], object] | None = None) -> dict:
    """Import the stored upload (in the worker)."""
    data = _upload_data(job)
    beat = Heartbeat(job)
    started = time.monotonic()
    error = None
    try:
        with transaction.atomic():
            with beat:
                summary = _import(job, data, progress=beat.add)
            # "done" commits with the imported rows, or neither does.
            result = summary.as_dict()
            mark_done(job, result, upload=None)
            chunks_drop(job)
    except Superseded:
        logger.error("job %s was marked failed while its worker still ran it; its import was rolled back", job.pk)
        return {"status": "superseded"}
    except ImportRefused as exc:  # bad input or a conflict: the same answer a synchronous upload gives
        error = exc.as_dict(via=job.options.get("via", "api"))  # in the words of the page or API that started it
    except ValidationError as exc:
        error = {"detail": "; ".join(exc.messages), "file": job.filename, "line": None, "field": None}
    except Exception as exc:  # any failure must end the job as failed, not leave it running
        logger.exception("job %s crashed", job.pk)
        error = {"detail": f"internal error: {exc}", "file": job.filename, "line": None, "field": None}
    finally:
        sidecar_remove(job.pk)
    seconds = time.monotonic() - started
    if error is not None:
        if mark_failed(job, error, upload=None):
            chunks_drop(job)
        logger.info("job %s failed after %.2f s: %r (nothing was imported)", job.pk, seconds, error["detail"])
        return {"status": "failed", "error": error}
    logger.info(
        "job %s done in %.2f s: %s import of %s, %d lines, %d added, %d updated, %d unchanged, %d pairs added",
        job.pk,
        seconds,
        job.kind,
        job.filename,
        job.total,
        result["added"],
        result["updated"],
        result["unchanged"],
        result["pairs_added"],
    )
    return {"status": "done", "result": result}


def _upload_data(job: Job) -> bytes | BinaryIO:
    """The job's file: its pieces as a file object, or the bytes of a job queued with the file in its row."""
    if job.upload is not None:
        return bytes(job.upload)
    return chunk_file(job)


@contextmanager
def _readable_apart(data: bytes | BinaryIO) -> Iterator[bytes | BinaryIO]:
    """The upload as a file another thread may read: a run import parses on a thread of its own (ReadAhead)
    while it writes, and the pieces in the database can only be read on the import's connection. They are
    copied, a piece at a time, to a temporary file on disk (memory stays flat; the disk holds the file once)."""
    if readable_apart(data):
        yield data
        return
    assert not isinstance(data, bytes)
    with tempfile.TemporaryFile(prefix="reljudge-run-") as copy:
        shutil.copyfileobj(data, copy, length=CHUNK_BYTES)
        copy.seek(0)
        yield copy


def _import(job: Job, data: bytes | BinaryIO, *, progress: Progress) -> ImportSummary:
    """Call the import service for the job's kind (looked up on ``services`` at call time, so that tests can
    substitute one)."""
    campaign, filename, opts = job.campaign, job.filename, job.options
    if job.kind == Job.Kind.TOPICS:
        return services.queries_import(campaign=campaign, data=data, filename=filename)
    if job.kind == Job.Kind.DOCS:
        return services.documents_import(campaign=campaign, data=data, filename=filename, progress=progress)
    if job.kind == Job.Kind.RUN:
        with _readable_apart(data) as readable:
            return services.run_import(
                campaign=campaign,
                data=readable,
                filename=filename,
                system_name=opts.get("system_name") or None,
                replace=bool(opts.get("replace")),
                progress=progress,
            )
    if job.started_by is None:
        raise FormatError("the lead who started this import no longer exists", filename=job.filename)
    annotator = opts.get("annotator") or job.started_by.get_username()
    return services.qrels_import(
        campaign=campaign,
        data=data,
        filename=filename,
        annotator=annotator,
        imported_by=job.started_by,
        progress=progress,
    )
