"""Import of online figures (CTR, conversion, ...) per system, and per query where given."""

from __future__ import annotations

import logging
from typing import BinaryIO

from django.db import transaction
from django.utils.translation import gettext as _

from judging.imports import parse
from judging.imports.errors import FormatError
from judging.imports.service import ImportSummary, Progress
from judging.models import Campaign, OnlineMetric, Query, System

logger = logging.getLogger(__name__)


@transaction.atomic
def online_import(
    *, campaign: Campaign, data: bytes | BinaryIO, filename: str, progress: Progress = None
) -> ImportSummary:
    """Import online figures (CSV ``system,metric,value[,ci_low,ci_high][,qid]``) in one transaction.

    Every system must exist (import its run first: an online figure of a system without a run cannot be
    compared with anything) and every qid must be a query of the campaign. A figure already stored for
    the same (system, metric, qid) is replaced; re-importing the same file changes nothing.
    """
    figures = parse.parse_online(data, filename=filename)
    systems = dict(System.objects.filter(campaign=campaign).values_list("name", "id"))
    qids = {f.qid for f in figures if f.qid}
    queries = dict(Query.objects.filter(campaign=campaign, qid__in=qids).values_list("qid", "id")) if qids else {}
    for f in figures:
        if f.system not in systems:
            known = ", ".join(sorted(systems)) or _("none yet: import a run first")
            raise FormatError(
                _("unknown system %(system)s (systems of %(campaign)s: %(known)s)")
                % {"system": repr(f.system), "campaign": repr(campaign.slug), "known": known},
                filename=filename,
                line=f.line,
                field="system",
            )
        if f.qid and f.qid not in queries:
            raise FormatError(
                _("unknown qid %(qid)s in campaign %(campaign)s")
                % {"qid": repr(f.qid), "campaign": repr(campaign.slug)},
                filename=filename,
                line=f.line,
                field="qid",
            )
    current = {
        (m.system_id, m.metric, m.query_id): m
        for m in OnlineMetric.objects.filter(campaign=campaign, system_id__in=systems.values())
    }
    summary = ImportSummary(kind="online figures", filename=filename)
    new, changed = [], []
    for f in figures:
        key = (systems[f.system], f.metric, queries.get(f.qid) if f.qid else None)
        old = current.get(key)
        if old is None:
            new.append(
                OnlineMetric(
                    campaign=campaign,
                    system_id=key[0],
                    metric=f.metric,
                    query_id=key[2],
                    value=f.value,
                    ci_low=f.ci_low,
                    ci_high=f.ci_high,
                )
            )
        elif (old.value, old.ci_low, old.ci_high) != (f.value, f.ci_low, f.ci_high):
            old.value, old.ci_low, old.ci_high = f.value, f.ci_low, f.ci_high
            changed.append(old)
        else:
            summary.unchanged += 1
    OnlineMetric.objects.bulk_create(new, batch_size=2000)
    OnlineMetric.objects.bulk_update(changed, ["value", "ci_low", "ci_high", "imported_at"], batch_size=2000)
    if progress:
        progress(len(figures))
    summary.added, summary.updated = len(new), len(changed)
    summary.systems = sorted({f.system for f in figures})
    return summary


def online_clear(*, campaign: Campaign) -> int:
    """Delete every online figure of the campaign; returns how many there were."""
    deleted, _ = OnlineMetric.objects.filter(campaign=campaign).delete()
    logger.info("campaign %s: %d online figures deleted", campaign.slug, deleted)
    return deleted
