"""Reads of the queries given to annotators (QueryAssignment): the list a lead manages, with each
assignee's progress on each query."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Exists, IntegerField, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce

from judging.models import Campaign, Judgment, Pair, QueryAssignment


def assignments_list(*, campaign: Campaign, annotator_id: int | None = None) -> list[dict[str, Any]]:
    """The campaign's assignments (only ``annotator_id``'s when given), by annotator then qid, each with the
    query's pooled pairs and how many of them the assignee has judged: one query."""
    of_query = Pair.objects.filter(query_id=OuterRef("query_id"), pooled=True).order_by().values("query_id")
    mine = Exists(Judgment.objects.filter(pair_id=OuterRef("pk"), annotator_id=OuterRef(OuterRef("annotator_id"))))
    qs = QueryAssignment.objects.filter(campaign=campaign)
    if annotator_id is not None:
        qs = qs.filter(annotator_id=annotator_id)
    rows = (
        qs.annotate(
            pairs=Coalesce(
                Subquery(of_query.annotate(n=Count("id")).values("n")[:1], output_field=IntegerField()), Value(0)
            ),
            judged=Coalesce(
                Subquery(of_query.filter(mine).annotate(n=Count("id")).values("n")[:1], output_field=IntegerField()),
                Value(0),
            ),
        )
        .order_by("annotator__username", "query__qid")
        .values(
            "id",
            "annotator__username",
            "query__qid",
            "query__text",
            "assigned_by__username",
            "created_at",
            "pairs",
            "judged",
        )
    )
    return [
        {
            "id": r["id"],
            "annotator": r["annotator__username"],
            "qid": r["query__qid"],
            "query_text": r["query__text"],
            "assigned_by": r["assigned_by__username"],
            "created_at": r["created_at"],
            "pairs": r["pairs"],
            "judged": r["judged"],
            "left": max(0, r["pairs"] - r["judged"]),
        }
        for r in rows
    ]


def assignment_counts(*, campaign: Campaign) -> dict[int, int]:
    """Queries assigned per annotator id."""
    return dict(
        QueryAssignment.objects.filter(campaign=campaign)
        .order_by()
        .values("annotator_id")
        .annotate(n=Count("id"))
        .values_list("annotator_id", "n")
    )
