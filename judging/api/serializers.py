"""What each API resource looks like on the wire, and the typed shapes of the custom actions' bodies."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils.translation import gettext as _
from rest_framework import serializers

from judging.formats import DOCID_MAX_LENGTH, QID_MAX_LENGTH, SYSTEM_NAME_MAX_LENGTH
from judging.models import (
    Campaign,
    Document,
    Grade,
    Judgment,
    JudgmentRevision,
    Membership,
    Pair,
    Query,
    System,
)
from judging.params import ascii_float
from judging.selectors.strategies import unknown_mode_message
from judging.services import CAMPAIGN_SETTINGS, scale_check

GRADE_RANGE: dict[str, Any] = {"min_value": 0, "max_value": 100}


class AsciiIntegerField(serializers.IntegerField):
    """An integer written with the digits 0-9: DRF's IntegerField, like int(), also reads "２" and "١٠" (files
    and forms refuse them). JSON's true and false are not numbers."""

    def to_internal_value(self, data: float | int | str) -> int:
        if isinstance(data, bool):
            self.fail("invalid")
        if isinstance(data, str):
            try:
                ascii_float(data)  # DRF's own parsing follows (it takes "2.0" as 2)
            except ValueError:
                self.fail("invalid")
        return super().to_internal_value(data)


class AsciiFloatField(serializers.FloatField):
    """A number written with ASCII digits (FloatField, like float(), also reads "١" and "nan"); JSON's true and
    false are not numbers (float(True) is 1.0: a template's thresholds [true, 67] were taken as [1, 67])."""

    def to_internal_value(self, data: float | int | str) -> float:
        if isinstance(data, bool):
            self.fail("invalid")
        if isinstance(data, str):
            try:
                ascii_float(data)
            except ValueError:
                self.fail("invalid")
        return super().to_internal_value(data)


# DRF's ModelSerializer with the model's number fields read as ASCII numbers. (A comment, not a docstring: the
# schema would show it as the description of every serializer without one of its own.)
class ModelSerializer(serializers.ModelSerializer):
    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        **dict.fromkeys(
            (
                models.IntegerField,
                models.SmallIntegerField,
                models.BigIntegerField,
                models.PositiveIntegerField,
                models.PositiveSmallIntegerField,
                models.PositiveBigIntegerField,
            ),
            AsciiIntegerField,
        ),
        models.FloatField: AsciiFloatField,
    }


# --------------------------------------------------------------------------- campaigns


class GradeSerializer(ModelSerializer):
    class Meta:
        model = Grade
        fields = ["value", "name", "description"]
        extra_kwargs = {"value": GRADE_RANGE}


class GradeValuesField(serializers.ListField):
    """The scale's values as a plain list, e.g. [0, 1, 2]: what `create_campaign --grades` takes."""

    child = AsciiIntegerField(**GRADE_RANGE)

    def get_attribute(self, instance: Campaign) -> list[int]:
        return [g.value for g in instance.grades.all()]


class CampaignSerializer(ModelSerializer):
    grades = GradeValuesField(
        source="grade_values",
        required=False,
        min_length=1,
        max_length=101,
        help_text="Grade values of the scale (default [0, 1, 2]); named like the default scale.",
    )
    scale = GradeSerializer(
        source="grades",
        many=True,
        required=False,
        help_text="The scale with names and descriptions; send it instead of `grades` to name the grades.",
    )
    role = serializers.ChoiceField(
        choices=Membership.Role.choices, read_only=True, help_text="Your role in this campaign."
    )

    class Meta:
        model = Campaign
        fields = ["slug", *CAMPAIGN_SETTINGS, "grades", "scale", "role", "created_at"]
        read_only_fields = ["created_at"]
        extra_kwargs = {"name": {"required": False}}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # An unknown queue mode's 400 names the allowed ones (DRF fills in {input}).
        self.fields["queue_mode"].error_messages["invalid_choice"] = unknown_mode_message('"{input}"')

    def validate_slug(self, value: str) -> str:
        if self.instance is not None and value != self.instance.slug:
            raise serializers.ValidationError(_("The slug of a campaign cannot change."))
        return value

    def validate_scale(self, value: list[dict]) -> list[dict]:
        return scale_check(value)  # the service's rules (its ValidationError becomes this field's 400)

    def validate(self, attrs: dict) -> dict:
        grades, scale = attrs.get("grade_values"), attrs.get("grades")
        if grades is not None and scale is not None and sorted(set(grades)) != [g["value"] for g in scale]:
            raise serializers.ValidationError({"grades": _("`grades` and `scale` name different values.")})
        return attrs


# --------------------------------------------------------------------------- campaign contents


class QuerySerializer(ModelSerializer):
    campaign = serializers.CharField(source="campaign.slug", read_only=True)

    class Meta:
        model = Query
        fields = ["id", "campaign", "qid", "text", "description", "is_stub"]


class DocumentSerializer(ModelSerializer):
    campaign = serializers.CharField(source="campaign.slug", read_only=True)
    # Not a URLField: most documents have no URL, and "" is not a valid "uri" in the schema.
    url = serializers.CharField(read_only=True, help_text="Link to the original document; empty when there is none.")

    class Meta:
        model = Document
        fields = ["id", "campaign", "docid", "title", "text", "url", "is_stub"]


class SystemSerializer(ModelSerializer):
    campaign = serializers.CharField(source="campaign.slug", read_only=True)

    class Meta:
        model = System
        fields = ["id", "campaign", "name", "source", "imported_at", "entries"]


class PairSerializer(ModelSerializer):
    """A pool pair. The label and judgment figures summarize everyone's judgments, so they are sent only
    to leads; for an annotator the fields are absent (hence optional in the schema)."""

    # created_at too: it says when the run that pooled the pair was imported, i.e. which system found it.
    LEAD_ONLY = ("label", "adjudicated", "judgment_count", "created_at")

    id = AsciiIntegerField(
        source="public_id", read_only=True, help_text="The pair's public id (random; what `pair` means elsewhere)."
    )
    campaign = serializers.CharField(source="campaign.slug", read_only=True)
    qid = serializers.CharField(source="query.qid", read_only=True)
    docid = serializers.CharField(source="document.docid", read_only=True)
    # Declared writable-but-optional (the endpoint is read-only) so the schema marks them optional.
    label = AsciiIntegerField(  # type: ignore[assignment]  # the API field "label" shadows Field.label
        required=False, allow_null=True, help_text="Leads only: the aggregated label the scorer uses (null: unjudged)."
    )
    adjudicated = serializers.BooleanField(required=False, help_text="Leads only: a lead decided the label.")
    judgment_count = AsciiIntegerField(required=False, help_text="Leads only: judgments of this pair.")
    created_at = serializers.DateTimeField(required=False, help_text="Leads only: when the pair was pooled.")

    class Meta:
        model = Pair
        fields = ["id", "campaign", "qid", "docid", "pooled", "label", "adjudicated", "judgment_count", "created_at"]
        read_only_fields = ["pooled", "created_at"]

    def to_representation(self, instance: Pair) -> dict:
        data = super().to_representation(instance)
        if not self.context["access"].is_lead(instance.campaign_id):
            for name in self.LEAD_ONLY:
                data.pop(name, None)
        return data


class AdjudicationSerializer(serializers.Serializer):
    grade = AsciiIntegerField(**GRADE_RANGE, help_text="The label this pair gets, on the campaign's scale.")
    note = serializers.CharField(required=False, allow_blank=True, max_length=5000, default="")


# --------------------------------------------------------------------------- judgments


class JudgmentSerializer(ModelSerializer):
    pair = AsciiIntegerField(source="pair.public_id", read_only=True, help_text="The pair's public id.")
    campaign = serializers.CharField(source="pair.campaign.slug", read_only=True)
    qid = serializers.CharField(source="pair.query.qid", read_only=True)
    docid = serializers.CharField(source="pair.document.docid", read_only=True)
    annotator = serializers.CharField(source="annotator.username", read_only=True)
    grade = AsciiIntegerField(source="grade.value", read_only=True, allow_null=True)
    tentative_grade = AsciiIntegerField(
        source="tentative_grade.value",
        read_only=True,
        allow_null=True,
        help_text="An unsure annotator's best guess (not scored).",
    )

    class Meta:
        model = Judgment
        fields = [
            "id",
            "pair",
            "campaign",
            "qid",
            "docid",
            "annotator",
            "grade",
            "unsure",
            "tentative_grade",
            "note",
            "seconds_spent",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class JudgmentRecordSerializer(serializers.Serializer):
    """Record or change the caller's own judgment of one pair, named by id or by campaign, qid and docid."""

    pair = AsciiIntegerField(
        required=False,
        min_value=1,
        max_value=2**53,
        help_text="The pair's public id, as judgments and /api/pairs/ show it (or campaign + qid + docid).",
    )
    campaign = serializers.SlugField(required=False, max_length=64)
    qid = serializers.CharField(required=False, max_length=QID_MAX_LENGTH)
    docid = serializers.CharField(required=False, max_length=DOCID_MAX_LENGTH)
    grade = AsciiIntegerField(
        required=False,
        allow_null=True,
        **GRADE_RANGE,
        help_text="A grade on the campaign's scale; with unsure it is taken as the tentative grade.",
    )
    unsure = serializers.BooleanField(required=False, default=False)
    tentative_grade = AsciiIntegerField(required=False, allow_null=True, **GRADE_RANGE)
    note = serializers.CharField(required=False, allow_blank=True, max_length=5000, default="")
    seconds_spent = AsciiFloatField(required=False, min_value=0, max_value=86400, default=0.0)

    def validate(self, attrs: dict) -> dict:
        named = [k for k in ("campaign", "qid", "docid") if attrs.get(k)]
        if "pair" in attrs:
            if named:
                raise serializers.ValidationError(
                    {"pair": _("Name the pair by id or by campaign, qid and docid, not both.")}
                )
        elif len(named) != 3:
            missing = [k for k in ("campaign", "qid", "docid") if k not in named]
            raise serializers.ValidationError(dict.fromkeys(missing, _("This field is required (or send `pair`).")))
        return attrs


class JudgmentRevisionSerializer(ModelSerializer):
    changed_by = serializers.CharField(
        source="changed_by.username",
        read_only=True,
        allow_null=True,
        help_text="Who made the change (for imported labels, the lead who imported them; null: the command line).",
    )
    on_behalf_of = serializers.CharField(
        source="on_behalf_of.username",
        read_only=True,
        allow_null=True,
        help_text="Imported labels: the source they were imported for (null: a change made in the app).",
    )

    class Meta:
        model = JudgmentRevision
        fields = [
            "id",
            "changed_by",
            "on_behalf_of",
            "imported_from",
            "changed_at",
            *JudgmentRevision.CHANGE_FIELDS,
            "seconds_spent",
        ]
        read_only_fields = fields


# --------------------------------------------------------------------------- members


class MemberSerializer(ModelSerializer):
    username = serializers.CharField(source="user.username", max_length=150)
    added = serializers.DateTimeField(source="created_at", read_only=True)
    password_set = serializers.SerializerMethodField(
        help_text="False while the account waits for its owner to use the set-password link."
    )

    class Meta:
        model = Membership
        fields = ["username", "role", "added", "password_set"]

    def get_password_set(self, membership: Membership) -> bool:
        return membership.user.has_usable_password()


class MemberAddSerializer(serializers.Serializer):
    """Add a person: an existing user, or (with ``create``) a new account that gets a set-password link."""

    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Membership.Role.choices, default=Membership.Role.ANNOTATOR)
    create = serializers.BooleanField(  # type: ignore[assignment]  # the API field "create"
        default=False, help_text="Create the account when no user has this username (no password is ever sent)."
    )
    email = serializers.EmailField(required=False, allow_blank=True, default="")
    name = serializers.CharField(required=False, allow_blank=True, default="", max_length=300)


class MemberAddedSerializer(MemberSerializer):
    created = serializers.BooleanField(help_text="True when the account was created by this request.")
    set_password_url = serializers.CharField(
        allow_null=True,
        help_text="A one-time link (valid a few days) with which the person sets their password; pass it on. "
        "Null when the account already has a password or belongs to campaigns you do not lead.",
    )
    emailed = serializers.BooleanField(help_text="True when the link is also sent to the account's e-mail address.")
    mail_refused = serializers.CharField(
        allow_null=True,
        help_text="Why the link was not e-mailed although the account has an address (too many set-password "
        "e-mails for it, or from you, this hour) and when to ask again; null otherwise.",
    )

    class Meta(MemberSerializer.Meta):
        fields = [*MemberSerializer.Meta.fields, "created", "set_password_url", "emailed", "mail_refused"]


# --------------------------------------------------------------------------- uploads


class UploadSerializer(serializers.Serializer):
    file = serializers.FileField(allow_empty_file=True, help_text="The file to import (multipart form field).")


class TopicsUploadSerializer(UploadSerializer):
    """Topics: TSV `qid<TAB>text[<TAB>description]` or JSONL `{"qid", "text", "description"?}`."""


class DocumentsUploadSerializer(UploadSerializer):
    """Documents: JSONL `{"docid", "title"?, "text", "url"?}` or TSV `docid<TAB>title<TAB>text`."""


class RunUploadSerializer(UploadSerializer):
    """A run: TREC `qid Q0 docid rank score tag` (or TSV / JSONL)."""

    system = serializers.CharField(
        required=False, max_length=SYSTEM_NAME_MAX_LENGTH, help_text="System name (default: the run's tag column)."
    )
    replace = serializers.BooleanField(
        required=False, default=False, help_text="Overwrite a different run already imported for this system."
    )


class QrelsUploadSerializer(UploadSerializer):
    """Qrels: TREC `qid iteration docid label`, imported as one user's confident judgments."""

    annotator = serializers.CharField(
        required=False,
        max_length=150,
        help_text="Whose judgments the labels become: a member's username, or a source name such as trec-2019 "
        "(a source account nobody can log in with is created). Default: you.",
    )
    model = serializers.BooleanField(
        required=False,
        default=False,
        help_text="The labels come from an automatic judge: `annotator` names a model judge (created if new); "
        "its labels never count as human labels.",
    )
    description = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=2000, help_text="With model: the model and prompt."
    )


class OnlineUploadSerializer(UploadSerializer):
    """Online figures: CSV `system,metric,value[,ci_low,ci_high][,qid]`."""


class ImportSummarySerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="What the file held: queries, documents, rankings or judgments.")
    filename = serializers.CharField()
    added = AsciiIntegerField()
    updated = AsciiIntegerField()
    unchanged = AsciiIntegerField()
    stub_queries = AsciiIntegerField(help_text="Queries created as stubs (their topics were not imported).")
    stub_documents = AsciiIntegerField(help_text="Documents created as stubs.")
    pairs_added = AsciiIntegerField(help_text="Pairs added to the judging pool.")
    systems = serializers.ListField(child=serializers.CharField(), help_text="Systems a run import touched.")
    source = serializers.CharField(  # type: ignore[assignment]  # the API field "source"
        allow_blank=True, help_text="Qrels: whose judgments the labels became."
    )
    source_created = serializers.BooleanField(help_text="Qrels: a source account was created for them.")
    kept = AsciiIntegerField(
        help_text="Qrels: labels not applied because the source had judged the pair in the app themselves."
    )


class UploadErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What is wrong.")
    file = serializers.CharField(help_text="Name of the uploaded file.")
    line = AsciiIntegerField(allow_null=True, help_text="1-based line number, when known.")
    field = serializers.CharField(allow_null=True, help_text="Column or JSON key, when known.")


# --------------------------------------------------------------------------- auth


class TokenRequestSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, style={"input_type": "password"}, trim_whitespace=False)


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Send it as `Authorization: Token <token>`.")


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
