"""Reads for the engine pages: a campaign's engine systems with their snapshots, and what changed between two
snapshots (per query: documents that entered or left the top k, rank moves, and the unjudged pairs they bring)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from django.db.models import QuerySet

from judging.engine_models import Engine, EngineSnapshot, EngineSystem
from judging.models import Campaign, Document, Pair, Query, Ranking


def engines_enabled() -> QuerySet[Engine]:
    return Engine.objects.filter(enabled=True).order_by("name")


def engine_systems(*, campaign: Campaign) -> list[EngineSystem]:
    """The campaign's engine systems, each with its snapshots (newest first) in ``snapshot_list``."""
    systems = list(EngineSystem.objects.filter(campaign=campaign).select_related("engine").order_by("name"))
    snapshots: dict[int, list[EngineSnapshot]] = {}
    for s in EngineSnapshot.objects.filter(engine_system__campaign=campaign).order_by("-number"):
        snapshots.setdefault(s.engine_system_id, []).append(s)
    for system in systems:
        system.snapshot_list = snapshots.get(system.pk, [])  # type: ignore[attr-defined]
    return systems


@dataclass
class QueryChange:
    qid: str
    text: str
    entered: list[tuple[str, int, int | None]] = field(default_factory=list)  # docid, new rank, label
    left: list[tuple[str, int]] = field(default_factory=list)  # docid, old rank
    moved: list[tuple[str, int, int]] = field(default_factory=list)  # docid, old rank, new rank
    unjudged: int = 0  # entered documents whose pair has no label yet


@dataclass
class Changes:
    k: int
    queries: list[QueryChange]
    unchanged: int  # queries whose top k is the same in both
    unjudged: int  # in all


def _tops(system_id: int | None, k: int) -> dict[int, np.ndarray]:
    if system_id is None:
        return {}
    rows = Ranking.objects.filter(system_id=system_id).values_list("query_id", "doc_ids")
    return {q: np.frombuffer(bytes(raw), dtype=np.int64)[:k] for q, raw in rows}


def snapshot_changes(*, old: EngineSnapshot, new: EngineSnapshot, k: int) -> Changes:
    """What changed in the top ``k`` from ``old`` to ``new`` (two snapshots of one engine system)."""
    before, after = _tops(old.system_id, k), _tops(new.system_id, k)
    query_ids = sorted(before.keys() | after.keys())
    empty = np.empty(0, dtype=np.int64)
    changed: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for q in query_ids:
        a, b = before.get(q, empty), after.get(q, empty)
        if not np.array_equal(a, b):
            changed[q] = (a, b)
    doc_ids = {int(d) for a, b in changed.values() for d in np.concatenate([a, b]).tolist()}
    docids = dict(Document.objects.filter(pk__in=doc_ids).values_list("id", "docid"))
    labels = {
        (q, d): label
        for q, d, label in Pair.objects.filter(query_id__in=list(changed), document_id__in=doc_ids).values_list(
            "query_id", "document_id", "label"
        )
    }
    rows = Query.objects.filter(pk__in=list(changed)).values_list("id", "qid", "text")
    queries = {pk: (qid, text) for pk, qid, text in rows}
    out: list[QueryChange] = []
    total = 0
    for q, (a, b) in changed.items():
        qid, text = queries[q]
        row = QueryChange(qid=qid, text=text)
        old_rank = {int(d): r for r, d in enumerate(a.tolist(), start=1)}
        new_rank = {int(d): r for r, d in enumerate(b.tolist(), start=1)}
        for d, r in new_rank.items():
            if d not in old_rank:
                label = labels.get((q, d))
                row.entered.append((docids[d], r, label))
                row.unjudged += label is None
            elif old_rank[d] != r:
                row.moved.append((docids[d], old_rank[d], r))
        row.left = [(docids[d], r) for d, r in old_rank.items() if d not in new_rank]
        total += row.unjudged
        out.append(row)
    out.sort(key=lambda r: r.qid)
    return Changes(k=k, queries=out, unchanged=len(query_ids) - len(changed), unjudged=total)
