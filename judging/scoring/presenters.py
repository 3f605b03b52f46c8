"""Shapes of scores for pages: ranking rows, significance cells, the heatmap, head-to-head, ranked lists, timeline.

Views parse the request and render; everything they show that is computed from scores is computed here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.db.models import Count, Max, Min, Q
from django.db.models.functions import TruncDay, TruncHour
from django.utils.safestring import SafeString
from django.utils.translation import gettext, gettext_lazy, ngettext

import metrics
from judging import charts
from judging.errors import RequestError
from judging.models import AnnotatorProfile, Campaign, Document, Judgment, LabelSource, Pair, Query
from judging.scoring.cache import Leaderboard
from judging.scoring.cube import labels_for
from judging.scoring.stats import PairwiseStats, RankingStats


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
    """Judgments over time for the progress chart: people's and model judges' apart, imported labels left out."""

    times: list[datetime]  # the buckets with a judgment by a person or a model judge
    cumulative: list[int]  # people's judgments up to each bucket
    bucket: str  # "hour" or "day"
    goal: int  # pooled pairs times annotators per pair
    model_cumulative: list[int] = field(default_factory=list)  # model judges' answers up to each bucket
    imported: int = 0  # labels imported from qrels files (made elsewhere, at no time the campaign knows)


def judging_timeline(campaign: Campaign) -> Timeline:
    """Cumulative count of judgments (one per pair and annotator, at the time it was first made) per hour when
    judging spans up to three days, per day otherwise: people's and model judges' apart; imported labels are
    only counted, as they were made before the campaign saw them. Three small aggregate queries."""
    sources = list(LabelSource.objects.values_list("user_id", flat=True))  # a handful of accounts
    models_ = AnnotatorProfile.model_user_ids()
    judgments = Judgment.objects.filter(pair__campaign=campaign)
    made = judgments.exclude(annotator_id__in=sources)
    span = made.aggregate(first=Min("created_at"), last=Max("created_at"))
    imported = judgments.filter(annotator_id__in=sources).count() if sources else 0
    goal = Pair.objects.filter(campaign=campaign, pooled=True).count() * campaign.redundancy
    if span["first"] is None:
        return Timeline([], [], "day", goal, [], imported)
    bucket = "hour" if span["last"] - span["first"] <= timedelta(days=3) else "day"
    trunc = TruncHour if bucket == "hour" else TruncDay
    rows = list(
        made.annotate(t=trunc("created_at"))
        .values("t")
        .annotate(
            people=Count("id", filter=~Q(annotator_id__in=models_)),
            model=Count("id", filter=Q(annotator_id__in=models_)),
        )
        .order_by("t")
        .values_list("t", "people", "model")
    )
    times = [t for t, _, _ in rows]
    cumulative = np.cumsum([n for _, n, _ in rows]).tolist()
    model = np.cumsum([n for _, _, n in rows]).tolist()
    return Timeline(times, cumulative, bucket, goal, model, imported)


# --------------------------------------------------------------------------- measure names in words

# What each measure of the registry (metrics.measures.MEASURES) is, in words, for tooltips and menus: its label,
# translated like every page's words; the abbreviation itself (P@10, nDCG@10, MRR ...) stays as it is in every
# language, as trec_eval and the API name it. tests/judging/test_scoring.py holds one per measure.
MEASURE_TITLES = {
    "nDCG": gettext_lazy("normalized discounted cumulative gain (nDCG) in the top %(k)s"),
    "P": gettext_lazy("precision: share of the top %(k)s that is relevant"),
    "R": gettext_lazy("recall: share of the query's relevant documents found in the top %(k)s"),
    "F1": gettext_lazy("F1: harmonic mean of precision and recall in the top %(k)s"),
    "Hit": gettext_lazy("hit rate: share of queries with a relevant document in the top %(k)s"),
    "MRR": gettext_lazy("mean reciprocal rank (MRR) of the first relevant document"),
    "MAP": gettext_lazy("mean average precision (MAP)"),
    "bpref": gettext_lazy("bpref: how often judged relevant documents rank above judged non-relevant ones"),
    "Judged": gettext_lazy("share of the top %(k)s that has a label"),
}


def measure_title(name: str) -> str:
    """The measure named ``name`` ("P@10", "MRR", "ILD@10" ...) in words, or "" for a measure without one."""
    base, _, cutoff = name.partition("@")
    title = MEASURE_TITLES.get(base)
    if title is None:
        return ""
    return f"{name}: {title % {'k': cutoff or 'k'}}"


# --------------------------------------------------------------------------- leaderboard rows

JUDGED_WARNING = 0.9  # Judged@k below this: scores of unjudged documents are guesses, say so
TIE = 1e-9  # per-query differences smaller than this are ties (float noise of equal rankings)


def system_order(lb: Leaderboard, measure: str) -> np.ndarray:
    """System indices by the mean of ``measure``, best first; ties by name."""
    means = lb.means()[lb.measure_index(measure)]
    names = np.array(lb.cube.system_names, dtype=str)
    return np.lexsort((names, -np.round(means, 12))) if len(names) else np.zeros(0, np.intp)


def _status(stats: RankingStats, s: int) -> str:
    """best, worse (significantly worse than the best) or tied; "" without a test against the best."""
    if s == stats.best:
        return "best"
    if not math.isfinite(stats.p_vs_best[s]):
        return ""
    return "worse" if stats.worse[s] else "tied"


def ranking_rows(lb: Leaderboard, measure: str, judged: str, stats: RankingStats | None) -> list[dict[str, Any]]:
    """One row per system in leaderboard order: rank, the ranking measure, the others, coverage, CI, status."""
    ranked_row, judged_row = lb.measure_index(measure), lb.measure_index(judged)
    means = lb.means()
    answered = (lb.cube.answered & lb.table.labelled).sum(axis=1)
    rows = []
    for rank, s in enumerate(system_order(lb, measure).tolist(), start=1):
        coverage = float(means[judged_row, s])
        row = {
            "rank": rank,
            "name": lb.cube.system_names[s],
            "index": s,
            "ranked": float(means[ranked_row, s]),
            "values": [
                {"name": m, "value": float(means[i, s])}
                for i, m in enumerate(lb.measures)
                if i not in (ranked_row, judged_row)
            ],
            "judged": coverage,
            "judged_low": coverage < JUDGED_WARNING,
            "answered": int(answered[s]),
            "ci": None,
            "status": "",
        }
        if stats is not None:
            row["ci"] = (float(stats.ci_low[s]), float(stats.ci_high[s])) if math.isfinite(stats.ci_low[s]) else None
            row["status"] = _status(stats, s)
            if row["status"] in ("worse", "tied"):
                row["p"] = float(stats.p_vs_best[s])
        rows.append(row)
    return rows


def bar_chart_of(
    rows: list[dict[str, Any]], measure: str, stats: RankingStats | None, *, width: int = 900
) -> SafeString | None:
    """The bar chart of ``ranking_rows``: means, CIs where known, best/tied/worse colours."""
    if not rows:
        return None
    return charts.bar_chart(
        [r["name"] for r in rows],
        [r["ranked"] for r in rows],
        measure=measure,
        low=[r["ci"][0] if r["ci"] else math.nan for r in rows] if stats is not None else None,
        high=[r["ci"][1] if r["ci"] else math.nan for r in rows] if stats is not None else None,
        status=[r["status"] for r in rows],
        width=width,
    )


def significance_rows(lb: Leaderboard, pairwise: PairwiseStats) -> tuple[list[dict[str, Any]], int, int]:
    """The pairwise matrix in leaderboard order: (rows of cells, number of system pairs, significant ones)."""
    order = system_order(lb, pairwise.measure).tolist()
    names = lb.cube.system_names
    rows = []
    for i in order:
        cells: list[dict[str, Any]] = []
        for j in order:
            if i == j:
                cells.append({"self": True})
                continue
            p, d = float(pairwise.p[i, j]), float(pairwise.diff[i, j])
            sig = math.isfinite(p) and p < pairwise.alpha
            cells.append(
                {
                    "p": p,
                    "diff": d,
                    "sig": sig,
                    "cls": ("sig-better" if d > 0 else "sig-worse") if sig else "ns",
                    "title": gettext("%(a)s − %(b)s = %(diff)s, adjusted p = %(p)s")
                    % {"a": names[i], "b": names[j], "diff": f"{d:+.4f}", "p": f"{p:.4f}"},
                }
            )
        rows.append({"name": names[i], "cells": cells})
    n_pairs = len(order) * (len(order) - 1) // 2
    n_sig = int(np.nansum(np.triu(pairwise.p < pairwise.alpha, 1))) if len(order) > 1 else 0
    return rows, n_pairs, n_sig


def query_texts(query_ids: np.ndarray) -> dict[int, str]:
    """Text of the queries on one page (one small query)."""
    return dict(Query.objects.filter(id__in=np.asarray(query_ids).tolist()).order_by().values_list("id", "text"))


# --------------------------------------------------------------------------- queries x systems heatmap

SORTS = {
    "qid": gettext_lazy("query id"),
    "hardest": gettext_lazy("hardest first (lowest mean over systems)"),
    "easiest": gettext_lazy("easiest first"),
    "spread": gettext_lazy("most disagreement between systems first"),
    "judged": gettext_lazy("least judged first"),
}


@dataclass
class Heatmap:
    """The scored queries x systems of one measure, filtered and sorted; ``matching`` is what to page over."""

    order: np.ndarray  # (S,) systems in leaderboard order
    scored: np.ndarray  # (Qs,) cube positions of the queries in the means
    values: np.ndarray  # (S, Qs) the measure, systems in leaderboard order
    mean: np.ndarray  # (Qs,) over systems
    judged: np.ndarray  # (Qs,) mean Judged@k over systems
    qids: np.ndarray  # (Qs,) object
    matching: np.ndarray  # positions into scored, in the chosen order

    def rows(self, lb: Leaderboard, shown: np.ndarray) -> list[dict[str, Any]]:
        """The heatmap rows of the positions ``shown`` (one page), with colour classes and query texts."""
        shown = np.asarray(shown, dtype=np.intp)
        texts = query_texts(lb.cube.query_ids[self.scored[shown]])
        classes = (
            charts.heat_classes(self.values[:, shown]) if shown.size else np.zeros((len(self.order), 0), dtype=str)
        )
        return [
            {
                "qid": self.qids[i],
                "text": texts.get(int(lb.cube.query_ids[self.scored[i]]), ""),
                "cells": [{"value": float(self.values[s, i]), "cls": classes[s, col]} for s in range(len(self.order))],
                "mean": float(self.mean[i]),
                "mean_cls": charts.heat_class(float(self.mean[i])),
                "judged": float(self.judged[i]),
                "judged_low": self.judged[i] < JUDGED_WARNING,
            }
            for col, i in enumerate(shown.tolist())
        ]


def heatmap(lb: Leaderboard, measure: str, judged: str, *, sort: str = "qid", search: str = "") -> Heatmap:
    """Scored queries whose qid contains ``search`` (case-insensitive), sorted by ``sort`` (see SORTS);
    ties and the qid sort by qid."""
    if sort not in SORTS:
        raise RequestError("sort", f"sort must be one of {', '.join(SORTS)}")
    order = system_order(lb, measure)
    scored = np.flatnonzero(lb.table.labelled)
    values = lb.table.scores[lb.measure_index(measure)][np.ix_(order, scored)]
    judged_share = lb.table.scores[lb.measure_index(judged)][:, scored]
    # no system yet (qrels imported before any run): nothing is retrieved, so nothing of it is judged
    coverage = judged_share.mean(axis=0) if judged_share.shape[0] else np.zeros(scored.size)
    qids = np.array(lb.cube.qids, dtype=object)[scored]
    matching = np.arange(scored.size)
    if search:
        matching = np.flatnonzero(np.char.find(np.char.lower(qids.astype(str)), search.lower()) >= 0)
    mean = values.mean(axis=0) if values.size else np.zeros(scored.size)
    key = {
        "qid": None,
        "hardest": mean,
        "easiest": -mean,
        "spread": -values.std(axis=0) if values.size else mean,
        "judged": coverage,
    }[sort]
    if key is None:
        matching = matching[np.argsort(qids[matching].astype(str), kind="stable")]
    else:
        matching = matching[np.lexsort((qids[matching].astype(str), key[matching]))]
    return Heatmap(order, scored, values, mean, coverage, qids, matching)


# --------------------------------------------------------------------------- head-to-head


@dataclass
class HeadToHead:
    """Two systems on one measure, query by query; ``ranked`` (biggest win of ``a`` first) is what to page."""

    a: int
    b: int
    summary: dict[
        str, Any
    ]  # names, n, wins / ties / losses, means, and with 2+ queries p-values and the CI of the mean
    diff: np.ndarray  # (Qs,) a minus b
    x: np.ndarray  # (S, Qs) the measure
    scored: np.ndarray  # (Qs,) cube positions
    qids: np.ndarray  # (Qs,) object
    ranked: np.ndarray  # positions into scored

    def rows(self, lb: Leaderboard, judged: str, shown: np.ndarray) -> list[dict[str, Any]]:
        """The per-query rows of the positions ``shown`` (one page)."""
        shown = np.asarray(shown, dtype=np.intp)
        judged_row = lb.measure_index(judged)
        texts = query_texts(lb.cube.query_ids[self.scored[shown]])
        a, b, diff = self.a, self.b, self.diff
        return [
            {
                "qid": self.qids[i],
                "text": texts.get(int(lb.cube.query_ids[self.scored[i]]), ""),
                "a": float(self.x[a, i]),
                "b": float(self.x[b, i]),
                "diff": float(diff[i]),
                "outcome": "win" if diff[i] > TIE else "loss" if diff[i] < -TIE else "tie",
                "judged_a": float(lb.table.scores[judged_row, a, self.scored[i]]),
                "judged_b": float(lb.table.scores[judged_row, b, self.scored[i]]),
            }
            for i in shown.tolist()
        ]


def head_to_head(lb: Leaderboard, measure: str, a: int, b: int) -> HeadToHead:
    """Per-query wins, ties and losses of system ``a`` against ``b``, a randomization test, a paired t-test
    and a bootstrap CI of the mean difference (fixed seeds: the same labels give the same numbers)."""
    x = lb.per_query(measure)
    scored = np.flatnonzero(lb.table.labelled)
    diff = x[a] - x[b] if x.size else np.zeros(0)
    wins, losses = int((diff > TIE).sum()), int((diff < -TIE).sum())
    summary = {
        "a": lb.cube.system_names[a],
        "b": lb.cube.system_names[b],
        "n": int(diff.size),
        "wins": wins,
        "losses": losses,
        "ties": int(diff.size) - wins - losses,
        "mean_a": float(x[a].mean()) if diff.size else 0.0,
        "mean_b": float(x[b].mean()) if diff.size else 0.0,
        "mean_diff": float(diff.mean()) if diff.size else 0.0,
    }
    if diff.size >= 2:
        summary["p_perm"] = metrics.permutation_test(x[a], x[b], n_permutations=10000, seed=0)
        summary["p_t"] = float(metrics.paired_ttest(x[a], x[b])[1])
        low, high = metrics.bootstrap_ci(diff, n_resamples=2000, seed=0)
        summary["ci"] = (float(low), float(high))
    qids = np.array(lb.cube.qids, dtype=object)[scored]
    ranked = np.lexsort((qids.astype(str), -diff)) if diff.size else np.zeros(0, np.intp)
    return HeadToHead(a, b, summary, diff, x, scored, qids, ranked)


# --------------------------------------------------------------------------- one query's ranked lists


def query_page(
    lb: Leaderboard, qid: str, *, depth: int, systems: np.ndarray, judged: str, grades: dict[int, str]
) -> dict[str, Any]:
    """Everything the one-query page shows: the query, a rank x system grid of labelled documents, each
    system's scores, the labelled documents, the relevant ones no shown system retrieved, and the
    neighbouring scored queries in qid order for stepping through.

    Raises LookupError when the campaign has no query ``qid``.
    """
    query = Query.objects.filter(campaign=lb.campaign, qid=qid).first()
    if query is None:
        raise LookupError(f"no query {qid!r} in this campaign")
    q = int(np.searchsorted(lb.cube.query_ids, query.id))
    detail = query_rankings(lb, q, depth=depth, systems=systems)
    threshold = lb.params.threshold

    def document(d: int) -> tuple[str, str, str]:
        return detail.documents.get(d, ("?", "", ""))

    def cell(doc: int, label: int) -> dict[str, Any] | None:
        if doc < 0:
            return None
        docid, title, url = document(doc)
        if label >= 0:
            kind, text = ("rel" if label >= threshold else "nonrel"), str(label)
        elif doc in detail.unsure:
            kind, text = "unsure", "?"
        else:
            kind, text = "unjudged", "–"
        return {
            "docid": docid,
            "title": title,
            "url": url,
            "label": label,
            "kind": kind,
            "text": text,
            "grade": grades.get(label, ""),
        }

    labels, docs = detail.labels.tolist(), detail.doc_ids.tolist()
    scores = lb.table.scores[:, systems, q]  # (M, S)
    judged_row = lb.measure_index(judged)
    scored_qids = np.sort(np.array(lb.cube.qids, dtype=str)[lb.table.labelled])
    before, after = np.searchsorted(scored_qids, qid, "left"), np.searchsorted(scored_qids, qid, "right")
    return {
        "query": query,
        "ranks": [
            {"rank": r + 1, "cells": [cell(docs[s][r], labels[s][r]) for s in range(len(systems))]}
            for r in range(depth)
        ],
        "columns": [
            {
                "name": lb.cube.system_names[s],
                "scores": [(m, float(scores[i, c])) for i, m in enumerate(lb.measures)],
                "length": int((lb.cube.doc_ids[s, q] >= 0).sum()),
                "judged": float(scores[judged_row, c]),
            }
            for c, s in enumerate(np.asarray(systems).tolist())
        ],
        "qrels": [
            {
                "docid": document(d)[0],
                "title": document(d)[1],
                "label": g,
                "grade": grades.get(g, ""),
                "rel": g >= threshold,
            }
            for d, g in detail.qrels
        ],
        "unretrieved": [{"docid": document(d)[0], "title": document(d)[1], "label": g} for d, g in detail.unretrieved],
        "labelled": bool(lb.table.labelled[q]),
        "prev_qid": str(scored_qids[before - 1]) if before > 0 else None,
        "next_qid": str(scored_qids[after]) if after < scored_qids.size else None,
        "n_unsure": len(detail.unsure),
    }


# --------------------------------------------------------------------------- verdicts in words


def holds_percent(p_holds: float) -> int:
    """p_holds as a whole percentage for a badge: rounded down, and never 100 (that is "settled")."""
    return min(99, math.floor(p_holds * 100 + 1e-9))


def stop_sentence(stop: dict[str, Any], without_labels: int = 0, n_systems: int | None = None) -> str:
    """The stop signal of the leaderboard JSON (judging.scoring.trust.final.stop_signal) in the reader's
    language, as one plain message: whether the lead may stop judging for the top K, at what confidence, and
    what more judging would still buy. "Settled" is said only of an order no judgment left can change; a K no
    smaller than the ``n_systems`` there are is said to cover them all."""
    k, left = int(stop["top_k"]), int(stop.get("judgments_to_settle", stop["judgments_left_estimate"]))
    settled = bool(stop.get("settled", False))
    values: dict[str, Any] = {"k": k, "n": n_systems or 0, "confidence": f"{stop['confidence']:.0%}", "left": left}
    if n_systems is not None and k >= n_systems:
        if settled:
            head = gettext(
                "There are %(n)d systems, no more than the top %(k)d you chose. You may stop judging: the order of "
                "all %(n)d is settled, no judgment left can change it."
            )
        elif stop["reached"]:
            head = gettext(
                "There are %(n)d systems, no more than the top %(k)d you chose. You may stop judging: the order of "
                "all %(n)d holds with %(confidence)s confidence, though it is not settled for certain."
            )
        else:
            head = gettext(
                "There are %(n)d systems, no more than the top %(k)d you chose. Keep judging: the order of all "
                "%(n)d does not hold with %(confidence)s confidence yet."
            )
    elif settled:
        head = ngettext(
            "You may stop judging for the top %(k)d system: its place is settled, no judgment left can change it.",
            "You may stop judging for the top %(k)d: their order is settled, no judgment left can change it.",
            k,
        )
    elif stop["reached"]:
        head = ngettext(
            "You may stop judging for the top %(k)d system: its place holds with %(confidence)s confidence, though it "
            "is not settled for certain.",
            "You may stop judging for the top %(k)d: their order holds with %(confidence)s confidence, though it is "
            "not settled for certain.",
            k,
        )
    else:
        head = ngettext(
            "Keep judging for the top %(k)d system: its place does not hold with %(confidence)s confidence yet.",
            "Keep judging for the top %(k)d: their order does not hold with %(confidence)s confidence yet.",
            k,
        )
    text = head % values
    if not settled and left:
        if stop["reached"]:
            more = ngettext(
                "About %(left)d more judgment would settle it for certain.",
                "About %(left)d more judgments would settle it for certain.",
                left,
            )
        else:
            values["to_stop"] = int(stop["judgments_left_estimate"])
            more = ngettext(
                "About %(to_stop)d more judgment should bring %(confidence)s confidence, as the order moves with the "
                "new labels; settling today's order for certain would take about %(left)d.",
                "About %(to_stop)d more judgments should bring %(confidence)s confidence, as the order moves with the "
                "new labels; settling today's order for certain would take about %(left)d.",
                values["to_stop"],
            )
        text += " " + more % values
    if without_labels:
        text += " " + ngettext(
            "The verdicts count the %(n)d query without any label yet: it joins the means once judged.",
            "The verdicts count the %(n)d queries without any label yet: they join the means once judged.",
            without_labels,
        ) % {"n": without_labels}
    return text
