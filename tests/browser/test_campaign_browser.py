"""A lead who is not a superuser runs a campaign in the browser alone, and the pages work on a phone.

Screenshots land in tests/browser/screenshots/ (phone: 390x844 with touch; desktop: 1366x900)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from judging.models import Judgment, Membership
from tests.browser.knitwear import DOCS, GUIDELINES, RUN_A, RUN_B, TOPICS, log_in
from tests.data import DESKTOP, PHONE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NEW_PASSWORD = "knit-one-purl-two-42"


def too_wide(page, width: int) -> list[str]:
    """Elements that stick out of a screen ``width`` px wide, making the page itself scroll sideways (wide
    tables scroll inside their own box instead). A phone's browser widens its layout viewport to fit such
    content, so the check is against the device's width, not window.innerWidth."""
    return page.evaluate(
        """width => {
            if (document.documentElement.scrollWidth <= width + 1) return [];
            const clipped = el => {
                for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
                    if (getComputedStyle(a).overflowX !== 'visible') return true;
                }
                return false;
            };
            const out = [];
            for (const el of document.querySelectorAll('body *')) {
                const r = el.getBoundingClientRect();
                if (r.right > width + 1 && r.width > 0 && !clipped(el)) {
                    out.push(el.tagName.toLowerCase() + (el.className && typeof el.className === 'string'
                        ? '.' + el.className.trim().split(/\\s+/).join('.') : '') + ' ' + Math.round(r.right));
                }
            }
            // Something wider than the screen that no element above accounts for (an absolutely positioned
            // child of a scroll box that is not its containing block escapes its clipping) still counts.
            return out.length ? out.slice(0, 8) : ['document ' + document.documentElement.scrollWidth + 'px wide'];
        }""",
        width,
    )


def fits(page, width: int = 390) -> bool:
    return not too_wide(page, width)


def upload(page, kind: str, name: str, text: str) -> str:
    page.set_input_files(
        f"#upload-{kind} input[type=file]", files=[{"name": name, "mimeType": "text/plain", "buffer": text.encode()}]
    )
    page.click(f"#upload-{kind} button[type=submit]")
    page.wait_for_load_state()
    return page.inner_text(".messages")


def in_view(page, selector: str) -> bool:
    return page.evaluate(
        """sel => { const r = document.querySelector(sel).getBoundingClientRect();
                    return r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0; }""",
        selector,
    )


def test_lead_runs_a_campaign_from_creation_to_export(live_server, new_page, screenshot):
    User = get_user_model()
    lena = User.objects.create_user("lena", password="lena-pw-secret-1")
    lena.user_permissions.add(Permission.objects.get(codename="add_campaign"))
    assert not lena.is_superuser and not lena.is_staff
    base = live_server.url
    page, watch = new_page(**DESKTOP)
    log_in(page, base, "lena", "lena-pw-secret-1")

    # Create the campaign.
    page.click("text=New campaign")
    page.fill("#id_slug", "knitwear")
    page.fill("#id_name", "Knitwear search")
    page.fill("#id_guidelines", GUIDELINES)
    page.fill("#id_pool_depth", "3")
    screenshot(page, "20-desktop-new-campaign", full_page=True)
    page.click("text=Create campaign")
    page.wait_for_url(f"{base}/campaigns/knitwear/settings/")
    page.goto(base + "/campaigns/knitwear/")
    assert "Getting this campaign ready" in page.inner_text("main")
    assert "Campaign complete" not in page.inner_text("main")
    screenshot(page, "21-desktop-empty-campaign", full_page=True)

    # Import queries, documents and two runs: one message per upload.
    page.goto(base + "/campaigns/knitwear/upload/")
    assert "2 queries" in upload(page, "topics", "topics.tsv", TOPICS) or page.locator(".message").count() == 1
    assert page.locator(".message.success").count() == 1
    upload(page, "docs", "docs.jsonl", DOCS)
    upload(page, "run", "alpha.run", RUN_A)
    upload(page, "run", "beta.run", RUN_B)
    assert page.locator(".form-error").count() == 0

    # Add an annotator who has no account yet, and read the one-time link meant for them.
    page.goto(base + "/campaigns/knitwear/members/")
    page.fill("#id_username", "dave")
    page.fill("#id_name", "Dave Lee")
    page.click("section[aria-labelledby=add-one] button[type=submit]")
    link = page.input_value(".link-box")
    assert "/accounts/set-password/" in link
    screenshot(page, "22-desktop-members-link", full_page=True)

    # Dave, on his phone, sets his password and judges every pair by tapping.
    phone, phone_watch = new_page(**PHONE)
    phone.goto(link)
    phone.wait_for_selector("#id_new_password1")
    screenshot(phone, "23-phone-set-password")
    phone.fill("#id_new_password1", NEW_PASSWORD)
    phone.fill("#id_new_password2", NEW_PASSWORD)
    phone.click("button[type=submit]")
    phone.wait_for_selector("text=Your password is set")
    phone.wait_for_selector("text=You are logged in as")  # setting the password logged Dave in
    phone.goto(base + "/campaigns/knitwear/judge/")
    phone.wait_for_selector("#judge .workspace[data-pair-id]")
    assert phone.locator("#guidelines-panel h3", has_text="What counts").count() == 1  # Markdown rendered
    grades = {"d1": "2", "d2": "0", "d3": "1", "d4": "2"}
    judged = 0
    while phone.locator("#judge-form").count():
        before = phone.get_attribute("#judge .workspace", "data-pair-id")
        docid = phone.inner_text(".doc-meta .mono")
        phone.wait_for_timeout(350)  # the page ignores grades for 300 ms after a new document appears
        phone.tap(f'button.grade[data-grade="{grades[docid]}"]')
        phone.wait_for_function(
            "b => { const w = document.querySelector('#judge .workspace'); return w && w.dataset.pairId !== b; }",
            arg=before,
        )
        judged += 1
        assert judged < 20
    assert judged == 5  # q1: d1 d2 d3, q2: d2 d4
    assert Judgment.objects.filter(annotator__username="dave").count() == 5
    screenshot(phone, "24-phone-done")
    assert phone.evaluate("() => window.__xss === undefined")

    # The lead sees the leaderboard and downloads every export from the browser.
    page.goto(base + "/campaigns/knitwear/leaderboard/")
    page.wait_for_selector(".lb-table")
    screenshot(page, "25-desktop-leaderboard", full_page=True)
    downloads = {}
    for text in ("Qrels (TREC)", "Judgments (CSV)", "Judgments (JSONL)", "Leaderboard (CSV)", "alpha"):
        with page.expect_download() as info:
            page.click(f".exports a:text-is('{text}')")
        downloads[text] = Path(info.value.path()).read_text(encoding="utf-8")
    assert downloads["Qrels (TREC)"].splitlines() == ["q1 0 d1 2", "q1 0 d2 0", "q1 0 d3 1", "q2 0 d2 0", "q2 0 d4 2"]
    assert downloads["Judgments (CSV)"].count("\n") == 6 and "dave" in downloads["Judgments (CSV)"]
    assert len(downloads["Judgments (JSONL)"].splitlines()) == 5
    board = downloads["Leaderboard (CSV)"].splitlines()
    assert board[0].startswith("system,") and len(board) == 3
    assert downloads["alpha"].splitlines()[0] == "q1 Q0 d1 1 9.0 alpha"
    assert watch.errors == [] and phone_watch.errors == []
    assert Membership.objects.get(user__username="dave").role == "annotator"


def test_phone_judging_shows_query_document_and_grades_together(live_server, new_page, screenshot, judged):
    page, watch = new_page(**PHONE)
    log_in(page, live_server.url, "bob", "bob-pw-secret-1", then="/campaigns/knitwear/judge/")
    page.wait_for_selector("#judge .workspace[data-pair-id]")
    screenshot(page, "30-phone-judge")
    assert in_view(page, ".query-text") and in_view(page, ".doc-title") and in_view(page, ".grades")
    assert page.evaluate("() => document.querySelector('.doc-text p').getBoundingClientRect().top") < 844 - 200
    sizes = page.evaluate(
        "() => [...document.querySelectorAll('button.grade, #note, .unsure-row .check')]"
        ".map(b => [b.getBoundingClientRect().width, b.getBoundingClientRect().height])"
    )
    assert sizes and all(w >= 44 and h >= 44 for w, h in sizes), sizes
    # No keyboard hints on a touch screen.
    assert not page.is_visible("[data-shortcuts]") and not page.is_visible(".hint-keys")
    assert page.is_visible(".hint-touch")
    assert fits(page)
    # Reading down a long document, then grading: the next query comes into view, not the top of the page.
    page.evaluate("() => window.scrollTo(0, 400)")
    before = page.get_attribute("#judge .workspace", "data-pair-id")
    page.wait_for_timeout(350)
    page.tap('button.grade[data-grade="1"]')
    page.wait_for_function("b => document.querySelector('#judge .workspace').dataset.pairId !== b", arg=before)
    assert in_view(page, ".query-text") and in_view(page, ".grades")
    assert page.evaluate("() => window.scrollY") > 0  # the header stays out of the way
    screenshot(page, "31-phone-judge-next")
    # Without scrolling, nothing moves at all.
    page.evaluate("() => window.scrollTo(0, 0)")
    before = page.get_attribute("#judge .workspace", "data-pair-id")
    page.wait_for_timeout(350)
    page.tap('button.grade[data-grade="0"]')
    page.wait_for_function("b => document.querySelector('#judge .workspace').dataset.pairId !== b", arg=before)
    assert page.evaluate("() => window.scrollY") == 0
    assert watch.errors == []


def test_desktop_judging_shows_keyboard_hints(live_server, new_page, screenshot, judged):
    page, watch = new_page(**DESKTOP)
    log_in(page, live_server.url, "bob", "bob-pw-secret-1", then="/campaigns/knitwear/judge/")
    page.wait_for_selector("#judge .workspace[data-pair-id]")
    assert page.is_visible("[data-shortcuts]") and page.is_visible(".hint-keys")
    screenshot(page, "32-desktop-judge")
    assert watch.errors == []


LEAD_PAGES = [
    ("home", "/"),
    ("overview", "/campaigns/knitwear/"),
    ("leaderboard", "/campaigns/knitwear/leaderboard/"),
    ("queries", "/campaigns/knitwear/leaderboard/queries/"),
    ("significance", "/campaigns/knitwear/leaderboard/significance/"),
    ("review", "/campaigns/knitwear/review/"),
    ("agreement", "/campaigns/knitwear/agreement/"),
    ("quality", "/campaigns/knitwear/quality/"),
    ("progress", "/campaigns/knitwear/progress/"),
    ("upload", "/campaigns/knitwear/upload/"),
    ("members", "/campaigns/knitwear/members/"),
    ("settings", "/campaigns/knitwear/settings/"),
    ("mine", "/campaigns/knitwear/mine/"),
]


@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_lead_pages_fit_the_screen(live_server, new_page, screenshot, judged, size):
    page, watch = new_page(**(PHONE if size == "phone" else DESKTOP))
    log_in(page, live_server.url, "lena", "lena-pw-secret-1")
    wide = []
    for n, (name, path) in enumerate(LEAD_PAGES):
        page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
        screenshot(page, f"4{n:02d}-{size}-{name}", full_page=True)
        width = PHONE["width"] if size == "phone" else DESKTOP["width"]
        if not fits(page, width):
            wide.append((name, too_wide(page, width)))
    assert wide == []
    if size == "phone":
        # The navigation is one line, not a third of the screen.
        assert page.evaluate("() => document.querySelector('.topbar').getBoundingClientRect().height") < 110
    assert watch.errors == []


@pytest.mark.parametrize("language", ["en", "ko"])
def test_lead_navigation_is_two_rows_at_1366_with_a_long_campaign_name(
    live_server, new_page, screenshot, judged, language
):
    """At 1366 px a lead's campaign navigation (name and 13 pages) wrapped to three rows with the demo's long
    name: the name is cut with an ellipsis (whole in its title) and the links sit on two rows at most."""
    from judging.models import Campaign

    long_name = "Product search — apparel & outdoor, spring and summer collection 2026"
    Campaign.objects.filter(slug="knitwear").update(name=long_name)
    page, watch = new_page(**DESKTOP)
    log_in(page, live_server.url, "lena", "lena-pw-secret-1")
    if language == "ko":
        page.goto(live_server.url + "/campaigns/knitwear/")
        page.click(".language-switch button.link")
    page.goto(live_server.url + "/campaigns/knitwear/settings/")
    page.wait_for_load_state("networkidle")
    screenshot(page, f"48-desktop-navigation-{language}")
    tops = page.eval_on_selector_all(".campaign-nav a", "links => links.map(a => a.getBoundingClientRect().top)")
    rows = len({round(top) for top in tops})
    assert rows <= 2, rows
    name = page.locator(".campaign-nav .campaign-name")
    assert name.get_attribute("title") == long_name
    assert watch.errors == []


def test_leaderboard_bar_chart_is_whole_on_a_phone(live_server, new_page, screenshot, judged):
    page, watch = new_page(**PHONE)
    log_in(page, live_server.url, "lena", "lena-pw-secret-1", then="/campaigns/knitwear/leaderboard/")
    page.wait_for_selector(".lb-table")
    figure = page.locator(".lb-figure", has=page.locator(".lb-chart-narrow"))
    figure.scroll_into_view_if_needed()
    screenshot(page, "34-phone-leaderboard-chart")
    # The chart drawn for a phone is the one shown, whole inside its card: no bar cut off at the edge.
    assert page.is_visible(".lb-chart-narrow svg") and not page.is_visible(".lb-chart-wide svg")
    box = figure.evaluate("f => [f.scrollWidth, f.clientWidth]")
    assert box[0] <= box[1], box
    font = page.evaluate(
        "() => { const s = document.querySelector('.lb-chart-narrow svg');"
        " return 12 * s.getBoundingClientRect().width / s.viewBox.baseVal.width; }"
    )
    assert font >= 10  # its 12 px labels are not shrunk to unreadable
    assert watch.errors == []


def test_review_counters_follow_a_decision_without_reload(live_server, new_page, screenshot, judged):
    page, watch = new_page(**DESKTOP)
    log_in(page, live_server.url, "lena", "lena-pw-secret-1", then="/campaigns/knitwear/review/")
    assert page.inner_text("#rv-count-all") == "1" and page.inner_text("#rv-count-decided") == "0"
    page.evaluate("() => { window.__sameDocument = true; }")  # gone if the page reloads
    page.click(".rv-item button.rv-grade-button[value='1']")
    page.wait_for_function("() => document.querySelector('#rv-count-decided').textContent === '1'")
    assert page.inner_text("#rv-count-all") == "0" and page.inner_text("#rv-count-unsure") == "0"
    assert page.evaluate("() => window.__sameDocument === true")
    screenshot(page, "33-desktop-review-decided")
    assert watch.errors == []
