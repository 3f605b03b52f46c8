"""Significance jobs: a test too slow for a request, computed by the task worker. The matrix goes to the shared
cache under the labels' state it was computed from (and into the job's result), so a stale one is never
shown as current."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict

import numpy as np
from django.contrib.auth.models import User as Account
from django.utils import timezone

from judging import scoring
from judging.jobs.runner import job_create, job_enqueue, job_refresh, run_work, runs
from judging.models import Job

logger = logging.getLogger(__name__)


def significance_key(lb: scoring.Leaderboard, measure: str, test: str) -> str:
    """What a significance job computes: the parameters' score table, the measure, the test and the labels'
    state (a new judgment changes the state, so a job for the old state is never taken as current)."""
    return f"{lb.key}|{measure}|{test}|{lb.state}"


def significance_job(
    *, lb: scoring.Leaderboard, measure: str, test: str, user: Account, start: bool = True, page: str = ""
) -> Job | None:
    """The latest job computing this test on the current labels; a new one is queued if there is none
    (``start``). A failed one is returned as it is (Retry is on its page), not started again at each visit.
    JobLimit past the queued-jobs limits."""
    key = significance_key(lb, measure, test)
    found = (
        Job.objects.filter(campaign=lb.campaign, kind=Job.Kind.SIGNIFICANCE, options__key=key)
        .defer("upload")
        .order_by("-created_at", "-id")
        .first()
    )
    if found is not None or not start:
        return job_refresh(found) if found is not None else None
    job = job_create(
        kind=Job.Kind.SIGNIFICANCE,
        campaign=lb.campaign,
        user=user,
        total=scoring.PAIRWISE_PERMUTATIONS,
        options={
            "key": key,
            "params": asdict(lb.params),
            "measure": measure,
            "test": test,
            "state": lb.state,
            "page": page,  # where the result is shown (the job's page links back to it)
        },
    )
    job_enqueue(job)
    logger.info("job %s queued: %s test on %s of %s", job.pk, test, measure, lb.campaign.slug)
    return job


def significance_get(
    *, lb: scoring.Leaderboard, measure: str, test: str, user: Account, page: str = "", start: bool = True
) -> tuple[scoring.PairwiseStats | None, Job | None]:
    """(matrix, job) for a page or the API: the current matrix when it is cached or cheap enough to compute
    in the request; above RELJUDGE_STATS_JOB_CELLS, (None, the job computing it) until that job is done.
    Without ``start`` no job is queued: (None, None) when none was."""
    pw = scoring.pairwise_current(lb, measure, test)
    if pw is not None:
        return pw, None
    if not scoring.pairwise_needs_job(lb, test):
        return scoring.pairwise_cached(lb, measure, test), None
    job = significance_job(lb=lb, measure=measure, test=test, user=user, page=page, start=start)
    if job is not None and job.status == Job.Status.DONE:
        pw = significance_from_job(job)
        if pw.state == lb.state and len(pw.diff) == len(lb.cube.system_ids):
            scoring.pairwise_store(lb, pw)
            return pw, job
    return None, job


def significance_from_job(job: Job) -> scoring.PairwiseStats:
    """The PairwiseStats a done significance job computed (when the shared cache has lost it)."""
    r = job.result or {}
    return scoring.PairwiseStats(
        r["measure"],
        r["test"],
        r["state"],
        np.array(r["diff"], dtype=np.float64),
        np.array([[np.nan if v is None else v for v in row] for row in r["p"]], dtype=np.float64),
        r["n_queries"],
        seconds=r["seconds"],
        computed_at=job.finished_at or timezone.now(),
    )


@runs(Job.Kind.SIGNIFICANCE)
def significance_job_run(job: Job, *, progress: Callable[[int], object] | None = None) -> dict:
    """Compute the test (in the worker); it writes nothing but the shared cache and the job's result."""
    return run_work(job, _significance, atomic=False, progress=progress)


def _significance(job: Job, progress: Callable[[int], object] | None) -> dict:
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
