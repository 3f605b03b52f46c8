"""Leaderboard pages: the live ranking of systems with its statistics and pictures, and what every leaderboard
page shares (the parameters, the access check, the links between the tabs).

Everything here reads through judging.scoring, which keeps per-query scores cached and rescored only for
queries whose labels moved; numpy does the per-query work, and Python only builds the rows a page shows.
The drill-down (leads only) is in leaderboard_drill, the trust tabs in leaderboard_trust.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

import numpy as np
from csp.decorators import csp_update
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from judging import charts, params, scoring
from judging.access import Member, View, campaign_view, signed_in
from judging.errors import RequestError
from judging.jobs import JobError, significance_get
from judging.params import LeaderboardQuery, ParamErrors, ascii_int
from judging.scoring import trust
from judging.selectors import grade_top, query_tag_exists
from judging.selectors.calibration import label_source_choices
from judging.views.board import BoardRequest
from judging.views.http import HtmxHttpRequest
from judging.views.job_presenters import job_context
from judging.views.leaderboard_ppi import ppi_context
from metrics import Measure
from metrics.measures import is_judged

# A leaderboard page's view: the request and its BoardRequest (and the URL's arguments) in, a response out.
BoardView = Callable[..., HttpResponse]

PAGE_SIZE = 200  # queries per page of the heatmap, the head-to-head list and the trust page's diversity table
PHONE_CHART_WIDTH = 340  # the bar chart drawn for a 390 px screen: about its card's width inside the padding


def leaderboard_page(*, drill: bool = False, ppi: bool = False) -> Callable[[BoardView], View]:
    """campaign_view, then the leaderboard's own checks and parameters; the view gets a BoardRequest.

    Annotators get 403 on the drill-down, and on the leaderboard itself unless the campaign lets them see
    it (knowing who is winning biases judgments). Bad parameters get a 400 that says which and why; so does
    labels=ppi:NAME on a page other than the leaderboard's (``ppi``).
    """

    def decorate(view: BoardView) -> View:
        @campaign_view
        @wraps(view)
        def wrapped(request: HtmxHttpRequest, member: Member, *args: object, **kwargs: Any) -> HttpResponse:
            if drill and not member.is_lead:
                return refuse(request, member, 403, _("The per-query drill-down is for the campaign's leads only."))
            if not member.can_see_leaderboard:
                return refuse(
                    request,
                    member,
                    403,
                    _(
                        "The leads of this campaign keep the leaderboard hidden from annotators while "
                        "judging is under way: knowing which system is winning biases judgments."
                    ),
                )
            try:
                board = board_request(request, member)
            except ParamErrors as exc:
                return refuse(request, member, 400, _("These leaderboard settings are not valid."), errors=exc.errors)
            if not ppi and scoring.ppi_judge(board.params.labels):
                return refuse(
                    request,
                    member,
                    400,
                    _(
                        "Prediction-powered estimates (ppi:NAME) are on the leaderboard page only; this page takes "
                        "humans, model:NAME or hybrid:NAME."
                    ),
                )
            return view(request, board, *args, **kwargs)

        return wrapped

    return decorate


def board_request(request: HttpRequest, member: Member) -> BoardRequest:
    """The page's parameters (judging.params.LeaderboardQuery, as the API reads them) with the page's own limits:
    the threshold up to the scale's top grade, a measure the table has at this k, a segment some query carries.
    ParamErrors names every bad one."""
    campaign = member.campaign
    sources = label_source_choices(campaign=campaign)
    query = LeaderboardQuery.parse(
        request.GET,
        campaign=campaign,
        names=params.PAGE,
        top_grade=grade_top(campaign=campaign),
        sources=[value for value, _label in sources],
    )
    errors = {}
    try:
        ranked_by = Measure.parse(trust.resolve_measure(query.measure, query.k))
    except RequestError as exc:  # in the reader's language, as the API says it
        errors["measure"] = [str(exc)]
    if query.segment and not query_tag_exists(campaign=campaign, tag=query.segment):
        errors["segment"] = [_("no query of this campaign has the tag %(tag)r") % {"tag": query.segment}]
    if errors:
        raise ParamErrors(errors)
    # A campaign with a model judge shows the hybrid leaderboard first (issue 40): people's labels, the model's
    # calibrated reading elsewhere, with verdicts that count on the model's doubt; ?labels=humans for people alone.
    judge = scoring.campaign_judge(campaign)
    default = f"hybrid:{judge}" if judge is not None and f"hybrid:{judge}" in dict(sources) else "humans"
    if not (request.GET.get("labels") or "").strip():
        query = query.but(labels=default)
    return BoardRequest(member, query.params(), ranked_by, sources, query.top_k, default)


def refuse(
    request: HtmxHttpRequest, member: Member, status: int, message: str, errors: dict[str, list[str]] | None = None
) -> HttpResponse:
    """The leaderboard's error page (or partial, for htmx) with ``status``; ``errors`` by parameter name."""
    labels = {name: p.label or name for name, p in params.PARAMS.items()}
    context = member.context(
        nav="leaderboard",
        status=status,
        message=message,
        errors=[(labels.get(name, name), e) for name, es in (errors or {}).items() for e in es],
    )
    template = "judging/_leaderboard_error.html" if request.htmx else "judging/leaderboard_error.html"
    return render(request, template, context, status=status)


def _bad_request(request: HtmxHttpRequest, ctx: BoardRequest, message: str) -> HttpResponse:
    return refuse(request, ctx.member, 400, message)


def int_arg(request: HttpRequest, name: str, default: int, low: int, high: int) -> int:
    raw = request.GET.get(name, "")
    if raw == "":
        return default
    try:
        value = ascii_int(raw)
    except ValueError:
        raise BadArg(_("%(name)s must be a whole number, not %(raw)r") % {"name": name, "raw": raw[:40]}) from None
    if not low <= value <= high:
        raise BadArg(_("%(name)s must be between %(low)d and %(high)d") % {"name": name, "low": low, "high": high})
    return value


class BadArg(ValueError):
    """A page-specific argument (page, depth, system...) that is not valid: answered with a 400."""


def handles_bad_args(view: BoardView) -> BoardView:
    @wraps(view)
    def wrapped(request: HtmxHttpRequest, ctx: BoardRequest, *args: object, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, ctx, *args, **kwargs)
        except BadArg as exc:
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


@leaderboard_page(ppi=True)
def leaderboard(request: HtmxHttpRequest, ctx: BoardRequest) -> HttpResponse:
    """The leaderboard page: controls, the live table with its bar chart, and the pictures."""
    if scoring.ppi_judge(ctx.params.labels):
        return render(request, "judging/leaderboard_ppi.html", ctx.base(**ppi_context(ctx)))
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    context = ctx.base(**_table_context(ctx, lb), **_pictures_context(ctx, lb), tests=scoring.TESTS)
    if ctx.params.labels.startswith("hybrid:"):  # who labelled what, how the model fares, what to quote
        context["hybrid"] = scoring.hybrid_overview(ctx.campaign, ctx.params.k, ctx.params.labels.partition(":")[2])
        context["on_leaderboard"] = True
    return render(request, "judging/leaderboard.html", context)


@leaderboard_page(ppi=True)
def leaderboard_table(request: HtmxHttpRequest, ctx: BoardRequest) -> HttpResponse:
    """The table partial htmx polls every few seconds."""
    if scoring.ppi_judge(ctx.params.labels):
        return render(request, "judging/_leaderboard_ppi_table.html", ctx.base(**ppi_context(ctx)))
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    return render(request, "judging/_leaderboard_table.html", ctx.base(**_table_context(ctx, lb)))


@leaderboard_page()
def leaderboard_stats(request: HtmxHttpRequest, ctx: BoardRequest) -> HttpResponse:
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
@handles_bad_args
def leaderboard_significance(request: HtmxHttpRequest, ctx: BoardRequest) -> HttpResponse:
    """Pairwise significance matrix of the ranking measure, on demand."""
    test = request.GET.get("test") or "randomization"
    if test not in scoring.TESTS:
        raise BadArg(_("test must be one of %(choices)s") % {"choices": ", ".join(scoring.TESTS)})
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    # Above RELJUDGE_STATS_JOB_CELLS the test runs in the task worker; the page shows its progress and then
    # the matrix (cached under the labels' state it was computed from, so never a stale one as current).
    # A job starts only from the page's button (a POST with the CSRF token), never from a visit.
    start = request.method == "POST"
    pairwise = job = None
    try:
        pairwise, job = significance_get(
            lb=lb,
            measure=ctx.measure,
            test=test,
            user=signed_in(request.user),
            page=request.get_full_path(),
            start=start,
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
            timeline.times,
            timeline.cumulative,
            model=timeline.model_cumulative,
            goal=timeline.goal,
            bucket=timeline.bucket,
        ),
        "imported": timeline.imported,
    }


@leaderboard_page()
def leaderboard_pictures(request: HtmxHttpRequest, ctx: BoardRequest) -> HttpResponse:
    """The per-query distribution and judging progress charts (polled less often than the table)."""
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    return render(request, "judging/_leaderboard_pictures.html", ctx.base(**_pictures_context(ctx, lb)))


def two_systems(request: HttpRequest, lb: scoring.Leaderboard, order: np.ndarray) -> tuple[int, int]:
    index = {n: i for i, n in enumerate(lb.cube.system_names)}
    if len(index) < 2:
        raise BadArg(_("a head-to-head needs at least two systems"))
    picked = []
    for name, default in (("a", order[0]), ("b", order[1])):
        raw = request.GET.get(name, "")
        if raw and raw not in index:
            raise BadArg(_("unknown system %(name)r for %(param)s") % {"name": raw[:100], "param": name})
        picked.append(index[raw] if raw else int(default))
    if picked[0] == picked[1]:
        raise BadArg(_("choose two different systems"))
    return picked[0], picked[1]


# --------------------------------------------------------------------------- charts as files

CHARTS = ("bars", "distribution", "progress", "differences")
NO_RUNS_YET = gettext_lazy("No system has a run in this campaign yet: upload one to see it here.")


# A chart file carries its colours in an embedded <style> (it is opened or pasted without the page's
# stylesheet): that one response allows inline styles; it holds no script, and script-src stays 'self'.
@csp_update({"style-src": ["'unsafe-inline'"]})
@leaderboard_page()
@handles_bad_args
def leaderboard_chart(request: HtmxHttpRequest, ctx: BoardRequest, kind: str) -> HttpResponse:
    """A chart as a standalone SVG file (for reports and slides)."""
    if kind not in CHARTS:
        raise Http404(_("No such chart."))
    if kind == "progress":
        t = scoring.judging_timeline(ctx.campaign)
        svg = charts.progress_chart(t.times, t.cumulative, model=t.model_cumulative, goal=t.goal, bucket=t.bucket)
    else:
        lb = scoring.leaderboard(ctx.campaign, ctx.params)
        order = scoring.system_order(lb, ctx.measure)
        if kind == "bars":
            stats = scoring.stats_for_page(lb, ctx.measure)[0]
            bars = scoring.bar_chart_of(scoring.ranking_rows(lb, ctx.measure, ctx.judged, stats), ctx.measure, stats)
            # no system to draw yet: say so in the picture (the URL is right, the campaign is still empty)
            svg = bars or charts.message_chart(_("Systems by %(measure)s") % {"measure": ctx.measure}, str(NO_RUNS_YET))
        elif kind == "distribution":
            names = [lb.cube.system_names[s] for s in order.tolist()]
            svg = charts.distribution_chart(names, lb.per_query(ctx.measure)[order], measure=ctx.measure)
        else:
            if not ctx.is_lead:
                return refuse(request, ctx.member, 403, _("Head-to-head charts are for leads only."))
            a, b = two_systems(request, lb, order)
            h2h = scoring.head_to_head(lb, ctx.measure, a, b)
            svg = charts.difference_chart(h2h.diff, a=h2h.summary["a"], b=h2h.summary["b"], measure=ctx.measure)
    response = HttpResponse(charts.standalone(svg), content_type="image/svg+xml; charset=utf-8")
    response["Cache-Control"] = "private, no-cache"
    return response


# --------------------------------------------------------------------------- how far to trust it

# Systems x scored queries x depth up to which the polled table shows score bounds and verdicts within the
# request; above it they are on the Trust page, and the table links there. At 20 x 5,000 x 100 they would add
# ~30 ms to every poll after a judgment (the table alone takes ~26 ms, bench/leaderboard_bench.py WARMVIEW),
# and a worker's first labels state a cold build of 2-3 s unless another process published that state's
# verdicts (trust.trust_entries).
INLINE_TRUST_CELLS = 2_000_000


def _trust_inline(lb: scoring.Leaderboard) -> bool:
    return len(lb.cube.system_ids) * max(lb.n_scored, 1) * lb.cube.doc_ids.shape[2] <= INLINE_TRUST_CELLS


def _table_trust(ctx: BoardRequest, lb: scoring.Leaderboard, rows: list[dict]) -> dict:
    """Each row's bounds on the ranking measure and whether its order with the next row is settled."""
    if not rows or not lb.n_scored or not _trust_inline(lb) or is_judged(ctx.measure):
        return {"trust_shown": False, "trust_inline": _trust_inline(lb)}
    # the same entries as the JSON's, computed once per labels state by the machine's processes together
    entries = trust.trust_entries(lb, ctx.measure, ctx.top_k)
    adjacent = entries["settled"]
    for r, verdict in zip(rows, [*adjacent, None], strict=True):
        low, high = entries["bounds"][r["index"]][ctx.measure]
        r["bounds"] = (float(low), float(high))
        r["next_settled"] = None if verdict is None else verdict["settled"]
        r["next_verdict"] = None if verdict is None else verdict["verdict"]
        r["next_percent"] = None if verdict is None else scoring.holds_percent(verdict["p_holds"])
        r["next_open_pairs"] = 0 if verdict is None else verdict["open_pairs"]
    n_open = sum(a["verdict"] in ("likely", "open") for a in adjacent)
    stop = entries.get("stop")
    without = entries["queries_without_labels"]
    return {
        "trust_shown": True,
        "trust_inline": True,
        "pairs_left": entries["pairs_left"],
        "n_open": n_open,
        "n_final": entries["verdict_queries"],
        "n_without_labels": without,
        "stop": stop,
        "stop_text": scoring.stop_sentence(stop, without, len(lb.cube.system_ids)) if stop else "",
    }
