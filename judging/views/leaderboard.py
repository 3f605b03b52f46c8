"""Leaderboard pages: the live ranking of systems with its statistics and pictures, and the leads' drill-down.

Everything here reads through judging.scoring, which keeps per-query scores cached and rescored only for
queries whose labels moved; numpy does the per-query work, and Python only builds the rows a page shows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import wraps
from urllib.parse import urlencode

import numpy as np
from django import forms
from django.core.cache import cache
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

import metrics
from judging import charts, scoring
from judging.access import Member, campaign_view
from judging.aggregation import POLICIES
from judging.models import Campaign, Grade, Membership, Query
from judging.selectors import grade_list
from judging.selectors.calibration import label_source_choices

LEAD = Membership.Role.LEAD
MEASURES = ("nDCG", "P", "R", "F1", "Hit", "MRR", "MAP", "Judged")  # order of the ranking-measure menu
JUDGED_WARNING = 0.9  # Judged@k below this: scores of unjudged documents are guesses, say so
PAGE_SIZE = 200  # queries per page of the heatmap and the head-to-head list
INLINE_STATS_CELLS = 10_000  # systems x queries up to which CIs and tests are computed within the request
STATS_MIN_AGE = 5.0  # seconds: stale statistics are recomputed at most this often...
STATS_DUTY = 10  # ...and after at least this many times as long as they took: at most 10% of the time
TIE = 1e-9
MIN_QUERIES_FOR_STATS = 2  # a "best" system or a significance test over one query (or none) means nothing
BOOLEAN_VALUES = {
    "": False,
    "0": False,
    "false": False,
    "off": False,
    "no": False,
    "1": True,
    "true": True,
    "on": True,
    "yes": True,
}


# --------------------------------------------------------------------------- parameters


class LeaderboardParamsForm(forms.Form):
    """The GET controls shared by every leaderboard page."""

    k = forms.IntegerField(
        label="k", min_value=1, max_value=1000, required=False, help_text="Cutoff of P, R, F1, Hit, nDCG and Judged."
    )
    gain = forms.ChoiceField(
        label="nDCG gain",
        required=False,
        choices=[("linear", "linear (label)"), ("exponential", "exponential (2^label − 1)")],
    )
    threshold = forms.IntegerField(label="Relevant from grade", min_value=0, max_value=100, required=False)
    judged_only = forms.CharField(label="Condensed (judged only)", required=False)
    policy = forms.ChoiceField(label="Aggregation", required=False)
    measure = forms.CharField(label="Rank by", required=False)
    labels = forms.ChoiceField(label="Label source", required=False)

    def __init__(self, data, *, campaign: Campaign, max_grade: int):
        super().__init__(data)
        self.campaign = campaign
        self.max_grade = max_grade
        self.fields["policy"].choices = [("", f"campaign's ({campaign.aggregation})")] + [(p, p) for p in POLICIES]
        self.fields["labels"].choices = label_source_choices(campaign=campaign)

    def clean_labels(self) -> str:
        return self.cleaned_data["labels"] or "humans"

    def clean_k(self) -> int:
        return self.cleaned_data["k"] or 10

    def clean_gain(self) -> str:
        return self.cleaned_data["gain"] or "linear"

    def clean_threshold(self) -> int:
        t = self.cleaned_data["threshold"]
        if t is None:
            return 1
        if t > self.max_grade:
            raise forms.ValidationError(
                f"must be between 0 and {self.max_grade}, the top grade of this campaign's scale"
            )
        return t

    def clean_judged_only(self) -> bool:
        raw = (self.cleaned_data["judged_only"] or "").strip().lower()
        if raw not in BOOLEAN_VALUES:
            raise forms.ValidationError("must be 1 (condensed scoring) or 0")
        return BOOLEAN_VALUES[raw]

    def clean_policy(self) -> str | None:
        return self.cleaned_data["policy"] or None

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        raw = (data.get("measure") or "nDCG").strip()
        base, _, cut = raw.partition("@")
        if base not in MEASURES:
            self.add_error("measure", f"unknown measure {raw!r}; expected one of {', '.join(MEASURES)}")
        elif cut and cut != str(data["k"]):
            self.add_error("measure", f"{raw} does not match k={data['k']}")
        elif cut and base in ("MRR", "MAP"):
            self.add_error("measure", f"{base} has no cutoff")
        else:
            data["measure_base"] = base
            data["measure"] = base if base in ("MRR", "MAP") else f"{base}@{data['k']}"
        return data


@dataclass
class BoardRequest:
    """Who is asking about which campaign's leaderboard, with which parameters."""

    member: Member
    params: scoring.Params
    measure: str  # full measure name, e.g. "nDCG@10"
    measure_base: str
    form: LeaderboardParamsForm

    @property
    def campaign(self) -> Campaign:
        return self.member.campaign

    @property
    def role(self) -> str:
        return self.member.role

    @property
    def is_lead(self) -> bool:
        return self.member.is_lead

    @property
    def changed_params(self) -> dict[str, str]:
        """The parameters that differ from the defaults, for links between the pages."""
        p = self.params
        q = {}
        if p.k != 10:
            q["k"] = str(p.k)
        if p.gain != "linear":
            q["gain"] = p.gain
        if p.threshold != 1:
            q["threshold"] = str(p.threshold)
        if p.judged_only:
            q["judged_only"] = "1"
        if p.policy:
            q["policy"] = p.policy
        if p.labels != "humans":
            q["labels"] = p.labels
        if self.measure_base != "nDCG":
            q["measure"] = self.measure_base
        return q

    @property
    def qs(self) -> str:
        return urlencode(self.changed_params)

    def url(self, name: str, *args, **extra) -> str:
        query = {**self.changed_params, **{k: v for k, v in extra.items() if v not in (None, "")}}
        base = reverse(f"judging:{name}", args=[self.campaign.slug, *args])
        return f"{base}?{urlencode(query, doseq=True)}" if query else base

    def base(self, **extra) -> dict:
        """Template context every leaderboard page shares (the campaign nav of base.html included)."""
        return self.member.context(
            nav="leaderboard",
            ctx=self,
            form=self.form,
            measure=self.measure,
            measure_choices=[(m, m if m in ("MRR", "MAP") else f"{m}@{self.params.k}") for m in MEASURES],
            policies=POLICIES,
            label_sources=self.form.fields["labels"].choices,
            urls=self.urls,
            **{"keep": [], **extra},
        )

    @property
    def urls(self) -> dict[str, str]:
        names = [
            "leaderboard",
            "leaderboard_table",
            "leaderboard_stats",
            "leaderboard_significance",
            "leaderboard_pictures",
            "leaderboard_queries",
            "leaderboard_compare",
        ]
        urls = {n.removeprefix("leaderboard_") if n != "leaderboard" else "page": self.url(n) for n in names}
        for kind in ("bars", "distribution", "progress"):
            urls[f"chart_{kind}"] = self.url("leaderboard_chart", kind)
        api = reverse("api:campaign-leaderboard", args=[self.campaign.slug])
        api_query = {
            k: v
            for k, v in self.changed_params.items()
            if k in ("k", "gain", "threshold", "judged_only", "policy", "labels")
        }
        urls["api"] = f"{api}?{urlencode(api_query)}" if api_query else api
        return urls


def leaderboard_page(*, drill: bool = False):
    """campaign_view, then the leaderboard's own checks and parameters; the view gets a BoardRequest.

    Annotators get 403 on the drill-down, and on the leaderboard itself unless the campaign lets them see
    it (knowing who is winning biases judgments). Bad parameters get a 400 that says which and why.
    """

    def decorate(view):
        @campaign_view
        @wraps(view)
        def wrapped(request, member: Member, *args, **kwargs):
            if drill and not member.is_lead:
                return _refuse(request, member, 403, "The per-query drill-down is for the campaign's leads only.")
            if not member.can_see_leaderboard:
                return _refuse(
                    request,
                    member,
                    403,
                    "The leads of this campaign keep the leaderboard hidden from annotators while "
                    "judging is under way: knowing which system is winning biases judgments.",
                )
            max_grade = max((g.value for g in grade_list(campaign=member.campaign)), default=0)
            form = LeaderboardParamsForm(request.GET, campaign=member.campaign, max_grade=max_grade)
            if not form.is_valid():
                return _refuse(request, member, 400, "These leaderboard settings are not valid.", form=form)
            d = form.cleaned_data
            params = scoring.Params(
                k=d["k"],
                gain=d["gain"],
                threshold=d["threshold"],
                judged_only=d["judged_only"],
                policy=d["policy"],
                labels=d["labels"],
            )
            return view(request, BoardRequest(member, params, d["measure"], d["measure_base"], form), *args, **kwargs)

        return wrapped

    return decorate


def _refuse(request, member: Member, status: int, message: str, form=None) -> HttpResponse:
    context = member.context(
        nav="leaderboard",
        status=status,
        message=message,
        form=form,
        errors=[(form.fields[f].label if f in form.fields else f, e) for f, es in form.errors.items() for e in es]
        if form is not None
        else [],
    )
    template = "judging/_leaderboard_error.html" if request.htmx else "judging/leaderboard_error.html"
    return render(request, template, context, status=status)


def _bad_request(request, ctx: BoardRequest, message: str) -> HttpResponse:
    return _refuse(request, ctx.member, 400, message)


def _int_arg(request, name: str, default: int, low: int, high: int) -> int:
    raw = request.GET.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _BadArg(f"{name} must be a whole number, not {raw[:40]!r}") from None
    if not low <= value <= high:
        raise _BadArg(f"{name} must be between {low} and {high}")
    return value


class _BadArg(ValueError):
    """A page-specific argument (page, depth, system...) that is not valid: answered with a 400."""


def _handles_bad_args(view):
    @wraps(view)
    def wrapped(request, ctx: BoardRequest, *args, **kwargs):
        try:
            return view(request, ctx, *args, **kwargs)
        except _BadArg as exc:
            return _bad_request(request, ctx, str(exc))

    return wrapped


# --------------------------------------------------------------------------- the leaderboard


def _order(lb: scoring.Leaderboard, mi: int) -> np.ndarray:
    """Systems by the ranking measure, best first; ties by name."""
    means = lb.means()[mi]
    names = np.array(lb.cube.system_names, dtype=str)
    return np.lexsort((names, -np.round(means, 12))) if len(names) else np.zeros(0, np.intp)


def _stats_for(lb: scoring.Leaderboard, measure: str) -> tuple[scoring.RankingStats | None, bool, bool]:
    """(statistics to show, whether they are current, whether a background refresh should be asked for).

    Small campaigns get current statistics within the request. Large ones show the last statistics
    (marked as older than the scores) and let a separate request recompute them, so the polled table
    stays fast; that refresh runs at most every STATS_MIN_AGE seconds and at most 10% of the time.
    """
    if lb.n_scored < MIN_QUERIES_FOR_STATS:
        return None, True, False
    stats = scoring.stats_cached(lb, measure)
    if stats is not None and len(stats.means) != len(lb.cube.system_ids):
        stats = None
    if stats is not None and stats.state == lb.state:
        return stats, True, False
    if len(lb.cube.system_ids) * max(lb.n_scored, 1) <= INLINE_STATS_CELLS:
        return scoring.stats_refresh(lb, measure), True, False
    if stats is None:
        return None, False, True
    age = (timezone.now() - stats.computed_at).total_seconds()
    return stats, False, age >= max(STATS_MIN_AGE, STATS_DUTY * stats.seconds)


def _table_context(ctx: BoardRequest, lb: scoring.Leaderboard) -> dict:
    mi = lb.measure_index(ctx.measure)
    ji = lb.measure_index(f"Judged@{ctx.params.k}")
    means = lb.means()
    order = _order(lb, mi)
    stats, current, refresh = _stats_for(lb, ctx.measure)
    answered = (lb.cube.answered & lb.table.labelled).sum(axis=1)
    names = lb.cube.system_names
    rows = []
    for rank, s in enumerate(order.tolist(), start=1):
        judged = float(means[ji, s])
        row = {
            "rank": rank,
            "name": names[s],
            "index": s,
            "ranked": float(means[mi, s]),
            "values": [
                {"name": m, "value": float(means[i, s])} for i, m in enumerate(lb.measures) if i not in (mi, ji)
            ],
            "judged": judged,
            "judged_low": judged < JUDGED_WARNING,
            "answered": int(answered[s]),
            "ci": None,
            "status": "",
        }
        if stats is not None:
            row["ci"] = (float(stats.ci_low[s]), float(stats.ci_high[s])) if math.isfinite(stats.ci_low[s]) else None
            if s == stats.best:
                row["status"] = "best"
            elif math.isfinite(stats.p_vs_best[s]):
                row["status"] = "worse" if stats.worse[s] else "tied"
                row["p"] = float(stats.p_vs_best[s])
        rows.append(row)
    chart = (
        charts.bar_chart(
            [r["name"] for r in rows],
            [float(means[mi, r["index"]]) for r in rows],
            measure=ctx.measure,
            low=[r["ci"][0] if r["ci"] else math.nan for r in rows] if stats is not None else None,
            high=[r["ci"][1] if r["ci"] else math.nan for r in rows] if stats is not None else None,
            status=[r["status"] for r in rows],
        )
        if rows
        else None
    )
    return {
        "lb": lb,
        "rows": rows,
        "measures": [m for m in lb.measures if m not in (ctx.measure, f"Judged@{ctx.params.k}")],
        "judged_name": f"Judged@{ctx.params.k}",
        "n_scored": lb.n_scored,
        "n_queries": len(lb.cube.query_ids),
        "stats": stats,
        "stats_current": current,
        "stats_refresh": refresh,
        "chart": chart,
        "any_judged_low": any(r["judged_low"] for r in rows),
        "judged_warning": JUDGED_WARNING,
        "alpha": scoring.ALPHA,
        "server_ms": lb.seconds * 1000,
        "min_queries_for_stats": MIN_QUERIES_FOR_STATS,
    }


@leaderboard_page()
def leaderboard(request, ctx: BoardRequest):
    """The leaderboard page: controls, the live table with its bar chart, and the pictures."""
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    context = ctx.base(**_table_context(ctx, lb), **_pictures_context(ctx, lb), tests=scoring.TESTS)
    return render(request, "judging/leaderboard.html", context)


@leaderboard_page()
def leaderboard_table(request, ctx: BoardRequest):
    """The table partial htmx polls every few seconds."""
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    return render(request, "judging/_leaderboard_table.html", ctx.base(**_table_context(ctx, lb)))


@leaderboard_page()
def leaderboard_stats(request, ctx: BoardRequest):
    """Recompute the CIs and tests against the best for the current labels (the table asks for this when
    its statistics are out of date), then tell the table to refresh. One computation at a time per
    parameter set; other requests meanwhile get 204 and the table keeps polling."""
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    stats = scoring.stats_cached(lb, ctx.measure)
    if stats is None or stats.state != lb.state:
        lock = f"{lb.key}:stats-lock:{ctx.measure}"
        if not cache.add(lock, 1, timeout=300):
            return HttpResponse(status=204)
        try:
            scoring.stats_refresh(lb, ctx.measure)
        finally:
            cache.delete(lock)
    response = HttpResponse(status=204)
    response["HX-Trigger"] = "lb-stats-ready"
    return response


@leaderboard_page()
@_handles_bad_args
def leaderboard_significance(request, ctx: BoardRequest):
    """Pairwise significance matrix of the ranking measure, on demand."""
    test = request.GET.get("test") or "randomization"
    if test not in scoring.TESTS:
        raise _BadArg(f"test must be one of {', '.join(scoring.TESTS)}")
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    pw = scoring.pairwise_cached(lb, ctx.measure, test)
    order = _order(lb, lb.measure_index(ctx.measure)).tolist()
    names = lb.cube.system_names
    rows = []
    for i in order:
        cells = []
        for j in order:
            if i == j:
                cells.append({"self": True})
                continue
            p, d = float(pw.p[i, j]), float(pw.diff[i, j])
            sig = math.isfinite(p) and p < pw.alpha
            cells.append(
                {
                    "p": p,
                    "diff": d,
                    "sig": sig,
                    "cls": ("sig-better" if d > 0 else "sig-worse") if sig else "ns",
                    "title": f"{names[i]} − {names[j]} = {d:+.4f}, adjusted p = {p:.4f}",
                }
            )
        rows.append({"name": names[i], "cells": cells})
    n_pairs = len(order) * (len(order) - 1) // 2
    n_sig = int(np.nansum(np.triu(pw.p < pw.alpha, 1))) if len(order) > 1 else 0
    context = ctx.base(
        rows=rows,
        names=[names[i] for i in order],
        pw=pw,
        test=test,
        tests=scoring.TESTS,
        test_label=scoring.TESTS[test],
        n_pairs=n_pairs,
        n_sig=n_sig,
        too_few_queries=lb.n_scored < MIN_QUERIES_FOR_STATS,
        tab="significance",
    )
    template = "judging/_leaderboard_significance.html" if request.htmx else "judging/leaderboard_significance.html"
    return render(request, template, context)


def _pictures_context(ctx: BoardRequest, lb: scoring.Leaderboard) -> dict:
    order = _order(lb, lb.measure_index(ctx.measure))
    timeline = scoring.judging_timeline(ctx.campaign)
    return {
        "distribution": charts.distribution_chart(
            [lb.cube.system_names[s] for s in order.tolist()], lb.per_query(ctx.measure)[order], measure=ctx.measure
        ),
        "progress": charts.progress_chart(
            timeline.times, timeline.cumulative, goal=timeline.goal, bucket=timeline.bucket
        ),
    }


@leaderboard_page()
def leaderboard_pictures(request, ctx: BoardRequest):
    """The per-query distribution and judging progress charts (polled less often than the table)."""
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    return render(request, "judging/_leaderboard_pictures.html", ctx.base(**_pictures_context(ctx, lb)))


# --------------------------------------------------------------------------- drill-down (leads only)


def _query_texts(query_ids: np.ndarray) -> dict[int, str]:
    """Text of the queries on one page (one small query)."""
    return dict(Query.objects.filter(id__in=query_ids.tolist()).order_by().values_list("id", "text"))


SORTS = {
    "qid": "query id",
    "hardest": "hardest first (lowest mean over systems)",
    "easiest": "easiest first",
    "spread": "most disagreement between systems first",
    "judged": "least judged first",
}


@leaderboard_page(drill=True)
@_handles_bad_args
def leaderboard_queries(request, ctx: BoardRequest):
    """Queries x systems heatmap of the ranking measure, a page of PAGE_SIZE queries at a time."""
    sort = request.GET.get("sort") or "qid"
    if sort not in SORTS:
        raise _BadArg(f"sort must be one of {', '.join(SORTS)}")
    search = request.GET.get("q", "").strip()[:100]
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    mi = lb.measure_index(ctx.measure)
    order = _order(lb, mi)
    scored = np.flatnonzero(lb.table.labelled)  # cube positions of the queries in the means
    values = lb.table.scores[mi][np.ix_(order, scored)]  # (S, Qs), systems in leaderboard order
    judged = lb.table.scores[lb.measure_index(f"Judged@{ctx.params.k}")][:, scored].mean(axis=0)
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
        "judged": judged,
    }[sort]
    if key is None:
        matching = matching[np.argsort(qids[matching].astype(str), kind="stable")]
    else:
        matching = matching[np.lexsort((qids[matching].astype(str), key[matching]))]
    page = Paginator(matching, PAGE_SIZE).get_page(request.GET.get("page"))
    shown = np.asarray(page.object_list, dtype=np.intp)
    texts = _query_texts(lb.cube.query_ids[scored[shown]])
    classes = charts.heat_classes(values[:, shown]) if shown.size else np.zeros((len(order), 0), dtype=str)
    rows = []
    for col, i in enumerate(shown.tolist()):
        cells = [{"value": float(values[s, i]), "cls": classes[s, col]} for s in range(len(order))]
        rows.append(
            {
                "qid": qids[i],
                "text": texts.get(int(lb.cube.query_ids[scored[i]]), ""),
                "cells": cells,
                "mean": float(mean[i]),
                "mean_cls": charts.heat_class(float(mean[i])),
                "judged": float(judged[i]),
                "judged_low": judged[i] < JUDGED_WARNING,
            }
        )
    context = ctx.base(
        rows=rows,
        systems=[lb.cube.system_names[s] for s in order.tolist()],
        system_means=[float(lb.means()[mi, s]) for s in order.tolist()],
        page=page,
        sort=sort,
        sorts=SORTS,
        search=search,
        n_scored=scored.size,
        n_matching=matching.size,
        n_queries=len(lb.cube.query_ids),
        page_query=urlencode(
            {**ctx.changed_params, **({"sort": sort} if sort != "qid" else {}), **({"q": search} if search else {})}
        ),
        judged_warning=JUDGED_WARNING,
        judged_name=f"Judged@{ctx.params.k}",
        tab="queries",
        keep=[(k, v) for k, v in (("sort", sort), ("q", search)) if v and v != "qid"],
    )
    return render(request, "judging/leaderboard_queries.html", context)


@leaderboard_page(drill=True)
@_handles_bad_args
def leaderboard_query(request, ctx: BoardRequest, qid: str):
    """One query: each system's ranked list with labels, unjudged and unsure documents marked."""
    query = Query.objects.filter(campaign=ctx.campaign, qid=qid).first()
    if query is None:
        raise Http404("No such query in this campaign.")
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    q = int(np.searchsorted(lb.cube.query_ids, query.id))
    order = _order(lb, lb.measure_index(ctx.measure))
    wanted = request.GET.getlist("s")
    if wanted:
        index = {n: i for i, n in enumerate(lb.cube.system_names)}
        unknown = [w for w in wanted if w not in index]
        if unknown:
            raise _BadArg(f"unknown system {unknown[0][:100]!r}")
        systems = np.array([s for s in order.tolist() if lb.cube.system_names[s] in set(wanted)], dtype=np.intp)
    else:
        systems = order
    depth_max = lb.cube.doc_ids.shape[2]
    depth = _int_arg(request, "depth", min(max(ctx.params.k, 10), depth_max), 1, 1000)
    depth = min(depth, depth_max)
    detail = scoring.query_rankings(lb, q, depth=depth, systems=systems)
    grades = dict(Grade.objects.filter(campaign=ctx.campaign).order_by().values_list("value", "name"))
    threshold = ctx.params.threshold

    def cell(doc: int, label: int) -> dict | None:
        if doc < 0:
            return None
        docid, title, url = detail.documents.get(doc, ("?", "", ""))
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
    ranks = [
        {"rank": r + 1, "cells": [cell(docs[s][r], labels[s][r]) for s in range(len(systems))]} for r in range(depth)
    ]
    scores = lb.table.scores[:, systems, q]  # (M, S)
    columns = [
        {
            "name": lb.cube.system_names[s],
            "scores": [(m, float(scores[i, c])) for i, m in enumerate(lb.measures)],
            "length": int((lb.cube.doc_ids[s, q] >= 0).sum()),
            "judged": float(scores[lb.measure_index(f"Judged@{ctx.params.k}"), c]),
        }
        for c, s in enumerate(systems.tolist())
    ]
    # neighbours in qid order among the scored queries, for stepping through
    scored_qids = np.sort(np.array(lb.cube.qids, dtype=str)[lb.table.labelled])
    before, after = np.searchsorted(scored_qids, qid, "left"), np.searchsorted(scored_qids, qid, "right")
    prev_qid = str(scored_qids[before - 1]) if before > 0 else None
    next_qid = str(scored_qids[after]) if after < scored_qids.size else None
    context = ctx.base(
        query=query,
        columns=columns,
        ranks=ranks,
        depth=depth,
        depth_max=depth_max,
        threshold=threshold,
        qrels=[
            {
                "docid": detail.documents.get(d, ("?", "", ""))[0],
                "title": detail.documents.get(d, ("", "", ""))[1],
                "label": g,
                "grade": grades.get(g, ""),
                "rel": g >= threshold,
            }
            for d, g in detail.qrels
        ],
        unretrieved=[
            {
                "docid": detail.documents.get(d, ("?", "", ""))[0],
                "title": detail.documents.get(d, ("", "", ""))[1],
                "label": g,
            }
            for d, g in detail.unretrieved
        ],
        labelled=bool(lb.table.labelled[q]),
        selected=wanted,
        all_systems=[lb.cube.system_names[s] for s in order],
        prev_qid=prev_qid,
        next_qid=next_qid,
        n_unsure=len(detail.unsure),
        tab="queries",
        depth_choices=sorted({10, 20, 50, 100, depth_max, depth}),
        step_query=urlencode(
            {**ctx.changed_params, **({"depth": depth} if "depth" in request.GET else {}), "s": wanted}, doseq=True
        ),
    )
    return render(request, "judging/leaderboard_query.html", context)


def _two_systems(request, lb: scoring.Leaderboard, order: np.ndarray) -> tuple[int, int]:
    index = {n: i for i, n in enumerate(lb.cube.system_names)}
    if len(index) < 2:
        raise _BadArg("a head-to-head needs at least two systems")
    picked = []
    for name, default in (("a", order[0]), ("b", order[1])):
        raw = request.GET.get(name, "")
        if raw and raw not in index:
            raise _BadArg(f"unknown system {raw[:100]!r} for {name}")
        picked.append(index[raw] if raw else int(default))
    if picked[0] == picked[1]:
        raise _BadArg("choose two different systems")
    return picked[0], picked[1]


@leaderboard_page(drill=True)
@_handles_bad_args
def leaderboard_compare(request, ctx: BoardRequest):
    """Head-to-head of two systems: per-query wins, ties and losses, sorted by the difference."""
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    mi = lb.measure_index(ctx.measure)
    order = _order(lb, mi)
    a, b = _two_systems(request, lb, order)
    x = lb.per_query(ctx.measure)
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
    ji = lb.measure_index(f"Judged@{ctx.params.k}")
    qids = np.array(lb.cube.qids, dtype=object)[scored]
    ranked = np.lexsort((qids.astype(str), -diff)) if diff.size else np.zeros(0, np.intp)
    page = Paginator(ranked, PAGE_SIZE).get_page(request.GET.get("page"))
    shown = np.asarray(page.object_list, dtype=np.intp)
    texts = _query_texts(lb.cube.query_ids[scored[shown]])
    rows = [
        {
            "qid": qids[i],
            "text": texts.get(int(lb.cube.query_ids[scored[i]]), ""),
            "a": float(x[a, i]),
            "b": float(x[b, i]),
            "diff": float(diff[i]),
            "outcome": "win" if diff[i] > TIE else "loss" if diff[i] < -TIE else "tie",
            "judged_a": float(lb.table.scores[ji, a, scored[i]]),
            "judged_b": float(lb.table.scores[ji, b, scored[i]]),
        }
        for i in shown.tolist()
    ]
    context = ctx.base(
        s=summary,
        rows=rows,
        page=page,
        systems=[lb.cube.system_names[s] for s in order.tolist()],
        chart=charts.difference_chart(diff, a=summary["a"], b=summary["b"], measure=ctx.measure),
        page_query=urlencode({**ctx.changed_params, "a": summary["a"], "b": summary["b"]}),
        judged_warning=JUDGED_WARNING,
        tab="compare",
        keep=[("a", summary["a"]), ("b", summary["b"])],
        chart_url=ctx.url("leaderboard_chart", "differences", a=summary["a"], b=summary["b"]),
        pair_query=urlencode({**ctx.changed_params, "s": [summary["a"], summary["b"]]}, doseq=True),
    )
    return render(request, "judging/leaderboard_compare.html", context)


# --------------------------------------------------------------------------- charts as files

CHARTS = ("bars", "distribution", "progress", "differences")


@leaderboard_page()
@_handles_bad_args
def leaderboard_chart(request, ctx: BoardRequest, kind: str):
    """A chart as a standalone SVG file (for reports and slides)."""
    if kind not in CHARTS:
        raise Http404("No such chart.")
    if kind == "progress":
        t = scoring.judging_timeline(ctx.campaign)
        svg = charts.progress_chart(t.times, t.cumulative, goal=t.goal, bucket=t.bucket)
    else:
        lb = scoring.leaderboard(ctx.campaign, ctx.params)
        mi = lb.measure_index(ctx.measure)
        order = _order(lb, mi)
        names = [lb.cube.system_names[s] for s in order.tolist()]
        if kind == "bars":
            stats, _, _ = _stats_for(lb, ctx.measure)
            means = lb.means()[mi][order]
            status = None
            if stats is not None:
                status = [
                    "best" if s == stats.best else ("worse" if stats.worse[s] else "tied") for s in order.tolist()
                ]
            svg = charts.bar_chart(
                names,
                means.tolist(),
                measure=ctx.measure,
                low=stats.ci_low[order].tolist() if stats else None,
                high=stats.ci_high[order].tolist() if stats else None,
                status=status,
            )
        elif kind == "distribution":
            svg = charts.distribution_chart(names, lb.per_query(ctx.measure)[order], measure=ctx.measure)
        else:
            if ctx.role != LEAD:
                return _refuse(request, ctx.member, 403, "Head-to-head charts are for leads only.")
            a, b = _two_systems(request, lb, order)
            x = lb.per_query(ctx.measure)
            svg = charts.difference_chart(
                x[a] - x[b], a=lb.cube.system_names[a], b=lb.cube.system_names[b], measure=ctx.measure
            )
    response = HttpResponse(svg, content_type="image/svg+xml; charset=utf-8")
    response["Cache-Control"] = "private, no-cache"
    return response
