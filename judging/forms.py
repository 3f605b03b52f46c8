"""Forms of the judging pages: what a request may carry, before the services decide what it means."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from judging.formats import QID_MAX_LENGTH, SYSTEM_NAME_MAX_LENGTH
from judging.models import Campaign, Membership
from judging.params import ascii_float
from judging.selectors.strategies import unknown_mode_message
from judging.services import CAMPAIGN_SETTINGS, people_parse, scale_check
from judging.services.campaigns import has_model_judge


class AsciiIntegerField(forms.IntegerField):
    """A whole number written with the digits 0-9: IntegerField, like int(), also reads "２" and "١٠"."""

    def to_python(self, value: Any) -> int | None:
        if isinstance(value, str) and value.strip():
            try:
                ascii_float(value)  # Django's parsing follows (it takes "2.0" as 2)
            except ValueError:
                raise ValidationError(self.error_messages["invalid"], code="invalid") from None
        return super().to_python(value)


class AsciiFloatField(forms.FloatField):
    """A number written with ASCII digits: FloatField, like float(), also reads "١"."""

    def to_python(self, value: Any) -> float | None:  # type: ignore[override]  # django-stubs give FloatField IntegerField's int
        if isinstance(value, str) and value.strip():
            try:
                ascii_float(value)
            except ValueError:
                raise ValidationError(self.error_messages["invalid"], code="invalid") from None
        return super().to_python(value)


class JudgmentForm(forms.Form):
    """One press of a grade key (or a click): the service checks the grade against the scale."""

    grade = AsciiIntegerField(required=False)
    unsure = forms.BooleanField(required=False)
    tentative_grade = AsciiIntegerField(required=False)
    note = forms.CharField(required=False, max_length=5000, widget=forms.Textarea)
    seconds = AsciiFloatField(required=False, min_value=0)
    # The judgment's state when the form was rendered: a change made meanwhile (another tab) is not
    # overwritten without the annotator seeing it.
    version = forms.CharField(required=False, max_length=64)

    def clean_seconds(self) -> float:
        return min(self.cleaned_data.get("seconds") or 0.0, 24 * 3600.0)


class CampaignCreateForm(forms.ModelForm):
    grades = forms.CharField(
        label=gettext_lazy("Grade values"),
        initial="0,1,2",
        validators=[
            RegexValidator(r"^\s*\d+(\s*,\s*\d+)*\s*$", gettext_lazy("whole numbers separated by commas, e.g. 0,1,2,3"))
        ],
        help_text=gettext_lazy(
            "The grading scale, e.g. 0,1,2 or 0,1,2,3. Names and descriptions are set on the next page."
        ),
    )

    class Meta:
        model = Campaign
        fields = ["slug", "name", "description", "guidelines", "pool_depth", "redundancy"]
        widgets = {
            "description": forms.Textarea(attrs={"rows": 3}),
            "guidelines": forms.Textarea(attrs={"rows": 8}),
        }
        help_texts = {"slug": gettext_lazy("Short name used in URLs and on the command line, e.g. trec-2024-web.")}

    def clean_grades(self) -> list[int]:
        return sorted({int(v) for v in self.cleaned_data["grades"].split(",")})


# One sentence per judging queue mode, shown under the setting (each mode's module says more).
QUEUE_MODE_HELP: dict[str, Any] = {
    Campaign.QueueMode.SHUFFLED: gettext_lazy(
        "Query by query: each annotator works through one query's pool at a time, in their own shuffled order."
    ),
    Campaign.QueueMode.MATTER: gettext_lazy(
        "Across queries: first the unjudged documents ranked highest by systems whose order on the leaderboard "
        "is not settled yet."
    ),
    Campaign.QueueMode.MTC: gettext_lazy(
        "Across queries: next the document whose label most moves the score differences of neighbouring systems "
        "whose order is still uncertain (minimal test collections, Carterette et al. 2006)."
    ),
    Campaign.QueueMode.BANDIT: gettext_lazy(
        "Across queries: next the top unjudged document of the system whose documents have been judged relevant "
        "most often, so relevant documents are found early (MM-NS bandit, Losada et al. 2017)."
    ),
    Campaign.QueueMode.AUDIT: gettext_lazy(
        "Query by query, in the order drawn: only the pairs of the queries drawn at random on the Audit page, "
        "for the prediction-powered leaderboard; nothing else is served, not even an annotator's assigned "
        "queries unless they were drawn."
    ),
    Campaign.QueueMode.DOUBTFUL: gettext_lazy(
        "Across queries: first the pairs a model judge is least sure of; these labels feed “humans, else model”, "
        "never the prediction-powered audit, which stays random."
    ),
    Campaign.QueueMode.HYBRID: gettext_lazy(
        "Across queries: people judge the pairs whose label would move the ranking most, given what the model "
        "judge said of them, and the model's calibrated labels stand in for the rest (needs a model judge)."
    ),
}


def queue_modes_help() -> str:
    """The judging queue's help: each mode's name and its sentence, one per line; annotators never see which
    system brought a pair, whatever the mode."""
    lines = format_html_join(
        mark_safe("<br>"),
        "<strong>{}</strong>: {}",
        ((label, QUEUE_MODE_HELP.get(value, "")) for value, label in Campaign.QueueMode.choices),
    )
    return format_html("{}<br>{}", lines, gettext_lazy("Every mode keeps the systems hidden from annotators."))


class CampaignSettingsForm(forms.ModelForm):
    class Meta:
        model = Campaign
        fields = list(CAMPAIGN_SETTINGS)  # the service's list: what it accepts is what the form shows
        widgets = {
            "description": forms.Textarea(attrs={"rows": 3}),
            "guidelines": forms.Textarea(attrs={"rows": 10}),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A form (or script) that predates the judging-queue setting leaves it as it is.
        self.fields["queue_mode"].required = False
        self.fields["queue_mode"].error_messages["invalid_choice"] = unknown_mode_message("“%(value)s”")
        self.fields["queue_mode"].help_text = queue_modes_help()
        hybrid = Campaign.QueueMode.HYBRID
        if self.instance.pk and self.instance.queue_mode != hybrid and not has_model_judge(self.instance):
            field = self.fields["queue_mode"]  # nothing to be hybrid with: not offered
            assert isinstance(field, forms.ChoiceField)  # a model field with choices
            offered = cast("list[tuple[str, str]]", field.choices)
            field.choices = [c for c in offered if c[0] != hybrid]

    def clean_queue_mode(self) -> str:
        return self.cleaned_data.get("queue_mode") or self.instance.queue_mode


class GradeForm(forms.Form):
    value = AsciiIntegerField(
        label=gettext_lazy("Value"), min_value=0, max_value=100, widget=forms.NumberInput(attrs={"class": "narrow"})
    )
    name = forms.CharField(label=gettext_lazy("Name"), max_length=100)
    description = forms.CharField(
        label=gettext_lazy("Description"), required=False, widget=forms.Textarea(attrs={"rows": 3})
    )
    examples = forms.CharField(label=gettext_lazy("Examples"), required=False, widget=forms.Textarea(attrs={"rows": 3}))


class BaseGradeFormSet(forms.BaseFormSet):
    def clean(self) -> None:
        if any(self.errors):
            return
        scale_check(self.scale())  # the service's rules, so that the page says what the API says

    def scale(self) -> list[dict]:
        """The grades kept (not deleted), sorted by value."""
        return sorted(
            (
                {k: f.cleaned_data[k] for k in ("value", "name", "description", "examples")}
                for f in self.forms
                if f.cleaned_data and not f.cleaned_data.get("DELETE")
            ),
            key=lambda g: g["value"],
        )


GradeFormSet = forms.formset_factory(GradeForm, formset=BaseGradeFormSet, extra=1, can_delete=True)


class MemberAddForm(forms.Form):
    """One person by username; the service decides whether the account exists or is created."""

    username = forms.CharField(label=gettext_lazy("Username"), max_length=150)
    email = forms.EmailField(required=False, label=gettext_lazy("E-mail (optional)"))
    name = forms.CharField(required=False, max_length=300, label=gettext_lazy("Full name (optional)"))
    role = forms.ChoiceField(
        label=gettext_lazy("Role"), choices=Membership.Role.choices, initial=Membership.Role.ANNOTATOR
    )
    create = forms.BooleanField(
        required=False,
        initial=True,
        label=gettext_lazy("Create the account if there is none"),
        help_text=gettext_lazy("A new account gets a one-time link to set its own password."),
    )


class MembersBulkForm(forms.Form):
    """Many people at once: a pasted list or a CSV file, one ``username[,email[,name]]`` per line."""

    people = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 5, "placeholder": "dave\nerin,erin@example.org,Erin Park"}),
        label=gettext_lazy("People, one per line"),
        help_text=gettext_lazy("username, or username,e-mail,full name. Missing accounts are created."),
    )
    file = forms.FileField(
        required=False,
        label=gettext_lazy("…or a CSV file"),
        help_text=gettext_lazy("Columns username, email, name."),
    )
    role = forms.ChoiceField(
        label=gettext_lazy("Role"), choices=Membership.Role.choices, initial=Membership.Role.ANNOTATOR
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload = data.get("file")
        if upload:
            try:
                text, source = upload.read().decode("utf-8"), upload.name
            except UnicodeDecodeError:
                raise ValidationError({"file": _("%(file)s: not UTF-8 text") % {"file": upload.name}}) from None
        else:
            text, source = data.get("people") or "", _("the list")
        if not text.strip():
            raise ValidationError(_("Paste at least one username or choose a CSV file."))
        try:
            data["rows"] = people_parse(text, source=source)
        except ValidationError as exc:
            raise ValidationError({"file" if upload else "people": exc.messages}) from None
        return data


class MemberChangeForm(forms.Form):
    """A row of the members table: change someone's role, or remove them. ``user`` is a hidden id that a
    client can send as anything, so it is read as a whole number before any lookup."""

    action = forms.ChoiceField(
        choices=[
            ("role", gettext_lazy("change role")),
            ("remove", gettext_lazy("remove")),
            ("link", gettext_lazy("new link")),
        ]
    )
    user = AsciiIntegerField(min_value=1, max_value=2**63 - 1)
    role = forms.ChoiceField(required=False, choices=Membership.Role.choices)
    # "remove" without it shows a confirmation step, whose button sends it (no script: the CSP allows none inline)
    confirm = forms.BooleanField(required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("action") == "role" and not data.get("role"):
            self.add_error("role", _("choose a role"))
        return data

    def error_text(self) -> str:
        """One line naming each bad field, for a page that shows it as a message."""
        return "; ".join(f"{field}: {' '.join(map(str, errors))}" for field, errors in self.errors.items())


class UploadForm(forms.Form):
    KINDS = [
        ("topics", gettext_lazy("Topics (TSV qid, text, description — or JSONL)")),
        ("docs", gettext_lazy("Documents (JSONL docid, title, text, url — or TSV)")),
        ("run", gettext_lazy("Run (TREC: qid Q0 docid rank score tag)")),
        ("qrels", gettext_lazy("Qrels (TREC: qid iteration docid label)")),
        (
            "online",
            gettext_lazy("Online figures (CSV: system,metric,value[,ci_low,ci_high][,qid]), e.g. CTR from an A/B test"),
        ),
    ]
    kind = forms.ChoiceField(choices=KINDS, widget=forms.HiddenInput)
    file = forms.FileField(label=gettext_lazy("File"))
    system = forms.CharField(
        required=False,
        max_length=SYSTEM_NAME_MAX_LENGTH,
        label=gettext_lazy("system name"),
        help_text=gettext_lazy("Runs only; defaults to the run's tag column (one system per tag)."),
    )
    replace = forms.BooleanField(
        required=False,
        label=gettext_lazy("replace a different run of the same system"),
        help_text=gettext_lazy("Runs only. Scores and the leaderboard change; judgments are kept."),
    )
    annotator = forms.CharField(
        required=False,
        max_length=150,
        label=gettext_lazy("judged by (member or source name)"),
        help_text=gettext_lazy(
            "Qrels only: whose judgments these labels become — a member's username, or a source such as "
            "trec-2019 (a source account nobody can log in with is created). Defaults to you. Pairs that "
            "member already judged in the app keep their judgment."
        ),
    )

    model = forms.BooleanField(
        required=False,
        label=gettext_lazy("labels from a model judge"),
        help_text=gettext_lazy(
            "Qrels only: the annotator named above is an automatic judge (created if new); its labels "
            "never count as human labels."
        ),
    )

    def clean_annotator(self) -> str:
        # A name, checked by the import itself: it may name a source account that does not exist yet (or,
        # with ``model``, a model judge the view creates first).
        return self.cleaned_data.get("annotator", "").strip()

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("model") and not data.get("annotator"):
            self.add_error("annotator", _("name the model judge whose labels these are"))
        return data


class MyJudgmentsFilter(forms.Form):
    UNSURE = [("", gettext_lazy("any")), ("yes", gettext_lazy("unsure only")), ("no", gettext_lazy("confident only"))]
    q = forms.CharField(
        required=False,
        label=gettext_lazy("search"),
        max_length=200,
        widget=forms.TextInput(attrs={"type": "search", "placeholder": gettext_lazy("title, docid, note…")}),
    )
    query = forms.CharField(required=False, label="qid", max_length=QID_MAX_LENGTH)
    grade = AsciiIntegerField(required=False, label=gettext_lazy("Grade"), min_value=0, max_value=100)
    unsure = forms.ChoiceField(required=False, label=gettext_lazy("Unsure"), choices=UNSURE)

    def filters(self) -> dict:
        data = self.cleaned_data if self.is_valid() else {}
        unsure = {"yes": True, "no": False}.get(data.get("unsure") or "")
        return {
            "text": (data.get("q") or "").strip(),
            "grade": data.get("grade"),
            "unsure": unsure,
            "qid": (data.get("query") or "").strip(),
        }


class QueryTagsForm(forms.Form):
    qid = forms.CharField(max_length=100)
    tags = forms.CharField(required=False, max_length=2000, help_text=gettext_lazy("Comma-separated, e.g. head, shoes"))


class AuditDrawForm(forms.Form):
    """How many more queries to draw for the audit of the prediction-powered leaderboard, and an optional seed."""

    queries = AsciiIntegerField(label=gettext_lazy("Queries to draw"), min_value=1, max_value=100_000)
    seed = AsciiIntegerField(
        label=gettext_lazy("Seed (optional)"),
        required=False,
        min_value=0,
        max_value=2**63 - 1,
        help_text=gettext_lazy("The same seed over the same undrawn queries draws the same queries."),
    )
