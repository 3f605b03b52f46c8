"""Server-rendered SVG charts and colour scales for the leaderboard pages (no JavaScript, no CDN).

Every function takes plain numbers and names and returns markup that is safe to put in a template: each
name, qid or label it draws is escaped here.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from django.utils.html import escape
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import ngettext, pgettext

from judging.charts.svg import clip as _clip
from judging.charts.svg import fmt as _fmt
from judging.charts.svg import label_width, name_label, svg

# the mark of each system's bar by its test against the best (colours: the ch-* classes of app.css)
STATUS_CLASS = {"best": "ch-best", "tied": "ch-tied", "worse": "ch-worse", "": "ch-plain"}


def chart_svg(width: float, height: float, body: list[str], *, title: str, label: str) -> SafeString:
    return svg(width, height, body, title=title, label=label, cls="lb-chart")


def message_chart(title: str, message: str, *, width: int = 640) -> SafeString:
    """A chart with nothing to draw yet: its title and one line saying why (and what to do), never a 404."""
    body = [f'<text x="{width / 2}" y="40" text-anchor="middle" class="ch-muted">{escape(message)}</text>']
    return chart_svg(width, 70, body, title=title, label=message)


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1, 2 or 5 times a power of ten apart)."""
    if not math.isfinite(low) or not math.isfinite(high) or high <= low:
        return [low] if math.isfinite(low) else [0.0]
    raw = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks, t = [], first
    while t <= high + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    return ticks


def heat_class(value: float | None) -> str:
    """CSS class of a [0, 1] value on the 9-step sequential scale (``h0`` .. ``h8``), ``hna`` for missing."""
    if value is None or not math.isfinite(value):
        return "hna"
    return f"h{min(8, max(0, int(value * 9)))}"


def heat_classes(values: np.ndarray) -> np.ndarray:
    """:func:`heat_class` over an array at once."""
    v = np.asarray(values, dtype=np.float64)
    idx = np.clip((np.nan_to_num(v, nan=0.0) * 9).astype(int), 0, 8)
    out = np.char.add("h", idx.astype(str))
    return np.where(np.isfinite(v), out, "hna")


def _vertical_grid(ticks: list[float], x: Callable[[float], float], top: float, bottom: float) -> list[str]:
    """A vertical grid line and a value label under the plot for each tick of a horizontal value axis."""
    out = []
    for t in ticks:
        out.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top - 4}" y2="{bottom + 4}" class="ch-grid"/>')
        out.append(f'<text x="{x(t):.1f}" y="{bottom + 18}" text-anchor="middle" class="ch-muted">{t:g}</text>')
    return out


# --------------------------------------------------------------------------- bar chart with CI whiskers


def bar_chart(
    names: Sequence[str],
    means: Sequence[float],
    *,
    measure: str,
    low: Sequence[float] | None = None,
    high: Sequence[float] | None = None,
    status: Sequence[str] | None = None,
    width: int = 900,
) -> SafeString:
    """Horizontal bars of one measure per system (in the given order) with 95% CI whiskers.

    ``status`` per system: ``best``, ``tied`` (not significantly worse than the best), ``worse`` or ``""``.
    A narrow chart (``width`` under 600, for a phone) starts its heading at the left edge, above the names.
    """
    n = len(names)
    row, top, bottom = 22, 26, 30
    label_w = label_width(names, chart_width=width)
    plot_w = width - label_w - 56
    height = top + bottom + row * max(n, 1)
    hi_values = [v for v in list(means) + list(high or []) if v is not None and math.isfinite(v)]
    x_max = max(1.0, max(hi_values, default=1.0))
    ticks = nice_ticks(0.0, x_max, 5)
    x_max = max(x_max, ticks[-1])

    def x(v: float) -> float:
        return label_w + plot_w * max(0.0, v) / x_max

    heading = (
        _("%(measure)s (mean over queries), whiskers: 95%% bootstrap CI")
        if low is not None
        else _("%(measure)s (mean over queries)")
    ) % {"measure": measure}
    if width >= 600:
        body = [f'<text x="{label_w}" y="15" class="ch-muted">{escape(heading)}</text>']
    else:
        # At 12 px about 6.3 px a Latin character and 12 a Hangul syllable: a heading longer than the chart is
        # squeezed to fit, not cut off.
        estimate = sum(12 if unicodedata.east_asian_width(c) in "WF" else 6.3 for c in heading)
        fit = f' textLength="{width - 8}" lengthAdjust="spacingAndGlyphs"' if estimate > width - 8 else ""
        body = [f'<text x="4" y="15" class="ch-muted"{fit}>{escape(heading)}</text>']
    body += _vertical_grid(ticks, x, top, height - bottom)
    for i, name in enumerate(names):
        y = top + i * row
        m = float(means[i])
        kind = status[i] if status else ""
        colour = STATUS_CLASS.get(kind, "ch-tied")
        tip = f"{name}: {measure} = {_fmt(m, 4)}"
        if low is not None and high is not None and math.isfinite(low[i]):
            tip += " " + _("(95%% CI %(low)s – %(high)s)") % {"low": _fmt(low[i], 4), "high": _fmt(high[i], 4)}
        if kind == "worse":
            tip += _(", significantly worse than the best")
        body.append(f"<g><title>{escape(tip)}</title>")
        body.append(name_label(name, x=label_w - 8, y=y + 15, px=label_w - 12))
        body.append(
            f'<rect x="{label_w}" y="{y + 4}" width="{max(0.0, x(m) - label_w):.1f}" height="{row - 8}" '
            f'class="{colour}" rx="2"/>'
        )
        if low is not None and high is not None and math.isfinite(low[i]) and math.isfinite(high[i]):
            a, b, cy = x(float(low[i])), x(float(high[i])), y + row / 2
            body.append(
                f'<path d="M{a:.1f} {cy:.1f}H{b:.1f}M{a:.1f} {cy - 5:.1f}V{cy + 5:.1f}'
                f'M{b:.1f} {cy - 5:.1f}V{cy + 5:.1f}" class="ch-whisker" stroke-width="1.3"/>'
            )
            end = max(b, x(m))
        else:
            end = x(m)
        body.append(f'<text x="{end + 5:.1f}" y="{y + 15}">{_fmt(m)}</text></g>')
    return chart_svg(
        width,
        height,
        body,
        title=_("%(measure)s per system") % {"measure": measure},
        label=_("Bar chart of %(measure)s per system") % {"measure": measure},
    )


# --------------------------------------------------------------------------- per-query distributions


def distribution_chart(
    names: Sequence[str], values: np.ndarray, *, measure: str, width: int = 640, points_up_to: int = 150
) -> SafeString:
    """One horizontal box plot per system of its per-query values (S, Q): quartiles, median, mean (◆),
    whiskers to the 5th and 95th percentiles; with few queries every query is drawn as a dot too."""
    values = np.asarray(values, dtype=np.float64)
    n = len(names)
    row, top, bottom = 24, 26, 30
    label_w = label_width(names, chart_width=width)
    plot_w = width - label_w - 20
    height = top + bottom + row * max(n, 1)
    x_max = max(1.0, float(values.max()) if values.size else 1.0)

    def x(v: float) -> float:
        return label_w + plot_w * v / x_max

    heading = _("Per-query %(measure)s: box = quartiles, whiskers = 5th–95th percentile, ◆ = mean") % {
        "measure": measure
    }
    body = [f'<text x="{label_w}" y="15" class="ch-muted">{escape(heading)}</text>']
    body += _vertical_grid(nice_ticks(0.0, x_max, 5), x, top, height - bottom)
    if values.shape[-1] == 0:
        no_label = _("No query has a label yet")
        body.append(
            f'<text x="{label_w + plot_w / 2}" y="{top + 20}" text-anchor="middle" class="ch-muted">'
            f"{escape(no_label)}</text>"
        )
        return chart_svg(width, height, body, title=_("Per-query distribution"), label=_("No data yet"))
    q = np.percentile(values, [5, 25, 50, 75, 95], axis=1)  # (5, S)
    mean = values.mean(axis=1)
    rng = np.random.default_rng(0)
    for i, name in enumerate(names):
        y = top + i * row
        cy = y + row / 2
        p5, p25, p50, p75, p95 = (float(v) for v in q[:, i])
        tip = ngettext(
            "%(name)s: mean %(mean)s, median %(median)s, quartiles %(q1)s–%(q3)s, "
            "5th–95th percentile %(p5)s–%(p95)s over %(n)d query",
            "%(name)s: mean %(mean)s, median %(median)s, quartiles %(q1)s–%(q3)s, "
            "5th–95th percentile %(p5)s–%(p95)s over %(n)d queries",
            values.shape[1],
        ) % {
            "name": name,
            "mean": _fmt(mean[i]),
            "median": _fmt(p50),
            "q1": _fmt(p25),
            "q3": _fmt(p75),
            "p5": _fmt(p5),
            "p95": _fmt(p95),
            "n": values.shape[1],
        }
        body.append(f"<g><title>{escape(tip)}</title>")
        body.append(name_label(name, x=label_w - 8, y=y + 16, px=label_w - 12))
        if values.shape[1] <= points_up_to:
            jitter = rng.uniform(-6, 6, int(values.shape[1]))
            dots = "".join(
                f'<circle cx="{x(v):.1f}" cy="{cy + j:.1f}" r="1.8"/>'
                for v, j in zip(values[i].tolist(), jitter.tolist(), strict=True)
            )
            body.append(f'<g class="ch-dots">{dots}</g>')
        body.append(
            f'<path d="M{x(p5):.1f} {cy}H{x(p25):.1f}M{x(p75):.1f} {cy}H{x(p95):.1f}'
            f'M{x(p5):.1f} {cy - 4}V{cy + 4}M{x(p95):.1f} {cy - 4}V{cy + 4}" class="ch-whisker"/>'
        )
        body.append(
            f'<rect x="{x(p25):.1f}" y="{y + 5}" width="{max(1.0, x(p75) - x(p25)):.1f}" '
            f'height="{row - 10}" class="ch-box"/>'
        )
        body.append(f'<path d="M{x(p50):.1f} {y + 5}V{y + row - 5}" class="ch-median"/>')
        mx = x(float(mean[i]))
        body.append(
            f'<path d="M{mx:.1f} {cy - 4.5}L{mx + 4.5:.1f} {cy}L{mx:.1f} {cy + 4.5}L{mx - 4.5:.1f} {cy}Z" '
            f'class="ch-mean"/></g>'
        )
    return chart_svg(
        width,
        height,
        body,
        title=_("Per-query %(measure)s per system") % {"measure": measure},
        label=_("Box plots of per-query %(measure)s per system") % {"measure": measure},
    )


# --------------------------------------------------------------------------- judging progress


def progress_chart(
    times: Sequence[datetime],
    cumulative: Sequence[int],
    *,
    model: Sequence[int] | None = None,
    goal: int | None = None,
    bucket: str = "day",
    width: int = 640,
    height: int = 220,
) -> SafeString:
    """People's cumulative judgments over time (a step line that rises in the bucket they were made), model
    judges' answers apart (a dotted step line, when there are any), and the pool's target as a dashed line.

    One function: one SVG drawn back to front (grid, axes, the two lines, the target, the labels), each part
    placed by the scales computed at its top.
    """
    left, right, top, bottom = 56, 16, 26, 36
    plot_w, plot_h = width - left - right, height - top - bottom
    models = np.asarray(model if model is not None and len(model) else np.zeros(len(times)), dtype=np.float64)
    has_model = bool(models.size and models[-1] > 0)
    heading = (
        _("Judgments people made, cumulative per hour")
        if bucket == "hour"
        else _("Judgments people made, cumulative per day")
    )
    if has_model:
        heading += " " + _("(dotted: model judges)")
    if goal:
        heading += " " + _("(dashed: pooled pairs × annotators per pair)")
    body = [f'<text x="{left}" y="15" class="ch-muted">{escape(heading)}</text>']
    if not times:
        no_judgments = _("No judgments yet")
        body.append(
            f'<text x="{left + plot_w / 2}" y="{top + plot_h / 2}" text-anchor="middle" class="ch-muted">'
            f"{escape(no_judgments)}</text>"
        )
        return chart_svg(width, height, body, title=_("Judging progress"), label=_("No judgments yet"))
    stamps = np.array([t.timestamp() for t in times], dtype=np.float64)
    counts = np.asarray(cumulative, dtype=np.float64)
    span = {"hour": 3600.0, "day": 86400.0}.get(bucket, 86400.0)
    t0, t1 = stamps[0], stamps[-1] + span
    top_count = max(float(counts[-1]), float(models[-1]) if has_model else 0.0)
    y_max = max(top_count, float(goal or 0), 1.0) * 1.1  # headroom for the labels above the lines
    ticks = nice_ticks(0.0, y_max, 4)

    def x(t: float) -> float:
        return left + plot_w * (t - t0) / (t1 - t0)

    def y(v: float) -> float:
        return top + plot_h * (1 - v / y_max)

    def steps(values: np.ndarray) -> str:
        # each count holds from the start of its bucket until the next bucket with judgments begins: the line
        # rises on the day (or hour) the judgments were made, never on an empty one before it
        pts = [f"M{x(t0):.1f} {y(0):.1f}"]
        for s, c in zip(stamps.tolist(), values.tolist(), strict=True):
            pts.append(f"H{x(s):.1f}V{y(c):.1f}")
        pts.append(f"H{x(t1):.1f}")
        return "".join(pts)

    for t in ticks:
        if t > y_max:
            continue
        body.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(t):.1f}" y2="{y(t):.1f}" class="ch-grid"/>')
        body.append(f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end" class="ch-muted">{t:,.0f}</text>')
    # x labels: up to 5, evenly spaced in time (judging comes in bursts, so bucket positions would crowd)
    tz = times[0].tzinfo
    # strftime formats: Korean reads dates year first, in numbers
    fmt = pgettext("strftime format", "%d %b %H:%M") if bucket == "hour" else pgettext("strftime format", "%d %b %Y")
    n_labels = max(2, min(5, int(round((t1 - t0) / span)) + 1))
    for i, t in enumerate(np.linspace(t0, t1, n_labels).tolist()):
        anchor = "start" if i == 0 else "end" if i == n_labels - 1 else "middle"
        body.append(
            f'<text x="{x(t):.1f}" y="{height - 12}" text-anchor="{anchor}" class="ch-muted">'
            f"{escape(datetime.fromtimestamp(t, tz).strftime(fmt))}</text>"
        )
    line = steps(counts)
    body.append(f'<path d="{line}V{y(0):.1f}Z" class="ch-area"/>')
    body.append(f'<path d="{line}" class="ch-line"/>')
    if has_model:
        body.append(f'<path d="{steps(models)}" class="ch-model"/>')
    taken: list[float] = []  # label baselines at the right edge, kept 14 px apart
    if goal:
        target = _("target %(n)s") % {"n": f"{goal:,}"}
        body.append(f'<path d="M{left} {y(goal):.1f}H{left + plot_w}" class="ch-goal"/>')
        body.append(
            f'<text x="{left + plot_w - 4}" y="{y(goal) - 5:.1f}" text-anchor="end" class="ch-goal-text">'
            f"{escape(target)}</text>"
        )
        taken.append(y(goal) - 5)

    def place(value: float) -> float:
        # above the line's end, else under it, else further down (then up) in 14 px steps until no other label at
        # the right edge is closer than 14 px (people's and a model's counts can end a few pixels apart)
        above, below = y(value) - 6, y(value) + 16
        candidates = [above, below, *(below + 14 * i for i in range(1, 6)), *(above - 14 * i for i in range(1, 6))]
        label_y = next((c for c in candidates if all(abs(c - other) >= 14 for other in taken)), above)
        taken.append(label_y)
        return label_y

    total = int(counts[-1])
    judgments_label = ngettext("%(n)s judgment by people", "%(n)s judgments by people", total) % {"n": f"{total:,}"}
    body.append(
        f'<text x="{x(t1) - 4:.1f}" y="{place(counts[-1]):.1f}" text-anchor="end" '
        f'font-weight="600">{escape(judgments_label)}</text>'
    )
    if has_model:
        n_model = int(models[-1])
        model_label = ngettext("%(n)s model judgment", "%(n)s model judgments", n_model) % {"n": f"{n_model:,}"}
        body.append(
            f'<text x="{x(t1) - 4:.1f}" y="{place(models[-1]):.1f}" text-anchor="end" class="ch-model-text">'
            f"{escape(model_label)}</text>"
        )
    return chart_svg(width, height, body, title=_("Judging progress"), label=_("Cumulative judgments over time"))


# --------------------------------------------------------------------------- head-to-head differences


def difference_chart(
    diffs: np.ndarray, *, a: str, b: str, measure: str, width: int = 640, height: int = 200, max_columns: int = 800
) -> SafeString:
    """Per-query differences a - b sorted from a's biggest win to its biggest loss, as one filled area.

    Long lists are resampled to ``max_columns`` quantiles, which keeps the shape and the file small.
    """
    left, right, top, bottom = 48, 12, 26, 24
    plot_w, plot_h = width - left - right, height - top - bottom
    d: npt.NDArray[np.floating[Any]] = np.sort(np.asarray(diffs, dtype=np.float64))[::-1]
    heading = ngettext(
        "%(measure)s: %(a)s − %(b)s per query, sorted (%(n)s query)",
        "%(measure)s: %(a)s − %(b)s per query, sorted (%(n)s queries)",
        d.size,
    ) % {"measure": measure, "a": _clip(a, 24), "b": _clip(b, 24), "n": f"{d.size:,}"}
    body = [f'<text x="{left}" y="15" class="ch-muted">{escape(heading)}</text>']
    if d.size == 0:
        return chart_svg(width, height, body, title=_("Per-query differences"), label=_("No queries"))
    if d.size > max_columns:
        d = np.quantile(d[::-1], np.linspace(1, 0, max_columns))
    lim = max(float(np.abs(d).max()), 1e-9)
    n = d.size

    def y(v: float) -> float:
        return top + plot_h / 2 * (1 - v / lim)

    for t in (-lim, 0.0, lim):
        body.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y(t):.1f}" y2="{y(t):.1f}" '
            f'class="{"ch-grid" if t else "ch-axis"}"/>'
        )
        body.append(f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end" class="ch-muted">{t:+.2f}</text>')
    col = plot_w / n
    pos = "".join(
        f"M{left + i * col:.1f} {y(0):.1f}V{y(v):.1f}h{col:.2f}V{y(0):.1f}Z" for i, v in enumerate(d.tolist()) if v > 0
    )
    neg = "".join(
        f"M{left + i * col:.1f} {y(0):.1f}V{y(v):.1f}h{col:.2f}V{y(0):.1f}Z" for i, v in enumerate(d.tolist()) if v < 0
    )
    better = _("%(system)s better")
    body.append(f'<path d="{pos}" class="ch-win"><title>{escape(better % {"system": a})}</title></path>')
    body.append(f'<path d="{neg}" class="ch-loss"><title>{escape(better % {"system": b})}</title></path>')
    # the wins are drawn on the left going up, the losses on the right going down: label the empty corners
    body.append(
        f'<text x="{left + plot_w - 4}" y="{top + 12}" text-anchor="end" class="ch-win">▲ '
        f"{escape(better % {'system': _clip(a, 30)})}</text>"
    )
    body.append(
        f'<text x="{left + 4}" y="{top + plot_h - 4}" class="ch-loss">▼ '
        f"{escape(better % {'system': _clip(b, 30)})}</text>"
    )
    return chart_svg(
        width,
        height,
        body,
        title=_("%(measure)s differences per query") % {"measure": measure},
        label=_("Sorted per-query %(measure)s differences between %(a)s and %(b)s")
        % {"measure": measure, "a": a, "b": b},
    )
