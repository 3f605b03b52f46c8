"""An engine system's fetch as a job: every campaign query asked (no transaction while the engine answers),
then the snapshot written and the job marked done in one transaction, so a failure writes nothing."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from django.db import transaction

from judging.engine_models import EngineSystem
from judging.jobs.runner import (
    Heartbeat,
    Superseded,
    job_create,
    job_enqueue,
    mark_done,
    mark_failed,
    runs,
    sidecar_remove,
)
from judging.models import Account, Campaign, Job, User
from judging.services.engine_client import EngineError, engine_fetch_queries
from judging.services.engines import campaign_queries, snapshot_system_name, snapshot_write

logger = logging.getLogger(__name__)


def engine_fetch_job_start(*, campaign: Campaign, user: User | None, system: EngineSystem, enqueue: bool = True) -> Job:
    """Queue a fetch of ``system`` (``enqueue=False``: the caller runs it, as the command line does). ValueError
    when the campaign has no queries or the engine is switched off; JobLimit past the queued-jobs limits."""
    if not system.engine.enabled:
        raise ValueError(f"the engine {system.engine.name} is switched off by an administrator")
    total = len(campaign_queries(campaign=campaign))
    if not total:
        raise ValueError("the campaign has no queries yet: upload its topics first")
    job = job_create(
        kind=Job.Kind.ENGINE_FETCH,
        campaign=campaign,
        user=user if isinstance(user, Account) else None,
        total=total,
        options={"engine_system": system.pk, "system": system.name, "engine": system.engine.name},
    )
    if enqueue:
        job_enqueue(job)
    logger.info("job %s: fetch of %s (%d queries) on %s", job.pk, system.name, total, campaign.slug)
    return job


@runs(Job.Kind.ENGINE_FETCH)
def engine_fetch_job_run(job: Job, *, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Ask every query, then write the snapshot (in the worker)."""
    beat = Heartbeat(job)

    def add(n: int) -> None:
        beat.add(n)
        if progress:
            progress(n)

    started = time.monotonic()
    error = None
    result: dict[str, Any] = {}
    try:
        system = EngineSystem.objects.select_related("engine", "campaign").get(pk=job.options["engine_system"])
        queries = campaign_queries(campaign=system.campaign)
        with beat:
            fetched = engine_fetch_queries(system=system, queries=queries, progress=add)
        seconds = time.monotonic() - started
        with transaction.atomic():
            snapshot = snapshot_write(system=system, fetched=fetched, seconds=seconds)
            result = {
                "system": system.name,
                "snapshot": snapshot.number,
                "run": snapshot_system_name(system.name, snapshot.number),
                "template_version": snapshot.template_version,
                "queries": len(queries),
                "ok": snapshot.queries_ok,
                "failed": snapshot.queries_failed,
                "failures": snapshot.failures[:1000],
                "answer_ms": snapshot.answer_ms,
                "documents_added": snapshot.documents_added,
                "pairs_added": snapshot.pairs_added,
                "seconds": round(seconds, 2),
            }
            mark_done(job, result)
    except Superseded:
        logger.error("job %s was marked failed while its worker still ran it; its work was rolled back", job.pk)
        return {"status": "superseded"}
    except EngineSystem.DoesNotExist:
        error = "the engine system was deleted"
    except EngineError as exc:  # the system's own configuration (a field's JSONPath), before any query
        error = str(exc)
    except Exception as exc:  # any failure must end the job as failed, not leave it running
        logger.exception("job %s crashed", job.pk)
        error = str(exc) if isinstance(exc, ValueError) else f"internal error: {exc}"
    finally:
        sidecar_remove(job.pk)
    if error is not None:
        mark_failed(job, {"detail": f"{error} (nothing was changed)", "file": None, "line": None, "field": None})
        return {"status": "failed", "error": {"detail": error}}
    return {"status": "done", "result": result}
