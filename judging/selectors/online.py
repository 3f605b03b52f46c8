"""Offline vs online: how well each leaderboard measure predicts each imported online metric across systems."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np
from django.utils.translation import gettext, ngettext

import metrics
from judging.models import Campaign, OnlineMetric
from judging.scoring import Leaderboard, Params, leaderboard
from metrics.measures import is_judged

# Below this many systems a correlation is anecdote: with 3 systems tau can only be -1, -1/3, 1/3 or 1.
FEW_SYSTEMS = 5


def online_figures(*, campaign: Campaign) -> list[dict[str, Any]]:
    """Every imported online figure, for the API and the page's table."""
    rows = (
        OnlineMetric.objects.filter(campaign=campaign)
        .order_by("metric", "query__qid", "system__name")
        .values_list("system__name", "metric", "value", "ci_low", "ci_high", "query__qid")
    )
    return [
        {"system": s, "metric": m, "value": v, "ci_low": lo, "ci_high": hi, "qid": q} for s, m, v, lo, hi, q in rows
    ]


def _nan_to_none(x: float) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


def metric_agreement(x: np.ndarray, y: np.ndarray, names: list[str]) -> dict[str, Any]:
    n = len(x)
    tau = metrics.kendall_tau(x, y) if n >= 2 else float("nan")
    r = metrics.pearson_r(x, y) if n >= 2 else float("nan")
    bad = metrics.discordant_pairs(x, y)
    i, j = np.triu_indices(n, k=1)
    tied = (x[i] == x[j]) & (y[i] != y[j])
    online_tied = (x[i] != x[j]) & (y[i] == y[j])
    return {
        "kendall_tau": _nan_to_none(tau),
        "pearson_r": _nan_to_none(r),
        "n_systems": n,
        "discordant_pairs": [[names[a], names[b]] for a, b in bad.tolist()],
        # pairs the offline measure cannot tell apart although the online metric does: not a discordance,
        # but no evidence either
        "offline_ties": [[names[a], names[b]] for a, b in zip(i[tied].tolist(), j[tied].tolist(), strict=True)],
        # and the other way round: tau-b counts both kinds of one-sided tie as neither agreeing nor disagreeing,
        # so tau is 1 only without discordant pairs and without either kind
        "online_ties": [
            [names[a], names[b]] for a, b in zip(i[online_tied].tolist(), j[online_tied].tolist(), strict=True)
        ],
    }


def offline_vs_online(
    *, campaign: Campaign, params: Params | None = None, lb: Leaderboard | None = None
) -> dict[str, Any]:
    """For each offline measure (every leaderboard measure under ``params``) and each online metric: Kendall's
    tau and Pearson's r across the systems that have both, with how many systems and which pairs of systems
    the two order differently; the same per query where per-query online figures exist.

    ``best`` names, per online metric, the offline measure whose system ranking agrees with it most (tau,
    then r); Judged@k is left out of that choice (it measures the labels, not the systems).
    """
    lb = lb or leaderboard(campaign, params or Params())
    overall, per_query = _online_figures(campaign, lb)
    rows, points = _overall_agreement(lb, overall)
    best = _best_measures(rows, overall)
    query_rows = _per_query_agreement(lb, per_query)
    n_systems = max((r["n_systems"] for r in rows), default=0)
    return {
        "campaign": campaign.slug,
        "k": lb.params.k,
        "gain": lb.params.gain,
        "threshold": lb.params.threshold,
        "labels": lb.params.labels,
        "measures": lb.measures,
        "metrics": sorted(overall),
        "per_query_metrics": sorted(per_query),
        "agreement": rows,
        "best": {
            m: {
                "measure": r["measure"],
                "kendall_tau": r["kendall_tau"],
                "pearson_r": r["pearson_r"],
                "offline_ties": r["offline_ties"],
                "online_ties": r["online_ties"],
                "discordant_pairs": r["discordant_pairs"],
            }
            for m, r in best.items()
        },
        "per_query": query_rows,
        "few_systems": 0 < n_systems < FEW_SYSTEMS,
        "_points": points,  # for the page's scatter plots; dropped from the API
    }


def _online_figures(
    campaign: Campaign, lb: Leaderboard
) -> tuple[dict[str, dict[int, float]], dict[str, dict[int, dict[int, float]]]]:
    """The campaign's online figures by metric: overall {system position: value}, and per query {query position:
    {system position: value}} (systems and queries the leaderboard does not have left out)."""
    index = {sid: i for i, sid in enumerate(lb.cube.system_ids.tolist())}
    q_index = {qid: i for i, qid in enumerate(lb.cube.query_ids.tolist())}
    overall: dict[str, dict[int, float]] = defaultdict(dict)
    per_query: dict[str, dict[int, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for system_id, metric, value, query_id in OnlineMetric.objects.filter(campaign=campaign).values_list(
        "system_id", "metric", "value", "query_id"
    ):
        if system_id not in index:
            continue
        if query_id is None:
            overall[metric][index[system_id]] = value
        elif query_id in q_index:
            per_query[metric][q_index[query_id]][index[system_id]] = value
    return overall, per_query


def _overall_agreement(
    lb: Leaderboard, overall: dict[str, dict[int, float]]
) -> tuple[list[dict[str, Any]], dict[tuple[str, str], list[dict[str, Any]]]]:
    """Per online metric and offline measure, the agreement across the systems with both, and the points of
    its scatter plot."""
    means = lb.means()  # (M, S)
    names = lb.cube.system_names
    rows = []
    points = {}
    for metric in sorted(overall):
        systems = sorted(overall[metric])
        y = np.array([overall[metric][s] for s in systems])
        sys_names = [names[s] for s in systems]
        for measure_row, measure in enumerate(lb.measures):
            x = means[measure_row, systems]
            rows.append({"measure": measure, "metric": metric, **metric_agreement(x, y, sys_names)})
            points[(measure, metric)] = [
                {"system": n, "offline": float(a), "online": float(b)} for n, a, b in zip(sys_names, x, y, strict=True)
            ]
    return rows, points


def _best_measures(rows: list[dict[str, Any]], overall: dict[str, dict[int, float]]) -> dict[str, dict[str, Any]]:
    """Per online metric, the offline measure that agrees with it most: the highest tau, then fewer pairs left
    tied (a measure that ties two systems is not shown right about them), then the highest r; Judged@k is left
    out (it measures the labels, not the systems)."""
    best = {}
    for metric in sorted(overall):
        candidates = [
            r
            for r in rows
            if r["metric"] == metric
            and not is_judged(r["measure"])
            and r["n_systems"] >= 2
            and r["kendall_tau"] is not None
        ]
        if candidates:
            best[metric] = max(
                candidates,
                key=lambda r: (
                    r["kendall_tau"],
                    -len(r["offline_ties"]),
                    r["pearson_r"] if r["pearson_r"] is not None else -2,
                ),
            )
    return best


def _per_query_agreement(lb: Leaderboard, per_query: dict[str, dict[int, dict[int, float]]]) -> list[dict[str, Any]]:
    """Per online metric and offline measure, the agreement on each labelled query with two systems or more, and
    the mean tau and r over those queries."""
    names = lb.cube.system_names
    labelled = lb.table.labelled
    query_rows = []
    for metric in sorted(per_query):
        by_query = per_query[metric]
        for measure_row, measure in enumerate(lb.measures):
            taus, rs, details = [], [], []
            for qi in sorted(by_query):
                if not labelled[qi] or len(by_query[qi]) < 2:
                    continue
                systems = sorted(by_query[qi])
                x = lb.table.scores[measure_row, systems, qi]
                y = np.array([by_query[qi][s] for s in systems])
                a = metric_agreement(x, y, [names[s] for s in systems])
                details.append({"qid": lb.cube.qids[qi], **a})
                if a["kendall_tau"] is not None:
                    taus.append(a["kendall_tau"])
                if a["pearson_r"] is not None:
                    rs.append(a["pearson_r"])
            if details:
                query_rows.append(
                    {
                        "measure": measure,
                        "metric": metric,
                        "queries": len(details),
                        "mean_kendall_tau": float(np.mean(taus)) if taus else None,
                        "mean_pearson_r": float(np.mean(rs)) if rs else None,
                        "per_query": details,
                    }
                )
    return query_rows


def best_sentence(result: dict[str, Any]) -> list[str]:
    """The plain statements the page leads with: which offline measure best predicts which online metric."""
    out = []
    for metric, b in result["best"].items():
        n = next(r["n_systems"] for r in result["agreement"] if r["metric"] == metric)
        tau = b["kendall_tau"]
        r = b["pearson_r"]
        figures = {"measure": b["measure"], "metric": metric, "tau": f"{tau:+.2f}", "n": n}
        if r is not None:
            figures["r"] = f"{r:+.2f}"
            if tau == 1:
                text = ngettext(
                    "%(measure)s orders the systems exactly as %(metric)s (Kendall's tau %(tau)s, "
                    "Pearson r %(r)s, %(n)d system)",
                    "%(measure)s orders the systems exactly as %(metric)s (Kendall's tau %(tau)s, "
                    "Pearson r %(r)s, %(n)d systems)",
                    n,
                )
            else:
                text = ngettext(
                    "%(measure)s agrees best with %(metric)s (Kendall's tau %(tau)s, Pearson r %(r)s, %(n)d system)",
                    "%(measure)s agrees best with %(metric)s (Kendall's tau %(tau)s, Pearson r %(r)s, %(n)d systems)",
                    n,
                )
        elif tau == 1:
            text = ngettext(
                "%(measure)s orders the systems exactly as %(metric)s (Kendall's tau %(tau)s, %(n)d system)",
                "%(measure)s orders the systems exactly as %(metric)s (Kendall's tau %(tau)s, %(n)d systems)",
                n,
            )
        else:
            text = ngettext(
                "%(measure)s agrees best with %(metric)s (Kendall's tau %(tau)s, %(n)d system)",
                "%(measure)s agrees best with %(metric)s (Kendall's tau %(tau)s, %(n)d systems)",
                n,
            )
        parts = [text % figures]
        parts += [
            gettext("; it orders %(a)s and %(b)s the other way round") % {"a": a, "b": b_}
            for a, b_ in b["discordant_pairs"]
        ]
        parts += [gettext("; it cannot tell %(a)s from %(b)s") % {"a": a, "b": b_} for a, b_ in b["offline_ties"]]
        parts += [
            gettext("; it tells %(a)s from %(b)s, which %(metric)s ties") % {"a": a, "b": b_, "metric": metric}
            for a, b_ in b.get("online_ties", [])
        ]
        out.append("".join(parts) + ".")
    return out


def per_query_for_page(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-query rows the "Offline vs online" page shows: for each online metric, its best offline measure
    only (nDCG@k where none is best). Annotators get these from the API too, and no more (issue 11 #7)."""
    fallback = str(metrics.Measure("nDCG", data["k"]))
    return [q for q in data["per_query"] if data["best"].get(q["metric"], {}).get("measure", fallback) == q["measure"]]
