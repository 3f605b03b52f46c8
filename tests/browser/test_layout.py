"""What a lead and an annotator see at 1366 px and on a 390 px phone: the leaderboard's default columns fit,
names appear as written, chart names fit the chart, and the phone pages keep their controls in reach."""

from __future__ import annotations

import numpy as np
import pytest

from judging.charts.leaderboard import bar_chart, distribution_chart
from tests.browser.knitwear import log_in
from tests.data import DESKTOP, PHONE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BOARD = "/campaigns/knitwear/leaderboard/"
# the pages' sans-serif (app.css --sans): what the charts' names are drawn in
SANS = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans CJK KR", sans-serif'


def test_leaderboard_fits_1366_px_and_what_does_not_fit_scrolls_visibly(live_server, new_page, judged):
    page, watch = new_page(**DESKTOP)
    log_in(page, live_server.url, "lena", "lena-pw-secret-1", then=BOARD)
    page.wait_for_selector(".lb-live .lb-table")
    box = ".lb-live .table-wrap"
    fit = page.evaluate(
        """box => { const w = document.querySelector(box), t = w.querySelector('table');
        const last = t.querySelector('thead th:last-child').getBoundingClientRect();
        return [t.scrollWidth, w.clientWidth, last.right <= w.getBoundingClientRect().right, w.dataset.more || ''] }""",
        box,
    )
    assert fit[0] <= fit[1] and fit[2], fit  # every default column, Judged@k and Answered included, on screen
    assert fit[3] == ""  # nothing to fade
    # A narrower window: the table scrolls inside its box, with a scroll bar and its right edge faded.
    page.set_viewport_size({"width": 900, "height": 900})
    page.wait_for_function(f"() => document.querySelector('{box}').dataset.more === 'right'")
    cue = page.evaluate(
        """box => { const w = document.querySelector(box), s = getComputedStyle(w);
        return [s.overflowX, s.maskImage || s.webkitMaskImage, w.offsetHeight - w.clientHeight] }""",
        box,
    )
    assert cue[0] == "auto" and "gradient" in cue[1] and cue[2] > 0, cue  # a visible scroll bar takes room
    page.eval_on_selector(box, "w => { w.scrollLeft = w.scrollWidth; w.dispatchEvent(new Event('scroll')); }")
    assert page.eval_on_selector(box, "w => w.dataset.more") == "left"
    assert watch.errors == []


def test_names_are_shown_as_written(live_server, new_page, judged):
    """System, measure and judge names are data: no CSS rule changes their case."""
    page, _ = new_page(**DESKTOP)
    log_in(page, live_server.url, "lena", "lena-pw-secret-1", then=BOARD)
    page.wait_for_selector(".lb-live .lb-table")
    heads = page.eval_on_selector_all(".lb-table thead th", "ths => ths.map(th => th.innerText.trim())")
    assert "nDCG@10" in heads and "Judged@10" in heads and "bpref" in heads, heads
    systems = page.eval_on_selector_all(".lb-table .lb-system", "ths => ths.map(th => th.innerText.trim())")
    assert {s.lstrip("★ ") for s in systems} == {"alpha", "beta-with-a-long-system-name"}
    for path in (BOARD, "/campaigns/knitwear/agreement/", "/campaigns/knitwear/quality/", "/"):
        page.goto(live_server.url + path)
        cases = page.eval_on_selector_all(
            "th, td, .eyebrow", "els => [...new Set(els.map(e => getComputedStyle(e).textTransform))]"
        )
        assert cases == ["none"], (path, cases)


def test_chart_names_fit_or_are_shortened_with_the_whole_name_as_tooltip(live_server, new_page, judged):
    page, _ = new_page(**DESKTOP)
    log_in(page, live_server.url, "lena", "lena-pw-secret-1", then=BOARD)
    page.wait_for_selector(".lb-chart-wide svg")
    for size in (DESKTOP, PHONE):
        page.set_viewport_size({"width": size["width"], "height": size["height"]})
        chart = ".lb-chart-wide svg" if size is DESKTOP else ".lb-chart-narrow svg"
        labels = page.eval_on_selector_all(
            chart + " text[text-anchor='end']",
            """ts => ts.map(t => [t.getBBox().x,
                [...t.childNodes].filter(n => n.nodeType === 3).map(n => n.data).join(''),
                (t.querySelector('title') || {}).textContent || ''])""",
        )
        assert labels, chart
        for x, text, tip in labels:
            assert x >= 0, (chart, text, x)  # nothing cut at the chart's left edge
            if text.endswith("…"):
                assert tip == "beta-with-a-long-system-name" and tip.startswith(text[:-1])
        if size is PHONE:  # a third of a phone's chart for the names: the long one is shortened there
            assert any(text.endswith("…") for _, text, _ in labels), labels


@pytest.mark.parametrize("chart", ["bars", "boxes"])
def test_capital_and_hangul_names_fit_left_of_the_plot(new_page, chart):
    """Names in capitals and in Hangul are the widest per character: none may start left of the chart."""
    names = ["STANDARD", "ONLY302", "WWW-MMM-BASELINE-2026", "밀집-검색-기본형-시스템", "bm25"]
    if chart == "bars":
        svg = bar_chart(names, [0.5, 0.4, 0.3, 0.2, 0.1], measure="nDCG@10", width=900)
    else:
        svg = distribution_chart(names, np.linspace(0, 1, 50).reshape(5, 10), measure="nDCG@10")
    page, _ = new_page(**DESKTOP)
    page.set_content(f'<html lang="ko"><style>svg {{ font: 12px {SANS}; }}</style><body>{svg}</body></html>')
    labels = page.eval_on_selector_all(
        "svg text[text-anchor='end']", "ts => ts.map(t => [t.getBBox().x, t.getBBox().width, t.textContent])"
    )
    assert len(labels) == len(names)
    assert all(x >= 0 for x, _, _ in labels), labels


def test_phone_home_header_and_folded_leaderboard_settings(live_server, new_page, judged):
    page, watch = new_page(**PHONE)
    log_in(page, live_server.url, "ann", "ann-pw-secret-1")
    button = page.locator("table.campaigns .button").first.bounding_box()
    assert button["x"] >= 0 and button["x"] + button["width"] <= 390  # the Judge button whole on screen
    cell = page.locator("table.campaigns td.campaign").first.bounding_box()
    assert cell["width"] > 300  # the name and description across the width, not a word per line
    page.goto(live_server.url + "/campaigns/knitwear/mine/")
    name = page.locator(".campaign-nav .campaign-name")
    shown = name.bounding_box()
    nav = page.locator(".campaign-nav").bounding_box()
    assert shown["x"] >= nav["x"] - 1 and name.inner_text() == "Knitwear search"  # its start always in view
    assert page.eval_on_selector(".campaign-nav .campaign-name", "e => getComputedStyle(e).textOverflow") == "ellipsis"
    page.context.close()

    page, watch = new_page(**PHONE)
    log_in(page, live_server.url, "lena", "lena-pw-secret-1", then=BOARD)
    fold = page.locator("details.lb-fold")
    assert fold.evaluate("d => d.open") is False
    assert not page.is_visible("form.lb-controls select[name=measure]")
    assert page.locator("details.lb-fold > summary").bounding_box()["y"] < 844  # the table's settings fold
    page.locator("details.lb-fold > summary").click()
    assert page.is_visible("form.lb-controls select[name=measure]")
    assert watch.errors == []
