"""The judging page and an annotator's own judgments ("my judgments")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from judging import selectors
from judging.access import Member, campaign_member_pair, campaign_pair, campaign_view, logged_in
from judging.forms import JudgmentForm, MyJudgmentsFilter
from judging.models import Campaign, Grade, Judgment, Pair
from judging.services import (
    JudgmentConflict,
    judgment_intent,
    judgment_record,
    judgment_record_next,
    judgment_version,
    pair_assign,
    pair_hold,
)
from judging.services.judgments import JudgmentRecorded
from judging.views.http import HtmxHttpRequest
from judging.views.paging import page_of

SKIPS_KEY = "reljudge_skips"
SKIPS_KEPT = 500


# --------------------------------------------------------------------------- the judging page


def _skips(request: HtmxHttpRequest, campaign: Campaign) -> list[int]:
    return request.session.get(SKIPS_KEY, {}).get(str(campaign.id), [])


def _skips_set(request: HtmxHttpRequest, campaign: Campaign, skips: list[int]) -> None:
    all_skips = request.session.get(SKIPS_KEY, {})
    all_skips[str(campaign.id)] = skips[-SKIPS_KEPT:]
    request.session[SKIPS_KEY] = all_skips


_version = judgment_version


def _values_of(judgment: Judgment | None) -> dict:
    if judgment is None:
        return {"grade": None, "unsure": False, "tentative_grade": None, "note": ""}
    return {
        "grade": judgment.grade.value if judgment.grade else None,
        "unsure": judgment.unsure,
        "tentative_grade": judgment.tentative_grade.value if judgment.tentative_grade else None,
        "note": judgment.note,
    }


def _grade_label(grades: Sequence[Grade] | None, values: dict[str, Any]) -> str:
    names = {g.value: g.name for g in grades or ()}
    if values["unsure"]:
        t = values["tentative_grade"]
        if t is None:
            return _("Unsure")
        return _("Unsure (tentatively %(grade)s – %(name)s)") % {"grade": t, "name": names.get(t, "?")}
    return f"{values['grade']} – {names.get(values['grade'], '?')}"


@dataclass
class Outcome:
    """What happened to one submitted judgment."""

    status: str  # "saved", "invalid" or "conflict"
    judgment: Judgment | None = None
    existed: bool = False
    changed: bool = False
    values: dict = field(default_factory=dict)  # what the annotator submitted, to show it again
    errors: list[str] = field(default_factory=list)


def _posted(request: HtmxHttpRequest) -> tuple[dict, dict | None, list[str]]:
    """The posted judgment: what was typed (to show it again), the values to record (or None) and the
    errors that stop it, each naming its field."""
    form = JudgmentForm(request.POST)
    raw = {
        "grade": request.POST.get("grade", ""),
        "unsure": bool(request.POST.get("unsure")),
        "tentative_grade": request.POST.get("tentative_grade", ""),
        "note": request.POST.get("note", ""),
    }
    if not form.is_valid():
        errors = [
            f"{name.replace('_', ' ')}: {e}" if name != "__all__" else str(e)
            for name, errs in form.errors.items()
            for e in errs
        ]
        return raw, None, errors
    data = form.cleaned_data
    try:
        wanted = judgment_intent(
            grade=data.get("grade"),
            unsure=data.get("unsure"),
            tentative_grade=data.get("tentative_grade"),
            note=data.get("note"),
        )
    except ValidationError as exc:
        return raw, None, exc.messages
    return raw, {**wanted, "seconds_spent": data["seconds"], "version": data["version"]}, []


def _invalid(request: HtmxHttpRequest, pair: Pair, raw: dict, errors: list[str]) -> Outcome:
    current = selectors.judgment_current(pair=pair, annotator=request.user)
    return Outcome("invalid", current, current is not None, values=raw, errors=errors)


def _saved(
    request: HtmxHttpRequest, campaign: Campaign, pair: Pair, recorded: JudgmentRecorded, wanted: dict
) -> Outcome:
    """The Outcome of a recorded judgment; the pair is no longer among the annotator's skipped ones."""
    skips = _skips(request, campaign)
    if pair.id in skips:
        _skips_set(request, campaign, [p for p in skips if p != pair.id])
    values = {name: wanted[name] for name in ("grade", "unsure", "tentative_grade", "note")}
    return Outcome("saved", recorded.judgment, not recorded.created, recorded.changed, values=values)


def _record(request: HtmxHttpRequest, member: Member, pair: Pair) -> Outcome:
    """Validate and record the posted judgment."""
    raw, wanted, errors = _posted(request)
    if wanted is None:
        return _invalid(request, pair, raw, errors)
    try:
        # The service compares the form's version with the judgment under the pair's lock: changed
        # elsewhere since this form was drawn (another tab, the API) and different from this choice, it
        # saves nothing; the page says so, keeps the new choice on screen, and a second press saves it.
        recorded = judgment_record(pair=pair, annotator=request.user, member=member, **wanted)
    except JudgmentConflict as exc:
        return Outcome("conflict", exc.judgment, True, values=raw)
    except ValidationError as exc:
        return _invalid(request, pair, raw, exc.messages)
    return _saved(request, member.campaign, pair, recorded, wanted)


def _workspace(request: HtmxHttpRequest, member: Member, pair: Pair | None, **extra: Any) -> dict:
    """Everything the judging panel shows for one pair (or the "all done" state)."""
    campaign = member.campaign
    if "grades" not in extra:
        extra["grades"] = member.grades if member.grades is not None else selectors.grade_list(campaign=campaign)
    # The panel's links, reversed once here rather than by a {% url %} tag at each of their places.
    judge_url = reverse("judging:judge", args=[campaign.slug])
    ctx = member.context(nav="judge", pair=pair, judge_url=judge_url, **extra)
    if pair is None:
        ctx["progress"] = selectors.judge_progress(campaign=campaign, annotator=request.user, query_id=None)
        ctx["mine"] = selectors.judgments_count(campaign=campaign, annotator=request.user)
        ctx["prev_pair_id"], _next_id = selectors.judgment_neighbours(
            campaign=campaign, annotator=request.user, judgment=None
        )
        return ctx
    if "judgment" in extra:
        judgment = extra["judgment"]
    else:
        judgment = selectors.judgment_current(pair=pair, annotator=request.user)
    if judgment is None and extra.get("latest_judged"):
        # A queue pair right after a new judgment: Back leads to the pair just judged, no query needed.
        prev_id, next_id = extra["latest_judged"], None
    elif "neighbours" in extra:  # a pair of the history reached by "record + next" (judgment_following_pair)
        prev_id, next_id = extra["neighbours"]
    else:
        prev_id, next_id = selectors.judgment_neighbours(campaign=campaign, annotator=request.user, judgment=judgment)
    current = _values_of(judgment)
    # What the form holds: after a failed save exactly what was sent, otherwise a fresh choice (the
    # unsure box unticked, so that a number key on a revisited unsure pair records a confident grade).
    typed = extra.get("values") or {"unsure": False, "note": current["note"]}
    url = pair.document.url or ""
    ctx.update(
        record_url=reverse("judging:judge_record", args=[campaign.slug, pair.public_id]),
        skip_url=reverse("judging:judge_skip", args=[campaign.slug, pair.public_id]),
        judgment=judgment,
        version=_version(judgment),
        current=current,
        typed=typed,
        selected=current["tentative_grade"] if current["unsure"] else current["grade"],
        prev_pair_id=prev_id,
        next_pair_id=next_id,
        review=judgment is not None,
        url_is_link=url.lower().startswith(("http://", "https://")),
        looks_like_html="<" in pair.document.text,
        # A pair just chosen and held by "record + next" comes with its progress figures (pair_next(lock=True)).
        progress=getattr(pair, "progress", None)
        or selectors.judge_progress(campaign=campaign, annotator=request.user, query_id=pair.query_id),
    )
    return ctx


def _render_workspace(
    request: HtmxHttpRequest, ctx: dict, *, status: int = 200, url: str | None = None
) -> HttpResponse:
    """The whole page, or for htmx just the panel (but the whole page when htmx restores history)."""
    partial = request.htmx and not request.htmx.history_restore_request
    response = render(request, "judging/_judge_workspace.html" if partial else "judging/judge.html", ctx, status=status)
    if partial and url:
        response["HX-Replace-Url"] = url  # the address bar names what is on screen: a reload shows it
    patch_vary_headers(response, ("HX-Request",))
    return response


def _next_pair(
    request: HtmxHttpRequest, campaign: Campaign, *, after: Pair | None, hold: bool = True
) -> tuple[Pair | None, bool]:
    """The next pair of the queue: staying on ``after``'s query while it has open pairs. Held for the
    annotator (a POST) or, with ``hold=False``, only looked up (a GET: see ``judge``)."""
    current_query = (
        after.query_id if after is not None else selectors.latest_query_id(campaign=campaign, annotator=request.user)
    )
    find = pair_assign if hold else selectors.pair_next
    found = find(
        campaign=campaign, annotator=request.user, current_query_id=current_query, exclude=_skips(request, campaign)
    )
    if found.pair is not None:
        found.pair.campaign = campaign
    return found.pair, found.was_skipped


def _after(
    request: HtmxHttpRequest, campaign: Campaign, pair: Pair, judgment: Judgment | None
) -> tuple[Pair | None, dict, bool]:
    """Where the annotator goes after acting on ``pair``: forward through their history when they were
    revisiting an earlier judgment (like a browser's Forward), else on along the queue.
    Returns (pair, extra context for the panel, whether the pair comes from the history)."""
    if judgment is not None:
        following = selectors.judgment_following(campaign=campaign, annotator=request.user, judgment=judgment)
        if following is not None:
            return campaign_pair(campaign, following, public=True), {}, True
    nxt, was_skipped = _next_pair(request, campaign, after=pair)
    return nxt, {"judgment": None, "was_skipped": was_skipped}, False


@campaign_view
@require_http_methods(["GET", "HEAD"])
def judge(request: HtmxHttpRequest, member: Member) -> HttpResponse:
    """The judging page: the next pair of the annotator's queue, or ?pair=ID (Back / Forward / Edit).

    A GET writes nothing: the next pair is shown at once but not held. The panel then asks to hold it with
    an htmx POST (``judge_hold``, hx-trigger="load", the CSRF token from the page), so no foreign page can
    take or refresh a hold by linking here.
    """
    campaign = member.campaign
    pair: Pair | None
    extra: dict[str, Any]
    if request.GET.get("pair"):
        pair, extra = campaign_pair(campaign, request.GET["pair"], public=True), {}
    else:
        pair, was_skipped = _next_pair(request, campaign, after=None, hold=False)
        extra = {"judgment": None, "was_skipped": was_skipped}  # the queue holds only unjudged pairs
        if pair is not None:
            extra["hold_url"] = reverse("judging:judge_hold", args=[campaign.slug, pair.public_id])
    return _render_workspace(request, _workspace(request, member, pair, **extra))


@campaign_view
@require_POST
def judge_hold(request: HtmxHttpRequest, member: Member, public_id: int) -> HttpResponse:
    """Hold the pair a GET of the judging page showed. 204 when held (or already judged by this annotator:
    a grade sent before this request arrived); when someone else took its last slot meanwhile, the panel
    with the next pair of the queue (held), which htmx swaps in."""
    campaign = member.campaign
    pair = campaign_pair(campaign, public_id, public=True)
    if pair_hold(campaign=campaign, annotator=request.user, pair=pair):
        return HttpResponse(status=204)
    if selectors.judgment_current(pair=pair, annotator=request.user) is not None:
        return HttpResponse(status=204)
    if not request.htmx:
        return redirect("judging:judge", slug=campaign.slug)
    nxt, was_skipped = _next_pair(request, campaign, after=pair)
    ctx = _workspace(request, member, nxt, judgment=None, was_skipped=was_skipped, taken=True)
    return _render_workspace(request, ctx)


@logged_in
@require_POST
def judge_record(request: HtmxHttpRequest, slug: str, public_id: int) -> HttpResponse:
    """Record (or change) the annotator's judgment of one pair, then show the next pair
    (services.judgment_record_next: one transaction; tests/judging/test_views.py holds its SQL count)."""
    member, pair = campaign_member_pair(request, slug, public_id)
    campaign, grades = member.campaign, member.grades
    raw, wanted, errors = _posted(request)
    after = None
    if wanted is None:
        outcome = _invalid(request, pair, raw, errors)
    else:
        try:
            after = judgment_record_next(
                member=member, pair=pair, annotator=request.user, exclude=_skips(request, campaign), **wanted
            )
        except JudgmentConflict as exc:  # see _record
            outcome = Outcome("conflict", exc.judgment, True, values=raw)
        except ValidationError as exc:
            outcome = _invalid(request, pair, raw, exc.messages)
        else:
            outcome = _saved(request, campaign, pair, after.recorded, wanted)
    if outcome.status == "invalid":
        ctx = _workspace(
            request,
            member,
            pair,
            judgment=outcome.judgment,
            values=outcome.values,
            errors=outcome.errors,
            grades=grades,
        )
        return _render_workspace(request, ctx, status=422)
    if outcome.status == "conflict":
        ctx = _workspace(
            request,
            member,
            pair,
            judgment=outcome.judgment,
            values=outcome.values,
            conflict=_grade_label(grades, _values_of(outcome.judgment)),
            grades=grades,
        )
        return _render_workspace(request, ctx, status=409)
    if after is None:  # a saved outcome always comes with where the annotator goes next
        raise AssertionError("record + next saved nothing to go on to")
    saved = {
        "qid": pair.query.qid,
        "docid": pair.document.docid,
        "pair_id": pair.public_id,
        "label": _grade_label(grades, outcome.values),
        "changed": outcome.changed,
        "note": bool(outcome.values["note"]),
    }
    nxt, in_history = after.pair, after.from_history
    extra: dict[str, Any]
    if in_history:
        extra = {"judgment": after.judgment, "neighbours": after.neighbours}
    else:
        extra = {"judgment": None, "was_skipped": after.was_skipped}
    target = reverse("judging:judge", args=[campaign.slug])
    target = f"{target}?pair={nxt.public_id}" if in_history and nxt is not None else target
    if not request.htmx:
        messages.success(request, _("Saved %(qid)s / %(docid)s: %(label)s") % saved)
        return redirect(target)
    if not outcome.existed:
        extra["latest_judged"] = pair.public_id
    ctx = _workspace(request, member, nxt, saved=saved, grades=grades, **extra)
    return _render_workspace(request, ctx, url=target)


@campaign_view
@require_POST
def judge_skip(request: HtmxHttpRequest, member: Member, public_id: int) -> HttpResponse:
    """Put a pair aside for now: it comes back once the rest of the queue is done."""
    campaign = member.campaign
    pair = campaign_pair(campaign, public_id, public=True)
    judgment = selectors.judgment_current(pair=pair, annotator=request.user)
    if judgment is None:
        skips = [p for p in _skips(request, campaign) if p != pair.id] + [pair.id]
        _skips_set(request, campaign, skips)
    # A pair already judged is not skipped but left as it is: Forward through the history.
    nxt, extra, in_history = _after(request, campaign, pair, judgment)
    target = reverse("judging:judge", args=[campaign.slug])
    target = f"{target}?pair={nxt.public_id}" if in_history and nxt is not None else target
    if not request.htmx:
        return redirect(target)
    skipped = {"qid": pair.query.qid, "docid": pair.document.docid} if judgment is None else None
    ctx = _workspace(request, member, nxt, skipped=skipped, **extra)
    return _render_workspace(request, ctx, url=target)


# --------------------------------------------------------------------------- my judgments


@campaign_view
def my_judgments(request: HtmxHttpRequest, member: Member) -> HttpResponse:
    """The annotator's own judgments (never anyone else's), filterable, each one editable."""
    campaign = member.campaign
    filters = MyJudgmentsFilter(request.GET or None)
    qs = selectors.judgment_list(campaign=campaign, annotator=request.user, **filters.filters())
    page = page_of(request, qs, 50)
    query_string = request.GET.copy()
    query_string.pop("page", None)
    return render(
        request,
        "judging/my_judgments.html",
        member.context(
            nav="mine",
            filters=filters,
            page=page,
            grades=selectors.grade_list(campaign=campaign),
            query_string=query_string.urlencode(),
            total=page.paginator.count,
        ),
    )


@campaign_view
@require_POST
def my_judgment_save(request: HtmxHttpRequest, member: Member, public_id: int) -> HttpResponse:
    """Edit one row of "my judgments" in place."""
    campaign = member.campaign
    pair = campaign_pair(campaign, public_id, pooled_only=False, public=True)
    if selectors.judgment_current(pair=pair, annotator=request.user) is None:
        raise Http404(_("You have not judged this pair."))
    outcome = _record(request, member, pair)
    judgment = selectors.judgment_current(pair=pair, annotator=request.user)
    grades = selectors.grade_list(campaign=campaign)
    if not request.htmx:
        if outcome.status == "saved":
            messages.success(
                request,
                _("Saved %(qid)s / %(docid)s: %(label)s")
                % {"qid": pair.query.qid, "docid": pair.document.docid, "label": _grade_label(grades, outcome.values)},
            )
        elif outcome.status == "conflict":
            messages.error(
                request,
                _("%(qid)s / %(docid)s was changed elsewhere to %(label)s; nothing was saved.")
                % {
                    "qid": pair.query.qid,
                    "docid": pair.document.docid,
                    "label": _grade_label(grades, _values_of(judgment)),
                },
            )
        else:
            messages.error(request, "; ".join(outcome.errors))
        back = request.POST.get("back", "")
        if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
            back = reverse("judging:my_judgments", args=[campaign.slug])
        return redirect(back)
    status = {"saved": 200, "invalid": 422, "conflict": 409}[outcome.status]
    return render(
        request,
        "judging/_my_judgment_row.html",
        member.context(
            j=judgment,
            grades=grades,
            outcome=outcome,
            conflict=_grade_label(grades, _values_of(judgment)) if outcome.status == "conflict" else None,
        ),
        status=status,
    )
