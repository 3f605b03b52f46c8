"""Each query tag's own leaderboard: means, bootstrap CIs and tests against the segment's best."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from django.db.models import Count

from judging.models import Campaign, QueryTag
from judging.scoring.cache import Leaderboard, ScoreTable
from judging.scoring.stats import RankingStats, ranking_stats
from judging.scoring.trust.store import cached

# Warn under this many scored queries in a segment: its CIs are wide and its tests have little power.
SEGMENT_MIN_QUERIES = 10


def campaign_tags(campaign: Campaign) -> list[tuple[str, int]]:
    """Every tag of the campaign's queries with its number of queries, most used first."""
    rows = (
        QueryTag.objects.filter(query__campaign=campaign)
        .order_by()
        .values("tag")
        .annotate(n=Count("id"))
        .order_by("-n", "tag")
        .values_list("tag", "n")
    )
    return list(rows)


@dataclass
class Segment:
    tag: str
    n_queries: int  # queries carrying the tag
    n_scored: int  # of those, queries with a label (in the means)
    stats: RankingStats | None  # None without scored queries

    @property
    def few(self) -> bool:
        return self.n_scored < SEGMENT_MIN_QUERIES


def segments(lb: Leaderboard, measure: str) -> list[Segment]:
    """Each tag's leaderboard: means, 95% bootstrap CIs and the randomization test against the segment's best.

    One RankingStats per segment (a loop over tags, not queries), cached per labels state.
    """

    def compute() -> list[Segment]:
        out: list[Segment] = []
        ids = QueryTag.objects.filter(query__campaign=lb.campaign).order_by().values_list("tag", "query_id")
        rows = np.array(list(ids), dtype=object).reshape(-1, 2)
        if not rows.size:
            return out
        tags, inverse = np.unique(rows[:, 0].astype(str), return_inverse=True)
        query_ids = rows[:, 1].astype(np.int64)
        for t, tag in enumerate(tags.tolist()):
            inside = np.isin(lb.cube.query_ids, query_ids[inverse == t])
            scored = lb.table.labelled & inside
            sub = replace(
                lb, table=ScoreTable(lb.table.versions, lb.table.scores, scored), _means=None, key=f"{lb.key}:{tag}"
            )
            stats = ranking_stats(sub, measure, n_resamples=1000, n_permutations=2000) if scored.any() else None
            out.append(Segment(tag, int(inside.sum()), int(scored.sum()), stats))
        return out

    return cached(lb, ("segments", measure), compute)


def _finite(v: float) -> float | None:
    v = float(v)
    return v if np.isfinite(v) else None


def segment_json(seg: Segment, names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "tag": seg.tag,
        "queries": seg.n_queries,
        "scored_queries": seg.n_scored,
        "few_queries": seg.few,
    }
    systems = []
    for i, name in enumerate(names):
        entry: dict[str, Any] = {"name": name, "value": None, "ci": None, "p_vs_best": None, "best": False}
        if seg.stats is not None:
            st = seg.stats
            entry["value"] = float(st.means[i])
            low, high = _finite(st.ci_low[i]), _finite(st.ci_high[i])
            entry["ci"] = [low, high] if low is not None else None
            entry["best"] = i == st.best
            entry["p_vs_best"] = _finite(st.p_vs_best[i])
        systems.append(entry)
    out["systems"] = systems
    return out
