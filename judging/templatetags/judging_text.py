"""Template filters for showing text to annotators: imported documents as plain text, Markdown as sanitized HTML."""

import functools
import html
import re

import nh3
from django import template
from django.utils.html import strip_tags
from django.utils.safestring import mark_safe
from markdown_it import MarkdownIt
from markdown_it.token import Token

register = template.Library()

_BREAKS = re.compile(r"(?i)<br\s*/?>|</(?:p|div|li|tr|h[1-6])\s*>")


@register.filter(is_safe=False)
def plaintext(value: object) -> str:
    """Imported HTML as the plain text a reader would see: tags dropped (line breaks kept), entities
    such as ``&amp;`` decoded. The result is an ordinary string, so the template still escapes it."""
    if value is None:
        return ""
    return html.unescape(strip_tags(_BREAKS.sub("\n", str(value))))


# Guidelines, grade descriptions and query descriptions are Markdown written by leads (or imported with the
# topics). CommonMark with raw HTML off: a "<script>" in the source comes out as text. Single newlines
# become line breaks so that plain text written before Markdown was supported keeps its lines.
_MD = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False}).enable(["table", "strikethrough"])
# Then a maintained sanitizer has the last word, whatever the parser let through: only these tags, links
# only to http(s) and mailto (no javascript:), and links that cannot reach back into this page.
_TAGS = {
    "p", "br", "strong", "em", "del", "code", "pre", "blockquote", "ul", "ol", "li", "a", "hr",
    "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "img",
}  # fmt: skip
_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "ol": {"start"},
    "th": {"align"},
    "td": {"align"},
}
_SCHEMES = {"http", "https", "mailto"}


def _shift_headings(tokens: list[Token], top: int = 3) -> None:
    # The page has its own h1 and h2: the text's highest heading becomes an h``top`` (a section inside the
    # page's card), the others keep their distance from it, so the outline never skips a level whichever
    # level the lead started from ("## Grades" as well as "# Grades").
    levels = [int(t.tag[1]) for t in tokens if t.type == "heading_open"]
    if not levels:
        return
    shift = top - min(levels)
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{max(1, min(6, int(token.tag[1]) + shift))}"


@register.filter(is_safe=True)
def markdown(value: object, top: int | str = 3) -> str:
    """Markdown as sanitized HTML (marked safe only after nh3 has cleaned it); its highest heading an h``top``
    (3 unless the template says, e.g. ``|markdown:4`` under an h3)."""
    if not value:
        return ""
    return mark_safe(_sanitized_html(str(value), int(top)))


# The same texts come back on every page (a query's description for each of its 50-odd pairs, a campaign's
# guidelines): their HTML, a pure function of the text, is kept for the most recent ones.
@functools.lru_cache(maxsize=256)
def _sanitized_html(text: str, top: int = 3) -> str:
    tokens = _MD.parse(text)
    _shift_headings(tokens, top)
    html_out = _MD.renderer.render(tokens, _MD.options, {})
    # nh3 removes every tag, attribute and URL scheme not listed above
    return nh3.clean(
        html_out, tags=_TAGS, attributes=_ATTRIBUTES, url_schemes=_SCHEMES, link_rel="noopener noreferrer nofollow"
    )
