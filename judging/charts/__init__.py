"""Server-rendered SVG charts: the leaderboard's pictures and the agreement page's confusion matrices."""

from judging.charts.agreement import confusion_svg  # noqa: F401
from judging.charts.curves import CURVE_SERIES, curve_chart, interval_bar  # noqa: F401
from judging.charts.leaderboard import (  # noqa: F401
    bar_chart,
    difference_chart,
    distribution_chart,
    heat_class,
    heat_classes,
    message_chart,
    nice_ticks,
    progress_chart,
)
from judging.charts.svg import standalone  # noqa: F401
