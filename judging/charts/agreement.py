"""Server-rendered SVG pictures for the agreement page: confusion-matrix heatmaps (no JavaScript, no CDN).

Every function takes plain numbers and names and returns markup that is safe to put in a template: each
name and grade it draws is escaped here.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString
from django.utils.translation import ngettext

from judging.charts.svg import clip, svg

CELL = 46
NAME_CHARS = 18


def _short(name: str) -> str:
    return clip(name, NAME_CHARS)


def _shade(count: int, top: int, diagonal: bool) -> tuple[str, str]:
    """CSS classes of a cell and of its count: 9 steps of the count relative to the largest cell.

    Agreement (the diagonal) in blues, disagreement in oranges (``ch-b1`` .. ``ch-b8``, ``ch-o1`` ..
    ``ch-o8``): the eye finds the off-diagonal hot spots, which are what a lead reads a confusion matrix for.
    """
    if count <= 0 or top <= 0:
        return "ch-empty", "ch-muted"
    step = 1 + min(7, int(count / top * 8))  # 1..8: a non-empty cell is never white
    return f"ch-{'b' if diagonal else 'o'}{step}", "ch-on-dark" if step >= 5 else ""


def confusion_svg(
    matrix: Sequence[Sequence[int]],
    categories: Sequence[int],
    *,
    row_name: str,
    col_name: str,
    grade_names: dict[int, str] | None = None,
) -> SafeString:
    """A C x C heatmap of two annotators' grades: rows are ``row_name``'s grade, columns ``col_name``'s.

    Each cell shows its count; its tooltip says what the cell means in words. The diagonal (both gave the
    same grade) is drawn in blues, the rest in oranges, each shaded by the count relative to the largest cell.
    """
    cats = [int(c) for c in categories]
    n_cat = len(cats)
    counts = [[int(v) for v in row] for row in matrix] if matrix else [[0] * n_cat for _ in cats]
    total = sum(map(sum, counts))
    top = max((v for row in counts for v in row), default=0)
    names = grade_names or {}
    left, top_margin = 64, 50
    width, height = left + n_cat * CELL + 8, top_margin + n_cat * CELL + 8
    a, b = escape(_short(row_name)), escape(_short(col_name))
    body = [
        # column axis: the second annotator's grades, across the top
        f'<text x="{left + n_cat * CELL / 2:.0f}" y="14" text-anchor="middle" font-weight="600">{b} →</text>',
        # row axis: the first annotator's grades, down the side
        f'<text transform="translate(14 {top_margin + n_cat * CELL / 2:.0f}) rotate(-90)" text-anchor="middle" '
        f'font-weight="600">{a} →</text>',
    ]
    for j, c in enumerate(cats):
        body.append(
            f'<text x="{left + j * CELL + CELL / 2:.0f}" y="{top_margin - 8}" text-anchor="middle" '
            f'class="ch-muted">{c}</text>'
        )
    for i, r in enumerate(cats):
        y = top_margin + i * CELL
        body.append(f'<text x="{left - 8}" y="{y + CELL / 2 + 4:.0f}" text-anchor="end" class="ch-muted">{r}</text>')
        for j, c in enumerate(cats):
            x = left + j * CELL
            count = counts[i][j] if i < len(counts) and j < len(counts[i]) else 0
            fill, ink = _shade(count, top, i == j)
            share = f" ({count / total:.0%})" if total else ""
            tip = ngettext(
                "%(a)s gave %(ga)s, %(b)s gave %(gb)s: %(n)d pair%(share)s",
                "%(a)s gave %(ga)s, %(b)s gave %(gb)s: %(n)d pairs%(share)s",
                count,
            ) % {
                "a": _short(row_name),
                "ga": f"{r} – {names[r]}" if r in names else r,
                "b": _short(col_name),
                "gb": f"{c} – {names[c]}" if c in names else c,
                "n": count,
                "share": share,
            }
            body.append(
                f"<g><title>{escape(tip)}</title>"
                f'<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" class="ch-cell {fill}"/>'
                f'<text x="{x + CELL / 2:.0f}" y="{y + CELL / 2 + 5:.0f}" text-anchor="middle" class="{ink}" '
                f'font-size="14" font-weight="{600 if count else 400}">{count}</text></g>'
            )
    # the diagonal's outline, so agreement reads as one stripe whatever the shades
    outline = " ".join(f"M{left + k * CELL} {top_margin + k * CELL}h{CELL}v{CELL}h-{CELL}z" for k in range(n_cat))
    body.append(f'<path d="{outline}" class="ch-diagonal"/>')
    diagonal = sum(counts[k][k] for k in range(min(n_cat, len(counts))))
    label = ngettext(
        "Confusion matrix of %(a)s (rows) against %(b)s (columns) over %(n)d pair both graded; "
        "they gave the same grade to %(same)d.",
        "Confusion matrix of %(a)s (rows) against %(b)s (columns) over %(n)d pairs both graded; "
        "they gave the same grade to %(same)d.",
        total,
    ) % {"a": row_name, "b": col_name, "n": total, "same": diagonal}
    return svg(width, height, body, title=label, label=label, cls="rv-confusion")
