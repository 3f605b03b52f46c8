"""axe-core finds no accessibility violation on the pages annotators and leads use, on a phone and a desktop.

axe-core (vendored in tests/browser/vendor/, test-only) is injected into each page after it has loaded;
every rule of WCAG 2.0/2.1 A and AA runs, and the test names each violation with the elements it found.
Screens are also checked for a visible keyboard focus."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from judging.services.accounts import set_password_path
from tests.browser.knitwear import log_in
from tests.data import DESKTOP, PHONE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = (Path(__file__).parent / "vendor" / "axe.min.js").read_text(encoding="utf-8")
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]

LEAD_PAGES = [
    "/",
    "/campaigns/knitwear/",
    "/campaigns/knitwear/judge/",
    "/campaigns/knitwear/mine/",
    "/campaigns/knitwear/leaderboard/",
    "/campaigns/knitwear/leaderboard/queries/",
    "/campaigns/knitwear/leaderboard/significance/",
    "/campaigns/knitwear/leaderboard/compare/",
    "/campaigns/knitwear/leaderboard/trust/",
    "/campaigns/knitwear/leaderboard/curves/",
    "/campaigns/knitwear/review/",
    "/campaigns/knitwear/agreement/",
    "/campaigns/knitwear/quality/",
    "/campaigns/knitwear/progress/",
    "/campaigns/knitwear/upload/",
    "/campaigns/knitwear/members/",
    "/campaigns/knitwear/settings/",
    "/campaigns/knitwear/assignments/",
    "/campaigns/knitwear/jobs/",
    "/campaigns/knitwear/plan/",
    "/campaigns/new/",
    "/accounts/password_change/",
    "/accounts/token/",
]
ANONYMOUS_PAGES = ["/accounts/login/"]


def violations(page) -> list[str]:
    # Evaluated through the DevTools protocol, which the page's Content-Security-Policy (script-src 'self',
    # no inline scripts) does not govern: the page under test keeps its real policy.
    page.evaluate(AXE + "\n;0")
    result = page.evaluate(
        """tags => axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})""",
        TAGS,
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']} -> " + "; ".join(" ".join(node["target"]) for node in v["nodes"][:4])
        for v in result["violations"]
    ]


@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_no_axe_violations(live_server, new_page, judged, size):
    page, watch = new_page(**(PHONE if size == "phone" else DESKTOP))
    found = {}
    # The first page a new annotator sees: the one-time link a lead passed on (dora has not used hers).
    users = get_user_model().objects
    link = set_password_path(user=users.get(username="dora"), by=users.get(username="lena"))
    for path in [*ANONYMOUS_PAGES, link]:
        page.goto(live_server.url + path)
        found[path] = violations(page)
    assert page.locator("#id_new_password1").count() == 1
    log_in(page, live_server.url, "lena", "lena-pw-secret-1")
    for path in LEAD_PAGES:
        page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
        found[path] = violations(page)
    bad = {path: v for path, v in found.items() if v}
    assert not bad, "\n".join(f"{path}: {item}" for path, items in bad.items() for item in items)
    assert watch.errors == []


@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_guidelines_headings_keep_the_judging_page_in_order(live_server, new_page, judged, size):
    """Guidelines written with "##" sections and "###" grades (as both demos' are) under the judging page's
    h1 (the query) and h2 (the document): axe-core's heading-order finds no skipped level."""
    judged.guidelines = "## What to judge\n\nThe product.\n\n## Grades\n\n### 2 Relevant\n\nAll of it.\n"
    judged.save(update_fields=["guidelines"])
    page, watch = new_page(**(PHONE if size == "phone" else DESKTOP))
    log_in(page, live_server.url, "lena", "lena-pw-secret-1", then="/campaigns/knitwear/judge/")
    found = {}
    for path in ("/campaigns/knitwear/judge/", "/campaigns/knitwear/"):
        page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
        page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
        found[path] = violations(page)
    assert found == {path: [] for path in found}
    assert watch.errors == []


def test_keyboard_focus_is_visible(live_server, new_page, judged):
    page, _ = new_page(**DESKTOP)
    log_in(page, live_server.url, "lena", "lena-pw-secret-1", then="/campaigns/knitwear/")
    for _ in range(3):
        page.keyboard.press("Tab")
        outline = page.evaluate(
            "() => { const s = getComputedStyle(document.activeElement);"
            " return [document.activeElement.tagName, s.outlineStyle, parseFloat(s.outlineWidth)]; }"
        )
        assert outline[0] in ("A", "BUTTON", "INPUT", "SELECT", "SUMMARY", "TEXTAREA")
        assert outline[1] != "none" and outline[2] >= 2, outline
