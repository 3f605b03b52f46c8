"""Pages: offline measures against online metrics, and model judges calibrated against the people."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods, require_POST

from judging import charts
from judging.access import Member, campaign_view, signed_in
from judging.charts.online import scatter_svg
from judging.forms import AsciiIntegerField
from judging.jobs import model_endpoint_configured, model_judge_job_start
from judging.selectors.calibration import UnknownJudge, judge_calibration, model_judges
from judging.selectors.online import FEW_SYSTEMS, best_sentence, offline_vs_online, online_figures, per_query_for_page
from judging.views.leaderboard import BoardRequest, leaderboard_page


@require_http_methods(["GET", "HEAD"])
@leaderboard_page()
def online(request: HttpRequest, ctx: BoardRequest) -> HttpResponse:
    """For each offline measure and online metric: tau, r, n, a scatter, and the pairs of systems ordered
    differently; which measure predicts which metric best; the same per query where figures exist."""
    campaign = ctx.campaign
    data = offline_vs_online(campaign=campaign, params=ctx.params)
    points = data["_points"]
    by_metric = []
    for metric in data["metrics"]:
        rows = [r for r in data["agreement"] if r["metric"] == metric]
        for r in rows:
            r["svg"] = scatter_svg(
                points[(r["measure"], metric)], r["discordant_pairs"], x_name=r["measure"], y_name=metric
            )
            r["best"] = data["best"].get(metric, {}).get("measure") == r["measure"]
        by_metric.append({"metric": metric, "rows": rows, "n": rows[0]["n_systems"] if rows else 0})
    # per query: the best measure of each metric (the full table is in the API)
    per_query = per_query_for_page(data)
    return render(
        request,
        "judging/online.html",
        ctx.base(
            tab="online",
            data=data,
            by_metric=by_metric,
            statements=best_sentence(data),
            few=FEW_SYSTEMS,
            per_query=per_query,
            figures=online_figures(campaign=campaign),
            keep=[],
            api_url=reverse("api:campaign-online", args=[campaign.slug]) + (f"?{ctx.qs}" if ctx.qs else ""),
        ),
    )


class JudgeRunForm(forms.Form):
    """Start a model judge's run from the web. No endpoint field: the server calls only the endpoint its
    environment configures (RELJUDGE_MODEL_ENDPOINT), never a URL typed into a page."""

    PAIRS = [
        ("unjudged", gettext_lazy("pairs this judge has not judged yet")),
        ("all", gettext_lazy("every pooled pair")),
        ("sample", gettext_lazy("a random sample")),
    ]
    model = forms.RegexField(
        label=gettext_lazy("Model"),
        regex=r"^[\w.@+-]{1,150}\Z",
        max_length=150,
        help_text=gettext_lazy("The model name sent to the endpoint; also the judge's name as an annotator."),
        error_messages={"invalid": gettext_lazy("Use 1-150 letters, digits and @.+-_ characters.")},
    )
    pairs = forms.ChoiceField(label=gettext_lazy("Pairs"), choices=PAIRS, initial="unjudged")
    sample = AsciiIntegerField(label=gettext_lazy("Sample size"), min_value=1, max_value=1_000_000, required=False)
    repeat = AsciiIntegerField(
        label=gettext_lazy("Ask each pair"),
        min_value=1,
        max_value=20,
        initial=1,
        required=False,
        help_text=gettext_lazy("times (2 or more measures self-consistency; the majority grade is stored)"),
    )
    canary = AsciiIntegerField(
        label=gettext_lazy("Canary documents"),
        min_value=0,
        max_value=200,
        initial=0,
        required=False,
        help_text=gettext_lazy("non-relevant documents asked again with the query's words inserted"),
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("pairs") == "sample":
            if not data.get("sample"):
                self.add_error("sample", _("Give the number of pairs to sample."))
            else:
                data["mode"] = f"sample:{data['sample']}"
        else:
            data["mode"] = data.get("pairs")
        return data


@require_http_methods(["GET", "HEAD"])
@leaderboard_page(drill=True)
def judges(request: HttpRequest, ctx: BoardRequest) -> HttpResponse:
    """The campaign's model judges, with a link to each one's calibration, and the form that starts a run."""
    return render(
        request,
        "judging/calibration_list.html",
        ctx.base(
            tab="judges",
            judges=model_judges(campaign=ctx.campaign),
            run_form=JudgeRunForm(),
            endpoint_configured=model_endpoint_configured(),
        ),
    )


@campaign_view(lead=True)
@require_POST
def judges_run(request: HttpRequest, member: Member) -> HttpResponse:
    """Queue a model judge's run (leads only); the browser goes to the job's page and watches it."""
    campaign = member.campaign
    form = JudgeRunForm(request.POST)
    if not model_endpoint_configured():
        messages.error(request, _("No model endpoint is configured on this server (RELJUDGE_MODEL_ENDPOINT)."))
        return redirect("judging:judges", slug=campaign.slug)
    if not form.is_valid():
        problems = "; ".join(str(e) for errors in form.errors.values() for e in errors)
        messages.error(request, _("The run was not started: %(problems)s") % {"problems": problems})
        return redirect("judging:judges", slug=campaign.slug)
    try:
        job = model_judge_job_start(
            campaign=campaign,
            user=signed_in(request.user),
            model=form.cleaned_data["model"],
            pairs=form.cleaned_data["mode"],
            repeat=form.cleaned_data.get("repeat") or 1,
            canary=form.cleaned_data.get("canary") or 0,
        )
    except (ValueError, ValidationError) as exc:
        text = exc.messages[0] if isinstance(exc, ValidationError) else str(exc)
        messages.error(request, _("The run was not started: %(problems)s") % {"problems": text})
        return redirect("judging:judges", slug=campaign.slug)
    return redirect("judging:job_detail", slug=campaign.slug, job_id=job.pk)


@require_http_methods(["GET", "HEAD"])
@leaderboard_page(drill=True)
def calibration(request: HttpRequest, ctx: BoardRequest, name: str) -> HttpResponse:
    """One model judge against the human labels (leads only)."""
    campaign = ctx.campaign
    try:
        data = judge_calibration(campaign=campaign, name=name, params=ctx.params)
    except UnknownJudge as exc:
        raise Http404(str(exc)) from None
    names = {int(k): v for k, v in data["grade_names"].items()}
    matrix = charts.confusion_svg(
        data["confusion"], data["categories"], row_name=_("humans"), col_name=data["judge"], grade_names=names
    )
    review = reverse("judging:review", args=[campaign.slug])
    for d in data["disagreements"]:
        d["review_url"] = f"{review}?kind=model&q={d['qid']}"
    return render(
        request,
        "judging/calibration.html",
        ctx.base(
            tab="judges",
            data=data,
            matrix=matrix,
            keep=[],
            api_url=reverse("api:campaign-calibration", args=[campaign.slug, data["judge"]]),
            hybrid_url=ctx.url("leaderboard", labels=f"hybrid:{data['judge']}"),
            model_url=ctx.url("leaderboard", labels=f"model:{data['judge']}"),
        ),
    )
