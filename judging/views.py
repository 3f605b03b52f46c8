"""Server-rendered pages: the judging page, an annotator's own judgments, and the lead's campaign pages."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from judging import selectors
from judging.formats import FormatError
from judging.forms import (
    CampaignCreateForm,
    CampaignSettingsForm,
    GradeFormSet,
    JudgmentForm,
    MemberAddForm,
    MyJudgmentsFilter,
    UploadForm,
)
from judging.models import Campaign, Judgment, Membership, Pair
from judging.services import (
    ImportError_,
    campaign_create,
    campaign_edit,
    campaign_has_judgments,
    docs_import,
    judgment_record,
    membership_add,
    membership_remove,
    pair_assign,
    qrels_import,
    run_import,
    scale_from_values,
    topics_import,
    user_role,
)

LEAD = Membership.Role.LEAD
SKIPS_KEY = "reljudge_skips"
SKIPS_KEPT = 500


# --------------------------------------------------------------------------- access


def login_required_htmx(view):
    """login_required, except that an htmx request gets 401 instead of a redirect to the login page:
    swapping a login form into the judging panel would throw away what the annotator typed."""
    guarded = login_required(view)

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not request.user.is_authenticated and request.htmx:
            return HttpResponse("Your session has expired: log in again in another tab.", status=401)
        return guarded(request, *args, **kwargs)

    return wrapped


def _campaign(request, slug: str, *, lead: bool = False) -> tuple[Campaign, str]:
    """The campaign and the user's role in it; 404 for non-members (they cannot tell it exists),
    403 for an annotator on a lead's page."""
    campaign = get_object_or_404(Campaign, slug=slug)
    role = user_role(campaign=campaign, user=request.user)
    if role is None:
        raise Http404("No such campaign.")
    if lead and role != LEAD:
        raise PermissionDenied("Only the campaign's leads can open this page.")
    return campaign, role


def _context(campaign: Campaign, role: str, **extra) -> dict:
    return {
        "campaign": campaign,
        "role": role,
        "is_lead": role == LEAD,
        "can_see_leaderboard": role == LEAD or campaign.leaderboard_visible_to_annotators,
        **extra,
    }


def _can_create_campaigns(user) -> bool:
    return user.is_superuser or user.has_perm("judging.add_campaign")


# --------------------------------------------------------------------------- home


@login_required
def home(request):
    campaigns = list(selectors.campaigns_for_user(user=request.user))
    roles = dict(Membership.objects.filter(user=request.user).values_list("campaign_id", "role"))
    mine = dict(
        Judgment.objects.filter(annotator=request.user)
        .values_list("pair__campaign_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    rows = [
        {"campaign": c, "role": LEAD if request.user.is_superuser else roles.get(c.id), "mine": mine.get(c.id, 0)}
        for c in campaigns
    ]
    return render(request, "judging/home.html", {"rows": rows, "can_create": _can_create_campaigns(request.user)})


# --------------------------------------------------------------------------- the judging page


def _skips(request, campaign: Campaign) -> list[int]:
    return request.session.get(SKIPS_KEY, {}).get(str(campaign.id), [])


def _skips_set(request, campaign: Campaign, skips: list[int]) -> None:
    all_skips = request.session.get(SKIPS_KEY, {})
    all_skips[str(campaign.id)] = skips[-SKIPS_KEPT:]
    request.session[SKIPS_KEY] = all_skips


def _version(judgment: Judgment | None) -> str:
    return judgment.updated_at.isoformat() if judgment else ""


def _values_of(judgment: Judgment | None) -> dict:
    if judgment is None:
        return {"grade": None, "unsure": False, "tentative_grade": None, "note": ""}
    return {
        "grade": judgment.grade.value if judgment.grade else None,
        "unsure": judgment.unsure,
        "tentative_grade": judgment.tentative_grade.value if judgment.tentative_grade else None,
        "note": judgment.note,
    }


def _wanted(data: dict) -> dict:
    """The submitted values as the service will store them (a grade sent with unsure is tentative)."""
    grade, unsure, tentative = data.get("grade"), bool(data.get("unsure")), data.get("tentative_grade")
    if unsure and grade is not None and tentative is None:
        grade, tentative = None, grade
    return {"grade": grade, "unsure": unsure, "tentative_grade": tentative, "note": (data.get("note") or "").strip()}


def _grade_label(grades: list, values: dict) -> str:
    names = {g.value: g.name for g in grades}
    if values["unsure"]:
        t = values["tentative_grade"]
        return "Unsure" + (f" (tentatively {t} – {names.get(t, '?')})" if t is not None else "")
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


def _record(request, campaign: Campaign, pair: Pair) -> Outcome:
    form = JudgmentForm(request.POST)
    current = selectors.judgment_current(pair=pair, annotator=request.user)
    raw = {
        "grade": request.POST.get("grade", ""),
        "unsure": bool(request.POST.get("unsure")),
        "tentative_grade": request.POST.get("tentative_grade", ""),
        "note": request.POST.get("note", ""),
    }
    if not form.is_valid():
        errors = [
            f"{name.replace('_', ' ')}: {e}" if name != "__all__" else e
            for name, errs in form.errors.items()
            for e in errs
        ]
        return Outcome("invalid", current, current is not None, values=raw, errors=errors)
    data = form.cleaned_data
    wanted = _wanted(data)
    if current is not None and data["version"] != _version(current) and wanted != _values_of(current):
        # Changed elsewhere since this form was drawn (another tab, the API): say so, keep the new
        # choice on screen, and let a second press save it over the current value.
        return Outcome("conflict", current, True, values=raw)
    try:
        judgment, changed = judgment_record(
            pair=pair,
            annotator=request.user,
            grade=wanted["grade"],
            unsure=wanted["unsure"],
            tentative_grade=wanted["tentative_grade"],
            note=wanted["note"],
            seconds_spent=data["seconds"],
        )
    except ValidationError as exc:
        return Outcome("invalid", current, current is not None, values=raw, errors=exc.messages)
    skips = _skips(request, campaign)
    if pair.id in skips:
        _skips_set(request, campaign, [p for p in skips if p != pair.id])
    return Outcome("saved", judgment, current is not None, changed, values=wanted)


def _workspace(request, campaign: Campaign, role: str, pair: Pair | None, **extra) -> dict:
    """Everything the judging panel shows for one pair (or the "all done" state)."""
    extra.setdefault("grades", selectors.grades_of(campaign=campaign))
    ctx = _context(campaign, role, nav="judge", pair=pair, **extra)
    if pair is None:
        ctx["progress"] = selectors.judge_progress(campaign=campaign, annotator=request.user, query_id=None)
        ctx["mine"] = selectors.judgments_count(campaign=campaign, annotator=request.user)
        ctx["prev_pair_id"], _ = selectors.judgment_neighbours(campaign=campaign, annotator=request.user, judgment=None)
        return ctx
    if "judgment" in extra:
        judgment = extra["judgment"]
    else:
        judgment = selectors.judgment_current(pair=pair, annotator=request.user)
    if judgment is None and extra.get("latest_judged"):
        # A queue pair right after a new judgment: Back leads to the pair just judged, no query needed.
        prev_id, next_id = extra["latest_judged"], None
    else:
        prev_id, next_id = selectors.judgment_neighbours(campaign=campaign, annotator=request.user, judgment=judgment)
    current = _values_of(judgment)
    # What the form holds: after a failed save exactly what was sent, otherwise a fresh choice (the
    # unsure box unticked, so that a number key on a revisited unsure pair records a confident grade).
    typed = extra.get("values") or {"unsure": False, "note": current["note"]}
    url = pair.document.url or ""
    ctx.update(
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
        progress=selectors.judge_progress(campaign=campaign, annotator=request.user, query_id=pair.query_id),
    )
    return ctx


def _render_workspace(request, ctx: dict, *, status: int = 200, url: str | None = None):
    """The whole page, or for htmx just the panel (but the whole page when htmx restores history)."""
    partial = request.htmx and not request.htmx.history_restore_request
    response = render(request, "judging/_judge_workspace.html" if partial else "judging/judge.html", ctx, status=status)
    if partial and url:
        response["HX-Replace-Url"] = url  # the address bar names what is on screen: a reload shows it
    patch_vary_headers(response, ("HX-Request",))
    return response


def _pair_or_404(campaign: Campaign, pair_id, *, pooled_only: bool = True) -> Pair:
    try:
        pair_id = int(pair_id)
    except (TypeError, ValueError):
        raise Http404("No such pair.") from None
    pair = selectors.pair_for_judging(campaign=campaign, pair_id=pair_id, pooled_only=pooled_only)
    if pair is None:
        raise Http404("No such pair in this campaign.")
    pair.campaign = campaign  # already loaded: spares the services a query
    return pair


def _next_pair(request, campaign: Campaign, *, after: Pair | None) -> tuple[Pair | None, bool]:
    """The next pair of the queue: staying on ``after``'s query while it has open pairs."""
    current_query = (
        after.query_id if after is not None else selectors.latest_query_id(campaign=campaign, annotator=request.user)
    )
    found = pair_assign(
        campaign=campaign, annotator=request.user, current_query_id=current_query, exclude=_skips(request, campaign)
    )
    if found.pair is not None:
        found.pair.campaign = campaign
    return found.pair, found.was_skipped


def _after(request, campaign: Campaign, pair: Pair, judgment: Judgment | None) -> tuple[Pair | None, dict, bool]:
    """Where the annotator goes after acting on ``pair``: forward through their history when they were
    revisiting an earlier judgment (like a browser's Forward), else on along the queue.
    Returns (pair, extra context for the panel, whether the pair comes from the history)."""
    if judgment is not None:
        following = selectors.judgment_following(campaign=campaign, annotator=request.user, judgment=judgment)
        if following is not None:
            return _pair_or_404(campaign, following), {}, True
    nxt, was_skipped = _next_pair(request, campaign, after=pair)
    return nxt, {"judgment": None, "was_skipped": was_skipped}, False


@login_required_htmx
@require_http_methods(["GET", "HEAD"])
def judge(request, slug: str):
    """The judging page: the next pair of the annotator's queue, or ?pair=ID (Back / Forward / Edit)."""
    campaign, role = _campaign(request, slug)
    if request.GET.get("pair"):
        pair, extra = _pair_or_404(campaign, request.GET["pair"]), {}
    else:
        pair, was_skipped = _next_pair(request, campaign, after=None)
        extra = {"judgment": None, "was_skipped": was_skipped}  # the queue holds only unjudged pairs
    return _render_workspace(request, _workspace(request, campaign, role, pair, **extra))


@login_required_htmx
@require_POST
def judge_record(request, slug: str, pair_id: int):
    """Record (or change) the annotator's judgment of one pair, then show the next pair."""
    campaign, role = _campaign(request, slug)
    pair = _pair_or_404(campaign, pair_id)
    grades = selectors.grades_of(campaign=campaign)
    outcome = _record(request, campaign, pair)
    if outcome.status == "invalid":
        ctx = _workspace(
            request,
            campaign,
            role,
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
            campaign,
            role,
            pair,
            judgment=outcome.judgment,
            values=outcome.values,
            conflict=_grade_label(grades, _values_of(outcome.judgment)),
            grades=grades,
        )
        return _render_workspace(request, ctx, status=409)
    saved = {
        "qid": pair.query.qid,
        "docid": pair.document.docid,
        "pair_id": pair.id,
        "label": _grade_label(grades, outcome.values),
        "changed": outcome.changed,
        "note": bool(outcome.values["note"]),
    }
    nxt, extra, in_history = _after(request, campaign, pair, outcome.judgment if outcome.existed else None)
    target = reverse("judging:judge", args=[campaign.slug])
    target = f"{target}?pair={nxt.id}" if in_history else target
    if not request.htmx:
        messages.success(request, f"Saved {saved['qid']} / {saved['docid']}: {saved['label']}")
        return redirect(target)
    if not outcome.existed:
        extra["latest_judged"] = pair.id
    ctx = _workspace(request, campaign, role, nxt, saved=saved, grades=grades, **extra)
    return _render_workspace(request, ctx, url=target)


@login_required_htmx
@require_POST
def judge_skip(request, slug: str, pair_id: int):
    """Put a pair aside for now: it comes back once the rest of the queue is done."""
    campaign, role = _campaign(request, slug)
    pair = _pair_or_404(campaign, pair_id)
    judgment = selectors.judgment_current(pair=pair, annotator=request.user)
    if judgment is None:
        skips = [p for p in _skips(request, campaign) if p != pair.id] + [pair.id]
        _skips_set(request, campaign, skips)
    # A pair already judged is not skipped but left as it is: Forward through the history.
    nxt, extra, in_history = _after(request, campaign, pair, judgment)
    target = reverse("judging:judge", args=[campaign.slug])
    target = f"{target}?pair={nxt.id}" if in_history else target
    if not request.htmx:
        return redirect(target)
    skipped = {"qid": pair.query.qid, "docid": pair.document.docid} if judgment is None else None
    ctx = _workspace(request, campaign, role, nxt, skipped=skipped, **extra)
    return _render_workspace(request, ctx, url=target)


# --------------------------------------------------------------------------- my judgments


@login_required_htmx
def my_judgments(request, slug: str):
    """The annotator's own judgments (never anyone else's), filterable, each one editable."""
    campaign, role = _campaign(request, slug)
    filters = MyJudgmentsFilter(request.GET or None)
    qs = selectors.judgments_of(campaign=campaign, annotator=request.user, **filters.filters())
    page = Paginator(qs, 50).get_page(request.GET.get("page"))
    query_string = request.GET.copy()
    query_string.pop("page", None)
    return render(
        request,
        "judging/my_judgments.html",
        _context(
            campaign,
            role,
            nav="mine",
            filters=filters,
            page=page,
            grades=selectors.grades_of(campaign=campaign),
            query_string=query_string.urlencode(),
            total=page.paginator.count,
        ),
    )


@login_required_htmx
@require_POST
def my_judgment_save(request, slug: str, pair_id: int):
    """Edit one row of "my judgments" in place."""
    campaign, role = _campaign(request, slug)
    pair = _pair_or_404(campaign, pair_id, pooled_only=False)
    if selectors.judgment_current(pair=pair, annotator=request.user) is None:
        raise Http404("You have not judged this pair.")
    outcome = _record(request, campaign, pair)
    judgment = selectors.judgment_current(pair=pair, annotator=request.user)
    grades = selectors.grades_of(campaign=campaign)
    if not request.htmx:
        if outcome.status == "saved":
            messages.success(
                request, f"Saved {pair.query.qid} / {pair.document.docid}: {_grade_label(grades, outcome.values)}"
            )
        elif outcome.status == "conflict":
            messages.error(
                request,
                f"{pair.query.qid} / {pair.document.docid} was changed elsewhere to "
                f"{_grade_label(grades, _values_of(judgment))}; nothing was saved.",
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
        _context(
            campaign,
            role,
            j=judgment,
            grades=grades,
            outcome=outcome,
            conflict=_grade_label(grades, _values_of(judgment)) if outcome.status == "conflict" else None,
        ),
        status=status,
    )


# --------------------------------------------------------------------------- campaign pages


@login_required
def campaign_detail(request, slug: str):
    campaign, role = _campaign(request, slug)
    ctx = _context(
        campaign,
        role,
        nav="overview",
        grades=selectors.grades_of(campaign=campaign),
        progress=selectors.judge_progress(campaign=campaign, annotator=request.user, query_id=None),
        mine=selectors.judgments_count(campaign=campaign, annotator=request.user),
    )
    if role == LEAD:
        ctx["stats"] = selectors.campaign_progress(campaign=campaign)
        ctx["systems"] = list(campaign.systems.values("name", "entries", "source", "imported_at"))
        ctx["documents"] = campaign.documents.count()
    return render(request, "judging/campaign_detail.html", ctx)


@login_required
def campaign_new(request):
    if not _can_create_campaigns(request.user):
        raise PermissionDenied("You may not create campaigns; ask an administrator.")
    form = CampaignCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            with transaction.atomic():
                campaign = campaign_create(
                    slug=data["slug"],
                    name=data["name"],
                    description=data["description"],
                    guidelines=data["guidelines"],
                    pool_depth=data["pool_depth"],
                    redundancy=data["redundancy"],
                    scale=scale_from_values(data["grades"]),
                    created_by=request.user,
                )
                membership_add(campaign=campaign, user=request.user, role=LEAD)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Campaign {campaign.name} created. Name the grades and add members next.")
            return redirect("judging:campaign_settings", slug=campaign.slug)
    return render(request, "judging/campaign_new.html", {"form": form})


@login_required
def campaign_settings(request, slug: str):
    campaign, role = _campaign(request, slug, lead=True)
    grades = list(campaign.grades.values("value", "name", "description", "examples"))
    scale_locked = campaign_has_judgments(campaign=campaign)
    # The form validates against its own copy: a ModelForm writes the submitted values into its instance,
    # and campaign_update must see the old pool depth and policy to know what changed.
    form = CampaignSettingsForm(request.POST or None, instance=Campaign.objects.get(pk=campaign.pk))
    formset = GradeFormSet(request.POST or None, initial=grades, prefix="grades")
    if request.method == "POST" and form.is_valid() and formset.is_valid():
        values = {name: form.cleaned_data[name] for name in CampaignSettingsForm.Meta.fields}
        try:
            # The same service as PATCH /api/campaigns/SLUG/: the same rules for the scale.
            added = campaign_edit(campaign=campaign, scale=formset.scale(), **values)
        except ValidationError as exc:
            campaign.refresh_from_db()
            form.add_error(None, exc.messages)
        else:
            selectors.pool_size_forget(campaign=campaign)
            text = "Settings saved."
            if added:
                text += f" The deeper pool added {added} pair{'s' if added != 1 else ''} to judge."
            messages.success(request, text)
            return redirect("judging:campaign_settings", slug=campaign.slug)
    status = 422 if request.method == "POST" else 200
    return render(
        request,
        "judging/campaign_settings.html",
        _context(
            campaign,
            role,
            nav="settings",
            form=form,
            formset=formset,
            scale_locked=scale_locked,
        ),
        status=status,
    )


@login_required
def campaign_members(request, slug: str):
    campaign, role = _campaign(request, slug, lead=True)
    form = MemberAddForm()
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "add":
            form = MemberAddForm(request.POST)
            if form.is_valid():
                user = form.cleaned_data["username"]
                membership_add(campaign=campaign, user=user, role=form.cleaned_data["role"])
                messages.success(request, f"{user.username} is now a {form.cleaned_data['role']} of this campaign.")
                return redirect("judging:campaign_members", slug=campaign.slug)
        elif action in ("role", "remove"):
            membership = get_object_or_404(Membership, campaign=campaign, user_id=request.POST.get("user"))
            other_leads = campaign.memberships.filter(role=LEAD).exclude(id=membership.id).exists()
            demoting = action == "remove" or request.POST.get("role") != LEAD
            if membership.role == LEAD and demoting and not other_leads:
                messages.error(request, "A campaign needs at least one lead: add another lead first.")
            elif action == "remove":
                membership_remove(campaign=campaign, user=membership.user)
                messages.success(request, f"{membership.user.username} was removed (their judgments are kept).")
            else:
                try:
                    membership_add(campaign=campaign, user=membership.user, role=request.POST.get("role", ""))
                except ValidationError as exc:
                    messages.error(request, "; ".join(exc.messages))
                else:
                    messages.success(request, f"{membership.user.username} is now a {request.POST['role']}.")
            return redirect("judging:campaign_members", slug=campaign.slug)
    return render(
        request,
        "judging/campaign_members.html",
        _context(
            campaign,
            role,
            nav="members",
            form=form,
            members=selectors.campaign_members(campaign=campaign),
            roles=Membership.Role.choices,
        ),
        status=422 if form.errors else 200,
    )


IMPORTERS = {"topics": topics_import, "docs": docs_import, "run": run_import, "qrels": qrels_import}


@login_required
def campaign_upload(request, slug: str):
    """Upload topics, documents, runs and qrels through the importers the command line uses."""
    campaign, role = _campaign(request, slug, lead=True)
    forms = {kind: UploadForm(initial={"kind": kind}, prefix=kind) for kind in IMPORTERS}
    error = None
    if request.method == "POST":
        kind = request.POST.get("kind")
        if kind not in IMPORTERS:
            raise Http404("Unknown kind of file.")
        form = forms[kind] = UploadForm(request.POST, request.FILES, prefix=kind)
        if form.is_valid():
            upload = form.cleaned_data["file"]
            kwargs = {"campaign": campaign, "data": upload.read(), "filename": upload.name}
            if kind == "run":
                kwargs.update(system_name=form.cleaned_data["system"] or None, replace=form.cleaned_data["replace"])
            elif kind == "qrels":
                kwargs["annotator"] = form.cleaned_data["annotator"] or request.user
            try:
                summary = IMPORTERS[kind](**kwargs)
            except (FormatError, ImportError_) as exc:
                error = f"{exc} — nothing was imported"
            except ValidationError as exc:
                error = "; ".join(exc.messages) + " — nothing was imported"
            else:
                selectors.pool_size_forget(campaign=campaign)
                for line in summary.lines():
                    messages.success(request, line)
                return redirect("judging:campaign_upload", slug=campaign.slug)
        # for a form error (no file, unknown user) the form shows it next to the field
    return render(
        request,
        "judging/campaign_upload.html",
        _context(
            campaign,
            role,
            nav="upload",
            forms=forms,
            error=error,
            error_kind=request.POST.get("kind"),
        ),
        status=422 if request.method == "POST" else 200,
    )


@login_required
def campaign_progress(request, slug: str):
    campaign, role = _campaign(request, slug, lead=True)
    return render(
        request,
        "judging/campaign_progress.html",
        _context(
            campaign,
            role,
            nav="progress",
            stats=selectors.campaign_progress(campaign=campaign),
            annotators=selectors.annotators_progress(campaign=campaign),
        ),
    )
