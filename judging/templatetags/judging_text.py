"""Template filters for showing imported document text to annotators."""

import html
import re

from django import template
from django.utils.html import strip_tags

register = template.Library()

_BREAKS = re.compile(r"(?i)<br\s*/?>|</(?:p|div|li|tr|h[1-6])\s*>")


@register.filter(is_safe=False)
def plaintext(value) -> str:
    """Imported HTML as the plain text a reader would see: tags dropped (line breaks kept), entities
    such as ``&amp;`` decoded. The result is an ordinary string, so the template still escapes it."""
    if value is None:
        return ""
    return html.unescape(strip_tags(_BREAKS.sub("\n", str(value))))
