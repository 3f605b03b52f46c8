"""A model judge's run as a job: the pairs' ids wait in the job's ``upload``, each batch of verdicts commits on
its own, with the job's cursor in the same transaction.

A run can call the endpoint for hours and holding one transaction that long would lock SQLite against every
annotator. So the pairs judged before a failure *stay* (each batch whole: judgments, history and labels
together; model judgments never change the human labels), the job ends failed saying how many were kept,
and Retry judges the rest. Runs go to their own task queue (runner.MODEL_QUEUE), so that a long one never
holds up imports and other jobs.

Where the endpoint comes from: the address a command line handed over (kept in the job's options only when it
carries no credentials: no user info, no query string), else the one a command running the job itself holds
in memory (a run started with ``enqueue=False``), else the worker's own environment. The key is never kept in
a job: it comes from the environment of the process that calls the endpoint.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from django.contrib.auth import get_user_model
from django.utils import timezone

from judging import runtime
from judging.jobs.runner import (
    Heartbeat,
    Superseded,
    clean_json,
    job_create,
    job_enqueue,
    mark_failed,
    runs,
    sidecar_remove,
)
from judging.models import Account, Campaign, Job, JudgeTemplate
from judging.services.judge_templates import judge_template_current
from judging.services.model_canary import CANARY_MAX, canary_run
from judging.services.model_client import API_KEY_ENV, ENDPOINT_ENV, Endpoint
from judging.services.model_judge import (
    REPEAT_MAX,
    ModelJudgeAborted,
    RunSummary,
    model_judge_get_or_create,
    model_judge_run,
    pairs_to_judge,
)

logger = logging.getLogger(__name__)

SEED_MAX = 2**32 - 1  # the seeds a run accepts (the API's and the command's): numpy's and random's common range
GIVE_UP_AFTER = 20  # failed calls in a row after which a model judge's job stops (the endpoint is down)


def model_endpoint_configured() -> bool:
    """Whether the server (and so its workers) has a model endpoint: the web form and API start runs only then."""
    return bool(os.environ.get(ENDPOINT_ENV, "").strip())


# Addresses with credentials of the jobs this process started to run itself (``enqueue=False``, as the command
# line does), by job id: kept in memory only, never in the job's row.
_ENDPOINT_HERE: dict[int, str] = runtime.hold(
    "jobs.model_endpoints",
    {},
    grows_with="model judge job this process runs itself",
    why="the address (with credentials) a running job of this process needs; removed when it ends",
)


def endpoint_storable(url: str) -> bool:
    """Whether a job may keep ``url`` in its options: no user info and no query string (either may hold a
    key) and no fragment. Only such an address is handed to the task worker."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return False
    return not (parts.username or parts.password or parts.query or parts.fragment or "@" in parts.netloc)


NO_ENDPOINT_IN_WORKER = (
    f"the task worker has no model endpoint: set {ENDPOINT_ENV} (and {API_KEY_ENV} if the endpoint needs a key) "
    "in the environment the worker starts in (scripts/serve.sh starts it), restart it and Retry; or run "
    "judge_with_model without --background, which calls the endpoint from the command's own process"
)


def pack(ids: Iterable[int]) -> bytes:
    """Pair ids as the job's ``upload`` keeps them (little-endian int64)."""
    return np.asarray(ids, dtype="<i8").tobytes()


def unpack(data: bytes | memoryview | None) -> list[int]:
    return np.frombuffer(bytes(data or b""), dtype="<i8").tolist()


def model_judge_job_start(
    *,
    campaign: Campaign,
    user: Account | None,
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
    repeat: int = 1,
    temperature: float = 0.0,
    canary: int = 0,
) -> Job:
    """Choose the pairs and queue a model judge's run of them (``enqueue=False``: the caller runs it, as the
    command line does). ``endpoint`` is for the command line only: the job keeps it
    when it carries no credentials (``endpoint_storable``), so that the worker calls it; the web and the API
    pass none, and the worker calls the endpoint of its environment. ValueError / ValidationError on a bad
    argument, when no endpoint is configured, or when a queued run would need an address the job may not
    keep; JobLimit past the queued-jobs limits.

    ``repeat`` asks each pair that many times at ``temperature`` (self-consistency); ``canary`` N > 0 runs
    the query-word-stuffing canary on N known non-relevant documents after the pairs (``pairs="none"``:
    the canary alone). The run uses the judge's current prompt template (version 1 is built on the first
    run), recorded in the job's options so that an edit during the run does not change it."""
    if concurrency < 1 or retries < 0 or timeout <= 0:
        raise ValueError("concurrency must be >= 1, retries >= 0 and timeout > 0")
    if not 1 <= repeat <= REPEAT_MAX:
        raise ValueError(f"--repeat must be from 1 to {REPEAT_MAX}")
    if not 0 <= temperature <= 2:
        raise ValueError("--temperature must be from 0 to 2")
    if isinstance(seed, bool) or not 0 <= seed <= SEED_MAX:
        raise ValueError(f"--seed must be a whole number from 0 to {SEED_MAX}")
    if not 0 <= canary <= CANARY_MAX:
        raise ValueError(f"--canary takes 1 to {CANARY_MAX} documents")
    if pairs == "none" and not canary:
        raise ValueError("--pairs none judges nothing: add --canary N")
    target = Endpoint.configured(url=endpoint, model=model)
    keep = endpoint if endpoint and endpoint_storable(endpoint) else ""
    if endpoint and enqueue and not keep:
        raise ValueError(
            f"the endpoint {target.display} carries credentials in its address (user info or a query string), "
            f"which a queued job never keeps: give the key in {API_KEY_ENV} of the task worker's environment and "
            "the address without it, or run without --background"
        )
    judge = model_judge_get_or_create(
        name=name or model, description=description or f"{model} at {target.display}", campaign=campaign
    )
    pair_ids = pairs_to_judge(campaign=campaign, judge=judge, mode=pairs, seed=seed)
    template = judge_template_current(campaign=campaign, judge=judge)
    options = {
        "model": model,
        "judge": judge.get_username(),
        "pairs": pairs,
        "endpoint": keep,  # never an address with credentials in it (see endpoint_storable)
        "concurrency": concurrency,
        "timeout": timeout,
        "retries": retries,
        "batch": batch,
        "template": template.pk if template else None,
        "repeat": repeat,
        "temperature": temperature,
        "canary": canary,
        "seed": seed,
        "cursor": 0,  # pairs of the stored list done (in order), and those of them that failed
        "failed": [],
        "tally": {"graded": 0, "unsure": 0, "unchanged": 0},
    }
    job = job_create(
        kind=Job.Kind.MODEL_JUDGE,
        campaign=campaign,
        user=user,
        total=len(pair_ids),
        options=options,
        upload=pack(pair_ids),
    )
    if endpoint and not keep:
        _ENDPOINT_HERE[job.pk] = endpoint  # this process runs it (enqueue=False): the address stays in memory
    if enqueue:
        job_enqueue(job)
    logger.info("job %s: model judge %s on %d pairs of %s", job.pk, judge.get_username(), len(pair_ids), campaign.slug)
    return job


def template_version(pk: int | None) -> int | None:
    """The version number of the template a run used (shown in its result)."""
    if not pk:
        return None
    return JudgeTemplate.objects.filter(pk=pk).values_list("version", flat=True).first()


@runs(Job.Kind.MODEL_JUDGE)
def model_judge_job_run(job: Job, *, progress: Callable[[int], object] | None = None) -> dict:
    """Judge the pairs not judged yet by this job, a batch at a time (in the worker).

    One function: its callbacks share the job's options as each batch commits (the cursor, the failed pairs).
    """
    opts, remaining, tally = _resume(job)
    beat = Heartbeat(job)
    beat.done = job.total - len(remaining)
    started = time.monotonic()
    summary = None

    def add(n: int) -> None:
        beat.add(n)
        if progress:
            progress(n)

    def totals(run: RunSummary) -> dict:
        return {k: tally[k] + getattr(run, k) for k in ("graded", "unsure", "unchanged")}

    def on_batch(n: int, failed_ids: list[int], run: RunSummary) -> None:
        new = {**opts, "cursor": opts["cursor"] + n, "failed": opts["failed"] + failed_ids, "tally": totals(run)}
        mine = Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, attempts=job.attempts)
        if not mine.update(options=new, heartbeat_at=timezone.now()):
            raise Superseded  # rolls this batch back; the batches before it stay
        # Only what committed counts (this runs inside the batch's transaction, which commits next).
        opts.update(new)

    def on_failure(where: str, reason: str) -> None:
        logger.warning("job %s: %s got no judgment: %s", job.pk, where, reason)

    error = None
    canary = None
    try:
        judge, target, template = _target(job, opts)
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
                on_failure=on_failure,
                give_up_after=GIVE_UP_AFTER,
                template=template,
                repeat=int(opts.get("repeat", 1)),
            )
            if opts.get("canary"):
                canary = canary_run(
                    campaign=job.campaign,
                    judge=judge,
                    endpoint=target,
                    template=template,
                    n=int(opts["canary"]),
                    seed=int(opts.get("seed", 0)),
                    concurrency=min(4, opts["concurrency"]),
                    on_failure=on_failure,
                )
    except Superseded:
        logger.error("job %s was marked failed while its worker still ran it; it stopped", job.pk)
        return {"status": "superseded"}
    except ModelJudgeAborted as exc:
        summary = exc.summary
        error = (
            f"the model endpoint failed {GIVE_UP_AFTER} calls in a row and the run stopped "
            f"(last error: {exc.last_error})"
        )
    except Exception as exc:  # any failure must end the job as failed, not leave it running
        logger.exception("job %s crashed", job.pk)
        error = f"internal error: {exc}" if not isinstance(exc, ValueError) else str(exc)
    finally:
        sidecar_remove(job.pk)
        # the address is this run's only: a later job of the same id (another database, tests) must not find it
        _ENDPOINT_HERE.pop(job.pk, None)
    seconds = time.monotonic() - started
    result = {
        "judge": opts["judge"],
        "model": opts["model"],
        "pairs": job.total,
        **(totals(summary) if summary else opts.get("tally", tally)),
        "failed": summary.failed if summary else 0,
        "off_scale": summary.off_scale if summary else 0,
        "repeat": int(opts.get("repeat", 1)),
        "template": template_version(opts.get("template")),
        "errors": summary.errors if summary else [],
        "seconds": round(seconds, 2),
    }
    if canary is not None:
        result["canary"] = canary
    return _job_end(job, opts, remaining, result, error, seconds)


def _resume(job: Job) -> tuple[dict[str, Any], list[int], dict[str, int]]:
    """The job's options, the pairs it has left (those not reached yet, and those whose call failed) and the
    counts of the runs before; the job's row says so before the run starts."""
    opts = dict(job.options)
    ids = unpack(job.upload)
    remaining = sorted(set(opts.get("failed", [])) | set(ids[opts.get("cursor", 0) :]))
    opts.update(cursor=0, failed=[])
    tally = dict(opts.get("tally") or {"graded": 0, "unsure": 0, "unchanged": 0})
    Job.objects.filter(pk=job.pk).update(upload=pack(remaining), options=opts, done=job.total - len(remaining))
    return opts, remaining, tally


def _target(job: Job, opts: dict[str, Any]) -> tuple[Account, Endpoint, JudgeTemplate | None]:
    """The model judge's account, its endpoint (the address given with the job, else the worker's environment's:
    ValueError without either) and its prompt template."""
    judge = get_user_model().objects.get(username=opts["judge"])
    url = opts.get("endpoint") or _ENDPOINT_HERE.get(job.pk)
    if not (url or os.environ.get(ENDPOINT_ENV, "").strip()):
        raise ValueError(NO_ENDPOINT_IN_WORKER)
    target = Endpoint.configured(
        url=url,
        model=opts["model"],
        timeout=opts["timeout"],
        retries=opts["retries"],
        temperature=float(opts.get("temperature", 0.0)),
    )
    template_id = opts.get("template")
    template = JudgeTemplate.objects.filter(pk=template_id).first() if template_id else None
    return judge, target, template


def _job_end(
    job: Job, opts: dict[str, Any], remaining: list[int], result: dict[str, Any], error: str | None, seconds: float
) -> dict[str, Any]:
    """The job's row at the run's end: failed with what was kept and what Retry judges, or done with its result."""
    if error is not None:
        kept = result["graded"] + result["unsure"] + result["unchanged"]
        left = len(set(opts["failed"]) | set(remaining[opts["cursor"] :]))
        detail = f"{error}. {kept} of {job.total} pairs were judged and are kept; Retry judges the {left} left"
        mark_failed(
            job, {"detail": detail, "file": None, "line": None, "field": None}, done=job.total - left, result=result
        )
        logger.info("job %s failed after %.2f s: %r", job.pk, seconds, detail)
        return {"status": "failed", "error": {"detail": detail}}
    now = timezone.now()
    Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, attempts=job.attempts).update(
        status=Job.Status.DONE,
        done=job.total,
        result=clean_json(result),
        error=None,
        upload=None,
        finished_at=now,
        heartbeat_at=now,
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
