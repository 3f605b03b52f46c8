"""A lead evaluates a live search engine from the browser alone, in English and in Korean: makes a system of an
engine an administrator configured, fetches a snapshot, grades hits on the Try page, fetches a second snapshot
after the engine's ranking changed, reads what changed and turns on "judge what is new first"; an annotator is
served those pairs first and judges them; the lead reads both snapshots side by side on the leaderboard.

Screenshots land in tests/browser/screenshots/ (desktop 1366x900, phone 390x844)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from django.contrib.auth import get_user_model

from judging.engine_models import Engine, QueueFocus
from judging.jobs import job_run
from judging.models import Campaign, Judgment, Pair
from judging.services import campaign_create, membership_add, queries_import
from tests.browser.knitwear import log_in
from tests.data import DESKTOP, PHONE
from tests.fake_engine import BM25, INDEX, FakeEngine

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "engine-pw-secret-1"
DOCS = {
    "p01": {"title": "Red running shoes", "text": "Light red shoes for running on the road."},
    "p02": {"title": "Trail running shoes", "text": "Grippy shoes for trail running."},
    "p03": {"title": "Running socks", "text": "Cushioned socks for running."},
    "p04": {"title": "Wireless headphones", "text": "Wireless over-ear headphones with noise cancelling."},
    "p05": {"title": "Wired earbuds", "text": "Earbuds with a cable and a microphone."},
    "p06": {"title": "Burr coffee grinder", "text": "A burr grinder for coffee beans."},
    "p07": {"title": "Espresso machine", "text": "Espresso coffee machine with a milk frother."},
    "p08": {"title": "Blade coffee grinder", "text": "A small blade grinder for coffee and spices."},
}
# The engine's second ranking: a new catalogue entry per query climbs to the top.
NEW_DOCS = {
    "p11": {"title": "Running shoes running shoes", "text": "Red running shoes, cushioned."},
    "p12": {"title": "Wireless headphones wireless", "text": "Wireless headphones for running."},
    "p13": {"title": "Coffee grinder coffee grinder", "text": "Burr coffee grinder, electric."},
}
TOPICS = "q1\trunning shoes\t\nq2\twireless headphones\t\nq3\tcoffee grinder\t\n"
WORDS = {
    "en": {
        "new": "New system from an engine",
        "fetch": "Fetch a snapshot",
        "done": "3 of 3 queries answered",
        "try": "Try a query",
        "search": "Search",
        "changed": "compared with the one before",
        "focus": "Judge what is new first",
        "left": "left",
        "all_judged": "are judged",
        "compare": "Compare the two on the leaderboard",
    },
    "ko": {
        "new": "엔진으로 새 시스템 만들기",
        "fetch": "스냅샷 가져오기",
        "done": "질의 3개 중 3개",
        "try": "질의 시험",
        "search": "검색",
        "changed": "직전 스냅샷과 비교",
        "focus": "새로운 것부터 판정",
        "left": "남음",
        "all_judged": "모두 판정되어",
        "compare": "리더보드에서 둘을 비교",
    },
}


@pytest.fixture
def server():
    s = FakeEngine(DOCS)
    yield s
    s.close()


@pytest.fixture
def shop(db, server):
    """What an administrator set up: an engine row (as added in the admin), a campaign with its queries, a lead
    who is not staff and an annotator."""
    User = get_user_model()
    lead = User.objects.create_user("lena", password=PASSWORD)
    ann = User.objects.create_user("minji", password=PASSWORD)
    assert not lead.is_staff and not lead.is_superuser
    campaign = campaign_create(slug="shop", name="Shop search", pool_depth=3, queue_mode="mtc")
    membership_add(campaign=campaign, user=lead, role="lead")
    membership_add(campaign=campaign, user=ann, role="annotator")
    queries_import(campaign=campaign, data=TOPICS.encode(), filename="topics.tsv")
    Engine.objects.create(name="shop-es", kind="elasticsearch", base_url=server.url, timeout=5.0, concurrency=2)
    return campaign


def switch_to(page, name: str) -> None:
    """Choose a language with the header's switcher (once chosen, an account keeps it: then nothing to do)."""
    if page.locator(f'.language-switch .current:has-text("{name}")').count():
        return
    with page.expect_navigation():
        page.click(f'.language-switch button:has-text("{name}")')


def no_sideways_scroll(page) -> bool:
    return page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")


def fetch(page, words: dict[str, str], base: str) -> None:
    page.goto(f"{base}/campaigns/shop/engines/")
    page.click(f'#engine-system-shop button:has-text("{words["fetch"]}")')
    page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
    # the task worker's part (manage.py db_worker): run the queued job; the job's page shows it done
    job_run(job_id=int(page.url.rstrip("/").rsplit("/", 1)[1]))
    page.wait_for_function("done => document.querySelector('main').innerText.includes(done)", arg=words["done"])


def focus_pairs() -> set[int]:
    focus = QueueFocus.objects.get()
    ids = np.frombuffer(bytes(focus.pair_ids), dtype=np.int64).tolist()
    return set(Pair.objects.filter(pk__in=ids).values_list("public_id", flat=True))


@pytest.mark.parametrize("language", ["en", "ko"])
def test_lead_evaluates_a_live_engine_from_the_browser(live_server, new_page, screenshot, shop, server, language):
    words = WORDS[language]
    base = live_server.url
    page, watch = new_page(**DESKTOP)
    log_in(page, base, "lena", PASSWORD, then="/campaigns/shop/engines/")
    if language == "ko":
        switch_to(page, "한국어")
        assert page.get_attribute("html", "lang") == "ko"

    # a system of the configured engine: the preview asks the first query, then Save
    page.click(f'a:has-text("{words["new"]}")')
    page.fill("#id_name", "shop")
    page.select_option("#id_engine", "shop-es")
    page.fill("#id_target", INDEX)
    page.fill("#id_title_field", "title")
    page.fill("#id_text_field", "text")
    page.fill("#id_depth", "5")
    page.click("button[name=preview]")
    page.wait_for_load_state()
    preview = page.inner_text("main")
    assert f"POST {server.url}/{INDEX}/_search" in preview and BM25(DOCS).search("running shoes")[0][0] in preview
    screenshot(page, f"60-{language}-desktop-engine-preview", full_page=True)
    page.click("button[name=save]")
    page.wait_for_url(f"{base}/campaigns/shop/engines/")

    # the first snapshot
    fetch(page, words, base)
    screenshot(page, f"61-{language}-desktop-engine-fetched")

    # the lead grades two hits of q1 in place on the Try page (pooled: the campaign pools each run's top 3)
    page.goto(f"{base}/campaigns/shop/engines/")
    page.click(f'a:has-text("{words["try"]}")')
    page.select_option("#try-qid", "q1")
    page.click(f'button:has-text("{words["search"]}")')
    page.wait_for_selector(".try-judge")
    first, second = (d for d, _s in BM25(DOCS).search("running shoes")[:2])
    for docid, grade in ((first, "2"), (second, "1")):
        pair = Pair.objects.get(campaign=shop, query__qid="q1", document__docid=docid)
        cell = f".try-p{pair.public_id}"
        page.click(f'{cell} button[value="{grade}"]')
        page.wait_for_selector(f'{cell} button[value="{grade}"][aria-pressed="true"]')
        assert f"({grade})" in page.inner_text(cell)
    assert set(Judgment.objects.values_list("pair__document__docid", "grade__value")) == {(first, 2), (second, 1)}
    screenshot(page, f"62-{language}-desktop-engine-try", full_page=True)

    # the engine changes its ranking: a second snapshot
    server.ranker = BM25({**DOCS, **NEW_DOCS})
    fetch(page, words, base)
    page.goto(f"{base}/campaigns/shop/engines/")
    page.click(f'#engine-system-shop a:has-text("{words["changed"]}")')
    page.wait_for_url(re.compile(r".*/snapshots/2/$"))
    page.fill("#changes-k", "3")
    page.click("form.filters button[type=submit]")
    page.wait_for_url(re.compile(r".*k=3"))
    assert all(d in page.inner_text(".engine-changes") for d in NEW_DOCS)
    screenshot(page, f"63-{language}-desktop-engine-changes-before-focus", full_page=True)
    page.click(f'button:has-text("{words["focus"]}")')
    page.wait_for_selector(".engine-focus")
    served_first = focus_pairs()
    assert len(served_first) >= 3  # p11, p12, p13 at least
    assert f"{len(served_first)}" in page.inner_text(".engine-focus") and words["left"] in page.inner_text(
        ".engine-focus"
    )
    screenshot(page, f"63-{language}-desktop-engine-changes", full_page=True)

    # the annotator is served those pairs first, never told where they come from
    ann_page, ann_watch = new_page(**DESKTOP)
    log_in(ann_page, base, "minji", PASSWORD, then="/campaigns/shop/judge/")
    if language == "ko":
        switch_to(ann_page, "한국어")
    seen: list[int] = []
    for _ in range(len(served_first)):
        ann_page.wait_for_selector("#judge .workspace[data-pair-id]")
        shown = int(ann_page.get_attribute("#judge .workspace", "data-pair-id") or 0)
        workspace = ann_page.inner_text("#judge")
        assert "shop@" not in workspace and "shop-es" not in workspace
        seen.append(shown)
        ann_page.wait_for_timeout(400)  # the page ignores grade keys for 300 ms after a new document
        ann_page.keyboard.press("1")
        ann_page.wait_for_function(
            "before => { const w = document.querySelector('#judge .workspace');"
            " return w && w.dataset.pairId !== String(before); }",
            arg=shown,
        )
    assert set(seen) == served_first
    screenshot(ann_page, f"64-{language}-desktop-judging-after-focus")
    assert not ann_watch.errors, ann_watch.errors

    # the focus says all its pairs are judged; the leaderboard puts the snapshots side by side
    page.goto(f"{base}/campaigns/shop/engines/")
    assert words["all_judged"] in page.inner_text(".engine-focus")
    screenshot(page, f"65-{language}-desktop-engines", full_page=True)
    page.goto(f"{base}/campaigns/shop/engines/systems/shop/snapshots/2/?k=3")
    page.click(f'a:has-text("{words["compare"]}")')
    page.wait_for_load_state()
    board = page.inner_text("main")
    assert "shop@1" in board and "shop@2" in board
    screenshot(page, f"66-{language}-desktop-leaderboard-compare", full_page=True)
    page.goto(f"{base}/campaigns/shop/leaderboard/")
    page.wait_for_selector("text=shop@2")
    assert "shop@1" in page.inner_text("main")
    screenshot(page, f"67-{language}-desktop-leaderboard", full_page=True)
    assert not watch.errors, watch.errors
    assert Campaign.objects.get(pk=shop.pk).queue_focus_id is not None

    # the same pages on a phone
    phone, phone_watch = new_page(**PHONE)
    log_in(phone, base, "lena", PASSWORD, then="/campaigns/shop/engines/")
    if language == "ko":
        switch_to(phone, "한국어")
    for url, name in (
        ("/campaigns/shop/engines/", "engines"),
        ("/campaigns/shop/engines/systems/shop/snapshots/2/?k=3", "changes"),
        ("/campaigns/shop/engines/try/?qid=q2", "try"),
    ):
        phone.goto(base + url)
        screenshot(phone, f"68-{language}-phone-{name}", full_page=True)
        assert no_sideways_scroll(phone), name
    assert not phone_watch.errors, phone_watch.errors
