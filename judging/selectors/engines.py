"""Reads for the engine pages: a campaign's engine systems with their snapshots, and what changed between two
snapshots (per query: documents that entered or left the top k, rank moves, and the unjudged pairs they bring)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from django.db.models import QuerySet

from judging.engine_models import Engine, EngineSnapshot, EngineSystem, QueueFocus
from judging.models import Campaign, Document, Judgment, Pair, Query, Ranking


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


def snapshot_new_pairs(*, old: EngineSnapshot | None, new: EngineSnapshot, k: int) -> np.ndarray:
    """The pooled pairs waiting for a label that ``new`` brought in its top ``k``: those of its documents that
    were not in the top ``k`` of ``old`` (all of them when ``old`` is None), the very pairs the "what changed"
    page counts as unjudged. Ids (int64) in the order they are served: by qid, then the new rank."""
    before, after = _tops(old.system_id if old is not None else None, k), _tops(new.system_id, k)
    empty = np.empty(0, dtype=np.int64)
    entered: dict[tuple[int, int], int] = {}
    for q, b in after.items():
        fresh = b[~np.isin(b, before.get(q, empty))]
        rank = {int(d): r for r, d in enumerate(b.tolist())}
        entered.update({(q, int(d)): rank[int(d)] for d in fresh.tolist()})
    if not entered:
        return empty
    qids = dict(Query.objects.filter(pk__in=after.keys()).values_list("id", "qid"))
    rows = Pair.objects.filter(
        campaign_id=new.engine_system.campaign_id,
        pooled=True,
        label__isnull=True,
        query_id__in=list(after),
        document_id__in={d for _q, d in entered},
    ).values_list("id", "query_id", "document_id")
    found = [(qids[q], entered[(q, d)], pk) for pk, q, d in rows if (q, d) in entered]
    found.sort()
    return np.array([pk for _qid, _rank, pk in found], dtype=np.int64)


@dataclass
class FocusStatus:
    """The campaign's "judge what is new first", as the engine pages show it."""

    focus: QueueFocus
    system: str  # the engine system's name
    number: int  # the snapshot's
    total: int  # pairs it holds
    left: int  # of them still needing a judgment


def focus_status(*, campaign: Campaign) -> FocusStatus | None:
    """The campaign's focus with how many of its pairs still need a judgment, or None when there is none."""
    if campaign.queue_focus_id is None:
        return None
    focus = QueueFocus.objects.select_related("snapshot__engine_system").filter(pk=campaign.queue_focus_id).first()
    if focus is None:
        return None
    ids = np.frombuffer(bytes(focus.pair_ids), dtype=np.int64).tolist()
    left = 0
    for at in range(0, len(ids), 5000):  # SQLite caps a statement's parameters
        left += Pair.objects.filter(
            id__in=ids[at : at + 5000], pooled=True, judgment_count__lt=campaign.redundancy
        ).count()
    snapshot = focus.snapshot
    return FocusStatus(
        focus=focus, system=snapshot.engine_system.name, number=snapshot.number, total=focus.pairs, left=left
    )


def pair_label_and_grade(*, pair_id: int, annotator_id: int | None) -> tuple[int | None, int | None]:
    """The pair's label and the grade ``annotator_id`` gave it (None: none, or unsure), as the Try page shows."""
    label = Pair.objects.filter(pk=pair_id).values_list("label", flat=True).first()
    mine = (
        Judgment.objects.filter(pair_id=pair_id, annotator_id=annotator_id)
        .values_list("grade__value", flat=True)
        .first()
        if annotator_id is not None
        else None
    )
    return label, mine
