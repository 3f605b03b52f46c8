"""A campaign's own pages: the home list, overview, creation, settings, members, uploads and progress."""

from __future__ import annotations

from typing import Any, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import SetPasswordForm
from django.contrib.auth.password_validation import get_default_password_validators, password_validators_help_text_html
from django.contrib.auth.views import INTERNAL_RESET_SESSION_TOKEN, PasswordResetConfirmView
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse, reverse_lazy
from django.utils.decorators import method_decorator
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.cache import never_cache
from django.views.generic import TemplateView

from judging import jobs, scoring, selectors
from judging.access import Member, campaign_view, can_create_campaigns, signed_in
from judging.auth_backends import RevokeTokenOnPasswordChange
from judging.forms import (
    BaseGradeFormSet,
    CampaignCreateForm,
    CampaignSettingsForm,
    GradeFormSet,
    MemberAddForm,
    MemberChangeForm,
    MembersBulkForm,
    UploadForm,
)
from judging.jobs import JobError, policy_job_start
from judging.models import Campaign, Membership
from judging.scoring import trust
from judging.selectors.pace import campaign_pace
from judging.selectors.people import PeopleProgress
from judging.services import (
    IMPORTERS,
    ImportRefused,
    campaign_create,
    campaign_has_judgments,
    campaign_update,
    member_add,
    members_add,
    membership_add,
    membership_remove,
    policy_switch_needs_job,
    scale_from_values,
    set_password_link_issue,
)
from judging.services.accounts import LINK_DAYS, set_password_refusal, set_password_tokens
from judging.services.model_judge import model_judge_upload_annotator
from judging.views.job_presenters import policy_job_context
from judging.views.leaderboard import INLINE_TRUST_CELLS

LEAD = Membership.Role.LEAD


# --------------------------------------------------------------------------- home


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The campaigns the user belongs to, with their role and how many pairs they judged in each."""
    rows = selectors.campaign_rows(user=request.user)
    # the worker page's link, for staff and leads (access.can_see_worker), read off the rows: no query more
    worker = request.user.is_staff or any(row["role"] == LEAD for row in rows)
    return render(
        request,
        "judging/home.html",
        {"rows": rows, "can_create": can_create_campaigns(request.user), "can_see_worker": worker},
    )


# --------------------------------------------------------------------------- campaign pages


def _setup_steps(
    campaign: Campaign, stats: dict, people: PeopleProgress, systems: list, documents: int, annotators: int
) -> list[dict]:
    """What a lead still has to do before (and while) the campaign is judged, in order, with where to do it."""
    upload = reverse("judging:campaign_upload", args=[campaign.slug])
    members = reverse("judging:campaign_members", args=[campaign.slug])
    judge = reverse("judging:judge", args=[campaign.slug])
    return [
        {
            "done": stats["queries"] > 0,
            "text": _("Import the queries (topics)"),
            "url": upload,
            "count": stats["queries"],
        },
        {"done": documents > 0, "text": _("Import the documents"), "url": upload, "count": documents},
        {
            "done": bool(systems),
            "text": _("Import the systems' runs (this builds the pool)"),
            "url": upload,
            "count": len(systems),
        },
        {"done": annotators > 0, "text": _("Add annotators"), "url": members, "count": annotators},
        # People's judgments: labels imported from a qrels file do not judge the pool for anyone.
        {"done": people.judged > 0, "text": _("Judge the pool"), "url": judge, "count": people.judged},
    ]


@campaign_view
def campaign_detail(request: HttpRequest, member: Member) -> HttpResponse:
    campaign = member.campaign
    ctx = member.context(
        nav="overview",
        grades=selectors.grade_list(campaign=campaign),
        progress=selectors.judge_progress(campaign=campaign, annotator=request.user, query_id=None),
        mine=selectors.judgments_count(campaign=campaign, annotator=request.user),
    )
    ctx["people"] = people = selectors.people_progress(campaign=campaign, pooled=ctx["progress"].campaign_total)
    if member.is_lead:
        ctx["stats"] = stats = selectors.campaign_progress(campaign=campaign)
        setup = selectors.campaign_setup(campaign=campaign)
        ctx["systems"], ctx["documents"] = setup["systems"], setup["documents"]
        ctx["steps"] = steps = _setup_steps(campaign, stats, people, **setup)
        ctx["setup_open"] = not all(step["done"] for step in steps)
        ctx["hybrid"] = hybrid = scoring.hybrid_overview(campaign) if setup["systems"] else None
        if len(setup["systems"]) >= 2:
            ctx["stop_text"] = _stop_text(campaign, hybrid["labels"] if hybrid else "humans")
    return render(request, "judging/campaign_detail.html", ctx)


def _stop_text(campaign: Campaign, labels: str = "humans") -> str:
    """The leaderboard's stop signal in words (default ranking, nDCG@10, top 3, the leaderboard page's first label
    source: hybrid:NAME with a model judge), or "" for a campaign too large to compute it within the page's request
    (its leaderboard says it)."""
    lb = scoring.leaderboard(campaign, scoring.Params(labels=labels))
    cells = len(lb.cube.system_ids) * len(lb.cube.query_ids) * lb.cube.doc_ids.shape[2]
    if cells > INLINE_TRUST_CELLS:
        return ""
    entries = trust.trust_entries(lb, trust.QUEUE_MEASURE, trust.TOP_K_DEFAULT)  # the leaderboard's own
    if "stop" not in entries:
        return ""
    return scoring.stop_sentence(entries["stop"], entries["queries_without_labels"], len(lb.cube.system_ids))


@login_required
def campaign_new(request: HttpRequest) -> HttpResponse:
    if not can_create_campaigns(request.user):
        raise PermissionDenied(_("Only campaign leads can create campaigns; ask a lead or an administrator."))
    form = CampaignCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            campaign = campaign_create(
                slug=data["slug"],
                name=data["name"],
                description=data["description"],
                guidelines=data["guidelines"],
                pool_depth=data["pool_depth"],
                redundancy=data["redundancy"],
                scale=scale_from_values(data["grades"]),
                lead=signed_in(request.user),
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(
                request,
                _("Campaign %(name)s created. Name the grades and add members next.") % {"name": campaign.name},
            )
            return redirect("judging:campaign_settings", slug=campaign.slug)
    return render(request, "judging/campaign_new.html", {"form": form})


@campaign_view(lead=True)
def campaign_settings(request: HttpRequest, member: Member) -> HttpResponse:
    campaign = member.campaign
    grades = selectors.scale_rows(campaign=campaign, shown=True)  # the default scale in the lead's language
    scale_locked = campaign_has_judgments(campaign=campaign)
    # The form validates against its own copy: a ModelForm writes the submitted values into its instance,
    # and campaign_update must see the old pool depth and policy to know what changed.
    form = CampaignSettingsForm(request.POST or None, instance=Campaign.objects.get(pk=campaign.pk))
    formset = cast(BaseGradeFormSet, GradeFormSet(request.POST or None, initial=grades, prefix="grades"))
    if request.method == "POST" and form.is_valid() and formset.is_valid():
        values = {name: form.cleaned_data[name] for name in CampaignSettingsForm.Meta.fields}
        # A large campaign's policy switch goes to the task worker; the other settings are saved now.
        switch = None
        if values.get("aggregation", campaign.aggregation) != campaign.aggregation and policy_switch_needs_job(
            campaign=campaign
        ):
            switch = values.pop("aggregation")
        try:
            # The same service as PATCH /api/campaigns/SLUG/: the same rules for the scale.
            added = campaign_update(campaign=campaign, scale=selectors.scale_stored(formset.scale()), **values)
            job = policy_job_start(campaign=campaign, user=signed_in(request.user), policy=switch) if switch else None
        except (ValidationError, JobError) as exc:
            campaign.refresh_from_db()
            form.add_error(None, exc.messages if isinstance(exc, ValidationError) else [str(exc)])
        else:
            text = _("Settings saved.")
            if added:
                text += " " + ngettext(
                    "The deeper pool added %(n)s pair to judge.", "The deeper pool added %(n)s pairs to judge.", added
                ) % {"n": added}
            if job is not None:
                text += " " + _(
                    "The switch to the %(policy)s aggregation policy recomputes %(n)s labels in the background; "
                    "the leaderboard keeps the old policy until it is done."
                ) % {"policy": job.options["policy"], "n": job.total}
            messages.success(request, text)
            return redirect("judging:campaign_settings", slug=campaign.slug)
    status = 422 if request.method == "POST" else 200
    return render(
        request,
        "judging/campaign_settings.html",
        member.context(
            nav="settings",
            form=form,
            formset=formset,
            scale_locked=scale_locked,
            **policy_job_context(campaign),
        ),
        status=status,
    )


def _base_url(request: HttpRequest) -> str:
    return request.build_absolute_uri("/").rstrip("/")


@campaign_view(lead=True)
def campaign_members(request: HttpRequest, member: Member) -> HttpResponse:
    """Add people (one, or many from a list or CSV), pass on set-password links, change roles, remove.

    New links are rendered in the answer to the POST, not stored for a redirect: a link is a secret that
    only the lead who asked for it should see, once."""
    campaign = member.campaign
    form, bulk = MemberAddForm(), MembersBulkForm()
    links: list = []
    if request.method == "POST":
        action = request.POST.get("action")
        try:
            if action == "add":
                form = MemberAddForm(request.POST)
                if form.is_valid():
                    added = member_add(
                        campaign=campaign, by=signed_in(request.user), base_url=_base_url(request), **form.cleaned_data
                    )
                    links = [added]
                    form = MemberAddForm()
            elif action == "bulk":
                bulk = MembersBulkForm(request.POST, request.FILES)
                if bulk.is_valid():
                    links = members_add(
                        campaign=campaign,
                        by=signed_in(request.user),
                        people=bulk.cleaned_data["rows"],
                        role=bulk.cleaned_data["role"],
                        base_url=_base_url(request),
                    )
                    bulk = MembersBulkForm()
            elif action in ("role", "remove", "link"):
                change = MemberChangeForm(request.POST)
                if not change.is_valid():
                    # a tampered hidden field (user=abc): say which, on the page, instead of failing the lookup
                    messages.error(request, change.error_text())
                    return _members_page(request, member, form, bulk, [], status=400)
                membership = selectors.membership_get(campaign=campaign, user_id=change.cleaned_data["user"])
                if membership is None:
                    raise Http404(_("No such member."))
                if action == "remove" and not change.cleaned_data["confirm"]:
                    return _members_page(request, member, form, bulk, [], status=200, confirm_remove=membership)
                if action == "remove":
                    membership_remove(campaign=campaign, user=membership.user)
                    messages.success(
                        request,
                        _("%(username)s was removed (their judgments are kept).")
                        % {"username": membership.user.username},
                    )
                elif action == "role":
                    role = change.cleaned_data["role"]
                    membership_add(campaign=campaign, user=membership.user, role=role)
                    messages.success(request, _now_role(membership.user.username, role, here=False))
                else:
                    links = [
                        set_password_link_issue(
                            campaign=campaign,
                            by=signed_in(request.user),
                            user=membership.user,
                            base_url=_base_url(request),
                        )
                    ]
            else:
                raise Http404(_("Unknown action."))
        except ValidationError as exc:
            if action in ("add", "bulk"):
                (bulk if action == "bulk" else form).add_error(None, exc.messages)
            else:
                messages.error(request, "; ".join(exc.messages))
        if not form.errors and not bulk.errors and not any(added.link_path for added in links):
            for added in links:
                messages.success(request, _now_role(added.username, added.membership.role, here=True))
            return redirect("judging:campaign_members", slug=campaign.slug)
    return _members_page(request, member, form, bulk, links, status=422 if form.errors or bulk.errors else 200)


def _now_role(username: str, role: str, *, here: bool) -> str:
    """ "alice is now an annotator (of this campaign)": one whole sentence per role, so that each language
    words it (and English gets its article) right."""
    names = {"username": username}
    if role == Membership.Role.LEAD:
        return (_("%(username)s is now a lead of this campaign.") if here else _("%(username)s is now a lead.")) % names
    return (
        _("%(username)s is now an annotator of this campaign.") if here else _("%(username)s is now an annotator.")
    ) % names


def _members_page(
    request: HttpRequest,
    member: Member,
    form: MemberAddForm,
    bulk: MembersBulkForm,
    links: list,
    *,
    status: int,
    confirm_remove: Membership | None = None,
) -> HttpResponse:
    """The members page; with ``confirm_remove`` (a membership), it first asks whether to remove that member."""
    for added in links:
        added.link = added.url(_base_url(request))
    return render(
        request,
        "judging/campaign_members.html",
        member.context(
            nav="members",
            form=form,
            bulk=bulk,
            links=links,
            link_days=LINK_DAYS,
            members=selectors.campaign_members(campaign=member.campaign),
            roles=Membership.Role.choices,
            confirm_remove=confirm_remove,
        ),
        status=status,
    )


class SetPasswordView(PasswordResetConfirmView):
    """The page a set-password link from a lead opens: Django's reset-confirm view (the token is checked, then
    moved into the session so that the address bar no longer shows it), on RelJudge's own template. Unlike
    password reset by e-mail it works on servers that send no mail: the lead passed the link on.

    Every request (the link, the form, its POST) checks again that the link's issuer may still set this
    account's password (``set_password_refusal``) and otherwise answers 403 saying why.

    Once the password is set the new member is logged in (Django's ``post_reset_login``, through ModelBackend:
    the login-attempts backend only counts passwords typed at the login form). The password rules say that a new
    password revokes the API token only to someone who has one."""

    template_name = "registration/set_password.html"
    success_url = reverse_lazy("judging:set_password_done")
    token_generator = set_password_tokens
    post_reset_login = True
    post_reset_login_backend = "django.contrib.auth.backends.ModelBackend"

    def get_form(self, form_class: type[SetPasswordForm] | None = None) -> SetPasswordForm:
        form = super().get_form(form_class)
        field = form.fields.get("new_password1")
        if field is not None and not selectors.api_token_exists(user=form.user):
            field.help_text = password_validators_help_text_html(
                [v for v in get_default_password_validators() if not isinstance(v, RevokeTokenOnPasswordChange)]
            )
        return form

    @method_decorator(never_cache)
    def dispatch(self, request: HttpRequest, *args: object, **kwargs: Any) -> HttpResponseBase:
        user = self.get_user(kwargs.get("uidb64", ""))
        token = kwargs.get("token")
        if token == self.reset_url_token:
            token = request.session.get(INTERNAL_RESET_SESSION_TOKEN)
        why_not = set_password_refusal(user=user, token=token) if user is not None else None
        if why_not:
            return render(request, "registration/set_password_refused.html", {"reason": why_not}, status=403)
        return super().dispatch(request, *args, **kwargs)


set_password_done = TemplateView.as_view(template_name="registration/set_password_done.html")


@campaign_view(lead=True)
def campaign_upload(request: HttpRequest, member: Member) -> HttpResponse:
    """Upload topics, documents, runs and qrels through the importers the command line uses."""
    campaign = member.campaign
    forms = {kind: UploadForm(initial={"kind": kind}, prefix=kind) for kind in IMPORTERS}
    error = None
    if request.method == "POST":
        kind = request.POST.get("kind")
        if kind not in IMPORTERS:
            raise Http404(_("Unknown kind of file."))
        form = forms[kind] = UploadForm(request.POST, request.FILES, prefix=kind)
        if form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                if kind == "qrels" and form.cleaned_data["model"]:
                    # the model judge exists (a member of kind "model") before the import or its job names it
                    model_judge_upload_annotator(
                        name=form.cleaned_data["annotator"], campaign=campaign, filename=upload.name
                    )
                if kind in jobs.KINDS and jobs.job_needed(size=upload.size):  # large files: the task worker
                    job = jobs.job_start_from_form(
                        kind=kind, campaign=campaign, user=signed_in(request.user), form=form
                    )
                    return redirect("judging:job_detail", slug=campaign.slug, job_id=job.pk)
                kwargs = {"campaign": campaign, "data": upload, "filename": upload.name}  # read as it is parsed
                if kind == "run":
                    kwargs.update(system_name=form.cleaned_data["system"] or None, replace=form.cleaned_data["replace"])
                elif kind == "qrels":
                    kwargs["annotator"] = form.cleaned_data["annotator"] or request.user.get_username()
                    kwargs["imported_by"] = request.user
                summary = IMPORTERS[kind](**kwargs)
            except ImportRefused as exc:
                error = _("%(error)s — nothing was imported") % {"error": exc.explained("form")}
            except jobs.JobLimit as exc:
                error = str(exc)
            else:
                # One message for one upload: a success is one event, however many lines describe it.
                messages.success(request, " · ".join(summary.lines()))
                return redirect("judging:campaign_upload", slug=campaign.slug)
        # for a form error (no file, unknown user) the form shows it next to the field
    return render(
        request,
        "judging/campaign_upload.html",
        member.context(
            nav="upload",
            forms=forms,
            error=error,
            error_kind=request.POST.get("kind"),
        ),
        status=422 if request.method == "POST" else 200,
    )


@campaign_view(lead=True)
def campaign_progress(request: HttpRequest, member: Member) -> HttpResponse:
    campaign = member.campaign
    return render(
        request,
        "judging/campaign_progress.html",
        member.context(
            nav="progress",
            stats=(stats := selectors.campaign_progress(campaign=campaign)),
            people=selectors.people_progress(campaign=campaign, pooled=stats["pooled"]),
            annotators=(annotators := selectors.annotators_progress(campaign=campaign)),
            sources=selectors.label_source_ids(user_ids=[a["user"].id for a in annotators]),
            pace=campaign_pace(campaign=campaign),
        ),
    )
