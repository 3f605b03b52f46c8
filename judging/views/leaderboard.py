"""Leaderboard pages: the live ranking of systems with its statistics and pictures, and the leads' drill-down.

Everything here reads through judging.scoring, which keeps per-query scores cached and rescored only for
queries whose labels moved; numpy does the per-query work, and Python only builds the rows a page shows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import wraps
from urllib.parse import urlencode

import numpy as np
from csp.decorators import csp_update
from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

import metrics
from judging import charts, scoring
from judging.access import Member, campaign_view
from judging.aggregation import Policy
from judging.jobs import JobError, significance_get
from judging.models import Campaign
from judging.scoring import trust
from judging.selectors import grade_list, grade_top, query_list, query_tag_exists
from judging.selectors.calibration import label_source_choices
from judging.services import query_tags_set
from judging.views.job_presenters import job_context
from metrics import Measure

MEASURES = ("nDCG", "P", "R", "F1", "Hit", "MRR", "MAP", "bpref", "Judged")  # order of the ranking-measure menu
PAGE_SIZE = 200  # queries per page of the heatmap and the head-to-head list
PHONE_CHART_WIDTH = 340  # the bar chart drawn for a 390 px screen: about its card's width inside the padding
GAIN_LABELS = {  # metrics.GAINS in words
    "linear": gettext_lazy("linear (label)"),
    "exponential": gettext_lazy("exponential (2^label − 1)"),
}
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
        label="k",
        min_value=1,
        max_value=1000,
        required=False,
        help_text=gettext_lazy("Cutoff of P, R, F1, Hit, nDCG and Judged."),
    )
    gain = forms.ChoiceField(
        label=gettext_lazy("nDCG gain"),
        required=False,
        choices=[(g, GAIN_LABELS[g]) for g in metrics.GAINS],
    )
    threshold = forms.IntegerField(
        label=gettext_lazy("Relevant from grade"), min_value=0, max_value=100, required=False
    )
    judged_only = forms.CharField(label=gettext_lazy("Condensed (judged only)"), required=False)
    policy = forms.ChoiceField(label=gettext_lazy("Aggregation"), required=False)
    measure = forms.CharField(label=gettext_lazy("Rank by"), required=False)
    labels = forms.ChoiceField(label=gettext_lazy("Label source"), required=False)
    segment = forms.CharField(label=gettext_lazy("Segment"), required=False, max_length=100)

    def __init__(self, data, *, campaign: Campaign, max_grade: int):
        super().__init__(data)
        self.campaign = campaign
        self.max_grade = max_grade
        self.fields["policy"].choices = [
            ("", _("campaign's (%(policy)s)") % {"policy": campaign.aggregation}),
            *Campaign.Aggregation.choices,
        ]
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
        return scoring.threshold_check(t, top=self.max_grade)

    def clean_judged_only(self) -> bool:
        raw = (self.cleaned_data["judged_only"] or "").strip().lower()
        if raw not in BOOLEAN_VALUES:
            raise forms.ValidationError(_("must be 1 (condensed scoring) or 0"))
        return BOOLEAN_VALUES[raw]

    def clean_policy(self) -> str | None:
        return self.cleaned_data["policy"] or None

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:
            data["measure"] = Measure.parse(trust.resolve_measure(data.get("measure"), data["k"]))
        except ValueError as exc:  # in the reader's language, as the API says it
            self.add_error("measure", str(exc))
            return data
        segment = (data.get("segment") or "").strip()
        data["segment"] = segment or None
        if segment and not query_tag_exists(campaign=self.campaign, tag=segment):
            self.add_error("segment", _("no query of this campaign has the tag %(tag)r") % {"tag": segment})
        return data


@dataclass
class BoardRequest:
    """Who is asking about which campaign's leaderboard, with which parameters."""

    member: Member
    params: scoring.Params
    ranked_by: Measure  # with the cutoff k, e.g. nDCG@10
    form: LeaderboardParamsForm

    @property
    def measure(self) -> str:
        """The ranking measure's name, e.g. "nDCG@10" (how the score table names it)."""
        return str(self.ranked_by)

    @property
    def measure_base(self) -> str:
        return self.ranked_by.base

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
    def judged(self) -> str:
        """The coverage measure shown beside the scores, e.g. "Judged@10"."""
        return str(Measure("Judged", self.params.k))

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
        if p.segment:
            q["segment"] = p.segment
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
            measure_choices=[
                (m, name, scoring.measure_title(name)) for m in MEASURES for name in [str(Measure(m).at(self.params.k))]
            ],
            measure_title=scoring.measure_title(self.measure),
            segment_choices=trust.campaign_tags(self.campaign),
            policy_choices=Policy.choices,
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
            "leaderboard_trust",
            "leaderboard_curves",
            "leaderboard_segments",
            "leaderboard_tags",
        ]
        urls = {n.removeprefix("leaderboard_") if n != "leaderboard" else "page": self.url(n) for n in names}
        for kind in ("bars", "distribution", "progress"):
            urls[f"chart_{kind}"] = self.url("leaderboard_chart", kind)
        api = reverse("api:campaign-leaderboard", args=[self.campaign.slug])
        api_query = {
            k: v
            for k, v in self.changed_params.items()
            if k in ("k", "gain", "threshold", "judged_only", "policy", "labels", "segment")
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
                return _refuse(request, member, 403, _("The per-query drill-down is for the campaign's leads only."))
            if not member.can_see_leaderboard:
                return _refuse(
                    request,
                    member,
                    403,
                    _(
                        "The leads of this campaign keep the leaderboard hidden from annotators while "
                        "judging is under way: knowing which system is winning biases judgments."
                    ),
                )
            max_grade = grade_top(campaign=member.campaign)
            form = LeaderboardParamsForm(request.GET, campaign=member.campaign, max_grade=max_grade)
            if not form.is_valid():
                return _refuse(request, member, 400, _("These leaderboard settings are not valid."), form=form)
            d = form.cleaned_data
            params = scoring.Params.from_settings(d)
            return view(request, BoardRequest(member, params, d["measure"], form), *args, **kwargs)

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
        raise _BadArg(_("%(name)s must be a whole number, not %(raw)r") % {"name": name, "raw": raw[:40]}) from None
    if not low <= value <= high:
        raise _BadArg(_("%(name)s must be between %(low)d and %(high)d") % {"name": name, "low": low, "high": high})
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


def _table_context(ctx: BoardRequest, lb: scoring.Leaderboard) -> dict:
    stats, current, refresh = scoring.stats_for_page(lb, ctx.measure)
    rows = scoring.ranking_rows(lb, ctx.measure, ctx.judged, stats)
    trust_ctx = _table_trust(ctx, lb, rows)
    return {
        **trust_ctx,
        "lb": lb,
        "rows": rows,
        "measures": [(m, scoring.measure_title(m)) for m in lb.measures if m not in (ctx.measure, ctx.judged)],
        "judged_name": ctx.judged,
        "n_scored": lb.n_scored,
        "n_queries": len(lb.cube.query_ids),
        "stats": stats,
        "stats_current": current,
        "stats_refresh": refresh,
        "chart": scoring.bar_chart_of(rows, ctx.measure, stats),
        # A phone shows this one instead: the wide chart would be cut off, or scaled to unreadable text.
        "chart_narrow": scoring.bar_chart_of(rows, ctx.measure, stats, width=PHONE_CHART_WIDTH),
        "any_judged_low": any(r["judged_low"] for r in rows),
        "judged_warning": scoring.JUDGED_WARNING,
        "alpha": scoring.ALPHA,
        "server_ms": lb.seconds * 1000,
        "min_queries_for_stats": scoring.MIN_QUERIES_FOR_STATS,
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
    if not scoring.stats_refresh_once(lb, ctx.measure):
        return HttpResponse(status=204)
    response = HttpResponse(status=204)
    response["HX-Trigger"] = "lb-stats-ready"
    return response


@leaderboard_page()
@_handles_bad_args
def leaderboard_significance(request, ctx: BoardRequest):
    """Pairwise significance matrix of the ranking measure, on demand."""
    test = request.GET.get("test") or "randomization"
    if test not in scoring.TESTS:
        raise _BadArg(_("test must be one of %(choices)s") % {"choices": ", ".join(scoring.TESTS)})
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    # Above RELJUDGE_STATS_JOB_CELLS the test runs in the task worker; the page shows its progress and then
    # the matrix (cached under the labels' state it was computed from, so never a stale one as current).
    # A job starts only from the page's button (a POST with the CSRF token), never from a visit.
    start = request.method == "POST"
    pairwise = job = None
    try:
        pairwise, job = significance_get(
            lb=lb, measure=ctx.measure, test=test, user=request.user, page=request.get_full_path(), start=start
        )
    except JobError as exc:  # too many jobs queued
        messages.error(request, str(exc))
    if start:
        return redirect(request.get_full_path())
    context = ctx.base(
        test=test,
        tests=scoring.TESTS,
        test_label=scoring.TESTS[test],
        too_few_queries=lb.n_scored < scoring.MIN_QUERIES_FOR_STATS,
        tab="significance",
        stats_job=job if pairwise is None else None,
        stats_needs_job=pairwise is None,
        **(job_context(job, request.user) if job is not None else {}),
        poll_url=request.get_full_path(),
    )
    if pairwise is not None:
        rows, n_pairs, n_sig = scoring.significance_rows(lb, pairwise)
        context.update(rows=rows, names=[r["name"] for r in rows], pairwise=pairwise, n_pairs=n_pairs, n_sig=n_sig)
    if request.htmx and pairwise is None:
        return render(request, "judging/_significance_job.html", context)
    template = "judging/_leaderboard_significance.html" if request.htmx else "judging/leaderboard_significance.html"
    return render(request, template, context)


def _pictures_context(ctx: BoardRequest, lb: scoring.Leaderboard) -> dict:
    order = scoring.system_order(lb, ctx.measure)
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


@leaderboard_page(drill=True)
@_handles_bad_args
def leaderboard_queries(request, ctx: BoardRequest):
    """Queries x systems heatmap of the ranking measure, a page of PAGE_SIZE queries at a time."""
    sort = request.GET.get("sort") or "qid"
    if sort not in scoring.SORTS:
        raise _BadArg(_("sort must be one of %(choices)s") % {"choices": ", ".join(scoring.SORTS)})
    search = request.GET.get("q", "").strip()[:100]
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    heat = scoring.heatmap(lb, ctx.measure, ctx.judged, sort=sort, search=search)
    page = Paginator(heat.matching, PAGE_SIZE).get_page(request.GET.get("page"))
    means = lb.means()[lb.measure_index(ctx.measure)]
    context = ctx.base(
        rows=heat.rows(lb, page.object_list),
        systems=[lb.cube.system_names[s] for s in heat.order.tolist()],
        system_means=[float(means[s]) for s in heat.order.tolist()],
        page=page,
        sort=sort,
        sorts=scoring.SORTS,
        search=search,
        n_scored=heat.scored.size,
        n_matching=heat.matching.size,
        n_queries=len(lb.cube.query_ids),
        page_query=urlencode(
            {**ctx.changed_params, **({"sort": sort} if sort != "qid" else {}), **({"q": search} if search else {})}
        ),
        judged_warning=scoring.JUDGED_WARNING,
        judged_name=ctx.judged,
        tab="queries",
        keep=[(k, v) for k, v in (("sort", sort), ("q", search)) if v and v != "qid"],
    )
    return render(request, "judging/leaderboard_queries.html", context)


@leaderboard_page(drill=True)
@_handles_bad_args
def leaderboard_query(request, ctx: BoardRequest, qid: str):
    """One query: each system's ranked list with labels, unjudged and unsure documents marked."""
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    order = scoring.system_order(lb, ctx.measure)
    wanted = request.GET.getlist("s")
    if wanted:
        unknown = [w for w in wanted if w not in lb.cube.system_names]
        if unknown:
            raise _BadArg(_("unknown system %(name)r") % {"name": unknown[0][:100]})
        systems = np.array([s for s in order.tolist() if lb.cube.system_names[s] in set(wanted)], dtype=np.intp)
    else:
        systems = order
    depth_max = lb.cube.doc_ids.shape[2]
    depth = min(_int_arg(request, "depth", min(max(ctx.params.k, 10), depth_max), 1, 1000), depth_max)
    grades = {g.value: g.name for g in grade_list(campaign=ctx.campaign)}
    try:
        shown = scoring.query_page(lb, qid, depth=depth, systems=systems, judged=ctx.judged, grades=grades)
    except LookupError:
        raise Http404(_("No such query in this campaign.")) from None
    context = ctx.base(
        **shown,
        depth=depth,
        depth_max=depth_max,
        threshold=ctx.params.threshold,
        selected=wanted,
        all_systems=[lb.cube.system_names[s] for s in order],
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
        raise _BadArg(_("a head-to-head needs at least two systems"))
    picked = []
    for name, default in (("a", order[0]), ("b", order[1])):
        raw = request.GET.get(name, "")
        if raw and raw not in index:
            raise _BadArg(_("unknown system %(name)r for %(param)s") % {"name": raw[:100], "param": name})
        picked.append(index[raw] if raw else int(default))
    if picked[0] == picked[1]:
        raise _BadArg(_("choose two different systems"))
    return picked[0], picked[1]


@leaderboard_page(drill=True)
@_handles_bad_args
def leaderboard_compare(request, ctx: BoardRequest):
    """Head-to-head of two systems: per-query wins, ties and losses, sorted by the difference."""
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    order = scoring.system_order(lb, ctx.measure)
    a, b = _two_systems(request, lb, order)
    h2h = scoring.head_to_head(lb, ctx.measure, a, b)
    summary = h2h.summary
    page = Paginator(h2h.ranked, PAGE_SIZE).get_page(request.GET.get("page"))
    context = ctx.base(
        s=summary,
        rows=h2h.rows(lb, ctx.judged, page.object_list),
        page=page,
        systems=[lb.cube.system_names[s] for s in order.tolist()],
        chart=charts.difference_chart(h2h.diff, a=summary["a"], b=summary["b"], measure=ctx.measure),
        page_query=urlencode({**ctx.changed_params, "a": summary["a"], "b": summary["b"]}),
        judged_warning=scoring.JUDGED_WARNING,
        tab="compare",
        keep=[("a", summary["a"]), ("b", summary["b"])],
        chart_url=ctx.url("leaderboard_chart", "differences", a=summary["a"], b=summary["b"]),
        pair_query=urlencode({**ctx.changed_params, "s": [summary["a"], summary["b"]]}, doseq=True),
    )
    return render(request, "judging/leaderboard_compare.html", context)


# --------------------------------------------------------------------------- charts as files

CHARTS = ("bars", "distribution", "progress", "differences")


# A chart file carries its colours in an embedded <style> (it is opened or pasted without the page's
# stylesheet): that one response allows inline styles; it holds no script, and script-src stays 'self'.
@csp_update({"style-src": ["'unsafe-inline'"]})
@leaderboard_page()
@_handles_bad_args
def leaderboard_chart(request, ctx: BoardRequest, kind: str):
    """A chart as a standalone SVG file (for reports and slides)."""
    if kind not in CHARTS:
        raise Http404(_("No such chart."))
    if kind == "progress":
        t = scoring.judging_timeline(ctx.campaign)
        svg = charts.progress_chart(t.times, t.cumulative, goal=t.goal, bucket=t.bucket)
    else:
        lb = scoring.leaderboard(ctx.campaign, ctx.params)
        order = scoring.system_order(lb, ctx.measure)
        if kind == "bars":
            stats = scoring.stats_for_page(lb, ctx.measure)[0]
            svg = scoring.bar_chart_of(scoring.ranking_rows(lb, ctx.measure, ctx.judged, stats), ctx.measure, stats)
        elif kind == "distribution":
            names = [lb.cube.system_names[s] for s in order.tolist()]
            svg = charts.distribution_chart(names, lb.per_query(ctx.measure)[order], measure=ctx.measure)
        else:
            if not ctx.is_lead:
                return _refuse(request, ctx.member, 403, _("Head-to-head charts are for leads only."))
            a, b = _two_systems(request, lb, order)
            h2h = scoring.head_to_head(lb, ctx.measure, a, b)
            svg = charts.difference_chart(h2h.diff, a=h2h.summary["a"], b=h2h.summary["b"], measure=ctx.measure)
    response = HttpResponse(charts.standalone(svg), content_type="image/svg+xml; charset=utf-8")
    response["Cache-Control"] = "private, no-cache"
    return response


# --------------------------------------------------------------------------- how far to trust it

# Systems x scored queries x depth up to which the polled table computes score bounds and settled verdicts
# within the request; above it they are on the Trust page (about a second after each label change on
# 20 x 5,000 x 100, see bench/trust_api_bench.py), and the table links there.
INLINE_TRUST_CELLS = 2_000_000


def _trust_inline(lb: scoring.Leaderboard) -> bool:
    return len(lb.cube.system_ids) * max(lb.n_scored, 1) * lb.cube.doc_ids.shape[2] <= INLINE_TRUST_CELLS


def _table_trust(ctx: BoardRequest, lb: scoring.Leaderboard, rows: list[dict]) -> dict:
    """Each row's bounds on the ranking measure and whether its order with the next row is settled."""
    if not rows or not lb.n_scored or not _trust_inline(lb) or ctx.measure.startswith("Judged"):
        return {"trust_shown": False, "trust_inline": _trust_inline(lb)}
    b = trust.bounds(lb)
    v = trust.verdicts(lb, ctx.measure)
    for r, verdict in zip(rows, [*v.adjacent, None], strict=True):
        s = r["index"]
        r["bounds"] = (float(b.mean_low[ctx.measure][s]), float(b.mean_high[ctx.measure][s]))
        r["next_settled"] = None if verdict is None else verdict["settled"]
        r["next_open_pairs"] = 0 if verdict is None else verdict["open_pairs"]
    n_open = sum(not a["settled"] for a in v.adjacent)
    return {
        "trust_shown": True,
        "trust_inline": True,
        "pairs_left": v.pairs_left,
        "n_open": n_open,
        # outside a segment, the queries not in the means are those without a label yet
        "n_unscored": 0 if ctx.params.segment else len(lb.cube.query_ids) - lb.n_scored,
    }


def _settled_rows(lb: scoring.Leaderboard, v: trust.Verdicts, b: trust.Bounds, measure: str) -> list[dict]:
    means = lb.means()[lb.measure_index(measure)]
    names = lb.cube.system_names
    rows = []
    for rank, s in enumerate(v.order.tolist(), start=1):
        low, high = float(b.mean_low[measure][s]), float(b.mean_high[measure][s])
        rows.append(
            {
                "rank": rank,
                "name": names[s],
                "value": float(means[s]),
                "low": low,
                "high": high,
                "bar": charts.interval_bar(low, high, float(means[s])),
            }
        )
    return rows


@leaderboard_page()
@_handles_bad_args
def leaderboard_trust(request, ctx: BoardRequest):
    """How far to trust the ranking: score bounds, settled comparisons, pool bias, macro vs micro, diversity."""
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    measure = ctx.measure
    attribute = request.GET.get("attribute", "").strip()
    attributes = trust.attribute_names(ctx.campaign)
    context = {"tab": "trust", "attribute": attribute, "attributes": attributes, "n_scored": lb.n_scored}
    if lb.n_scored and len(lb.cube.system_ids):
        b = trust.bounds(lb)
        bounded = measure in b.mean_low
        v = trust.verdicts(lb, measure) if bounded else None
        rows = _settled_rows(lb, v, b, measure) if v else []
        if v:
            for row, adj in zip(rows, [*v.adjacent, None], strict=True):
                row["next"] = adj
                if adj is not None:
                    row["next_where"] = ", ".join(f"{q['qid']} ({q['pairs']})" for q in adj["top_queries"])
        bound_names = list(b.mean_low)
        order = trust.ranking_order(lb, measure).tolist()
        names = lb.cube.system_names
        means = lb.means()
        all_bounds = [
            {
                "name": names[s],
                "cells": [
                    (
                        m,
                        float(means[lb.measure_index(m), s]),
                        float(b.mean_low[m][s]),
                        float(b.mean_high[m][s]),
                    )
                    for m in bound_names
                ],
            }
            for s in order
        ]
        pb = trust.pool_bias(lb)
        pool_rows = [
            {
                "name": names[s],
                "real": float(pb.real[lb.measure_index(measure), s]),
                "without": float(pb.without[lb.measure_index(measure), s]),
                "drop": float(pb.drop[lb.measure_index(measure), s]),
                "unique_top_k": int(pb.unique_in_top_k[s]),
                "unique_pool": int(pb.unique_in_pool[s]),
                "unique_per_query": float(pb.unique_in_top_k[s]) / max(pb.n_queries, 1),
            }
            for s in order
        ]
        p_at_k, r_at_k = str(Measure("P", ctx.params.k)), str(Measure("R", ctx.params.k))
        micro = trust.micro(lb)
        micro_rows = [
            {
                "name": names[s],
                "macro_p": float(means[lb.measure_index(p_at_k), s]),
                "micro_p": float(micro[p_at_k][s]),
                "macro_r": float(means[lb.measure_index(r_at_k), s]),
                "micro_r": float(micro[r_at_k][s]),
            }
            for s in order
        ]
        diversity = None
        if attribute:
            try:
                d = trust.diversity(lb, attribute)
            except ValueError as exc:
                raise _BadArg(str(exc)) from None
            ild, cov = d.means()
            # per query, a page of the scored queries (in the cube's order) with each system's two values
            qids = lb.scored_qids()
            page = Paginator(range(len(qids)), PAGE_SIZE).get_page(request.GET.get("page"))
            shown = np.asarray(page.object_list, dtype=np.intp)
            ild_q = d.ild[np.ix_(order, shown)].T.tolist()  # (page, S) in ranking order
            cov_q = d.coverage[np.ix_(order, shown)].T.tolist()
            diversity = {
                "d": d,
                "ild_name": d.names[0],
                "cov_name": d.names[1],
                "rows": [
                    {
                        "name": names[s],
                        "value": float(means[lb.measure_index(measure), s]),
                        "ild": ild[s],
                        "cov": cov[s],
                    }
                    for s in order
                ],
                "systems": [names[s] for s in order],
                "queries": [
                    {"qid": qids[q], "cells": list(zip(i_row, c_row, strict=True))}
                    for q, i_row, c_row in zip(shown.tolist(), ild_q, cov_q, strict=True)
                ],
                "page": page,
            }
        context.update(
            n_unscored=0 if ctx.params.segment else len(lb.cube.query_ids) - lb.n_scored,
            bounded=bounded,
            verdicts=v,
            settled_rows=rows,
            n_open=sum(not a["settled"] for a in v.adjacent) if v else 0,
            all_bounds=all_bounds,
            bound_names=bound_names,
            pool_rows=pool_rows,
            pool_depth=ctx.campaign.pool_depth,
            micro_rows=micro_rows,
            micro_note=trust.MICRO_NOTE,
            diversity=diversity,
            queue_mode=ctx.campaign.get_queue_mode_display(),
            queue_matter=ctx.campaign.queue_mode == Campaign.QueueMode.MATTER,
        )
    context["keep"] = [("attribute", attribute)] if attribute else []
    context["page_query"] = urlencode({**ctx.changed_params, **({"attribute": attribute} if attribute else {})})
    return render(request, "judging/leaderboard_trust.html", ctx.base(**context))


# metrics.CURVE_MEASURES with nDCG, the leaderboard's default ranking measure, first.
CURVE_BASES = tuple(sorted(metrics.CURVE_MEASURES, key=lambda m: m != "nDCG"))


def _with_query(url: str, query: dict) -> str:
    return f"{url}?{urlencode(query)}" if query else url


@leaderboard_page()
@_handles_bad_args
def leaderboard_curves(request, ctx: BoardRequest):
    """Each system's measure at every cutoff 1..K as a line chart and a table."""
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    base = ctx.measure_base if ctx.measure_base in CURVE_BASES else "nDCG"
    k_max = _int_arg(request, "k_max", trust.curve_k_default(lb), 1, trust.CURVE_K_MAX)
    values = trust.curves(lb, base, k_max)
    order = trust.ranking_order(lb, str(Measure(base, ctx.params.k))).tolist()
    names = [lb.cube.system_names[s] for s in order]
    values = values[order] if len(order) else values
    # the table shows every cutoff up to 20, then every 5th and 10th: a readable width
    shown = [k for k in range(1, k_max + 1) if k <= 20 or k % (5 if k_max <= 50 else 10) == 0]
    table = [
        {"name": n, "cells": [float(values[i, k - 1]) for k in shown], "series": i % charts.CURVE_SERIES}
        for i, n in enumerate(names)
    ]
    chart = charts.curve_chart(names, values, measure=base) if names and lb.n_scored else None
    context = ctx.base(
        tab="curves",
        base=base,
        bases=CURVE_BASES,
        k_max=k_max,
        shown=shown,
        table=table,
        chart=chart,
        n_scored=lb.n_scored,
        keep=[("k_max", k_max)] if "k_max" in request.GET else [],
        api=reverse("api:campaign-leaderboard-curves", args=[ctx.campaign.slug])
        + "?"
        + urlencode(
            {**{k: v for k, v in ctx.changed_params.items() if k != "measure"}, "measure": base, "k_max": k_max}
        ),
    )
    return render(request, "judging/leaderboard_curves.html", context)


@leaderboard_page()
@_handles_bad_args
def leaderboard_segments(request, ctx: BoardRequest):
    """Each system's measure per query segment (tag), with the segment's CIs and tests."""
    # every segment of the whole campaign, whatever segment the other pages are filtered to
    lb = scoring.leaderboard(ctx.campaign, replace(ctx.params, segment=None))
    segs = trust.segments(lb, ctx.measure)
    order = trust.ranking_order(lb, ctx.measure).tolist()
    names = [lb.cube.system_names[s] for s in order]
    means = lb.means()[lb.measure_index(ctx.measure)]
    rows = []
    for rank, s in enumerate(order):
        cells = []
        for seg in segs:
            st = seg.stats
            if st is None:
                cells.append(None)
                continue
            p = float(st.p_vs_best[s])
            cells.append(
                {
                    "value": float(st.means[s]),
                    "ci": (float(st.ci_low[s]), float(st.ci_high[s])) if math.isfinite(st.ci_low[s]) else None,
                    "best": s == st.best,
                    "worse": bool(st.worse[s]),
                    "p": p if math.isfinite(p) else None,
                }
            )
        rows.append({"rank": rank + 1, "name": names[rank], "all": float(means[s]), "cells": cells})
    context = ctx.base(
        tab="segments",
        segments=segs,
        rows=rows,
        few=trust.SEGMENT_MIN_QUERIES,
        any_few=any(seg.few for seg in segs),
        n_scored=lb.n_scored,
        alpha=scoring.ALPHA,
        api=_with_query(
            reverse("api:campaign-leaderboard-segments", args=[ctx.campaign.slug]),
            {k: v for k, v in ctx.changed_params.items() if k != "segment"},
        ),
    )
    return render(request, "judging/leaderboard_segments.html", context)


class QueryTagsForm(forms.Form):
    qid = forms.CharField(max_length=100)
    tags = forms.CharField(required=False, max_length=2000, help_text=gettext_lazy("Comma-separated, e.g. head, shoes"))


@leaderboard_page(drill=True)
@_handles_bad_args
def leaderboard_tags(request, ctx: BoardRequest):
    """Leads edit the queries' tags (segments), a page of PAGE_SIZE queries at a time."""
    message = error = ""
    if request.method == "POST":
        form = QueryTagsForm(request.POST)
        if form.is_valid():
            tags = [t.strip() for t in form.cleaned_data["tags"].split(",") if t.strip()]
            try:
                changed = query_tags_set(campaign=ctx.campaign, qid=form.cleaned_data["qid"], tags=tags)
            except ValueError as exc:  # FormatError included: it names the bad tag
                error = str(exc)
            else:
                qid = form.cleaned_data["qid"]
                message = (_("Tags of %(qid)s saved.") if changed else _("Tags of %(qid)s unchanged.")) % {"qid": qid}
        else:
            error = "; ".join(f"{f}: {e}" for f, es in form.errors.items() for e in es)
    search = request.GET.get("q", "").strip()[:100]
    page = Paginator(query_list(campaign=ctx.campaign, search=search), PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [{"qid": q.qid, "text": q.text, "tags": ", ".join(t.tag for t in q.tags.all())} for q in page]
    context = ctx.base(
        tab="tags",
        rows=rows,
        page=page,
        search=search,
        message=message,
        error=error,
        tag_counts=trust.campaign_tags(ctx.campaign),
        page_query=urlencode({**ctx.changed_params, **({"q": search} if search else {})}),
        keep=[("q", search)] if search else [],
    )
    return render(request, "judging/leaderboard_tags.html", context, status=400 if error else 200)
