"""Pages: systems made of live search engines (leads only): the list with each system's snapshots and a Fetch
button, the form that makes or changes one (previewing the first query's request and hits), and what changed
between two snapshots."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods, require_POST

from judging.access import Member, campaign_view
from judging.engine_models import DEPTH_MAX, Engine, EngineSnapshot, EngineSystem
from judging.forms import AsciiIntegerField
from judging.jobs import JobError, engine_fetch_job_start
from judging.models import Membership, Query
from judging.selectors import grade_list, pair_get
from judging.selectors.engines import (
    engine_systems,
    engines_enabled,
    focus_status,
    pair_label_and_grade,
    snapshot_changes,
    snapshot_new_pairs,
)
from judging.services import JudgmentConflict, judgment_record
from judging.services.engine_client import TEMPLATE_MAX_CHARS, TemplateError, target_check, template_parse
from judging.services.engines import (
    Tried,
    TriedHit,
    engine_preview,
    engine_system_save,
    engine_try,
    focus_start,
    focus_stop,
    snapshot_system_name,
)
from judging.views.http import HtmxHttpRequest

ES_EXAMPLE = '{\n  "query": {\n    "multi_match": {"query": "{{query}}", "fields": ["title", "text"]}\n  }\n}'


class EngineSystemForm(forms.Form):
    """A system made of a configured engine: where to ask, the request template, the fields of a hit."""

    name = forms.RegexField(
        label=gettext_lazy("Name"),
        regex=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z",
        help_text=gettext_lazy("Letters, digits, '.', '_' and '-'; each snapshot is the system NAME@N."),
    )
    engine = forms.ModelChoiceField(label=gettext_lazy("Engine"), queryset=Engine.objects.none(), to_field_name="name")
    target = forms.CharField(
        label=gettext_lazy("Index, collection or path"),
        required=False,
        max_length=200,
        help_text=gettext_lazy("Under the engine's address: an index (Elasticsearch), a collection (Solr), a path."),
    )
    method = forms.ChoiceField(
        label=gettext_lazy("Method (http engines)"), choices=EngineSystem.Method.choices, initial="POST"
    )
    template = forms.CharField(
        label=gettext_lazy("Request template (JSON)"),
        widget=forms.Textarea(attrs={"rows": 10, "class": "mono", "spellcheck": "false"}),
        max_length=TEMPLATE_MAX_CHARS,
        strip=False,
        initial=ES_EXAMPLE,
        help_text=gettext_lazy(
            "The search body (Elasticsearch), the parameters (Solr, http GET) or the body (http POST), with "
            "{{query}} and optionally {{qid}} and {{description}} inside its strings."
        ),
    )
    hits_path = forms.CharField(label=gettext_lazy("Hit list (JSONPath, http engines)"), required=False, max_length=200)
    id_field = forms.CharField(
        label=gettext_lazy("Id field"),
        required=False,
        max_length=200,
        help_text=gettext_lazy("Empty: _id (Elasticsearch), id (Solr, http)."),
    )
    title_field = forms.CharField(label=gettext_lazy("Title field"), required=False, max_length=200)
    text_field = forms.CharField(label=gettext_lazy("Text field"), required=False, max_length=200)
    depth = AsciiIntegerField(label=gettext_lazy("Hits kept per query"), min_value=1, max_value=DEPTH_MAX, initial=100)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        engine_field = self.fields["engine"]
        assert isinstance(engine_field, forms.ModelChoiceField)
        engine_field.queryset = engines_enabled()

    def clean_template(self) -> str:
        text: str = self.cleaned_data["template"]
        try:
            template_parse(text)
        except TemplateError as exc:
            raise forms.ValidationError(str(exc)) from None
        return text

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        engine = data.get("engine")
        if engine is not None:
            try:
                data["target"] = target_check(engine.kind, data.get("target") or "")
            except ValueError as exc:
                self.add_error("target", str(exc))
        return data

    def system(self, campaign: Any) -> EngineSystem:
        """The system as the form describes it, not saved (for the preview)."""
        d = self.cleaned_data
        return EngineSystem(
            campaign=campaign,
            engine=d["engine"],
            name=d["name"],
            target=d["target"],
            method=d["method"],
            template=d["template"],
            hits_path=d["hits_path"],
            id_field=d["id_field"],
            title_field=d["title_field"],
            text_field=d["text_field"],
            depth=d["depth"],
        )


@campaign_view(lead=True)
@require_http_methods(["GET", "HEAD"])
def engines(request: HttpRequest, member: Member) -> HttpResponse:
    """The campaign's systems made of engines, each with its snapshots and a Fetch button."""
    campaign = member.campaign
    return render(
        request,
        "judging/engines.html",
        member.context(
            nav="engines",
            systems=engine_systems(campaign=campaign),
            configured=engines_enabled().exists(),
            focus=focus_status(campaign=campaign),
        ),
    )


@campaign_view(lead=True)
@require_http_methods(["GET", "HEAD", "POST"])
def engine_system_edit(request: HttpRequest, member: Member, name: str | None = None) -> HttpResponseBase:
    """Make a system of an engine, or change one; "Preview" asks the first query without saving."""
    campaign = member.campaign
    existing = None
    if name is not None:
        existing = EngineSystem.objects.select_related("engine").filter(campaign=campaign, name=name).first()
        if existing is None:
            raise Http404(_("No engine system of that name."))
    preview = None
    status = 200
    if request.method == "POST":
        form = EngineSystemForm(request.POST)
        if form.is_valid():
            if "preview" in request.POST:
                preview = engine_preview(system=form.system(campaign))
            else:
                d = form.cleaned_data
                try:
                    saved = engine_system_save(campaign=campaign, user=request.user, **d)
                except ValidationError as exc:
                    for field, errors in exc.message_dict.items():
                        form.add_error(field if field in form.fields else None, errors)
                else:
                    messages.success(
                        request,
                        _("System %(name)s saved (template version %(version)s).")
                        % {"name": saved.name, "version": saved.version},
                    )
                    return redirect("judging:engines", slug=campaign.slug)
        if form.errors:
            status = 400
    elif existing is not None:
        form = EngineSystemForm(
            initial={
                "name": existing.name,
                "engine": existing.engine.name,
                "target": existing.target,
                "method": existing.method,
                "template": existing.template,
                "hits_path": existing.hits_path,
                "id_field": existing.id_field,
                "title_field": existing.title_field,
                "text_field": existing.text_field,
                "depth": existing.depth,
            }
        )
    else:
        form = EngineSystemForm()
    return render(
        request,
        "judging/engine_system.html",
        member.context(nav="engines", form=form, existing=existing, preview=preview),
        status=status,
    )


@campaign_view(lead=True)
@require_POST
def engine_fetch(request: HttpRequest, member: Member, name: str) -> HttpResponseBase:
    """Queue a fetch of the system; the browser goes to the job's page and watches its progress."""
    campaign = member.campaign
    system = EngineSystem.objects.select_related("engine").filter(campaign=campaign, name=name).first()
    if system is None:
        raise Http404(_("No engine system of that name."))
    try:
        job = engine_fetch_job_start(campaign=campaign, user=request.user, system=system)
    except (ValueError, JobError) as exc:
        messages.error(request, _("The fetch was not started: %(problem)s") % {"problem": exc})
        return redirect("judging:engines", slug=campaign.slug)
    return redirect("judging:job_detail", slug=campaign.slug, job_id=job.pk)


@campaign_view(lead=True)
@require_http_methods(["GET", "HEAD"])
def engine_changes(request: HttpRequest, member: Member, name: str, number: int) -> HttpResponse:
    """What changed in the top k from the previous snapshot (or ``?from=N``) to snapshot ``number``."""
    campaign = member.campaign
    snapshots = {
        s.number: s for s in EngineSnapshot.objects.filter(engine_system__campaign=campaign, engine_system__name=name)
    }
    new = snapshots.get(number)
    if new is None:
        raise Http404(_("No such snapshot."))
    raw_from, raw_k = request.GET.get("from", ""), request.GET.get("k", "")
    if (raw_from and not raw_from.isascii()) or (raw_k and not raw_k.isascii()):
        raise Http404(_("No such snapshot."))
    older = [n for n in snapshots if n < number]
    start = int(raw_from) if raw_from.isdigit() else (max(older) if older else None)
    old = snapshots.get(start) if start is not None else None
    k = min(max(int(raw_k), 1), DEPTH_MAX) if raw_k.isdigit() else 10
    changes = snapshot_changes(old=old, new=new, k=k) if old is not None else None
    # The queries whose new documents wait for a label: the form gives them to an annotator through the
    # Assignments page's own form (the queue serves an annotator's assigned queries first).
    to_judge = " ".join(q.qid for q in changes.queries if q.unjudged) if changes else ""
    new_pairs = int(snapshot_new_pairs(old=old, new=new, k=k).size) if changes else 0
    focus = focus_status(campaign=campaign)
    annotators = list(
        campaign.memberships.filter(role=Membership.Role.ANNOTATOR)
        .exclude(user__annotator_profile__kind="model")
        .order_by("user__username")
        .values_list("user__username", flat=True)
    )
    return render(
        request,
        "judging/engine_changes.html",
        member.context(
            nav="engines",
            name=name,
            new=new,
            old=old,
            k=k,
            changes=changes,
            numbers=sorted(n for n in snapshots if n != number),
            new_system=snapshot_system_name(name, new.number),
            old_system=snapshot_system_name(name, old.number) if old else "",
            to_judge=to_judge,
            annotators=annotators if to_judge else [],
            new_pairs=new_pairs,
            focus=focus,
            focus_here=focus is not None
            and old is not None
            and focus.focus.snapshot_id == new.pk
            and focus.focus.against_id == old.pk
            and focus.focus.k == k,
        ),
    )


@campaign_view(lead=True)
@require_POST
def engine_focus(request: HttpRequest, member: Member, name: str, number: int) -> HttpResponseBase:
    """ "Judge what is new first" on (``action=on``: the unjudged pairs snapshot ``number`` brought in its top
    ``k`` since snapshot ``from``, served before any other pair) or off (``action=off``); back to what changed."""
    campaign = member.campaign
    snapshots = {
        s.number: s for s in EngineSnapshot.objects.filter(engine_system__campaign=campaign, engine_system__name=name)
    }
    new = snapshots.get(number)
    if new is None:
        raise Http404(_("No such snapshot."))
    back = redirect("judging:engine_changes", slug=campaign.slug, name=name, number=number)
    if request.POST.get("action") == "off":
        if focus_stop(campaign=campaign):
            messages.success(request, _("Judge what is new first is off: the queue serves pairs in its usual order."))
        return back
    raw_from, raw_k = request.POST.get("from", ""), request.POST.get("k", "")
    old = snapshots.get(int(raw_from)) if raw_from.isascii() and raw_from.isdigit() else None
    if (raw_from and old is None) or not (raw_k.isascii() and raw_k.isdigit()):
        messages.error(request, _("Judge what is new first was not turned on: no such snapshot or top k."))
        return back
    try:
        focus = focus_start(campaign=campaign, snapshot=new, against=old, k=int(raw_k), user=request.user)
    except ValueError as exc:
        messages.error(request, _("Judge what is new first was not turned on: %(problem)s") % {"problem": exc})
        return back
    messages.success(
        request,
        _("Judge what is new first is on: %(n)s pairs are served before any other.") % {"n": focus.pairs},
    )
    return redirect(f"{back.url}?from={old.number if old else ''}&k={focus.k}")


@campaign_view(lead=True)
@require_http_methods(["GET", "HEAD"])
def engine_try_page(request: HttpRequest, member: Member) -> HttpResponse:
    """Type a query (or pick one of the campaign's) and see every engine system's hits beside their labels."""
    campaign = member.campaign
    text = request.GET.get("q", "").strip()[:1000]
    qid = request.GET.get("qid", "").strip()[:200]
    query: Query | None = None
    results: list[Tried] = []
    if text or qid:
        query, results = engine_try(campaign=campaign, text=text, qid=qid, annotator_id=request.user.pk)
    grades = {g.value: g.name for g in grade_list(campaign=campaign)}
    return render(
        request,
        "judging/engine_try.html",
        member.context(
            nav="engines",
            text=text or (query.text if query else ""),
            qid=qid,
            query=query,
            results=results,
            grades=grades,
            queries=campaign.queries.filter(is_stub=False).order_by("qid").values_list("qid", "text")[:500],
        ),
    )


@campaign_view(lead=True, grades=True)
@require_POST
def engine_try_judge(request: HtmxHttpRequest, member: Member) -> HttpResponseBase:
    """Grade a hit of the Try page: the lead's own judgment of the pooled pair ``pair`` (a public id), recorded
    by judgment_record as the judging page records one. With htmx: the hit's label cell again, wherever the
    pair shows (an out-of-band swap of every cell of it), 422 with the reason when nothing was recorded;
    without: back to the page with a message."""
    campaign = member.campaign
    raw = request.POST.get("pair", "")
    pair = (
        pair_get(campaign=campaign, public_id=int(raw), pooled_only=False)
        if raw.isascii() and raw.isdigit() and len(raw) < 19
        else None
    )
    error = ""
    if pair is None:
        raise Http404(_("No such pair in this campaign."))
    pair.campaign = campaign
    if not pair.pooled:
        error = _("Not in the pool: only pairs in the pool can be judged; a fetch of a snapshot pools its hits.")
    else:
        raw_grade = request.POST.get("grade", "")
        try:
            if not (raw_grade.isascii() and raw_grade.lstrip("-").isdigit() and len(raw_grade) < 6):
                raise ValidationError({"grade": _("Choose a grade of the campaign's scale.")})
            judgment_record(pair=pair, annotator=request.user, grade=int(raw_grade), member=member)
        except ValidationError as exc:
            error = " ".join(message for messages_ in exc.message_dict.values() for message in messages_)
        except (PermissionDenied, JudgmentConflict) as exc:
            error = str(exc)
    if not request.htmx:
        if error:
            messages.error(request, _("Nothing recorded: %(problem)s") % {"problem": error})
        else:
            messages.success(
                request,
                _("Judged %(qid)s / %(docid)s.") % {"qid": pair.query.qid, "docid": pair.document.docid},
            )
        back = reverse("judging:engine_try", args=[campaign.slug])
        return redirect(f"{back}?{urlencode({'q': request.POST.get('q', ''), 'qid': pair.query.qid})}")
    label, mine = pair_label_and_grade(pair_id=pair.pk, annotator_id=request.user.pk)
    hit = TriedHit(
        docid=pair.document.docid, title="", label=label, known=True, pair=pair.public_id if pair.pooled else None
    )
    hit.mine = mine
    return render(
        request,
        "judging/_engine_try_cell.html",
        member.context(
            hit=hit,
            query=pair.query,
            text=request.POST.get("q", "")[:1000],
            grades={g.value: g.name for g in member.grades or grade_list(campaign=campaign)},
            error=error,
            cell=pair.public_id,
        ),
        status=422 if error else 200,
    )
