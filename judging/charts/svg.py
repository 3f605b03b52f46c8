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
