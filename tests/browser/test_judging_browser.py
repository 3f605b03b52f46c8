"""An annotator judges in a real browser with the keyboard alone; the database holds exactly what they did."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from judging.models import Judgment, Pair
from judging.services import (
    campaign_create,
    documents_import,
    judgment_record,
    membership_add,
    queries_import,
    run_import,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

GUIDELINES = (
    "Judge the document against what the searcher wanted, as the description says.\n\n"
    "A product page for the exact item is highly relevant; a related item is partially relevant."
)
TOPICS = (
    "q1\twool knit sweater\tA warm sweater knitted from wool; cardigans count, cotton does not.\n"
    "q2\train jacket\tA waterproof jacket for walking in the rain.\n"
)
XSS_TITLE = '<img src=x onerror="window.__xss=1">Sweater care'
XSS_TEXT = (
    "How to wash wool. <script>window.__xss=2; alert('xss')</script> Use cold water "
    "<img src=nope onerror=\"window.__xss=3; alert('img')\"> and lay it flat to dry."
)


def doc(docid: str, title: str, text: str, url: str = "") -> str:
    return json.dumps({"docid": docid, "title": title, "text": text, "url": url}) + "\n"


DOCS = "".join(
    [
        doc(
            "d1",
            "Merino wool crew-neck sweater",
            "A soft merino knit in six colours. " * 12,
            "https://shop.example/merino-sweater",
        ),
        doc("d2", "Cotton T-shirt", "Light, breathable cotton for summer days. " * 8),
        doc("d3", "Chunky cable-knit wool cardigan", "Hand-knitted from British wool, with horn buttons. " * 10),
        doc("d4", "Packable rain shell", "A waterproof, breathable shell that folds into its own pocket. " * 9),
        doc("d5", "Wool socks, pack of three", "Warm socks for hiking boots. " * 6),
        doc("x1", XSS_TITLE, XSS_TEXT, "javascript:alert('url')"),
    ]
)
RUN = "".join(
    f"{q} Q0 {d} {r} {10 - r} sys\n"
    for q, docs in (("q1", ["d1", "d3", "x1", "d2", "d5"]), ("q2", ["d4", "d2", "d5"]))
    for r, d in enumerate(docs, start=1)
)


@pytest.fixture
def setup(db):
    User = get_user_model()
    campaign = campaign_create(slug="knitwear", name="Knitwear search", pool_depth=10, guidelines=GUIDELINES)
    users = {}
    for name in ("ann", "bob"):
        users[name] = User.objects.create_user(username=name, password=f"pw-{name}-secret")
        membership_add(campaign=campaign, user=users[name], role="annotator")
    queries_import(campaign=campaign, data=TOPICS.encode(), filename="topics.tsv")
    documents_import(campaign=campaign, data=DOCS.encode(), filename="docs.jsonl")
    run_import(campaign=campaign, data=RUN.encode(), filename="sys.run")
    return campaign, users


def log_in(page, base: str, username: str, password: str, *, then: str) -> None:
    page.goto(base + then)
    assert "/accounts/login/" in page.url
    # Keyboard only: the username field has the focus (wait for autofocus: on a loaded machine the first
    # keys could otherwise arrive before it and go nowhere).
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'id_username'")
    page.keyboard.type(username)
    page.keyboard.press("Tab")
    page.keyboard.type(password)
    page.keyboard.press("Enter")
    page.wait_for_url(base + then)


def shown(page) -> int | None:
    value = page.get_attribute("#judge .workspace", "data-pair-id")
    return int(value) if value else None


def press_and_wait(page, key: str, *, before: int) -> int | None:
    """Press a key that moves on, wait for the next pair, and give the annotator a moment to read it
    (the page ignores grade keys for 300 ms after a new document appears)."""
    page.keyboard.press(key)
    page.wait_for_function(
        "before => { const w = document.querySelector('#judge .workspace');"
        " return w && w.dataset.pairId !== String(before); }",
        arg=before,
    )
    page.wait_for_timeout(400)
    return shown(page)


def no_xss(page) -> bool:
    return page.evaluate("() => window.__xss === undefined")


def test_annotator_judges_with_the_keyboard_alone(live_server, new_page, screenshot, setup):
    campaign, users = setup
    base = live_server.url
    judge = f"/campaigns/{campaign.slug}/judge/"
    page, watch = new_page()
    log_in(page, base, "ann", "pw-ann-secret", then=judge)
    page.wait_for_selector("#judge .workspace[data-pair-id]")
    page.wait_for_timeout(400)
    screenshot(page, "01-judging-page")

    a = shown(page)
    b = press_and_wait(page, "2", before=a)  # A: highly relevant

    # B: unsure, with a tentative grade and a note, all from the keyboard.
    page.keyboard.press("u")
    assert page.is_checked("#unsure")
    page.keyboard.press("n")
    assert page.evaluate("() => document.activeElement.id") == "note"
    page.keyboard.type("Not sure: the brand is not named anywhere.")
    page.keyboard.press("Escape")
    screenshot(page, "02-unsure-with-note")
    c = press_and_wait(page, "1", before=b)

    d = press_and_wait(page, "0", before=c)  # C: not relevant

    # Back to C and change it; the page goes forward again to D.
    back = press_and_wait(page, "Backspace", before=d)
    assert back == c
    assert "Your judgment" in page.inner_text("#judge")
    screenshot(page, "03-back-to-change")
    again = press_and_wait(page, "1", before=c)
    assert again == d

    # A double press on D records once, and does not grade the next document unseen.
    page.keyboard.press("2")
    page.keyboard.press("2")
    page.wait_for_function("d => document.querySelector('#judge .workspace').dataset.pairId !== String(d)", arg=d)
    page.wait_for_timeout(800)
    e = shown(page)
    assert e not in (a, b, c, d)

    # The shortcut list opens with ? and closes with Escape.
    page.keyboard.press("?")
    assert page.is_visible("#shortcuts")
    screenshot(page, "04-shortcuts")
    page.keyboard.press("Escape")
    assert not page.is_visible("#shortcuts")

    # s skips E: nothing is recorded for it.
    f = press_and_wait(page, "s", before=e)
    assert f not in (a, b, c, d, e)

    judgments = Judgment.objects.filter(annotator=users["ann"]).select_related("pair", "grade", "tentative_grade")
    mine = {j.pair.public_id: j for j in judgments}  # the page names pairs by their public id
    assert set(mine) == {a, b, c, d}
    assert (mine[a].grade.value, mine[a].unsure) == (2, False)
    assert (mine[b].grade, mine[b].unsure, mine[b].tentative_grade.value) == (None, True, 1)
    assert mine[b].note == "Not sure: the brand is not named anywhere."
    assert mine[c].grade.value == 1
    assert list(mine[c].revisions.values_list("old_grade", "new_grade")) == [(None, 0), (0, 1)]
    assert mine[d].grade.value == 2 and mine[d].revisions.count() == 1
    assert all(j.seconds_spent > 0 for j in mine.values())
    assert not Judgment.objects.filter(pair__public_id__in=[e, f]).exists()
    assert watch.errors == [] and watch.dialogs == []


def test_a_grade_key_too_soon_after_a_new_document_is_held_back_with_a_word(live_server, new_page, setup):
    """A grade key within 300 ms of a new document never grades it unseen, and is never dropped silently:
    the page says it was held back and to press it again; pressed again, it records."""
    campaign, users = setup
    base = live_server.url
    page, watch = new_page()
    log_in(page, base, "ann", "pw-ann-secret", then=f"/campaigns/{campaign.slug}/judge/")
    page.wait_for_selector("#judge .workspace[data-pair-id]")
    page.wait_for_timeout(400)
    first = shown(page)
    # "1" arrives in the same moment the next document is swapped in (as a bounced or too-quick key does).
    page.evaluate(
        """() => document.addEventListener("htmx:afterSwap", () => setTimeout(() =>
            document.dispatchEvent(new KeyboardEvent("keydown", {key: "1", bubbles: true})), 0), {once: true})"""
    )
    page.keyboard.press("2")
    page.wait_for_function("f => document.querySelector('#judge .workspace').dataset.pairId !== String(f)", arg=first)
    notice = page.locator('#judge [data-hint="held"]')
    notice.wait_for()
    assert notice.get_attribute("role") == "status"
    assert "“1” was held back" in notice.inner_text() and "Press it again" in notice.inner_text()
    second = shown(page)
    page.wait_for_timeout(500)
    assert shown(page) == second
    assert not Judgment.objects.filter(pair__public_id=second).exists()
    # Pressed again once the document has been seen, the key grades it.
    third = press_and_wait(page, "1", before=second)
    assert third != second
    assert Judgment.objects.get(pair__public_id=second, annotator=users["ann"]).grade.value == 1
    assert watch.errors == []


def test_failed_save_keeps_the_note_and_says_so(live_server, new_page, screenshot, setup):
    campaign, users = setup
    base = live_server.url
    judge = f"/campaigns/{campaign.slug}/judge/"
    page, watch = new_page()
    log_in(page, base, "ann", "pw-ann-secret", then=judge)
    page.wait_for_selector("#judge .workspace[data-pair-id]")
    page.wait_for_timeout(400)
    first = shown(page)
    page.keyboard.press("n")
    page.keyboard.type("a careful note")
    page.keyboard.press("Escape")

    # The network drops the request: an error shows, the page and the note stay.
    page.route("**/judge/*/", lambda route: route.abort())
    page.keyboard.press("2")
    page.wait_for_selector("#net-error:not([hidden])")
    assert "nothing was saved" in page.inner_text("#net-error").lower()
    assert shown(page) == first and page.input_value("#note") == "a careful note"
    screenshot(page, "05-failed-save")
    assert not Judgment.objects.exists()

    # The connection is back: the same key saves it, note included.
    page.unroute("**/judge/*/")
    press_and_wait(page, "2", before=first)
    assert page.is_hidden("#net-error")
    j = Judgment.objects.get()
    assert (j.pair.public_id, j.grade.value, j.note) == (first, 2, "a careful note")

    # A grade that is not on the scale is refused by the page itself.
    page.keyboard.press("7")
    assert "no grade 7" in page.inner_text("#judge .notices")
    assert Judgment.objects.count() == 1

    # The session expired meanwhile: the message links to the login page the URL configuration names.
    page.route("**/judge/*/", lambda route: route.fulfill(status=401, body=""))
    page.keyboard.press("1")
    page.wait_for_selector("#net-error:not([hidden])")
    assert page.get_attribute("#net-error a", "href") == reverse("login")
    page.unroute("**/judge/*/")
    assert Judgment.objects.count() == 1
    # htmx reports the dropped request and the 401 on the console; nothing else may go wrong.
    expected = ("console: htmx:", "console: Response Status Error Code 401 ")
    assert [e for e in watch.errors if not e.startswith(expected)] == [], watch.errors
    assert watch.dialogs == []


def test_a_background_hold_finishing_late_never_hides_a_failed_save(live_server, new_page, setup):
    """The page holds the pair it shows by a background request; when that request ends after a save has failed
    (a slow server, a busy machine), the error about the save stays on screen."""
    campaign, users = setup
    page, watch = new_page()
    holds = []
    page.route("**/hold/", lambda route: holds.append(route))  # held back until the save has failed
    log_in(page, live_server.url, "ann", "pw-ann-secret", then=f"/campaigns/{campaign.slug}/judge/")
    page.wait_for_selector("#judge .workspace[data-pair-id]")
    page.wait_for_timeout(400)
    page.route("**/judge/*/", lambda route: route.abort())
    page.keyboard.press("2")
    page.wait_for_selector("#net-error:not([hidden])")
    assert holds, "the page asked to hold its pair"
    with page.expect_response("**/hold/") as answer:
        for route in holds:
            route.continue_()
    assert answer.value.ok
    page.wait_for_timeout(400)  # the hold's answer is swapped in
    assert Judgment.objects.count() == 0
    assert page.is_visible("#net-error") and "nothing was saved" in page.inner_text("#net-error").lower()
    assert watch.dialogs == []


def test_script_payload_does_not_run(live_server, new_page, screenshot, setup):
    campaign, users = setup
    base = live_server.url
    xss_pair = Pair.objects.get(campaign=campaign, document__docid="x1")
    page, watch = new_page()
    url = f"/campaigns/{campaign.slug}/judge/?pair={xss_pair.public_id}"
    log_in(page, base, "ann", "pw-ann-secret", then=url)
    page.wait_for_selector("#judge .workspace[data-pair-id]")
    page.wait_for_timeout(500)
    assert no_xss(page)
    text = page.inner_text("#judge .document")
    assert "Sweater care" in text and "How to wash wool." in text
    assert page.locator("#judge .document script").count() == 0
    assert page.locator("#judge .document img").count() == 0
    assert page.locator("#judge .document a[href^='javascript']").count() == 0
    page.click("text=Show the original markup")  # the raw markup, as text
    assert "<script>window.__xss=2" in page.inner_text(".doc-source pre")
    screenshot(page, "06-script-payload-escaped")
    # Recording a grade for it (an htmx swap of new HTML) does not run anything either.
    page.wait_for_timeout(400)
    press_and_wait(page, "1", before=xss_pair.public_id)
    # ... and neither does the row in "my judgments".
    page.goto(base + f"/campaigns/{campaign.slug}/mine/")
    page.wait_for_selector("#my-judgments")
    assert no_xss(page)
    assert watch.dialogs == [] and watch.errors == []


def test_second_annotator_sees_none_of_the_first_ones_work(live_server, new_page, screenshot, setup):
    campaign, users = setup
    base = live_server.url
    judged = list(Pair.objects.filter(campaign=campaign, query__qid="q1").order_by("id")[:3])
    for pair, grade in zip(judged, (2, 1, 0), strict=True):
        judgment_record(pair=pair, annotator=users["ann"], grade=grade, note=f"ann-private-note-{grade}")

    page, watch = new_page()
    log_in(page, base, "bob", "pw-bob-secret", then=f"/campaigns/{campaign.slug}/mine/")
    assert "You have not judged anything" in page.inner_text("main")
    assert "ann-private-note" not in page.content()

    page.goto(base + f"/campaigns/{campaign.slug}/judge/")
    page.wait_for_selector("#judge .workspace[data-pair-id]")
    assert shown(page) not in {p.public_id for p in judged}  # redundancy 1: those pairs are done
    assert "Your judgment" not in page.inner_text("#judge")
    assert page.locator("#back-link").count() == 0  # no history of someone else's to go back to
    # Even opening one of ann's pairs directly shows no judgment.
    page.goto(base + f"/campaigns/{campaign.slug}/judge/?pair={judged[0].public_id}")
    assert "Your judgment" not in page.inner_text("#judge")
    assert "ann-private-note" not in page.content()
    assert page.locator("button.grade.selected").count() == 0
    screenshot(page, "07-second-annotator")
    assert watch.errors == []


def test_lead_pages_render(live_server, new_page, screenshot, setup):
    campaign, users = setup
    User = get_user_model()
    User.objects.create_user(username="lena", password="pw-lena-secret")
    membership_add(campaign=campaign, user=User.objects.get(username="lena"), role="lead")
    judgment_record(
        pair=Pair.objects.filter(campaign=campaign).first(), annotator=users["ann"], grade=2, seconds_spent=12
    )
    page, watch = new_page()
    base = live_server.url
    log_in(page, base, "lena", "pw-lena-secret", then=f"/campaigns/{campaign.slug}/")
    screenshot(page, "10-campaign-overview", full_page=True)
    for name in ("settings", "members", "upload", "progress"):
        page.goto(base + f"/campaigns/{campaign.slug}/{name}/")
        assert page.locator("h1").count() == 1
        screenshot(page, f"11-lead-{name}", full_page=True)
    # A broken upload shows the file, line and field.
    page.goto(base + f"/campaigns/{campaign.slug}/upload/")
    page.set_input_files(
        "#upload-run input[type=file]",
        files=[
            {"name": "broken.run", "mimeType": "text/plain", "buffer": b"q1 Q0 d1 1 2.0 t\nq1 Q0 d2 x 1.0 t\n"},
        ],
    )
    page.click("#upload-run button[type=submit]")
    page.wait_for_selector(".form-error")
    assert "broken.run, line 2, field 'rank'" in page.inner_text(".form-error")
    screenshot(page, "12-upload-error")
    page.goto(base + "/")
    screenshot(page, "13-home")
    assert watch.errors == []


def test_narrow_screen_layout(live_server, new_page, screenshot, setup):
    campaign, users = setup
    page, watch = new_page(width=420, height=860)
    log_in(page, live_server.url, "ann", "pw-ann-secret", then=f"/campaigns/{campaign.slug}/judge/")
    page.wait_for_selector("#judge .workspace[data-pair-id]")
    screenshot(page, "08-narrow", full_page=True)
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")
    assert watch.errors == []
