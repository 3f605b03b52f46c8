"""The leaderboard as SPEC §4 JSON for `scores --json` and the API: scores, and what judging.scoring.trust adds."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from judging import runtime
from judging.models import Campaign
from judging.scoring import trust
from judging.scoring.cache import Params, leaderboard
from judging.scoring.hybrid import campaign_judge, hybrid_fit, hybrid_summary
from judging.scoring.ppi import ppi_data, ppi_judge
from metrics.numbers import MEASURE_RANGE, within


def leaderboard_data(
    *,
    campaign: Campaign,
    k: int = 10,
    gain: str = "linear",
    threshold: int = 1,
    judged_only: bool = False,
    policy: str | None = None,
    labels: str = "humans",
    per_query: bool = True,
    segment: str | None = None,
    measure: str | None = None,
    bounds: bool = True,
    attribute: str | None = None,
    micro: bool = False,
    per_query_text: Callable[..., str] | None = None,
    top_k: int = 3,
    allow_stale: bool = False,
) -> dict[str, Any]:
    """The SPEC §4 JSON shape shared by `scores --json` and the API.

    With ``bounds`` (the default) each system gains ``"bounds"`` and the top level ``"settled"`` for the
    systems adjacent in the ranking by ``measure`` (default nDCG@k), each with its ``verdict`` and
    ``p_holds``, and ``"stop"``, whether the order of the top ``top_k`` holds with 95% confidence;
    ``attribute`` adds ILD@k and Coverage@k over that document attribute, ``micro`` the micro-averaged P@k and R@k (see
    judging.scoring.trust). ``segment`` restricts the means to the queries carrying that tag.

    ``per_query_text`` (judging.api.leaderboard_text.leaderboard_json): called as ``per_query_text(values, qids,
    names, block=..., series=..., campaign_pk=..., versions=...)`` for each system, with ``values()`` its
    (Q_scored, M) per-query values (``values(rows)`` those of the scored queries at positions ``rows``),
    ``block`` naming them (the scores' state and the system), ``series`` the same system's values in every state
    of the score table and ``versions`` the scored queries' labels versions (a query's values move only with its
    version), it returns what stands in the data for that system's per-query object.

    ``labels="ppi:NAME"``: the prediction-powered leaderboard (judging.scoring.ppi.ppi_data) instead.

    ``allow_stale`` (the API, served by long-running processes): on a large campaign, a process that has not built
    the bounds and verdicts of an earlier state answers with the latest ones published, marked with
    ``verdicts_behind``, while it builds this state's in the background (trust.trust_entries).

    One function: the JSON's keys are filled in SPEC §4's order, each from the one leaderboard read at its top.
    """
    params = Params(
        k=k,
        gain=gain,
        threshold=threshold,
        judged_only=judged_only,
        policy=policy,
        labels=labels or "humans",
        segment=segment,
    )
    if ppi_judge(params.labels) is not None:
        # estimates and intervals, not per-query values (see judging.scoring.ppi)
        return ppi_data(campaign=campaign, params=params, measure=measure)
    lb = leaderboard(campaign, params)
    means = within(lb.means(), *MEASURE_RANGE, what=f"means of {campaign.slug}")  # finite, in [0, 1]
    names = lb.measures
    qids = lb.scored_qids() if per_query else []  # 5,000 names when asked for, none otherwise
    systems = []
    state = lb.state if per_query and per_query_text is not None else ""
    versions = lb.table.versions[lb.table.labelled] if state else None

    @functools.cache
    def scored() -> np.ndarray:
        """(S, Q_scored, M): every system's per-query values, taken once when one's are needed (a poll whose texts
        are all kept needs none)."""
        every = lb.table.scores if lb.table.labelled.all() else lb.table.scores[:, :, lb.table.labelled]
        return np.ascontiguousarray(every.transpose(1, 2, 0))

    @functools.cache
    def scored_at() -> np.ndarray:
        """The score table's positions of the scored queries."""
        return np.flatnonzero(lb.table.labelled)

    for s, name in enumerate(lb.cube.system_names):
        entry = {"name": name, "measures": {m: float(means[i, s]) for i, m in enumerate(names)}}
        if per_query and per_query_text is not None:

            def system_values(rows: np.ndarray | None = None, s: int = s) -> np.ndarray:
                """Every scored query's values (Q_scored, M), or those of the scored queries at ``rows``."""
                if rows is None:
                    values: np.ndarray = scored()[s]
                    return values
                return lb.table.scores[:, s, scored_at()[rows]].T

            entry["per_query"] = per_query_text(
                system_values,
                qids,
                names,
                block=f"{state}:{s}",
                series=f"{lb.key}:{lb.cube.system_ids[s]}",
                campaign_pk=campaign.pk,
                versions=versions,
            )
        elif per_query:
            values = lb.table.scores[:, s][:, lb.table.labelled].T.tolist()  # (Q_scored, M)
            entry["per_query"] = {q: dict(zip(names, row, strict=True)) for q, row in zip(qids, values, strict=True)}
        systems.append(entry)
    data = {
        "campaign": campaign.slug,
        "k": k,
        "gain": gain,
        "threshold": threshold,
        "judged_only": judged_only,
        "policy": policy or campaign.aggregation,
        "labels": lb.params.labels,
        "queries": lb.n_scored,
        "systems": systems,
    }
    if segment is not None:
        data["segment"] = segment
    if bounds or attribute or micro:
        trust.leaderboard_data_extend(
            lb,
            data,
            measure=measure,
            with_bounds=bounds,
            attribute=attribute,
            with_micro=micro,
            per_query=per_query,
            top_k=top_k,
            allow_stale=allow_stale,
        )
    return data


def hybrid_overview(campaign: Campaign, k: int = 10, judge: str | None = None) -> dict[str, Any] | None:
    """Hybrid judging at a glance for the pages (None without a model judge): judging.scoring.hybrid.hybrid_summary
    of model judge ``judge`` (default: the campaign's), with the hybrid leaderboard's label source."""
    judge = judge or campaign_judge(campaign)
    if judge is None:
        return None
    lb = leaderboard(campaign, Params(k=k, labels=f"hybrid:{judge}"))
    fit = hybrid_fit(campaign, lb.cube, judge, lb.table.versions)
    return {**hybrid_summary(campaign, fit, judge), "labels": f"hybrid:{judge}"}


def process_caches_clear() -> None:
    """Forget everything this process keeps between requests (every cache of judging.runtime's registry), as a
    freshly started server process would not have it (the shared cache in Django's cache stays): for tests and
    benchmarks."""
    runtime.caches_clear()
