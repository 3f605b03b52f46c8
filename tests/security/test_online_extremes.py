"""Online figures at the ends of the float range draw a chart, never a 500, for leads and for annotators who
may see the leaderboard; inf and NaN never reach a chart."""

from __future__ import annotations

import math

import pytest

from judging.charts.online import scatter_svg
from judging.services import qrels_import, run_import
from judging.services.online import online_import

RUN = "q1 Q0 d1 1 3 bm25\nq1 Q0 d2 2 2 bm25\nq1 Q0 d2 1 3 dense\nq1 Q0 d1 2 2 dense\n"


@pytest.fixture
def two_systems(campaign, annotator):
    run_import(campaign=campaign, data=RUN.encode(), filename="runs.trec")
    qrels_import(campaign=campaign, data=b"q1 0 d1 2\nq1 0 d2 0\n", filename="q.qrels", annotator=annotator)
    return campaign


@pytest.mark.parametrize(
    "figures",
    [
        "bm25,ctr,1e308\n",  # the metric's only figure, huge
        "bm25,ctr,1e308\ndense,ctr,1e308\n",
        "bm25,ctr,-1.7e308\ndense,ctr,1.7e308\n",
        "bm25,ctr,5e-324\ndense,ctr,0\n",
    ],
)
def test_online_page_with_extreme_figures_draws_a_chart(client, two_systems, lead, annotator, figures):
    online_import(campaign=two_systems, data=figures.encode(), filename="o.csv")
    two_systems.leaderboard_visible_to_annotators = True
    two_systems.save(update_fields=["leaderboard_visible_to_annotators"])
    for user in (lead, annotator):
        client.force_login(user)
        page = client.get("/campaigns/demo/online/")
        assert page.status_code == 200, user
        assert "<svg" in page.content.decode()


@pytest.mark.parametrize(
    "values",
    [[1e308], [1e308, 1e308], [-1.7976931348623157e308, 1.7976931348623157e308], [0.0, 5e-324], [-3.0, 7.5]],
)
def test_scatter_puts_every_finite_point_inside_the_frame(values):
    points = [{"system": f"s{i}", "offline": v, "online": v} for i, v in enumerate(values)]
    svg = str(scatter_svg(points, [], x_name="ndcg", y_name="ctr"))
    import re

    xs = [float(x) for x in re.findall(r'<circle cx="([^"]+)"', svg)]
    ys = [float(y) for y in re.findall(r'<circle cx="[^"]+" cy="([^"]+)"', svg)]
    assert len(xs) == len(values)
    assert all(58 <= x <= 300 - 14 for x in xs), xs
    assert all(14 <= y <= 220 - 38 for y in ys), ys


def test_scatter_leaves_out_inf_and_nan():
    points = [
        {"system": "a", "offline": 0.5, "online": 1.0},
        {"system": "b", "offline": 0.4, "online": math.inf},
        {"system": "c", "offline": math.nan, "online": 2.0},
        {"system": "d", "offline": 0.3, "online": 3.0},
    ]
    svg = str(scatter_svg(points, [], x_name="ndcg", y_name="ctr"))
    assert svg.count("<circle") == 2 and "inf" not in svg and "nan" not in svg
    assert str(scatter_svg(points[1:3], [], x_name="ndcg", y_name="ctr")) == ""
