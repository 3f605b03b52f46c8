"""Measure-versus-cutoff line chart of the leaderboard's curves page (server-rendered SVG).

Series colours come from CSS classes (``lb-series-0`` .. ``lb-series-7`` in leaderboard.css), so the
chart and its table's swatches share one palette and a stylesheet can restyle both.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from django.utils.html import escape
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from judging.charts.leaderboard import chart_svg, nice_ticks
from judging.charts.svg import clip

#: Distinct series styles (colour classes); more systems reuse them with a dashed stroke.
CURVE_SERIES = 8


def curve_chart(
    names: Sequence[str], values: np.ndarray, *, measure: str, width: int = 720, height: int = 320
) -> SafeString:
    """One line per system through its mean ``measure`` at k = 1..K (``values`` is (S, K)), legend on the right.

    The y axis runs from 0 to the largest value (rounded up to a tick); each point has a tooltip.
    """
    values = np.asarray(values, dtype=np.float64)
    n_sys, k_max = values.shape
    legend_w = 150
    left, right, top, bottom = 48, legend_w + 12, 26, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    finite = values[np.isfinite(values)]
    y_top = max(float(finite.max()) if finite.size else 0.0, 0.05)
    ticks = nice_ticks(0.0, y_top, 5)
    y_max = max(ticks[-1], y_top)

    def x(k: float) -> float:
        return left + (plot_w * (k - 1) / (k_max - 1) if k_max > 1 else plot_w / 2)

    def y(v: float) -> float:
        return top + plot_h * (1 - v / y_max)

    heading = _("%(measure)s@k for k = 1 … %(k_max)d") % {"measure": measure, "k_max": k_max}
    body = [f'<text x="{left}" y="15" class="ch-muted">{escape(heading)}</text>']
    for t in ticks:
        body.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(t):.1f}" y2="{y(t):.1f}" class="ch-grid"/>')
        body.append(f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end" class="ch-muted">{t:g}</text>')
    for k in nice_ticks(1.0, float(k_max), 6) if k_max > 1 else [1.0]:
        if k < 1 or k > k_max:
            continue
        body.append(f'<text x="{x(k):.1f}" y="{top + plot_h + 16}" text-anchor="middle" class="ch-muted">{k:g}</text>')
    cutoff_k = _("cutoff k")
    body.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle" class="ch-ink">'
        f"{escape(cutoff_k)}</text>"
    )
    ks = np.arange(1, k_max + 1)
    for i in range(n_sys):
        cls = f"lb-series lb-series-{i % CURVE_SERIES}" + (" lb-series-dashed" if i >= CURVE_SERIES else "")
        row = values[i]
        pts = " ".join(f"{x(k):.1f},{y(v):.1f}" for k, v in zip(ks.tolist(), row.tolist(), strict=True))
        name = escape(names[i])
        body.append(f'<g class="{cls}"><title>{name}</title>')
        body.append(f'<polyline points="{pts}" fill="none" stroke-width="2"/>')
        if k_max <= 30:  # dots only where they do not merge into the line
            for k, v in zip(ks.tolist(), row.tolist(), strict=True):
                body.append(
                    f'<circle cx="{x(k):.1f}" cy="{y(v):.1f}" r="2.5"><title>{name}: {escape(measure)}@{k} = '
                    f"{v:.4f}</title></circle>"
                )
        body.append("</g>")
        ly = top + 4 + i * 18
        if ly < height - 10:
            lx = width - legend_w
            body.append(
                f'<g class="{cls}"><line x1="{lx}" x2="{lx + 18}" y1="{ly:.1f}" y2="{ly:.1f}" stroke-width="3"/>'
                f'<text x="{lx + 24}" y="{ly + 4:.1f}" class="ch-ink">'
                f"{escape(clip(names[i], 18))}</text></g>"
            )
    return chart_svg(
        width,
        height,
        body,
        title=_("%(measure)s at every cutoff") % {"measure": measure},
        label=_("%(measure)s versus k per system") % {"measure": measure},
    )


def interval_bar(low: float, high: float, value: float, *, top: float = 1.0, width: int = 140) -> SafeString:
    """A small bar from ``low`` to ``high`` on a 0..``top`` scale with a tick at today's ``value``.

    SVG rather than a styled <div>: the pages' Content-Security-Policy allows no inline styles.
    """
    top = top if top > 0 else 1.0

    def x(v: float) -> float:
        return 1 + (width - 2) * min(max(v / top, 0.0), 1.0)

    body = [
        f'<rect x="0" y="3" width="{width}" height="8" rx="3" class="lb-interval-bg"/>',
        f'<rect x="{x(low):.1f}" y="3" width="{max(x(high) - x(low), 1.5):.1f}" height="8" rx="3" class="ch-tied"/>',
        f'<rect x="{x(value) - 1:.1f}" y="0" width="2.5" height="14" class="ch-best"/>',
    ]
    label = _("today %(value)s, between %(low)s and %(high)s") % {
        "value": f"{value:.3f}",
        "low": f"{low:.3f}",
        "high": f"{high:.3f}",
    }
    return chart_svg(width, 14, body, title=label, label=label)
