"""Server-rendered SVG for the offline-vs-online page: one scatter of systems per (offline measure, online metric).

Takes plain numbers and names and returns markup safe to put in a template: every name drawn is escaped here.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

W, H = 300, 220
LEFT, RIGHT, TOP, BOTTOM = 58, 14, 14, 38


def _scale(values: Sequence[float], low: float, high: float) -> Callable[[float], float]:
    """Map the finite ``values`` onto [low, high], their range padded by 8% on each side.

    Worked with the midpoint and half the range, each computed from halves, so that no step overflows
    for any finite value (1e308 and -1e308 included) and a range too small to draw (one value, or values
    a few ulps apart) is centred instead of divided by."""
    lo, hi = min(values), max(values)
    mid = lo / 2 + hi / 2
    half = hi / 2 - lo / 2
    if not half > 1e-300 * max(1.0, abs(mid)):  # every system the same: centre them rather than divide by zero
        half = max(abs(mid) / 2, 0.5)
    half = min(half * 1.08, sys.float_info.max)
    return lambda v: low + ((v / 2 - mid / 2) / half + 0.5) * (high - low)


def scatter_svg(points: Sequence[dict], discordant: Sequence[Sequence[str]], *, x_name: str, y_name: str) -> SafeString:
    """Systems as dots at (offline measure, online metric); each pair of systems the two order differently
    is joined by a dashed orange line, so the eye finds the disagreements first."""
    # inf and NaN have no place on an axis: such a system is left out of the chart (its row says the figure)
    points = [p for p in points if math.isfinite(p["offline"]) and math.isfinite(p["online"])]
    if not points:
        return mark_safe("")
    xs = [p["offline"] for p in points]
    ys = [p["online"] for p in points]
    sx = _scale(xs, LEFT, W - RIGHT)
    sy = _scale(ys, H - BOTTOM, TOP)
    at = {p["system"]: (sx(p["offline"]), sy(p["online"])) for p in points}
    title = _("%(x)s (across) against %(y)s (up), one dot per system") % {"x": x_name, "y": y_name}
    ordered_differently = _("%(a)s and %(b)s are ordered differently")
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
        f'class="chart scatter" font-size="11"><title>{escape(title)}</title>',
        f'<rect x="{LEFT}" y="{TOP}" width="{W - LEFT - RIGHT}" height="{H - TOP - BOTTOM}" class="ch-frame"/>',
        # ticks at the smallest and largest value actually seen (the frame is padded beyond them)
        f'<text x="{sx(min(xs)):.1f}" y="{H - 24}" class="ch-muted" text-anchor="middle">{min(xs):.3g}</text>',
        f'<text x="{sx(max(xs)):.1f}" y="{H - 24}" class="ch-muted" text-anchor="middle">{max(xs):.3g}</text>'
        if max(xs) != min(xs)
        else "",
        f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 6}" class="ch-ink" text-anchor="middle">{escape(x_name)}</text>',
        f'<text x="{LEFT - 4}" y="{sy(min(ys)) + 4:.1f}" class="ch-muted" text-anchor="end">{min(ys):.3g}</text>',
        f'<text x="{LEFT - 4}" y="{sy(max(ys)) + 4:.1f}" class="ch-muted" text-anchor="end">{max(ys):.3g}</text>'
        if max(ys) != min(ys)
        else "",
        f'<text transform="translate(12 {(TOP + H - BOTTOM) / 2}) rotate(-90)" class="ch-ink" '
        f'text-anchor="middle">{escape(y_name)}</text>',
    ]
    for a, b in discordant:
        (x1, y1), (x2, y2) = at[a], at[b]
        out.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" class="ch-discordant-line" '
            f'stroke-width="2" stroke-dasharray="4 3"><title>{escape(ordered_differently % {"a": a, "b": b})}'
            f"</title></line>"
        )
    flagged = {name for pair in discordant for name in pair}
    placed: list[tuple[float, float]] = []
    for p in sorted(points, key=lambda p: at[p["system"]]):
        x, y = at[p["system"]]
        point = "ch-point ch-discordant" if p["system"] in flagged else "ch-point"
        anchor = "end" if x > (LEFT + W - RIGHT) / 2 else "start"
        dx = -7 if anchor == "end" else 7
        # a label that would sit on an earlier one goes further down, below its dot
        label_y = y - 7
        while any(abs(label_y - py) < 12 and abs(x - px) < 70 for px, py in placed):
            label_y += 13
        placed.append((x, label_y))
        out.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" class="{point}"><title>{escape(p["system"])}: '
            f"{escape(x_name)} {p['offline']:.4f}, {escape(y_name)} {p['online']:.4g}</title></circle>"
            f'<text x="{x + dx:.1f}" y="{label_y:.1f}" class="ch-ink" text-anchor="{anchor}">'
            f"{escape(p['system'])}</text>"
        )
    out.append("</svg>")
    return mark_safe("".join(out))
