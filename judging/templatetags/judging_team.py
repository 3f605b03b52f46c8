"""Template filters of the team pages: a length of time in words."""

from __future__ import annotations

from django import template
from django.utils.translation import gettext as _

register = template.Library()


@register.filter
def duration(seconds: float | None) -> str:
    """``seconds`` as "45 s", "12 min" or "3 h 05 min" (in the reader's language); "–" for None."""
    if seconds is None:
        return "–"
    total = round(float(seconds))
    if total < 60:
        return _("%(s)d s") % {"s": total}
    minutes = round(total / 60)
    if minutes < 60:
        return _("%(m)d min") % {"m": minutes}
    return _("%(h)d h %(m)02d min") % {"h": minutes // 60, "m": minutes % 60}
