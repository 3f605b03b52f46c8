"""Background jobs: large uploads imported by the task worker, with progress, heartbeat and dead-worker reaping.

A job is a ``Job`` row plus one django-tasks task. The web request stores the upload in the row and
enqueues ``import_job``; ``manage.py db_worker`` (any machine that reaches the database) runs it:

1. claim: ``queued -> running`` in one UPDATE (a second worker that got the same task finds nothing);
2. import: the same service the command line uses, inside one transaction, so a failure — bad input, a
   crash, or the worker being killed — writes nothing of the file;
3. finish: the job row is marked done *inside* that transaction, so "done" and the imported rows commit
   together; a failure is recorded after the rollback, with the file, line and field of the error.

Progress and liveness cannot go through the import's own connection (nothing it writes is visible
before the commit), so a heartbeat thread reports them every ``BEAT_SECONDS``: on PostgreSQL with an
UPDATE of the job row on the thread's own connection (visible at once to every web server); on SQLite,
where the import holds the database's only write lock until it commits, to a small file beside the
database instead (SQLite serves one machine, so every reader can see that file). A running job whose
last sign of life is older than ``RELJUDGE_JOB_STALE_SECONDS`` lost its worker: reading it marks it
failed, keeping the upload so that it can be retried.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connections, transaction
from django.db.models import F
from django.utils import timezone
from django_tasks import task

from judging.formats import FormatError, ImportRefused
from judging.models import Campaign, Job, Membership

logger = logging.getLogger(__name__)

BEAT_SECONDS = 1.0
KINDS = tuple(Job.Kind.values)


class JobError(ValueError):
    """A job that cannot be started or retried; the message says why."""


class _Superseded(Exception):
    """The job was reaped (taken for dead) while this worker still ran it: roll the import back."""


# --------------------------------------------------------------------------- starting


def job_needed(*, size: int) -> bool:
    """Whether an upload of this many bytes goes to a background job rather than the request."""
    return size > settings.RELJUDGE_JOB_THRESHOLD_BYTES


def job_start(*, kind: str, campaign: Campaign, user, data: bytes, filename: str, options: dict | None = None) -> Job:
    """Store the upload and queue its import. ``options``: ``system_name``/``replace`` for runs,
    ``annotator`` (the source's name, see qrels_import) for qrels."""
    if kind not in KINDS:
        raise JobError(f"unknown kind of import {kind!r} (one of {', '.join(KINDS)})")
    total = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    job = Job.objects.create(
        kind=kind,
        campaign=campaign,
        started_by=user,
        filename=filename,
        options=options or {},
        upload=data,
        size=len(data),
        total=total,
    )
    _enqueue(job)
    logger.info("job %s queued: %s import of %s (%d bytes, %d lines)", job.pk, kind, filename, len(data), total)
    return job


def _enqueue(job: Job) -> None:
    result = import_job.enqueue(job.pk)
    # With the immediate backend (tests, RELJUDGE_TASKS_BACKEND) the job has already run here.
    Job.objects.filter(pk=job.pk).update(task_id=str(result.id))
    job.refresh_from_db()


def job_retry(*, job: Job) -> Job:
    """Queue a failed job again, if its upload is still kept (jobs whose worker died keep it)."""
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        if locked.status != Job.Status.FAILED or locked.upload is None:
            raise JobError("only a failed job whose upload is still kept can be retried; upload the file again")
        locked.status, locked.error, locked.result, locked.done = Job.Status.QUEUED, None, None, 0
        locked.started_at = locked.heartbeat_at = locked.finished_at = None
        locked.save(update_fields=["status", "error", "result", "done", "started_at", "heartbeat_at", "finished_at"])
    _sidecar(job.pk).unlink(missing_ok=True)
    _enqueue(locked)
    logger.info("job %s queued again (attempt %d)", job.pk, locked.attempts + 1)
    return locked


# --------------------------------------------------------------------------- running (in the worker)


@task()
def import_job(job_id: int) -> dict:
    """The task the worker runs: import a job's upload (see the module docstring)."""
    return job_run(job_id=job_id)


def job_run(*, job_id: int) -> dict:
    now = timezone.now()
    claimed = Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(
        status=Job.Status.RUNNING, started_at=now, heartbeat_at=now, attempts=F("attempts") + 1
    )
    if not claimed:
        logger.warning("job %s is not queued any more; nothing to do", job_id)
        return {"status": "skipped"}
    job = Job.objects.select_related("campaign").get(pk=job_id)
    data = bytes(job.upload)
    beat = _Heartbeat(job)
    started = time.monotonic()
    error = None
    try:
        with transaction.atomic():
            with beat:
                summary = _import(job, data, progress=beat.add)
            # "done" commits with the imported rows, or neither does.
            locked = Job.objects.select_for_update().get(pk=job.pk)
            if locked.status != Job.Status.RUNNING or locked.attempts != job.attempts:
                raise _Superseded
            result = summary.as_dict()
            Job.objects.filter(pk=job.pk).update(
                status=Job.Status.DONE,
                done=job.total,
                result=result,
                error=None,
                upload=None,
                finished_at=timezone.now(),
                heartbeat_at=timezone.now(),
            )
    except _Superseded:
        logger.error("job %s was marked failed while its worker still ran it; its import was rolled back", job.pk)
        return {"status": "superseded"}
    except ImportRefused as exc:  # bad input or a conflict: the same answer a synchronous upload gives
        error = exc.as_dict()
    except ValidationError as exc:
        error = {"detail": "; ".join(exc.messages), "file": job.filename, "line": None, "field": None}
    except Exception as exc:  # noqa: BLE001 - any failure must end the job as failed, not leave it running
        logger.exception("job %s crashed", job.pk)
        error = {"detail": f"internal error: {exc}", "file": job.filename, "line": None, "field": None}
    finally:
        _sidecar(job.pk).unlink(missing_ok=True)
    seconds = time.monotonic() - started
    if error is not None:
        Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, attempts=job.attempts).update(
            status=Job.Status.FAILED, error=error, upload=None, finished_at=timezone.now()
        )
        logger.info("job %s failed after %.2f s: %s (nothing was imported)", job.pk, seconds, error["detail"])
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


def _import(job: Job, data: bytes, *, progress):
    """Call the import service for the job's kind (looked up at call time, so tests can substitute one)."""
    from judging import services

    common = {"campaign": job.campaign, "data": data, "filename": job.filename}
    opts = job.options
    if job.kind == Job.Kind.TOPICS:
        return services.queries_import(**common)
    if job.kind == Job.Kind.DOCS:
        return services.documents_import(progress=progress, **common)
    if job.kind == Job.Kind.RUN:
        return services.run_import(
            system_name=opts.get("system_name") or None, replace=bool(opts.get("replace")), progress=progress, **common
        )
    if job.started_by is None:
        raise FormatError("the lead who started this import no longer exists", filename=job.filename)
    annotator = opts.get("annotator") or job.started_by.get_username()
    return services.qrels_import(annotator=annotator, imported_by=job.started_by, progress=progress, **common)


class _Heartbeat:
    """Reports a running job's progress and liveness from a thread of its own (see the module docstring)."""

    def __init__(self, job: Job):
        self.job_id, self.total = job.pk, job.total
        self.done = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"job-{job.pk}-heartbeat", daemon=True)
        self._sqlite = connections["default"].vendor == "sqlite"

    def add(self, rows: int) -> None:
        self.done += rows

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        try:
            while not self._stop.wait(BEAT_SECONDS):
                self.beat()
        finally:
            connections.close_all()  # this thread's own connections

    def beat(self) -> None:
        done = min(self.done, self.total)
        try:
            if self._sqlite:
                path = _sidecar(self.job_id)
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps({"done": done, "at": time.time()}))
                tmp.replace(path)
            else:
                Job.objects.filter(pk=self.job_id, status=Job.Status.RUNNING).update(
                    done=done, heartbeat_at=timezone.now()
                )
        except Exception:  # noqa: BLE001 - a missed beat must not stop the import; the next one retries
            logger.warning("job %s: heartbeat failed", self.job_id, exc_info=True)


def _sidecar(job_id: int) -> Path:
    """Where a job's progress goes on SQLite: a directory per database file, in the temp directory."""
    name = str(settings.DATABASES["default"]["NAME"])
    folder = Path(tempfile.gettempdir()) / f"reljudge-jobs-{hashlib.sha1(name.encode()).hexdigest()[:12]}"
    folder.mkdir(exist_ok=True)
    return folder / f"{job_id}.json"


# --------------------------------------------------------------------------- reading


def job_get(*, job_id: int, user) -> Job:
    """The job, if ``user`` may see it (who started it, the campaign's leads, superusers); Job.DoesNotExist
    otherwise. A running job whose worker died is marked failed on the way."""
    job = Job.objects.defer("upload").select_related("campaign", "started_by").get(pk=job_id)
    if not (
        user.is_superuser
        or job.started_by_id == user.pk
        or Membership.objects.filter(campaign=job.campaign, user=user, role=Membership.Role.LEAD).exists()
    ):
        raise Job.DoesNotExist
    return job_refresh(job)


def job_refresh(job: Job) -> Job:
    """Merge the SQLite progress file into ``job`` and reap it if its worker stopped beating."""
    if job.status != Job.Status.RUNNING:
        return job
    last = job.heartbeat_at
    path = _sidecar(job.pk)
    if path.exists():
        try:
            beat = json.loads(path.read_text())
            job.done = max(job.done, int(beat["done"]))
            at = datetime.fromtimestamp(float(beat["at"]), tz=UTC)
            last = max(last, at) if last else at
        except (OSError, ValueError, KeyError):
            pass  # replaced while we read it: the row's heartbeat still counts
    stale = timedelta(seconds=settings.RELJUDGE_JOB_STALE_SECONDS)
    if last is None or timezone.now() - last > stale:
        _reap(job, last)
    return job


def _reap(job: Job, last) -> None:
    waited = int((timezone.now() - last).total_seconds()) if last else None
    error = {
        "detail": f"the worker running this job stopped (no sign of life for {waited} s); nothing was imported "
        "— retry the job",
        "file": job.filename,
        "line": None,
        "field": None,
    }
    # Keep the upload: a retry can run it again without the file being uploaded anew.
    reaped = Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, attempts=job.attempts).update(
        status=Job.Status.FAILED, error=error, finished_at=timezone.now()
    )
    if reaped:
        logger.warning("job %s: worker gone (last heartbeat %s s ago), marked failed", job.pk, waited)
        job.status, job.error, job.finished_at = Job.Status.FAILED, error, timezone.now()
    else:
        job.refresh_from_db()


def job_can_retry(job: Job) -> bool:
    return job.status == Job.Status.FAILED and Job.objects.filter(pk=job.pk, upload__isnull=False).exists()


def job_as_dict(job: Job) -> dict:
    """The job as the API returns it (SPEC §5)."""
    return {
        "id": job.pk,
        "kind": job.kind,
        "campaign": job.campaign.slug,
        "filename": job.filename,
        "status": job.status,
        "progress": {"done": job.total if job.status == Job.Status.DONE else job.done, "total": job.total},
        "result": job.result or {},
        "error": job.error or {},
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
    }


def job_start_from_form(*, kind: str, campaign: Campaign, user, form) -> Job:
    """Start a job from the upload page's validated form (its fields name the import's options)."""
    data = form.cleaned_data
    upload = data["file"]
    options = {}
    if kind == Job.Kind.RUN:
        options = {"system_name": data.get("system") or None, "replace": bool(data.get("replace"))}
    elif kind == Job.Kind.QRELS:
        options = {"annotator": data.get("annotator") or user.get_username()}
    return job_start(kind=kind, campaign=campaign, user=user, data=upload.read(), filename=upload.name, options=options)
