"""Each annotator's pace and the work left to them, and when the campaign should be done at that pace.

What is stored: every judgment has ``created_at`` and ``seconds_spent``, the time the judging page had the
pair on screen before the grade (0 from clients that do not send it, e.g. a script through the API). A
judgment's duration is ``seconds_spent`` when it is positive, else the gap since the annotator's previous
judgment in the campaign, capped at ``GAP_CAP_SECONDS`` (a longer gap is a break, not work). An annotator's
pace is the median duration over their last ``PACE_WINDOW`` judgments.

What is left:
- ``assigned``: pooled pairs of the queries given to them (QueryAssignment) that they have not judged and
  that still need a judgment;
- ``shared``: pooled pairs of the queries given to nobody that still need a judgment and that they have not
  judged (the queries given to someone else are theirs: see selectors.queue);
- ``remaining`` = assigned + shared.

The estimated finish assumes each annotator judges their own queries first and then the shared ones at their
pace, the team splitting the shared judgments (``redundancy`` minus the judgments a pair has) so that all end
together (see ``finish_times``); an annotator without a pace of their own counts at the team's median.
``eta_seconds`` is judging time; ``eta`` is that time from now, if they judged without a break.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, F, IntegerField, OuterRef, Q, Subquery, Sum, Value, Window
from django.db.models.functions import Coalesce, RowNumber
from django.utils import timezone

from judging.models import AnnotatorProfile, Campaign, Judgment, Membership, Pair, QueryAssignment

PACE_WINDOW = 50
GAP_CAP_SECONDS = 600.0


@dataclass(frozen=True)
class Pace:
    rows: list[dict[str, Any]]  # one per member and past judge, by username
    team_median_seconds: float | None
    eta_seconds: float | None  # the campaign's: when its last annotator is done
    eta: datetime | None
    shared_judgments: int  # judgments the shared queries still need
    assigned_pairs: int  # pairs of assigned queries their assignees have still to judge


def durations(annotators: np.ndarray, times: np.ndarray, seconds: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Each judgment's duration: rows sorted by annotator, newest first (``rank`` 1, 2, ... within an
    annotator); ``seconds_spent`` when positive, else the gap to the annotator's next older judgment capped at
    GAP_CAP_SECONDS (NaN for an annotator's oldest judgment read, which has nothing to measure from)."""
    gap = np.full(times.shape, np.nan)
    if times.size > 1:
        same = annotators[:-1] == annotators[1:]
        gap[:-1] = np.where(same, times[:-1] - times[1:], np.nan)
    gap = np.minimum(np.maximum(gap, 0.0), GAP_CAP_SECONDS)
    return np.where(seconds > 0, seconds, gap)


def medians_by(annotators: np.ndarray, values: np.ndarray) -> dict[int, float]:
    """Median of the finite ``values`` per annotator id (rows grouped by annotator)."""
    ok = np.isfinite(values)
    annotators, values = annotators[ok], values[ok]
    if not values.size:
        return {}
    ids, starts = np.unique(annotators, return_index=True)
    order = np.argsort(starts)
    ids, starts = ids[order], starts[order]
    parts = np.split(values, starts[1:])
    return {int(a): float(np.median(p)) for a, p in zip(ids.tolist(), parts, strict=True)}


def finish_times(assigned_seconds: np.ndarray, seconds_per: np.ndarray, shared: float) -> tuple[np.ndarray, float]:
    """When each annotator is done, in judging seconds from now, and when the team is.

    Annotator a first spends ``assigned_seconds[a]`` on their own queries, then judges shared work at one
    judgment per ``seconds_per[a]``. The shared ``shared`` judgments end at T with
    sum_a max(0, T - assigned_seconds[a]) / seconds_per[a] = shared; each annotator finishes at
    max(assigned_seconds[a], T). Solved exactly on the sorted breakpoints (the left side is piecewise linear).
    """
    if not assigned_seconds.size:
        return assigned_seconds, float("nan") if shared > 0 else 0.0
    if shared <= 0:
        return assigned_seconds.copy(), float(assigned_seconds.max())
    order = np.argsort(assigned_seconds, kind="stable")
    a, w = assigned_seconds[order], 1.0 / seconds_per[order]
    cw, cwa = np.cumsum(w), np.cumsum(w * a)
    # work done on shared judgments by time a[k]: those who started before a[k] have worked since they started
    at_break = a * np.concatenate(([0.0], cw[:-1])) - np.concatenate(([0.0], cwa[:-1]))
    k = int(np.searchsorted(at_break, shared, side="right")) - 1
    end = (shared + cwa[k]) / cw[k]
    return np.maximum(assigned_seconds, end), float(max(end, assigned_seconds.max()))


def _last_judgments(campaign: Campaign) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every annotator's last PACE_WINDOW + 1 judgments in the campaign (one query, a window function):
    annotator ids, times (epoch seconds), seconds spent and rank (1 = newest), grouped by annotator."""
    rows = list(
        Judgment.objects.filter(pair__campaign_id=campaign.id)
        .annotate(
            rank=Window(
                RowNumber(), partition_by=[F("annotator_id")], order_by=[F("created_at").desc(), F("id").desc()]
            )
        )
        .filter(rank__lte=PACE_WINDOW + 1)
        .order_by("annotator_id", "rank")
        .values_list("annotator_id", "created_at", "seconds_spent", "rank")
    )
    if not rows:
        empty = np.zeros(0)
        return empty.astype(np.int64), empty, empty, empty.astype(np.int64)
    ids, times, secs, ranks = zip(*rows, strict=True)
    return (
        np.array(ids, dtype=np.int64),
        np.array([t.timestamp() for t in times]),
        np.array(secs, dtype=np.float64),
        np.array(ranks, dtype=np.int64),
    )


def pace_medians(campaign: Campaign) -> tuple[dict[int, float], float | None]:
    """The median seconds per judgment over each annotator's last PACE_WINDOW judgments, and the team's
    (the median over all those judgments of the campaign's human annotators)."""
    ids, times, secs, ranks = _last_judgments(campaign)
    values = durations(ids, times, secs, ranks)
    values = np.where(ranks <= PACE_WINDOW, values, np.nan)
    models = set(AnnotatorProfile.model_user_ids())
    human = ~np.isin(ids, list(models)) if models else np.ones(ids.shape, dtype=bool)
    team = values[human & np.isfinite(values)]
    return medians_by(ids, values), (float(np.median(team)) if team.size else None)


def campaign_pace(*, campaign: Campaign) -> Pace:
    """The Progress page's and the API's pace and work left, per member and past judge (see the module)."""
    now = timezone.now()
    judged = _judged_by_annotator(campaign, now)
    shared_pairs, shared_judgments = _shared_left(campaign)
    assigned = _assigned_left(campaign)
    medians, team_median = pace_medians(campaign)
    roles = dict(campaign.memberships.values_list("user_id", "role"))
    models = set(AnnotatorProfile.model_user_ids())
    users = get_user_model().objects.filter(id__in=set(judged) | set(roles) | set(assigned)).order_by("username")
    rows: list[dict[str, Any]] = []
    for user in users:
        j = judged.get(user.id, {})
        is_model = user.id in models
        role = roles.get(user.id)
        works = role == Membership.Role.ANNOTATOR and not is_model
        mine = assigned.get(user.id, 0)
        open_shared = max(0, shared_pairs - j.get("shared_open", 0)) if works else 0
        rows.append(
            {
                "user": user,
                "username": user.get_username(),
                "role": role,
                "model": is_model,
                "judged": j.get("judged", 0),
                "judged_today": j.get("judged_today", 0),
                "assigned": mine,
                "shared": open_shared,
                "remaining": mine + open_shared if works else None,
                "median_seconds": medians.get(user.id),
                "eta_seconds": None,
                "eta": None,
                "works": works,
            }
        )
    team = [r for r in rows if r["works"]]
    eta_seconds = _team_finish(team, team_median, shared_judgments, now)
    return Pace(
        rows=rows,
        team_median_seconds=team_median,
        eta_seconds=eta_seconds,
        eta=None if eta_seconds is None else now + timedelta(seconds=eta_seconds),
        shared_judgments=shared_judgments,
        assigned_pairs=sum(r["assigned"] for r in team),
    )


def _judged_by_annotator(campaign: Campaign, now: datetime) -> dict[int, dict[str, Any]]:
    """Judgments per annotator: all, today, and of shared pairs still needing judgments."""
    today = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
    given = Exists(QueryAssignment.objects.filter(query_id=OuterRef("pair__query_id")))
    return {
        r["annotator_id"]: r
        for r in Judgment.objects.filter(pair__campaign_id=campaign.id)
        .order_by()
        .values("annotator_id")
        .annotate(
            judged=Count("id"),
            judged_today=Count("id", filter=Q(created_at__gte=today)),
            shared_open=Count(
                "id", filter=Q(pair__pooled=True, pair__judgment_count__lt=campaign.redundancy) & ~Q(given)
            ),
        )
    }


def _shared_left(campaign: Campaign) -> tuple[int, int]:
    """The shared pool (queries given to nobody) still needing judgments: its pairs, and the judgments they need."""
    redundancy = campaign.redundancy
    shared = (
        Pair.objects.filter(campaign_id=campaign.id, pooled=True, judgment_count__lt=redundancy)
        .exclude(Exists(QueryAssignment.objects.filter(query_id=OuterRef("query_id"))))
        .aggregate(pairs=Count("id"), judgments=Coalesce(Sum("judgment_count"), Value(0)))
    )
    pairs = int(shared["pairs"])
    return pairs, redundancy * pairs - int(shared["judgments"])


def _assigned_left(campaign: Campaign) -> dict[int, int]:
    """The assigned pairs each assignee has still to judge."""
    left_of_query = (
        Pair.objects.filter(query_id=OuterRef("query_id"), pooled=True, judgment_count__lt=campaign.redundancy)
        .exclude(
            Exists(Judgment.objects.filter(pair_id=OuterRef("pk"), annotator_id=OuterRef(OuterRef("annotator_id"))))
        )
        .order_by()
        .values("query_id")
        .annotate(n=Count("id"))
        .values("n")[:1]
    )
    lefts = np.array(
        QueryAssignment.objects.filter(campaign=campaign)
        .annotate(left=Coalesce(Subquery(left_of_query, output_field=IntegerField()), Value(0)))
        .values_list("annotator_id", "left"),
        dtype=np.int64,
    ).reshape(-1, 2)
    who, at = np.unique(lefts[:, 0], return_inverse=True)
    return dict(zip(who.tolist(), np.bincount(at, weights=lefts[:, 1]).astype(int).tolist(), strict=True))


def _team_finish(
    team: list[dict[str, Any]], team_median: float | None, shared_judgments: int, now: datetime
) -> float | None:
    """When the team is done, in seconds from now (each member's own ``eta`` set on their row): their assigned
    pairs at their own pace, then the shared pool split as they come free; None without a pace to go by."""
    speeds = np.array([r["median_seconds"] or team_median or np.nan for r in team], dtype=np.float64)
    if team and np.isfinite(speeds).all() and (speeds > 0).all():
        own = np.array([r["assigned"] for r in team], dtype=np.float64) * speeds
        each, end = finish_times(own, speeds, float(shared_judgments))
        for r, s in zip(team, each.tolist(), strict=True):
            r["eta_seconds"] = s
            r["eta"] = now + timedelta(seconds=s)
        return end
    if not shared_judgments and not any(r["assigned"] for r in team):
        return 0.0
    return None


# The pace figures added to each annotators_progress row, and their values for someone not in the pace.
PACE_FIELDS: dict[str, Any] = {
    "judged": 0,
    "judged_today": 0,
    "assigned": 0,
    "remaining": None,
    "median_seconds": None,
    "eta_seconds": None,
    "eta": None,
}


def pace_fields(rows: list[dict[str, Any]], pace: Pace) -> list[dict[str, Any]]:
    """annotators_progress rows with the pace figures of the same user added (PACE_FIELDS)."""
    by_user = {r["user"].pk: r for r in pace.rows}
    return [
        {**row, **{f: by_user.get(row["user"].pk, PACE_FIELDS).get(f, d) for f, d in PACE_FIELDS.items()}}
        for row in rows
    ]
