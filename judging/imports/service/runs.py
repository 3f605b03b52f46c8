"""Imports of runs: one system per tag, stubs for what the campaign lacks, its top k pooled."""

from __future__ import annotations

import hashlib
from typing import BinaryIO

import numpy as np
from django.db import transaction
from django.utils.translation import gettext as _

from judging.formats import SYSTEM_NAME_MAX_LENGTH
from judging.imports import parse
from judging.imports.errors import FormatError, RunExists
from judging.imports.service.pool import pool_add, stubs_create
from judging.imports.service.summary import ImportSummary, Progress, logged
from judging.imports.write import insert_rows
from judging.models import Campaign, Ranking, System


def _fingerprint(rows: list[tuple[str, np.ndarray, np.ndarray]]) -> str:
    h = hashlib.sha256()
    for qid, doc_ids, scores in sorted(rows, key=lambda r: r[0]):
        h.update(qid.encode())
        h.update(b"\0")
        h.update(doc_ids.tobytes())
        h.update(scores.tobytes())
    return h.hexdigest()


@logged
@transaction.atomic
def run_import(
    *,
    campaign: Campaign,
    data: bytes | BinaryIO,
    filename: str,
    system_name: str | None = None,
    replace: bool = False,
    progress: Progress = None,
) -> ImportSummary:
    """Import a run (one system, or one per tag), create stubs for unknown qids/docids, and pool its top k.

    Re-importing an identical run changes nothing. A different run for an existing system is refused
    unless ``replace`` is set, because scores and history would silently change.
    """
    if system_name and len(system_name) > SYSTEM_NAME_MAX_LENGTH:
        raise FormatError(
            _("system name too long: %(length)s characters (at most %(limit)s)")
            % {"length": f"{len(system_name):,}", "limit": SYSTEM_NAME_MAX_LENGTH},
            filename=filename,
            field="system",
        )
    runs = parse.parse_run(data, filename=filename)
    if not runs:
        raise FormatError(_("empty file: no ranked documents"), filename=filename)
    if system_name and len(runs) > 1:
        raise FormatError(
            _(
                "the file holds %(n)s runs (tags %(tags)s); import them without --system "
                "to create one system per tag, or split the file"
            )
            % {"n": len(runs), "tags": ", ".join(sorted(runs))},
            filename=filename,
            field="tag",
        )
    summary = ImportSummary(kind="rankings", filename=filename)
    all_qids = {r.qid for rankings in runs.values() for r in rankings}
    all_docids = {d for rankings in runs.values() for r in rankings for d in r.docids}
    qmap, dmap, new_queries, new_documents = stubs_create(campaign=campaign, qids=all_qids, docids=all_docids)
    summary.stub_queries, summary.stub_documents = len(new_queries), len(new_documents)
    for tag, rankings in sorted(runs.items()):
        name = system_name or tag
        rows = [
            (
                r.qid,
                np.fromiter(map(dmap.__getitem__, r.docids), dtype=np.int64, count=len(r.docids)),
                np.asarray(r.scores, dtype=np.float64),
            )
            for r in rankings
        ]
        fingerprint = _fingerprint(rows)
        system = System.objects.filter(campaign=campaign, name=name).first()
        if system is not None:
            if system.fingerprint == fingerprint:
                summary.unchanged += len(rows)
                summary.systems.append(f"{name} (unchanged)")
                continue
            if not replace:
                raise RunExists(
                    _("system %(system)s already has a different run in campaign %(campaign)s")
                    % {"system": repr(name), "campaign": repr(campaign.slug)},
                    filename=filename,
                )
            system.rankings.all().delete()
            summary.updated += len(rows)
        else:
            system = System(campaign=campaign, name=name)
            summary.added += len(rows)
        system.source = filename[:255]
        system.fingerprint = fingerprint
        system.entries = int(sum(len(r[1]) for r in rows))
        system.save()
        insert_rows(
            Ranking,
            ["system", "query", "doc_ids", "scores", "length"],
            (
                (system.pk, qmap[qid], doc_ids.tobytes(), scores.tobytes(), len(doc_ids))
                for qid, doc_ids, scores in rows
            ),
        )
        if progress:
            progress(system.entries)
        summary.systems.append(name)
        depth = campaign.pool_depth
        summary.pairs_added += pool_add(
            campaign=campaign,
            pairs=((qmap[qid], int(d)) for qid, doc_ids, _ in rows for d in doc_ids[:depth]),
        )
    return summary
