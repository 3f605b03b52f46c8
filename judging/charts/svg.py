"""What every server-rendered chart shares: the <svg> wrapper, number and name formatting, and the colours.

Charts colour their marks with the ``ch-*`` classes of static/judging/app.css, whose variables hold the
palette (the ``--ch-*`` custom properties and the ColorBrewer scales ``--blue-0`` .. ``--blue-8`` and
``--orange-0`` .. ``--orange-8``), so a chart in a page and the page's own tables take their colours from
one place. A chart saved as a file has no page around it: ``standalone`` puts app.css's variables and
chart rules inside it.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from django.contrib.staticfiles import finders
from django.core.exceptions import ImproperlyConfigured
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

# The chart rules of app.css lie between these two comments.
CSS_BEGIN, CSS_END = "/* charts: begin */", "/* charts: end */"


def svg(width: float, height: float, body: list[str], *, title: str, label: str, cls: str) -> SafeString:
    """An accessible <svg> of the given size around ``body`` (markup already escaped by the caller)."""
    return mark_safe(
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="{escape(label)}" class="{cls}">'
        f"<title>{escape(title)}</title>" + "".join(body) + "</svg>"
    )


def fmt(value: float | None, digits: int = 3) -> str:
    """A number for a label or tooltip; an en dash for a missing or undefined one."""
    return "–" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def clip(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters with an ellipsis, for names beside bars and axes."""
    return text if len(text) <= n else text[: n - 1] + "…"


def text_width(text: str, size: float = 12.0) -> float:
    """A generous estimate of ``text``'s width in px at ``size`` px in the pages' sans-serif (DejaVu Sans,
    Noto, the system UI fonts): a Hangul or CJK character, M, W, m, w, @, % and & 1 em, another capital 0.78 em,
    a narrow mark 0.36 em, anything else 0.64 em. Generous, so that a label placed by it is never cut at the
    chart's edge."""
    em = 0.0
    for c in text:
        if unicodedata.east_asian_width(c) in "WF":
            em += 1.0
        elif c in " .,:;'|!iljtf()[]-":
            em += 0.36
        elif c in "mwMW@%&":
            em += 1.0
        elif c.isupper():
            em += 0.78
        else:
            em += 0.64
    return em * size


def clip_to(text: str, px: float, size: float = 12.0) -> str:
    """``text`` cut with an ellipsis to fit ``px`` (by text_width): a name beside a bar or an axis."""
    if text_width(text, size) <= px:
        return text
    room = px - text_width("…", size)
    out = ""
    for c in text:
        if text_width(out + c, size) > room:
            break
        out += c
    return out.rstrip() + "…"


def name_label(name: str, *, x: float, y: float, px: float) -> str:
    """A system's (or judge's) name right-aligned at ``x``: whole when it fits ``px``, else shortened, with
    the whole name in its tooltip (<title>)."""
    shown = clip_to(name, px)
    tip = f"<title>{escape(name)}</title>" if shown != name else ""
    return f'<text x="{x:.0f}" y="{y:.0f}" text-anchor="end">{tip}{escape(shown)}</text>'


def label_width(names: Iterable[str], *, chart_width: float) -> float:
    """Room for the names left of a chart's plot: the longest name's width, at most 200 px and at most a
    third of a narrow chart (a phone's), so that the plot keeps its room."""
    cap = min(200.0, chart_width / 3 if chart_width < 600 else 200.0)
    longest = max((text_width(n) for n in names), default=text_width("xxxx"))
    return min(cap, 16 + longest)


@functools.cache
def _stylesheet() -> str:
    path = finders.find("judging/app.css")
    if path is None:
        raise ImproperlyConfigured("judging/app.css is not among the static files")
    css = Path(path).read_text(encoding="utf-8")
    root = re.search(r":root\s*\{.*?\}", css, re.S)
    start, end = css.find(CSS_BEGIN), css.find(CSS_END)
    if root is None or start < 0 or end < start:
        raise RuntimeError(f"{path} lost its :root block or its {CSS_BEGIN} ... {CSS_END} section")
    return root.group(0) + css[start + len(CSS_BEGIN) : end]


def standalone(chart: str) -> str:
    """``chart`` as a file of its own: app.css's colour variables and chart rules embedded in a <style>."""
    head, sep, rest = chart.partition(">")
    return f"{head}{sep}<style>{_stylesheet()}</style>{rest}"
