"""Shapes of scores for pages: per-query ranked lists and the judging timeline."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
from django.db.models import Count, Max, Min
from django.db.models.functions import TruncDay, TruncHour

import metrics
from judging.models import Campaign, Document, Judgment, Pair
from judging.scoring.cache import Leaderboard
from judging.scoring.cube import labels_for


@dataclass
class QueryRankings:
    """One query's ranked lists: every system's documents with their labels, for the drill-down page."""

    doc_ids: np.ndarray  # (S, D) document pks, -1 after the end of a run
    labels: np.ndarray  # (S, D) label, metrics.UNJUDGED, or metrics.PAD
    unsure: set[int]  # documents someone was unsure about that have no label
    documents: dict[int, tuple[str, str, str]]  # pk -> (docid, title, url) of every document shown
    qrels: list[tuple[int, int]]  # (document pk, label) of every labelled document, best first
    unretrieved: list[tuple[int, int]]  # labelled relevant documents no shown system retrieved in the depth


def query_rankings(lb: Leaderboard, q: int, *, depth: int, systems: np.ndarray | None = None) -> QueryRankings:
    """The top ``depth`` of the chosen systems (indices, default all) for the query at cube position ``q``.

    A handful of queries whatever the size: the query's labels (under the leaderboard's policy), its
    unsure pairs, and the titles of the documents on the page.
    """
    cube = lb.cube
    sel = np.arange(len(cube.system_ids)) if systems is None else np.asarray(systems, dtype=np.intp)
    docs = cube.doc_ids[sel, q, :depth]
    query_id = int(cube.query_ids[q])
    lq, ld, lab = labels_for(
        lb.campaign, np.array([query_id]), lb.params.policy, total=len(cube.query_ids), labels=lb.params.labels
    )
    order = np.argsort(ld)
    ld, lab = ld[order], lab[order]
    if ld.size:
        pos = np.minimum(np.searchsorted(ld, docs), ld.size - 1)
        labels = np.where(ld[pos] == docs, lab[pos], metrics.UNJUDGED)
    else:
        labels = np.full(docs.shape, metrics.UNJUDGED)
    labels = np.where(docs >= 0, labels, metrics.PAD)
    unsure = set(
        Judgment.objects.filter(pair__query_id=query_id, unsure=True)
        .order_by()
        .values_list("pair__document_id", flat=True)
        .distinct()
    ) - set(ld.tolist())
    by_label = np.lexsort((ld, -lab))
    qrels = list(zip(ld[by_label].tolist(), lab[by_label].tolist(), strict=True))
    retrieved = set(docs[docs >= 0].tolist())
    unretrieved = [(d, g) for d, g in qrels if g >= lb.params.threshold and d not in retrieved]
    wanted = retrieved | {d for d, _ in qrels}
    rows = Document.objects.filter(id__in=wanted).order_by().values_list("id", "docid", "title", "url")
    documents = {pk: (docid, title, url) for pk, docid, title, url in rows}
    return QueryRankings(docs, labels, unsure, documents, qrels, unretrieved)


@dataclass
class Timeline:
    """Judgments over time for the progress chart."""

    times: list[datetime]
    cumulative: list[int]
    bucket: str  # "hour" or "day"
    goal: int  # pooled pairs times annotators per pair


def judging_timeline(campaign: Campaign) -> Timeline:
    """Cumulative count of judgments (first judgments of a pair by an annotator, when they were made) per
    hour when judging spans up to three days, per day otherwise. Three small aggregate queries."""
    judgments = Judgment.objects.filter(pair__campaign=campaign)
    span = judgments.aggregate(first=Min("created_at"), last=Max("created_at"))
    goal = Pair.objects.filter(campaign=campaign, pooled=True).count() * campaign.redundancy
    if span["first"] is None:
        return Timeline([], [], "day", goal)
    bucket = "hour" if span["last"] - span["first"] <= timedelta(days=3) else "day"
    trunc = TruncHour if bucket == "hour" else TruncDay
    rows = list(
        judgments.annotate(t=trunc("created_at"))
        .values("t")
        .annotate(n=Count("id"))
        .order_by("t")
        .values_list("t", "n")
    )
    times = [t for t, _ in rows]
    cumulative = np.cumsum([n for _, n in rows]).tolist()
    return Timeline(times, cumulative, bucket, goal)
