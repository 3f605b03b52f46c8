"""Policy-switch jobs: a large campaign's aggregation policy changed by the task worker in one transaction
that marks the job done as it commits, so a failure changes no label and not the policy."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.contrib.auth.models import User as Account
from django.core.exceptions import ValidationError
from django.db import transaction

from judging.jobs.runner import ACTIVE, JobError, job_create, job_enqueue, run_work, runs
from judging.models import Campaign, Job
from judging.services import campaign_judged_pairs, campaign_policy_set

logger = logging.getLogger(__name__)


def policy_job_start(*, campaign: Campaign, user: Account, policy: str) -> Job:
    """Queue the switch of a large campaign's aggregation policy (see policy_switch_needs_job)."""
    if policy not in Campaign.Aggregation.values:
        raise ValidationError({"aggregation": f"unknown aggregation policy {policy!r}"})
    with transaction.atomic():
        Campaign.objects.select_for_update().filter(pk=campaign.pk).exists()  # one switch queued at a time
        if Job.objects.filter(campaign=campaign, kind=Job.Kind.POLICY, status__in=ACTIVE).exists():
            raise JobError("a switch of the aggregation policy is already under way; wait for it to finish")
        job = job_create(
            kind=Job.Kind.POLICY,
            campaign=campaign,
            user=user,
            total=campaign_judged_pairs(campaign=campaign),
            options={"policy": policy, "from": campaign.aggregation},
        )
    job_enqueue(job)
    logger.info("job %s queued: %s policy %s -> %s", job.pk, campaign.slug, job.options["from"], policy)
    return job


def policy_job_pending(*, campaign: Campaign) -> Job | None:
    """The policy switch of this campaign that is queued or running, if any (the settings page shows it)."""
    return Job.objects.filter(campaign=campaign, kind=Job.Kind.POLICY, status__in=ACTIVE).defer("upload").first()


@runs(Job.Kind.POLICY)
def policy_job_run(job: Job, *, progress: Callable[[int], object] | None = None) -> dict:
    """Switch the policy (in the worker): the switch and its "done" commit together, or neither does."""
    return run_work(job, _policy_switch, atomic=True, progress=progress)


def _policy_switch(job: Job, progress: Callable[[int], object] | None) -> dict:
    if job.started_by is None:
        raise ValidationError("the lead who started this switch no longer exists")
    before = Campaign.objects.filter(pk=job.campaign_id).values_list("aggregation", flat=True).get()
    changed = campaign_policy_set(
        campaign=job.campaign, lead=job.started_by, policy=job.options["policy"], progress=progress
    )
    return {"policy": job.options["policy"], "from": before, "labels_changed": changed, "judged_pairs": job.total}
