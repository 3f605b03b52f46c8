"""django-filter FilterSets of the API's list endpoints (query-string filters, documented in the schema)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import django_filters as df
from django import forms
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _
from django_filters.fields import IsoDateTimeField
from rest_framework import filters
from rest_framework.request import Request
from rest_framework.views import APIView

from judging.api.permissions import access
from judging.formats import DOCID_MAX_LENGTH, QID_MAX_LENGTH, SYSTEM_NAME_MAX_LENGTH
from judging.forms import AsciiIntegerField
from judging.models import Campaign, Document, Judgment, Pair, Query, System
from judging.selectors import judgments_in_campaigns

CAMPAIGN_HELP = "Slug of a campaign you belong to (404 if you do not)."


class IntegerFilter(df.NumberFilter):
    """Whole numbers in ASCII digits only: a NumberFilter would accept 1.5 (the integer lookup would round it)
    and "２"."""

    field_class = AsciiIntegerField  # type: ignore[assignment]  # the stubs allow DecimalField subclasses only


class UTCDateTimeField(IsoDateTimeField):
    """An ISO 8601 timestamp that has a UTC time: 0001-01-01T00:00:00+14:00 parses, but the database
    compares in UTC, and the conversion would overflow (a 500) instead of a 400 naming the parameter."""

    def to_python(self, value: str | dt.datetime | dt.date | None) -> dt.datetime | None:
        parsed = super().to_python(value)
        if parsed is not None and timezone.is_aware(parsed):
            try:
                parsed.astimezone(dt.UTC)
            except OverflowError:
                raise forms.ValidationError(
                    _("out of range: the time must lie between years 1 and 9999 in UTC")
                ) from None
        return parsed


class UTCDateTimeFilter(df.IsoDateTimeFilter):
    field_class = UTCDateTimeField


def _campaign(field_name: str = "campaign__slug") -> df.CharFilter:
    return df.CharFilter(field_name=field_name, max_length=64, help_text=CAMPAIGN_HELP)


class QueryFilter(df.FilterSet):
    campaign = _campaign()
    qid = df.CharFilter(max_length=QID_MAX_LENGTH)
    stub = df.BooleanFilter(field_name="is_stub", help_text="Only stubs (true) or only imported topics (false).")

    class Meta:
        model = Query
        fields = ["campaign", "qid", "stub"]


class DocumentFilter(df.FilterSet):
    campaign = _campaign()
    docid = df.CharFilter(max_length=DOCID_MAX_LENGTH)
    stub = df.BooleanFilter(field_name="is_stub", help_text="Only stubs (true) or only imported documents (false).")

    class Meta:
        model = Document
        fields = ["campaign", "docid", "stub"]


class SystemFilter(df.FilterSet):
    campaign = _campaign()
    name = df.CharFilter(max_length=SYSTEM_NAME_MAX_LENGTH)

    class Meta:
        model = System
        fields = ["campaign", "name"]


class PairFilter(df.FilterSet):
    campaign = _campaign()
    qid = df.CharFilter(field_name="query__qid", max_length=QID_MAX_LENGTH)
    docid = df.CharFilter(field_name="document__docid", max_length=DOCID_MAX_LENGTH)
    pooled = df.BooleanFilter(help_text="In the judging pool (false: pairs only imported qrels labelled).")
    # Labels are aggregated from everyone's judgments: these filters only ever match pairs of campaigns
    # the caller leads, so an annotator cannot learn labels by probing with them.
    label = IntegerFilter(method="filter_lead_only", min_value=0, max_value=100, help_text="Leads only.")
    labelled = df.BooleanFilter(method="filter_lead_only", help_text="Has a label (leads only).")
    adjudicated = df.BooleanFilter(method="filter_lead_only", help_text="Adjudicated by a lead (leads only).")

    class Meta:
        model = Pair
        fields = ["campaign", "qid", "docid", "pooled", "label", "labelled", "adjudicated"]

    def filter_lead_only(self, queryset: QuerySet[Pair], name: str, value: object) -> QuerySet[Pair]:
        # The API's filter backend hands the filter set the view's DRF request.
        assert isinstance(self.request, Request)
        led = access(self.request).led_ids
        if led is not None:
            queryset = queryset.filter(campaign_id__in=led)
        if name == "labelled":
            return queryset.filter(label__isnull=not value)
        return queryset.filter(**{name: value})


class JudgmentFilter(df.FilterSet):
    UNSURE_CHOICES = [
        ("exclude", "leave unsure judgments out (default)"),
        ("include", "include them, with their tentative grades"),
        ("only", "only unsure judgments (the review queue)"),
    ]

    campaign = df.CharFilter(method="filter_campaign", max_length=64, help_text=CAMPAIGN_HELP)
    annotator = df.CharFilter(field_name="annotator__username", max_length=150, help_text="Username.")
    qid = df.CharFilter(field_name="pair__query__qid", max_length=QID_MAX_LENGTH)
    docid = df.CharFilter(field_name="pair__document__docid", max_length=DOCID_MAX_LENGTH)
    grade = IntegerFilter(field_name="grade__value", min_value=0, max_value=100, help_text="Confident grade.")
    unsure = df.ChoiceFilter(
        choices=UNSURE_CHOICES,
        method="filter_unsure",
        empty_label=None,
        help_text="exclude (default): confident judgments only; include: unsure ones too, with their "
        "tentative grades; only: just the unsure ones.",
    )
    updated_since = UTCDateTimeFilter(
        field_name="updated_at",
        lookup_expr="gte",
        help_text="ISO 8601 timestamp: judgments changed at or after it (incremental sync).",
    )

    class Meta:
        model = Judgment
        fields = ["campaign", "annotator", "qid", "docid", "grade", "unsure", "updated_since"]

    def filter_campaign(self, queryset: QuerySet[Judgment], name: str, value: str) -> QuerySet[Judgment]:
        # Not a join condition: that would make every id-ordered page sort the whole campaign.
        return judgments_in_campaigns(judgments=queryset, campaigns=Campaign.objects.filter(slug=value))

    def filter_unsure(self, queryset: QuerySet[Judgment], name: str, value: str) -> QuerySet[Judgment]:
        if value == "include":
            return queryset
        return queryset.filter(unsure=(value == "only"))

    def filter_queryset(self, queryset: QuerySet[Judgment]) -> QuerySet[Judgment]:
        queryset = super().filter_queryset(queryset)
        if not self.form.cleaned_data.get("unsure"):
            # The default: an unsure judgment is no label, and stays out of exports unless asked for.
            queryset = queryset.filter(unsure=False)
        return queryset


class OrderingFilter(filters.OrderingFilter):
    """DRF's ``?ordering=`` filter, with the values a view allows listed in the schema."""

    def get_schema_operation_parameters(self, view: APIView) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        fields = list(getattr(view, "ordering_fields", None) or [])
        for parameter in parameters:
            if parameter["name"] == self.ordering_param and fields:
                parameter["schema"]["enum"] = [p + f for f in fields for p in ("", "-")]
                parameter["description"] = "Sort by this field (a leading '-' sorts descending)."
        return parameters
