"""Background jobs: work too long for a request, run by the task worker with progress, heartbeat and reaping.

A job is a ``Job`` row plus one django-tasks task. The web request stores what the job needs in the row and
enqueues it; ``manage.py db_worker`` (any machine that reaches the database) runs it. ``runner`` claims a
job (``queued -> running`` in one UPDATE), reports its progress and liveness from a heartbeat thread, marks
failed a running job whose worker stopped beating (``RELJUDGE_JOB_STALE_SECONDS``), retries failed jobs, and
refuses new ones past the queued-jobs limits. One module per kind does the work:

- ``imports``: a large upload, imported in one transaction that marks the job done as it commits;
- ``model_judge``: a model judge's run, a batch of verdicts committed at a time, on its own task queue;
- ``policy``: an aggregation policy switch on a large campaign, in one transaction;
- ``significance``: a slow significance test, its matrix cached under the labels' state it was computed from;
- ``engine_fetch``: a live search engine asked every query, its snapshot written in one transaction.

Who may read, retry or cancel a job is ``judging.access.job_access``; how a job is shown is
``judging.views.job_presenters``.
"""

from judging.jobs.engine_fetch import engine_fetch_job_start
from judging.jobs.imports import KINDS, job_needed, job_start, job_start_from_form, job_start_upload
from judging.jobs.model_judge import GIVE_UP_AFTER, model_endpoint_configured, model_judge_job_start
from judging.jobs.policy import policy_job_pending, policy_job_start
from judging.jobs.runner import (
    ACTIVE,
    MODEL_QUEUE,
    JobError,
    JobLimit,
    import_job,
    job_can_retry,
    job_get,
    job_rate,
    job_refresh,
    job_retry,
    job_run,
    model_judge_task,
)
from judging.jobs.significance import significance_from_job, significance_get, significance_job, significance_key

__all__ = [
    "ACTIVE",
    "engine_fetch_job_start",
    "GIVE_UP_AFTER",
    "KINDS",
    "MODEL_QUEUE",
    "JobError",
    "JobLimit",
    "import_job",
    "job_can_retry",
    "job_get",
    "job_needed",
    "job_rate",
    "job_refresh",
    "job_retry",
    "job_run",
    "job_start",
    "job_start_from_form",
    "job_start_upload",
    "model_endpoint_configured",
    "model_judge_job_start",
    "model_judge_task",
    "policy_job_pending",
    "policy_job_start",
    "significance_from_job",
    "significance_get",
    "significance_job",
    "significance_key",
]
