"""Template filters for the interface's own words inside campaign data (the default grade names) and durations."""

from datetime import datetime

from django import template
from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext as _

from judging.languages import catalog_url
from judging.models import Grade
from judging.selectors.campaigns import grade_text_shown

register = template.Library()


@register.filter
def grade_name(value: Grade | str) -> str:
    """A grade's name (a Grade, or its name), the default scale's in the active language."""
    name = value.name if isinstance(value, Grade) else value
    return grade_text_shown(name) if isinstance(name, str) else name


@register.filter
def duration(start: datetime | None, end: datetime | None) -> str:
    """How long from ``start`` to ``end`` (datetimes), to the second under an hour: "25 s", "4 min 5 s",
    "2 h 3 min". (timesince says "0 minutes" for anything under one.)"""
    if not start or not end:
        return ""
    seconds = max(0, round((end - start).total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return _("%(h)d h %(m)d min") % {"h": hours, "m": minutes}
    if minutes:
        return _("%(m)d min %(s)d s") % {"m": minutes, "s": seconds}
    return _("%(s)d s") % {"s": seconds}


@register.simple_tag
def script_catalog_url() -> str:
    """The URL of the scripts' translations in the page's language (see languages.catalog_url)."""
    return catalog_url(translation.get_language() or settings.LANGUAGE_CODE)
