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

Other long work runs the same way (``job_run`` dispatches on the job's kind):

- a model judge's run (``model_judge_job_start``): the pairs' ids wait in ``upload``; each batch of
  verdicts commits on its own (with the job's cursor in the same transaction), because a run can call
  the endpoint for hours and holding one transaction that long would lock SQLite against every
  annotator. So the pairs judged before a failure *stay* (each batch whole: judgments, history and
  labels together; model judgments never change the human labels), the job ends failed saying how many
  were kept, and Retry judges the rest. The endpoint and key come from the worker's environment only.
- an aggregation policy switch on a large campaign (``policy_job_start``): like an import, one
  transaction that marks the job done as it commits, so a failure changes no label and not the policy.
- a slow significance test (``significance_job_start``): the matrix goes to the shared cache under the
  labels' state it was computed from (and into the job's result), so a stale one is never shown as current.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connections, transaction
from django.db.models import F
from django.utils import timezone
from django_tasks import task

from judging.imports.errors import FormatError, ImportRefused
from judging.models import Campaign, Job, Membership

logger = logging.getLogger(__name__)

BEAT_SECONDS = 1.0
KINDS = Job.IMPORTS  # the uploads that become jobs above the size threshold
ACTIVE = (Job.Status.QUEUED, Job.Status.RUNNING)


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


def _job_create(*, kind: str, campaign: Campaign, user, total: int, options: dict, upload: bytes | None = None) -> Job:
    return Job.objects.create(
        kind=kind,
        campaign=campaign,
        started_by=user,
        filename="",
        options=options,
        upload=upload,
        size=len(upload or b""),
        total=total,
    )


def _enqueue(job: Job) -> None:
    result = import_job.enqueue(job.pk)
    # With the immediate backend (tests, RELJUDGE_TASKS_BACKEND) the job has already run here.
    Job.objects.filter(pk=job.pk).update(task_id=str(result.id))
    job.refresh_from_db()


def job_retry(*, job: Job) -> Job:
    """Queue a failed job again: an import if its upload is still kept (jobs whose worker died keep it), a
    model judge's run for the pairs it has not judged yet, a policy switch or a significance test as it was."""
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        if locked.status != Job.Status.FAILED or (locked.is_import and locked.upload is None):
            raise JobError("only a failed job whose upload is still kept can be retried; upload the file again")
        if locked.kind == Job.Kind.MODEL_JUDGE and locked.upload is None:
            raise JobError("this model judge's run cannot be resumed; start a new one")
        # A model judge's run resumes where it stopped: its progress starts from the pairs already judged.
        keep = locked.kind == Job.Kind.MODEL_JUDGE
        locked.status, locked.error, locked.result = Job.Status.QUEUED, None, None
        locked.done = locked.done if keep else 0
        locked.started_at = locked.heartbeat_at = locked.finished_at = None
        locked.save(update_fields=["status", "error", "result", "done", "started_at", "heartbeat_at", "finished_at"])
    _sidecar(job.pk).unlink(missing_ok=True)
    _enqueue(locked)
    logger.info("job %s queued again (attempt %d)", job.pk, locked.attempts + 1)
    return locked


# --------------------------------------------------------------------------- running (in the worker)


@task()
def import_job(job_id: int) -> dict:
    """The task the worker runs: any job by its kind (the name stays from when jobs were imports only)."""
    return job_run(job_id=job_id)


def job_run(*, job_id: int, progress=None) -> dict:
    """Claim the job and run it (see the module docstring); ``progress(n)`` is also told of the work done
    (the command line's progress bar when it runs a job itself)."""
    now = timezone.now()
    claimed = Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(
        status=Job.Status.RUNNING, started_at=now, heartbeat_at=now, attempts=F("attempts") + 1
    )
    if not claimed:
        logger.warning("job %s is not queued any more; nothing to do", job_id)
        return {"status": "skipped"}
    job = Job.objects.select_related("campaign", "started_by").get(pk=job_id)
    if job.kind == Job.Kind.MODEL_JUDGE:
        return _run_model_judge(job, progress=progress)
    if job.kind in (Job.Kind.POLICY, Job.Kind.SIGNIFICANCE):
        return _run_in_transaction(job, progress=progress)
    return _run_import(job)


def _mark_done(job: Job, result: dict, **fields) -> None:
    """Mark ``job`` done with ``result`` (inside the caller's transaction, so "done" commits with the work),
    unless it is no longer this worker's: marked failed meanwhile, or retried (_Superseded rolls back)."""
    locked = Job.objects.select_for_update().get(pk=job.pk)
    if locked.status != Job.Status.RUNNING or locked.attempts != job.attempts:
        raise _Superseded
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(
        status=Job.Status.DONE, done=job.total, result=result, error=None, finished_at=now, heartbeat_at=now, **fields
    )


def _run_import(job: Job) -> dict:
    data = bytes(job.upload)
    beat = _Heartbeat(job)
    started = time.monotonic()
    error = None
    try:
        with transaction.atomic():
            with beat:
                summary = _import(job, data, progress=beat.add)
            # "done" commits with the imported rows, or neither does.
            result = summary.as_dict()
            _mark_done(job, result, upload=None)
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
        self._add_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"job-{job.pk}-heartbeat", daemon=True)
        self._sqlite = connections["default"].vendor == "sqlite"

    def add(self, rows: int) -> None:
        with self._add_lock:  # a model judge's calls end on many threads
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
    reaped = Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, attempts=job.attempts).update(
        status=Job.Status.FAILED, error=error, finished_at=timezone.now()
    )
    if reaped:
        logger.warning("job %s: worker gone (last heartbeat %s s ago), marked failed", job.pk, waited)
        job.status, job.error, job.finished_at = Job.Status.FAILED, error, timezone.now()
    else:
        job.refresh_from_db()


def job_can_retry(job: Job) -> bool:
    if job.status != Job.Status.FAILED:
        return False
    if job.kind in (Job.Kind.POLICY, Job.Kind.SIGNIFICANCE):
        return True
    return Job.objects.filter(pk=job.pk, upload__isnull=False).exists()


def job_percent(job: Job) -> int:
    """How far the job is, for its progress bar."""
    if job.status == Job.Status.DONE or not job.total:
        return 100 if job.status == Job.Status.DONE else 0
    return min(100, int(100 * job.done / job.total))


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


# --------------------------------------------------------------------------- a model judge's run

GIVE_UP_AFTER = 20  # failed calls in a row after which a model judge's job stops (the endpoint is down)


def model_endpoint_configured() -> bool:
    """Whether the server (and so its workers) has a model endpoint: the web form and API start runs only then."""
    from judging.services.model_judge import ENDPOINT_ENV

    return bool(os.environ.get(ENDPOINT_ENV, "").strip())


def _pack(ids) -> bytes:
    return np.asarray(ids, dtype="<i8").tobytes()


def _unpack(data) -> list[int]:
    return np.frombuffer(bytes(data or b""), dtype="<i8").tolist()


def model_judge_job_start(
    *,
    campaign: Campaign,
    user,
    model: str,
    name: str | None = None,
    pairs: str = "unjudged",
    seed: int = 0,
    description: str = "",
    endpoint: str | None = None,
    concurrency: int = 8,
    timeout: float = 60.0,
    retries: int = 4,
    batch: int = 256,
    enqueue: bool = True,
) -> Job:
    """Choose the pairs and queue a model judge's run of them (``enqueue=False``: the caller runs it, as the
    command line does). ``endpoint`` is for the command line only: the web and the API pass none, so the
    worker calls the endpoint of its environment. ValueError / ValidationError on a bad argument or when no
    endpoint is configured."""
    from judging.services.model_judge import Endpoint, model_judge_get_or_create, pairs_to_judge

    if concurrency < 1 or retries < 0 or timeout <= 0:
        raise ValueError("concurrency must be >= 1, retries >= 0 and timeout > 0")
    target = Endpoint.configured(url=endpoint, model=model)
    judge = model_judge_get_or_create(
        name=name or model, description=description or f"{model} at {target.url}", campaign=campaign
    )
    pair_ids = pairs_to_judge(campaign=campaign, judge=judge, mode=pairs, seed=seed)
    options = {
        "model": model,
        "judge": judge.get_username(),
        "pairs": pairs,
        "endpoint": endpoint or "",
        "concurrency": concurrency,
        "timeout": timeout,
        "retries": retries,
        "batch": batch,
        "cursor": 0,  # pairs of the stored list done (in order), and those of them that failed
        "failed": [],
        "tally": {"graded": 0, "unsure": 0, "unchanged": 0},
    }
    job = _job_create(
        kind=Job.Kind.MODEL_JUDGE,
        campaign=campaign,
        user=user,
        total=len(pair_ids),
        options=options,
        upload=_pack(pair_ids),
    )
    if enqueue:
        _enqueue(job)
    logger.info("job %s: model judge %s on %d pairs of %s", job.pk, judge.get_username(), len(pair_ids), campaign.slug)
    return job


def _run_model_judge(job: Job, *, progress=None) -> dict:
    from django.contrib.auth import get_user_model

    from judging.services.model_judge import Endpoint, ModelJudgeAborted, model_judge_run

    opts = dict(job.options)
    ids = _unpack(job.upload)
    # Resume: the pairs not reached yet, and those whose call failed.
    remaining = sorted(set(opts.get("failed", [])) | set(ids[opts.get("cursor", 0) :]))
    opts.update(cursor=0, failed=[])
    tally = dict(opts.get("tally") or {"graded": 0, "unsure": 0, "unchanged": 0})
    already = job.total - len(remaining)
    Job.objects.filter(pk=job.pk).update(upload=_pack(remaining), options=opts, done=already)
    beat = _Heartbeat(job)
    beat.done = already
    started = time.monotonic()
    summary = None

    def add(n: int) -> None:
        beat.add(n)
        if progress:
            progress(n)

    def totals(run) -> dict:
        return {k: tally[k] + getattr(run, k) for k in ("graded", "unsure", "unchanged")}

    def on_batch(n: int, failed_ids: list[int], run) -> None:
        new = {**opts, "cursor": opts["cursor"] + n, "failed": opts["failed"] + failed_ids, "tally": totals(run)}
        mine = Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, attempts=job.attempts)
        if not mine.update(options=new, heartbeat_at=timezone.now()):
            raise _Superseded  # rolls this batch back; the batches before it stay
        # Only what committed counts (this runs inside the batch's transaction, which commits next).
        opts.update(new)

    error = None
    try:
        judge = get_user_model().objects.get(username=opts["judge"])
        target = Endpoint.configured(
            url=opts.get("endpoint") or None, model=opts["model"], timeout=opts["timeout"], retries=opts["retries"]
        )
        with beat:
            summary = model_judge_run(
                campaign=job.campaign,
                judge=judge,
                endpoint=target,
                pair_ids=remaining,
                concurrency=opts["concurrency"],
                batch=opts.get("batch", 256),
                progress=add,
                on_batch=on_batch,
                give_up_after=GIVE_UP_AFTER,
            )
    except _Superseded:
        logger.error("job %s was marked failed while its worker still ran it; it stopped", job.pk)
        return {"status": "superseded"}
    except ModelJudgeAborted as exc:
        summary = exc.summary
        error = (
            f"the model endpoint failed {GIVE_UP_AFTER} calls in a row and the run stopped "
            f"(last error: {exc.last_error})"
        )
    except Exception as exc:  # noqa: BLE001 - any failure must end the job as failed, not leave it running
        logger.exception("job %s crashed", job.pk)
        error = f"internal error: {exc}" if not isinstance(exc, ValueError) else str(exc)
    finally:
        _sidecar(job.pk).unlink(missing_ok=True)
    seconds = time.monotonic() - started
    run_failed = summary.failed if summary else 0
    result = {
        "judge": opts["judge"],
        "model": opts["model"],
        "pairs": job.total,
        **(totals(summary) if summary else opts.get("tally", tally)),
        "failed": run_failed,
        "errors": summary.errors if summary else [],
        "seconds": round(seconds, 2),
    }
    mine = Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, attempts=job.attempts)
    if error is not None:
        kept = result["graded"] + result["unsure"] + result["unchanged"]
        left = len(set(opts["failed"]) | set(remaining[opts["cursor"] :]))
        detail = f"{error}. {kept} of {job.total} pairs were judged and are kept; Retry judges the {left} left"
        done = job.total - left
        mine.update(
            status=Job.Status.FAILED,
            done=done,
            result=result,
            error={"detail": detail, "file": None, "line": None, "field": None},
            finished_at=timezone.now(),
        )
        logger.info("job %s failed after %.2f s: %s", job.pk, seconds, detail)
        return {"status": "failed", "error": {"detail": detail}}
    mine.update(
        status=Job.Status.DONE,
        done=job.total,
        result=result,
        error=None,
        upload=None,
        finished_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )
    logger.info(
        "job %s done in %.2f s: model judge %s, %d pairs, %d graded, %d unsure, %d unchanged, %d failed",
        job.pk,
        seconds,
        opts["judge"],
        job.total,
        result["graded"],
        result["unsure"],
        result["unchanged"],
        result["failed"],
    )
    return {"status": "done", "result": result}


# --------------------------------------------------------------------------- policy switches, significance


def policy_job_start(*, campaign: Campaign, user, policy: str) -> Job:
    """Queue the switch of a large campaign's aggregation policy (see policy_switch_needs_job)."""
    from judging.services import campaign_judged_pairs

    if policy not in Campaign.Aggregation.values:
        raise ValidationError({"aggregation": f"unknown aggregation policy {policy!r}"})
    with transaction.atomic():
        Campaign.objects.select_for_update().filter(pk=campaign.pk).exists()  # one switch queued at a time
        if Job.objects.filter(campaign=campaign, kind=Job.Kind.POLICY, status__in=ACTIVE).exists():
            raise JobError("a switch of the aggregation policy is already under way; wait for it to finish")
        job = _job_create(
            kind=Job.Kind.POLICY,
            campaign=campaign,
            user=user,
            total=campaign_judged_pairs(campaign=campaign),
            options={"policy": policy, "from": campaign.aggregation},
        )
    _enqueue(job)
    logger.info("job %s queued: %s policy %s -> %s", job.pk, campaign.slug, job.options["from"], policy)
    return job


def policy_job_pending(*, campaign: Campaign) -> Job | None:
    """The policy switch of this campaign that is queued or running, if any (the settings page shows it)."""
    return Job.objects.filter(campaign=campaign, kind=Job.Kind.POLICY, status__in=ACTIVE).defer("upload").first()


def significance_key(lb, measure: str, test: str) -> str:
    """What a significance job computes: the parameters' score table, the measure, the test and the labels'
    state (a new judgment changes the state, so a job for the old state is never taken as current)."""
    return f"{lb.key}|{measure}|{test}|{lb.state}"


def significance_job(*, lb, measure: str, test: str, user, start: bool = True, page: str = "") -> Job | None:
    """The latest job computing this test on the current labels; a new one is queued if there is none
    (``start``). A failed one is returned as it is (Retry is on its page), not started again at each visit."""
    from dataclasses import asdict

    key = significance_key(lb, measure, test)
    found = (
        Job.objects.filter(campaign=lb.campaign, kind=Job.Kind.SIGNIFICANCE, options__key=key)
        .defer("upload")
        .order_by("-created_at", "-id")
        .first()
    )
    if found is not None or not start:
        return job_refresh(found) if found is not None else None
    job = _job_create(
        kind=Job.Kind.SIGNIFICANCE,
        campaign=lb.campaign,
        user=user,
        total=_permutations(),
        options={
            "key": key,
            "params": asdict(lb.params),
            "measure": measure,
            "test": test,
            "state": lb.state,
            "page": page,  # where the result is shown (the job's page links back to it)
        },
    )
    _enqueue(job)
    logger.info("job %s queued: %s test on %s of %s", job.pk, test, measure, lb.campaign.slug)
    return job


def significance_get(*, lb, measure: str, test: str, user, page: str = ""):
    """(matrix, job) for a page or the API: the current matrix when it is cached or cheap enough to compute
    in the request; above RELJUDGE_STATS_JOB_CELLS, (None, the job computing it) until that job is done."""
    from judging import scoring

    pw = scoring.pairwise_current(lb, measure, test)
    if pw is not None:
        return pw, None
    if not scoring.pairwise_needs_job(lb, test):
        return scoring.pairwise_cached(lb, measure, test), None
    job = significance_job(lb=lb, measure=measure, test=test, user=user, page=page)
    if job.status == Job.Status.DONE:
        pw = significance_from_job(job)
        if pw.state == lb.state and len(pw.diff) == len(lb.cube.system_ids):
            scoring.pairwise_store(lb, pw)
            return pw, job
    return None, job


def significance_from_job(job: Job):
    """The PairwiseStats a done significance job computed (when the shared cache has lost it)."""
    from judging.scoring import PairwiseStats

    r = job.result or {}
    return PairwiseStats(
        r["measure"],
        r["test"],
        r["state"],
        np.array(r["diff"], dtype=np.float64),
        np.array([[np.nan if v is None else v for v in row] for row in r["p"]], dtype=np.float64),
        r["n_queries"],
        seconds=r["seconds"],
        computed_at=job.finished_at or timezone.now(),
    )


def _permutations() -> int:
    from judging.scoring import PAIRWISE_PERMUTATIONS

    return PAIRWISE_PERMUTATIONS


def _run_in_transaction(job: Job, *, progress=None) -> dict:
    """A policy switch (it and its "done" commit together, or neither does) or a significance test."""
    beat = _Heartbeat(job)

    def add(n: int) -> None:
        beat.add(n)
        if progress:
            progress(n)

    started = time.monotonic()
    error = None
    # A significance test writes nothing but the shared cache: no transaction around it (on SQLite one would
    # hold the database's write lock, and keep annotators waiting, for as long as the permutations take).
    # A policy switch and its "done" commit together.
    work = transaction.atomic() if job.kind == Job.Kind.POLICY else nullcontext()
    try:
        with work:
            with beat:
                result = _POLICY_OR_STATS[job.kind](job, add)
            with transaction.atomic():
                _mark_done(job, result)
    except _Superseded:
        logger.error("job %s was marked failed while its worker still ran it; its work was rolled back", job.pk)
        return {"status": "superseded"}
    except ValidationError as exc:
        error = "; ".join(exc.messages)
    except Exception as exc:  # noqa: BLE001 - any failure must end the job as failed, not leave it running
        logger.exception("job %s crashed", job.pk)
        error = f"internal error: {exc}"
    finally:
        _sidecar(job.pk).unlink(missing_ok=True)
    seconds = time.monotonic() - started
    if error is not None:
        Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, attempts=job.attempts).update(
            status=Job.Status.FAILED,
            error={"detail": f"{error} (nothing was changed)", "file": None, "line": None, "field": None},
            finished_at=timezone.now(),
        )
        logger.info("job %s failed after %.2f s: %s", job.pk, seconds, error)
        return {"status": "failed", "error": {"detail": error}}
    logger.info("job %s done in %.2f s: %s", job.pk, seconds, job.kind)
    return {"status": "done", "result": result}


def _policy_switch(job: Job, progress) -> dict:
    from judging.services import campaign_policy_set

    if job.started_by is None:
        raise ValidationError("the lead who started this switch no longer exists")
    before = Campaign.objects.filter(pk=job.campaign_id).values_list("aggregation", flat=True).get()
    changed = campaign_policy_set(
        campaign=job.campaign, lead=job.started_by, policy=job.options["policy"], progress=progress
    )
    return {"policy": job.options["policy"], "from": before, "labels_changed": changed, "judged_pairs": job.total}


def _significance(job: Job, progress) -> dict:
    from judging import scoring

    opts = job.options
    lb = scoring.leaderboard(job.campaign, scoring.Params(**opts["params"]))
    stats = scoring.pairwise_stats(lb, opts["measure"], test=opts["test"], progress=progress)
    scoring.pairwise_store(lb, stats)
    # Kept in the job too: its result stands in for the cache entry if the cache loses it.
    return {
        "measure": stats.measure,
        "test": stats.test,
        "state": stats.state,
        "n_queries": stats.n_queries,
        "systems": list(lb.cube.system_names),
        "diff": np.round(stats.diff, 10).tolist(),
        "p": [[None if np.isnan(v) else float(v) for v in row] for row in stats.p],
        "alpha": stats.alpha,
        "seconds": round(stats.seconds, 3),
    }


_POLICY_OR_STATS = {Job.Kind.POLICY: _policy_switch, Job.Kind.SIGNIFICANCE: _significance}
