"""The job runner: creating, enqueuing, claiming, heartbeat, dead-worker reaping and retrying jobs.

Each kind of job (``judging.jobs.imports``, ``model_judge``, ``policy``, ``significance``) registers the
function that does its work with ``@runs(kind)``; ``job_run`` claims a job and hands it to that function.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Self

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connections, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import ngettext
from django_tasks import task

from judging.access import job_access
from judging.jobs.chunks import chunks_kept
from judging.models import Account, Campaign, Job, User

logger = logging.getLogger(__name__)

BEAT_SECONDS = 1.0
ACTIVE = (Job.Status.QUEUED, Job.Status.RUNNING)
MODEL_QUEUE = "models"  # a model judge's run can take hours: its own queue and worker, so no other job waits on it


class JobError(ValueError):
    """A job that cannot be started or retried; the message says why."""


class JobLimit(JobError):
    """Too many jobs queued for the user or the campaign (RELJUDGE_JOBS_QUEUED_PER_*): try again later."""


class Superseded(Exception):
    """The job was reaped (taken for dead) while this worker still ran it: roll its work back."""


# --------------------------------------------------------------------------- creating


def queued_limit_check(*, campaign: Campaign, user: Account | None) -> None:
    """JobLimit when ``campaign`` or ``user`` already has as many queued jobs as the settings allow.
    Call inside a transaction that locked the campaign's row (job_create does), so that two requests
    cannot both take the last place."""
    per_campaign = settings.RELJUDGE_JOBS_QUEUED_PER_CAMPAIGN
    queued = Job.objects.filter(status=Job.Status.QUEUED)
    who = user.username if user is not None else "a script"
    if queued.filter(campaign=campaign).count() >= per_campaign:
        logger.warning(
            "job refused for %s: campaign %s has %d jobs queued (the limit)", who, campaign.slug, per_campaign
        )
        raise JobLimit(
            ngettext(
                "This campaign already has %(n)d job waiting for a worker (the limit, "
                "RELJUDGE_JOBS_QUEUED_PER_CAMPAIGN): try again when it has started.",
                "This campaign already has %(n)d jobs waiting for a worker (the limit, "
                "RELJUDGE_JOBS_QUEUED_PER_CAMPAIGN): try again when one has started.",
                per_campaign,
            )
            % {"n": per_campaign}
        )
    per_user = settings.RELJUDGE_JOBS_QUEUED_PER_USER
    if user is not None and queued.filter(started_by=user).count() >= per_user:
        logger.warning("job refused for %s on campaign %s: %d jobs queued (the limit)", who, campaign.slug, per_user)
        raise JobLimit(
            ngettext(
                "You already have %(n)d job waiting for a worker (the limit, RELJUDGE_JOBS_QUEUED_PER_USER): "
                "try again when it has started.",
                "You already have %(n)d jobs waiting for a worker (the limit, RELJUDGE_JOBS_QUEUED_PER_USER): "
                "try again when one has started.",
                per_user,
            )
            % {"n": per_user}
        )


def job_create(
    *,
    kind: str,
    campaign: Campaign,
    user: Account | None,
    total: int,
    options: dict,
    upload: bytes | None = None,
    filename: str = "",
) -> Job:
    """A queued Job row (not enqueued yet: call job_enqueue), within the queued-jobs limits."""
    with transaction.atomic():
        Campaign.objects.select_for_update().filter(pk=campaign.pk).exists()
        queued_limit_check(campaign=campaign, user=user)
        job = Job.objects.create(
            kind=kind,
            campaign=campaign,
            started_by=user,
            filename=filename,
            options=options,
            upload=upload,
            size=len(upload or b""),
            total=total,
        )
    logger.info(
        "job %s created: %s on campaign %s by %s", job.pk, kind, campaign.slug, user.username if user else "a script"
    )
    return job


def job_enqueue(job: Job) -> None:
    """Hand the job to the task queue of its kind."""
    runner = model_judge_task if job.kind == Job.Kind.MODEL_JUDGE else import_job
    result = runner.enqueue(job.pk)
    # With the immediate backend (tests, RELJUDGE_TASKS_BACKEND) the job has already run here.
    Job.objects.filter(pk=job.pk).update(task_id=str(result.id))
    job.refresh_from_db()


def job_retry(*, job: Job) -> Job:
    """Queue a failed job again: an import if its upload is still kept (jobs whose worker died keep it), a
    model judge's run for the pairs it has not judged yet, a policy switch or a significance test as it was.
    Whether the caller may is access.job_access's question, asked before."""
    with transaction.atomic():
        Campaign.objects.select_for_update().filter(pk=job.campaign_id).exists()
        locked = Job.objects.select_for_update().get(pk=job.pk)
        if locked.status != Job.Status.FAILED or (locked.is_import and not _upload_kept(locked)):
            raise JobError("only a failed job whose upload is still kept can be retried; upload the file again")
        if locked.kind == Job.Kind.MODEL_JUDGE and locked.upload is None:
            raise JobError("this model judge's run cannot be resumed; start a new one")
        queued_limit_check(campaign=locked.campaign, user=locked.started_by)
        # A model judge's run resumes where it stopped: its progress starts from the pairs already judged.
        keep = locked.kind == Job.Kind.MODEL_JUDGE
        locked.status, locked.error, locked.result = Job.Status.QUEUED, None, None
        locked.done = locked.done if keep else 0
        locked.started_at = locked.heartbeat_at = locked.finished_at = None
        locked.save(update_fields=["status", "error", "result", "done", "started_at", "heartbeat_at", "finished_at"])
    sidecar_remove(job.pk)
    job_enqueue(locked)
    logger.info("job %s queued again (attempt %d)", job.pk, locked.attempts + 1)
    return locked


# --------------------------------------------------------------------------- running (in the worker)

# What the worker does for a job of one kind: ``work(job, *, progress)``, returning the job's result.
Work = Callable[..., dict]

_RUNNERS: dict[str, Work] = {}


def runs(*kinds: str) -> Callable[[Work], Work]:
    """Register ``work(job, *, progress)`` as what the worker does for jobs of these kinds."""

    def register(work: Work) -> Work:
        for kind in kinds:
            _RUNNERS[kind] = work
        return work

    return register


@task()
def import_job(job_id: int) -> dict:
    """The task the worker runs for every kind but a model judge's run (the name stays from when jobs were
    imports only, so that tasks queued by an older version still run)."""
    return job_run(job_id=job_id)


@task(queue_name=MODEL_QUEUE)
def model_judge_task(job_id: int) -> dict:
    """A model judge's run, on its own queue (``manage.py db_worker --queue-name models``)."""
    return job_run(job_id=job_id)


def job_run(*, job_id: int, progress: Callable[[int], object] | None = None) -> dict:
    """Claim the job and run it: ``queued -> running`` in one UPDATE (a second worker that got the same task
    finds nothing), then the work of its kind. ``progress(n)`` is also told of the work done (the command
    line's progress bar when it runs a job itself)."""
    now = timezone.now()
    claimed = Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(
        status=Job.Status.RUNNING, started_at=now, heartbeat_at=now, attempts=F("attempts") + 1
    )
    if not claimed:
        logger.warning("job %s is not queued any more; nothing to do", job_id)
        return {"status": "skipped"}
    job = Job.objects.select_related("campaign", "started_by").get(pk=job_id)
    logger.info(
        "job %s started (attempt %d): %s on campaign %s, queued by %s",
        job.pk,
        job.attempts,
        job.kind,
        job.campaign.slug,
        job.started_by.username if job.started_by else "a script",
    )
    return _RUNNERS[job.kind](job, progress=progress)


def mark_done(job: Job, result: dict, **fields: Any) -> None:
    """Mark ``job`` done with ``result`` (inside the caller's transaction, so "done" commits with the work),
    unless it is no longer this worker's: marked failed meanwhile, or retried (Superseded rolls back)."""
    locked = Job.objects.select_for_update().get(pk=job.pk)
    if locked.status != Job.Status.RUNNING or locked.attempts != job.attempts:
        raise Superseded
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(
        status=Job.Status.DONE,
        done=job.total,
        result=clean_json(result),
        error=None,
        finished_at=now,
        heartbeat_at=now,
        **fields,
    )


def mark_failed(job: Job, error: dict, **fields: Any) -> bool:
    """Record the failure of this worker's attempt (the row is left alone if it was reaped or retried)."""
    return bool(
        Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, attempts=job.attempts).update(
            status=Job.Status.FAILED,
            error=clean_json(error),
            finished_at=timezone.now(),
            **{k: clean_json(v) if k == "result" else v for k, v in fields.items()},
        )
    )


def clean_json(value: object) -> object:
    """``value`` without NUL characters in its strings: PostgreSQL's jsonb refuses "\\u0000", and a job whose
    error quotes a file or an answer with one could otherwise never be marked failed."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {clean_json(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    return value


class Heartbeat:
    """Reports a running job's progress and liveness from a thread of its own.

    On PostgreSQL it UPDATEs the job row on the thread's own connection (visible at once to every web
    server); on SQLite, where the work holds the database's only write lock until it commits, it writes a
    small file beside the other jobs' (``sidecar``) instead (SQLite serves one machine, so every reader can
    see that file)."""

    def __init__(self, job: Job) -> None:
        self.job_id, self.total = job.pk, job.total
        self.done = 0
        self._add_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"job-{job.pk}-heartbeat", daemon=True)
        self._sqlite = connections["default"].vendor == "sqlite"

    def add(self, rows: int) -> None:
        with self._add_lock:  # a model judge's calls end on many threads
            self.done += rows

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
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
                sidecar_write(self.job_id, {"done": done, "at": time.time()})
            else:
                Job.objects.filter(pk=self.job_id, status=Job.Status.RUNNING).update(
                    done=done, heartbeat_at=timezone.now()
                )
        except Exception:  # noqa: BLE001 - a missed beat must not stop the work; the next one retries
            logger.warning("job %s: heartbeat failed", self.job_id, exc_info=True)


# --------------------------------------------------------------------------- the SQLite progress files


class UnsafeFolder(OSError):
    """The progress files' folder is not a directory of ours that only we can write to."""


def sidecar_folder() -> Path:
    """The folder of the progress files of this database's jobs: one per database file and user, in the
    temp directory, created 0700 and refused unless it is a real directory owned by us that nobody else can
    write to (the temp directory is shared: another user could have made the name first, or a link)."""
    name = str(settings.DATABASES["default"]["NAME"])
    uid = os.getuid()
    folder = Path(tempfile.gettempdir()) / f"reljudge-jobs-{uid}-{hashlib.sha1(name.encode()).hexdigest()[:12]}"
    with suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    info = os.lstat(folder)  # lstat: a link is not followed to whatever it names
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or info.st_mode & 0o077:
        raise UnsafeFolder(f"{folder} is not a directory only this user can write to; remove it")
    return folder


def _sidecar(job_id: int) -> Path:
    return sidecar_folder() / f"{job_id}.json"


def sidecar_write(job_id: int, beat: dict) -> None:
    """Write the job's progress file anew: a fresh temporary file (O_EXCL | O_NOFOLLOW: never one that
    exists, nor a link) renamed over the last one (a rename replaces a link, never writes through it)."""
    path = _sidecar(job_id)
    tmp = path.with_name(f"{job_id}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(beat))
    os.replace(tmp, path)


def sidecar_read(job_id: int) -> dict | None:
    """The job's last progress file, or None (none, unreadable, or a link)."""
    try:
        fd = os.open(_sidecar(job_id), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd) as f:
        try:
            return json.loads(f.read(4096))
        except ValueError:
            return None


def sidecar_remove(job_id: int) -> None:
    try:
        _sidecar(job_id).unlink(missing_ok=True)
    except OSError:
        logger.warning("job %s: its progress file could not be removed", job_id, exc_info=True)


# --------------------------------------------------------------------------- reading


def job_get(*, job_id: int, user: User, action: str = "read") -> Job:
    """The job (without its upload) if ``user`` may ``action`` it now (access.job_access), brought up to date
    by job_refresh; Job.DoesNotExist otherwise, so that a job one may not see looks like none."""
    job = Job.objects.defer("upload").select_related("campaign", "started_by").get(pk=job_id)
    if not job_access(job=job, user=user, action=action):
        raise Job.DoesNotExist
    return job_refresh(job)


def job_refresh(job: Job) -> Job:
    """Merge the SQLite progress file into ``job`` and reap it if its worker stopped beating."""
    if job.status != Job.Status.RUNNING:
        return job
    last = job.heartbeat_at
    beat = sidecar_read(job.pk)
    if beat is not None:
        try:
            job.done = max(job.done, int(beat["done"]))
            at = datetime.fromtimestamp(float(beat["at"]), tz=UTC)
            last = max(last, at) if last else at
        except (TypeError, ValueError, KeyError, OverflowError):
            pass  # a file we did not write: the row's heartbeat still counts
    stale = timedelta(seconds=settings.RELJUDGE_JOB_STALE_SECONDS)
    if last is None or timezone.now() - last > stale:
        _reap(job, last)
    return job


def _reap(job: Job, last: datetime | None) -> None:
    waited = int((timezone.now() - last).total_seconds()) if last else None
    outcome = (
        "the pairs judged before it stopped are kept" if job.kind == Job.Kind.MODEL_JUDGE else "nothing was changed"
    )
    if job.is_import:
        outcome = "nothing was imported"
    error = {
        "detail": f"the worker running this job stopped (no sign of life for {waited} s); {outcome} — retry the job",
        "file": job.filename,
        "line": None,
        "field": None,
    }
    # Keep the upload: a retry can run it again without the file being uploaded anew.
    if mark_failed(job, error):
        logger.warning("job %s: worker gone (last heartbeat %s s ago), marked failed", job.pk, waited)
        job.status, job.error, job.finished_at = Job.Status.FAILED, clean_json(error), timezone.now()
    else:
        job.refresh_from_db()


def job_can_retry(job: Job) -> bool:
    """Whether the job itself can run again (access.job_access says whether the caller may ask)."""
    if job.status != Job.Status.FAILED:
        return False
    if job.kind in (Job.Kind.POLICY, Job.Kind.SIGNIFICANCE, Job.Kind.ENGINE_FETCH):
        return True
    return _upload_kept(job)


def _upload_kept(job: Job) -> bool:
    """Whether the job's file (or a model judge's pairs) is still stored: in its row, or as pieces."""
    return Job.objects.filter(pk=job.pk, upload__isnull=False).exists() or chunks_kept(job)


def run_work(
    job: Job,
    work: Callable[[Job, Callable[[int], None]], dict],
    *,
    atomic: bool,
    progress: Callable[[int], object] | None = None,
) -> dict:
    """Run ``work(job, add)`` for a policy switch (``atomic``: it and its "done" commit together, or neither
    does) or a significance test (it writes nothing but the shared cache: no transaction around it, since on
    SQLite one would hold the database's write lock for as long as the permutations take)."""
    beat = Heartbeat(job)

    def add(n: int) -> None:
        beat.add(n)
        if progress:
            progress(n)

    started = time.monotonic()
    error = None
    try:
        with transaction.atomic() if atomic else nullcontext():
            with beat:
                result = work(job, add)
            with transaction.atomic():
                mark_done(job, result)
    except Superseded:
        logger.error("job %s was marked failed while its worker still ran it; its work was rolled back", job.pk)
        return {"status": "superseded"}
    except ValidationError as exc:
        error = "; ".join(exc.messages)
    except Exception as exc:  # any failure must end the job as failed, not leave it running
        logger.exception("job %s crashed", job.pk)
        error = f"internal error: {exc}"
    finally:
        sidecar_remove(job.pk)
    seconds = time.monotonic() - started
    if error is not None:
        mark_failed(job, {"detail": f"{error} (nothing was changed)", "file": None, "line": None, "field": None})
        logger.info("job %s failed after %.2f s: %s", job.pk, seconds, error)
        return {"status": "failed", "error": {"detail": error}}
    logger.info("job %s done in %.2f s: %s", job.pk, seconds, job.kind)
    return {"status": "done", "result": result}


def job_rate(job: Job) -> float | None:
    """A running job's pace: its units (lines of an import's file, pairs, labels, permutations) per second since
    it started; None before it has done any."""
    if job.status != Job.Status.RUNNING or not job.done or job.started_at is None:
        return None
    seconds = (timezone.now() - job.started_at).total_seconds()
    return job.done / seconds if seconds > 0 else None
