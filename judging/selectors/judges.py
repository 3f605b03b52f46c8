"""Reads about one model judge beyond its agreement with people: its prompt template's versions, how often
it agrees with itself (``--repeat``), and the query-word-stuffing canary (``--canary``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from django.contrib.auth.models import User as Account
from django.db.models import Count

from judging.judge_models import answer_line
from judging.models import Campaign, CanaryProbe, JudgeTemplate, ModelConsistency

CANARY_ROWS = 20  # probes listed on the page


def template_json(t: JudgeTemplate) -> dict[str, Any]:
    """One version of a judge's template as the page and the API show it."""
    return {
        "version": t.version,
        "text": t.text,
        "answer_line": answer_line(t),
        "example_pairs": list(t.example_pairs),
        "scale": {"low": t.scale_low, "high": t.scale_high, "thresholds": list(t.thresholds)}
        if t.scale_low is not None
        else None,
        "created_by": t.created_by.get_username() if t.created_by else None,
        "created_at": t.created_at.isoformat(),
    }


def judge_templates(*, campaign: Campaign, judge: Account) -> list[dict[str, Any]]:
    """Every version of the judge's template, newest first, each with the number of judgments made with it."""
    rows = (
        JudgeTemplate.objects.filter(campaign=campaign, judge=judge)
        .annotate(n=Count("judgments"))
        .select_related("created_by")
        .order_by("-version")
    )
    return [template_json(t) | {"judgments": t.n} for t in rows]


def self_consistency(*, campaign: Campaign, judge: Account) -> dict[str, Any] | None:
    """How often the judge agrees with itself, over the pairs it was asked several times: the share of
    pairs whose answers were all equal, and the mean share of agreeing answer pairs (metrics.calibration);
    None when it was never asked a pair twice. Where the per-pair figure lives: ModelConsistency.agreement
    (1 - agreement is the judge's doubt about the pair)."""
    rows = np.array(
        list(
            ModelConsistency.objects.filter(pair__campaign=campaign, judge=judge).values_list(
                "agreement", "unanimous", "repeats", "temperature"
            )
        ),
        dtype=np.float64,
    ).reshape(-1, 4)
    if not rows.shape[0]:
        return None
    return {
        "pairs": int(rows.shape[0]),
        "unanimous": float(rows[:, 1].mean()),
        "pairwise": float(rows[:, 0].mean()),
        "repeats": sorted({int(x) for x in rows[:, 2]}),
        "temperatures": sorted({float(x) for x in rows[:, 3]}),
    }


def canary(*, campaign: Campaign, judge: Account) -> dict[str, Any] | None:
    """The judge's latest canary probes: how often the grade of a non-relevant document rose once the
    query's words were written into it, counted over the documents it could rise on (``could_rise``: those the
    model had not already given the top grade as they were; ``at_top`` the others); None when the canary never ran."""
    probes = list(
        CanaryProbe.objects.filter(pair__campaign=campaign, judge=judge)
        .order_by("pair__query__qid", "pair__document__docid")
        .values_list("pair__query__qid", "pair__document__docid", "original_grade", "stuffed_grade")
    )
    if not probes:
        return None
    compared = [(a, b) for _q, _d, a, b in probes if a is not None and b is not None]
    top = campaign.grades.order_by("-value").values_list("value", flat=True).first()
    could_rise = sum(1 for a, _b in compared if top is None or a < top)
    rose = sum(1 for a, b in compared if b > a)
    fell = sum(1 for a, b in compared if b < a)
    return {
        "probes": len(probes),
        "compared": len(compared),
        "could_rise": could_rise,
        "at_top": len(compared) - could_rise,
        "rose": rose,
        "fell": fell,
        "share_rose": rose / could_rise if could_rise else None,
        "rows": [{"qid": q, "docid": d, "original": a, "stuffed": b} for q, d, a, b in probes[:CANARY_ROWS]],
    }
