"""Campaigns, members, roles and progress as pages and exports read them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, TypedDict

import numpy as np
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as Account
from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Count, Max, Q, QuerySet, Sum, TextField
from django.db.models.expressions import RawSQL
from django.utils.translation import pgettext_lazy
from rest_framework.authtoken.models import Token

from judging.formats import RankedList
from judging.models import (
    AnnotatorProfile,
    Campaign,
    Document,
    Grade,
    Judgment,
    Membership,
    Pair,
    Query,
    QueryTag,
    Ranking,
    System,
    User,
)
from judging.roles import leads_everywhere, membership_role


def campaign_list(*, user: User) -> QuerySet[Campaign]:
    """The campaigns a user may open: every one for a superuser, else those they are a member of."""
    if leads_everywhere(user):
        return Campaign.objects.all()
    if isinstance(user, AnonymousUser):
        return Campaign.objects.none()
    return Campaign.objects.filter(memberships__user=user)


# The default scale's English names and descriptions (models.DEFAULT_SCALE) are the interface's words, not
# the lead's: a campaign that kept them shows them in the reader's language. A grade a lead named or
# described is content, shown as written. Keyed by the stored English text.
_DEFAULT_GRADE_TEXT = {
    "Not relevant": pgettext_lazy("default grade name", "Not relevant"),
    "Partially relevant": pgettext_lazy("default grade name", "Partially relevant"),
    "Highly relevant": pgettext_lazy("default grade name", "Highly relevant"),
    "The document does not help with the query at all, or is about something else.": pgettext_lazy(
        "default grade description", "The document does not help with the query at all, or is about something else."
    ),
    "The document is on topic and partly answers the query, or answers a nearby need.": pgettext_lazy(
        "default grade description", "The document is on topic and partly answers the query, or answers a nearby need."
    ),
    "The document is exactly what the searcher wanted.": pgettext_lazy(
        "default grade description", "The document is exactly what the searcher wanted."
    ),
}


def grade_text_shown(text: str) -> str:
    """A grade's name or description as a reader sees it: the default scale's in the active language."""
    shown = _DEFAULT_GRADE_TEXT.get(text)
    return str(shown) if shown is not None else text


def grade_list(*, campaign: Campaign) -> list[Grade]:
    """The campaign's scale, lowest grade first, with the default names and descriptions in the active
    language (for display: these instances are never saved)."""
    grades = list(Grade.objects.filter(campaign_id=campaign.id).order_by("value"))
    for g in grades:
        g.name = grade_text_shown(g.name)
        g.description = grade_text_shown(g.description)
    return grades


# The scale as one JSON text column of a campaign query: [[id, value, name, description, examples], ...].
# The judging page needs the scale on every grade it records; read beside the campaign it costs no query.
_GRADES_JSON = {
    "postgresql": (
        "SELECT COALESCE(json_agg(json_build_array(g.id, g.value, g.name, g.description, g.examples)), '[]')::text "
        'FROM judging_grade g WHERE g.campaign_id = "judging_campaign"."id"'
    ),
    "sqlite": (
        "SELECT json_group_array(json_array(g.id, g.value, g.name, g.description, g.examples)) "
        'FROM judging_grade g WHERE g.campaign_id = "judging_campaign"."id"'
    ),
}


class ScaleRow(TypedDict):
    value: int
    name: str
    description: str
    examples: str


def grade_text_stored(text: str) -> str:
    """The inverse of grade_text_shown: a default name or description as read in the active language, back to
    the stored English text (a lead who kept the default keeps it shown in every reader's language)."""
    for stored, shown in _DEFAULT_GRADE_TEXT.items():
        if text == str(shown):
            return stored
    return text


def scale_rows(*, campaign: Campaign, shown: bool = False) -> list[ScaleRow]:
    """The campaign's scale as stored, lowest grade first (names as the lead wrote them, for editing); with
    ``shown``, the default names and descriptions in the active language (``scale_stored`` takes them back)."""
    rows: list[ScaleRow] = list(campaign.grades.order_by("value").values("value", "name", "description", "examples"))
    if shown:
        for row in rows:
            row["name"], row["description"] = grade_text_shown(row["name"]), grade_text_shown(row["description"])
    return rows


def scale_stored(scale: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A scale edited from ``scale_rows(shown=True)``, with the default texts kept as stored (English keys)."""
    return [
        {**row, "name": grade_text_stored(row["name"]), "description": grade_text_stored(row["description"])}
        for row in scale
    ]


def grades_json() -> RawSQL:
    """An annotation of a Campaign queryset: its grades as JSON text (see ``grades_parse``)."""
    return RawSQL(_GRADES_JSON[connection.vendor], (), output_field=TextField())


_GRADE_FIELDS = ("id", "campaign_id", "value", "name", "description", "examples")


def grades_parse(campaign: Campaign, text: str | None) -> list[Grade]:
    """The Grade objects of ``grades_json``'s text, lowest grade first, named as ``grade_list`` names them
    (the default scale in the active language; for display and as foreign keys, never saved)."""
    grades = []
    for gid, value, name, description, examples in json.loads(text or "[]"):
        # Loaded as the ORM loads a row: a saved grade, with its campaign already at hand.
        grade = Grade.from_db(DEFAULT_DB_ALIAS, _GRADE_FIELDS, [gid, campaign.id, value, name, description, examples])
        grade.campaign = campaign
        grade.name, grade.description = grade_text_shown(name), grade_text_shown(description)
        grades.append(grade)
    return sorted(grades, key=lambda g: g.value)


def campaign_setup(*, campaign: Campaign) -> dict[str, Any]:
    """What a lead's overview shows of the campaign's setup: its systems (by name), how many documents and
    how many annotators it has."""
    return {
        "systems": list(campaign.systems.order_by("name").values("id", "name", "entries", "source", "imported_at")),
        "documents": campaign.documents.count(),
        "annotators": campaign.memberships.filter(role=Membership.Role.ANNOTATOR).count(),
    }


def query_list(*, campaign: Campaign, search: str = "") -> QuerySet[Query]:
    """The campaign's queries by qid, their tags prefetched; with ``search``, those whose qid contains it or
    that carry it as a tag."""
    queries = Query.objects.filter(campaign=campaign)
    if search:
        queries = (queries.filter(qid__icontains=search) | queries.filter(tags__tag=search)).distinct()
    return queries.order_by("qid").prefetch_related("tags")


def query_tag_exists(*, campaign: Campaign, tag: str) -> bool:
    """Whether a query of the campaign carries ``tag`` (a leaderboard segment)."""
    return QueryTag.objects.filter(query__campaign=campaign, tag=tag).exists()


def campaign_members(*, campaign: Campaign) -> QuerySet[Membership]:
    # the profile and label source tell people from model judges and imported-label sources on the page
    return campaign.memberships.select_related("user", "user__annotator_profile", "user__label_source").order_by(
        "role", "user__username"
    )


def membership_get(*, campaign: Campaign, username: str | None = None, user_id: int | None = None) -> Membership | None:
    """One member of the campaign, by username or user id, with the user loaded; None for a non-member."""
    key: dict[str, str | int | None] = {"user__username": username} if username is not None else {"user_id": user_id}
    return campaign.memberships.filter(**key).select_related("user").first()


def campaign_progress(*, campaign: Campaign) -> dict[str, Any]:
    """Pool-wide figures for the campaign page and the lead's progress page."""
    row = Pair.objects.filter(campaign_id=campaign.id, pooled=True).aggregate(
        pooled=Count("id"),
        touched=Count("id", filter=Q(judgment_count__gt=0)),
        complete=Count("id", filter=Q(judgment_count__gte=campaign.redundancy)),
        labelled=Count("id", filter=Q(label__isnull=False)),
        judgments=Sum("judgment_count"),
    )
    row["judgments"] = row["judgments"] or 0
    row["needed"] = row["pooled"] * campaign.redundancy
    row["percent"] = 100.0 * row["complete"] / row["pooled"] if row["pooled"] else 0.0
    row["queries"] = Query.objects.filter(campaign_id=campaign.id).count()
    row["unsure_open"] = (
        Pair.objects.filter(campaign_id=campaign.id, label__isnull=True, judgments__unsure=True).distinct().count()
    )
    return row


def annotators_progress(*, campaign: Campaign) -> list[dict[str, Any]]:
    """One row per member (and per past judge who is no longer a member): what they have done; ``model_judge``
    tells a model judge's row from a person's."""
    User = get_user_model()
    stats = {
        row["annotator_id"]: row
        for row in Judgment.objects.filter(pair__campaign_id=campaign.id)
        .values("annotator_id")
        .annotate(
            judgments=Count("id"),
            unsure=Count("id", filter=Q(unsure=True)),
            notes=Count("id", filter=~Q(note="")),
            seconds=Sum("seconds_spent"),
            last=Max("updated_at"),
        )
    }
    roles = dict(campaign.memberships.values_list("user_id", "role"))
    users = User.objects.filter(id__in=set(stats) | set(roles)).order_by("username")
    models = set(AnnotatorProfile.model_user_ids())
    rows = []
    for user in users:
        s = stats.get(user.id, {})
        n = s.get("judgments", 0)
        rows.append(
            {
                "user": user,
                "role": roles.get(user.id),
                "judgments": n,
                "unsure": s.get("unsure", 0),
                "notes": s.get("notes", 0),
                "last": s.get("last"),
                "mean_seconds": (s.get("seconds") or 0) / n if n else None,
                "model_judge": user.id in models,
            }
        )
    return rows


def system_rankings(*, system: System, queries_per_chunk: int = 200) -> Iterator[RankedList]:
    """A system's run as ``formats.RankedList`` objects in qid order, for a TREC run download.

    Read a chunk of queries at a time, resolving only that chunk's document ids, so memory stays bounded
    by the chunk however large the run."""
    rows = (
        Ranking.objects.filter(system=system)
        .order_by("query__qid")
        .values_list("query__qid", "doc_ids", "scores")
        .iterator(chunk_size=queries_per_chunk)
    )
    batch: list[tuple[str, np.ndarray, np.ndarray]] = []

    def flush() -> Iterator[RankedList]:
        ids = np.unique(np.concatenate([b[1] for b in batch])).tolist() if batch else []
        docids: dict[int, str] = {}
        for start in range(0, len(ids), 5000):  # SQLite allows a limited number of query parameters
            docids.update(Document.objects.filter(id__in=ids[start : start + 5000]).values_list("id", "docid"))
        for qid, doc_ids, scores in batch:
            yield RankedList(qid, [docids[i] for i in doc_ids.tolist()], scores)

    for qid, raw_ids, raw_scores in rows:
        batch.append((qid, np.frombuffer(bytes(raw_ids), dtype=np.int64), np.frombuffer(bytes(raw_scores))))
        if len(batch) == queries_per_chunk:
            yield from flush()
            batch = []
    yield from flush()


def api_token_exists(*, user: Account) -> bool:
    """Whether the user has an API token (a new password would revoke it)."""
    return Token.objects.filter(user=user).exists()


def membership_roles(*, user: User) -> dict[int, str]:
    """The user's role in each campaign they belong to, by campaign id (one query)."""
    if not user.is_authenticated:
        return {}
    return dict(Membership.objects.filter(user=user).values_list("campaign_id", "role"))


def campaign_rows(*, user: User) -> list[dict[str, Any]]:
    """The home page's rows: each campaign the user may open, their role in it and how many pairs they judged."""
    if isinstance(user, AnonymousUser):
        return []
    roles = membership_roles(user=user)
    mine: dict[int, int] = dict(
        Judgment.objects.filter(annotator=user).values_list("pair__campaign_id").annotate(n=Count("id")).order_by()
    )
    return [
        {
            "campaign": c,
            "role": membership_role(campaign=c.id, user=user, roles=roles),
            "mine": mine.get(c.id, 0),
        }
        for c in campaign_list(user=user)
    ]
