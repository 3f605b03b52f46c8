"""The leaderboard's drill-down, for leads: the queries x systems heatmap, one query's ranked lists, a
head-to-head of two systems, and the queries' tags (segments)."""

from __future__ import annotations

from typing import cast
from urllib.parse import urlencode

import numpy as np
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _

from judging import charts, scoring
from judging.forms import QueryTagsForm
from judging.scoring import trust
from judging.selectors import grade_list, query_list
from judging.services import query_tags_set
from judging.views.leaderboard import (
    PAGE_SIZE,
    BadArg,
    BoardRequest,
    handles_bad_args,
    int_arg,
    leaderboard_page,
    two_systems,
)
from judging.views.paging import page_of


@leaderboard_page(drill=True)
@handles_bad_args
def leaderboard_queries(request: HttpRequest, ctx: BoardRequest) -> HttpResponse:
    """Queries x systems heatmap of the ranking measure, a page of PAGE_SIZE queries at a time."""
    sort = request.GET.get("sort") or "qid"
    if sort not in scoring.SORTS:
        raise BadArg(_("sort must be one of %(choices)s") % {"choices": ", ".join(scoring.SORTS)})
    search = request.GET.get("q", "").strip()[:100]
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    heat = scoring.heatmap(lb, ctx.measure, ctx.judged, sort=sort, search=search)
    page = page_of(request, heat.matching, PAGE_SIZE)
    means = lb.means()[lb.measure_index(ctx.measure)]
    context = ctx.base(
        rows=heat.rows(lb, cast(np.ndarray, page.object_list)),
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
@handles_bad_args
def leaderboard_query(request: HttpRequest, ctx: BoardRequest, qid: str) -> HttpResponse:
    """One query: each system's ranked list with labels, unjudged and unsure documents marked."""
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    order = scoring.system_order(lb, ctx.measure)
    wanted = request.GET.getlist("s")
    if wanted:
        unknown = [w for w in wanted if w not in lb.cube.system_names]
        if unknown:
            raise BadArg(_("unknown system %(name)r") % {"name": unknown[0][:100]})
        systems = np.array([s for s in order.tolist() if lb.cube.system_names[s] in set(wanted)], dtype=np.intp)
    else:
        systems = order
    depth_max = lb.cube.doc_ids.shape[2]
    depth = min(int_arg(request, "depth", min(max(ctx.params.k, 10), depth_max), 1, 1000), depth_max)
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


@leaderboard_page(drill=True)
@handles_bad_args
def leaderboard_compare(request: HttpRequest, ctx: BoardRequest) -> HttpResponse:
    """Head-to-head of two systems: per-query wins, ties and losses, sorted by the difference."""
    lb = scoring.leaderboard(ctx.campaign, ctx.params)
    order = scoring.system_order(lb, ctx.measure)
    if len(order) < 2:  # the campaign's state, not the caller's error: say what to do next
        context = ctx.base(
            tab="compare", too_few=len(order), upload_url=reverse("judging:campaign_upload", args=[ctx.campaign.slug])
        )
        return render(request, "judging/leaderboard_compare_empty.html", context)
    a, b = two_systems(request, lb, order)
    h2h = scoring.head_to_head(lb, ctx.measure, a, b)
    summary = h2h.summary
    page = page_of(request, h2h.ranked, PAGE_SIZE)
    context = ctx.base(
        s=summary,
        rows=h2h.rows(lb, ctx.judged, cast(np.ndarray, page.object_list)),
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


@leaderboard_page(drill=True)
@handles_bad_args
def leaderboard_tags(request: HttpRequest, ctx: BoardRequest) -> HttpResponse:
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
    page = page_of(request, query_list(campaign=ctx.campaign, search=search), PAGE_SIZE)
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
