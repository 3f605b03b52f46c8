"""A Korean annotator, from the login page to the last judgment, with the interface in Korean: the header's
switcher, the choice remembered at the next login, every pair judged by keyboard, and screenshots of the
judging and campaign pages in Korean and in English, on a laptop and on a phone."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model

from judging.models import AnnotatorProfile, Judgment, Pair
from judging.services import campaign_create, documents_import, membership_add, queries_import, run_import
from tests.data import DESKTOP, PHONE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "jiwoo-pw-secret-1"
GUIDELINES = (
    "## 판정 기준\n\n"
    "검색한 사람이 **설명에 적힌 상품**을 찾고 있다고 생각하고 판정하세요.\n\n"
    "- 정확히 그 상품의 상세 페이지는 적합입니다.\n"
    "- 비슷하지만 조건이 다른 상품(색상, 길이, 용도)은 부분 적합입니다.\n"
    "- 다른 종류의 상품이나 광고성 페이지는 부적합입니다.\n"
)
TOPICS = (
    "k1\t여성 경량 롱패딩\t무릎까지 내려오는 가벼운 여성용 롱패딩. 숏패딩이나 남성용은 부분 적합입니다.\n"
    "k2\t방수 등산화\t비 오는 날 산행에 신을 방수 등산화. 방수가 아닌 운동화는 부적합입니다.\n"
)


def doc(docid: str, title: str, text: str) -> str:
    return json.dumps({"docid": docid, "title": title, "text": text}, ensure_ascii=False) + "\n"


DOCS = "".join(
    [
        doc(
            "p1",
            "여성 초경량 구스다운 롱패딩 (무릎 기장, 블랙)",
            "무게가 650그램에 불과한 초경량 구스다운 롱패딩입니다. 무릎을 덮는 기장으로 한겨울 출퇴근길에도 "
            "따뜻하며, 발수 가공된 겉감이 눈과 가벼운 비를 막아 줍니다. 양쪽 지퍼로 걸을 때 편하고, "
            "접으면 전용 파우치에 들어갑니다. " * 4,
        ),
        doc("p2", "남성 숏패딩 점퍼", "허리까지 오는 짧은 기장의 남성용 패딩 점퍼입니다. 덕다운 80%. " * 3),
        doc("p3", "고어텍스 방수 중등산화", "고어텍스 멤브레인으로 발을 보송하게 지켜 주는 중등산화입니다. " * 5),
        doc("p4", "캔버스 단화", "가볍게 신기 좋은 캔버스 소재의 단화입니다. 방수 기능은 없습니다. " * 3),
        doc("p5", "여성 롱패딩 세탁 방법 안내", "다운 제품은 중성세제로 미지근한 물에 손세탁하세요. " * 4),
    ]
)
RUN = "".join(
    f"{q} Q0 {d} {r} {10 - r} base\n"
    for q, docs in (("k1", ["p1", "p2", "p5"]), ("k2", ["p3", "p4"]))
    for r, d in enumerate(docs, start=1)
)
GRADES = {"p1": "2", "p2": "1", "p5": "0", "p3": "2", "p4": "0"}


@pytest.fixture
def korean_campaign(db):
    campaign = campaign_create(slug="winter", name="겨울 의류 검색", pool_depth=10, guidelines=GUIDELINES)
    jiwoo = get_user_model().objects.create_user("jiwoo", password=PASSWORD)
    membership_add(campaign=campaign, user=jiwoo, role="annotator")
    queries_import(campaign=campaign, data=TOPICS.encode(), filename="topics.tsv")
    documents_import(campaign=campaign, data=DOCS.encode(), filename="docs.jsonl")
    run_import(campaign=campaign, data=RUN.encode(), filename="base.run")
    return campaign, jiwoo


def log_in(page, base: str, then: str) -> None:
    page.goto(base + then)
    assert "/accounts/login/" in page.url
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'id_username'")
    page.keyboard.type("jiwoo")
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(base + then)


def switch_to(page, name: str) -> None:
    """Choose a language with the header's switcher, by keyboard: focus its button, press Enter."""
    page.focus(f'.language-switch button:has-text("{name}")')
    with page.expect_navigation():
        page.keyboard.press("Enter")


def no_sideways_scroll(page) -> bool:
    return page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")


def test_korean_annotator_judges_everything_in_korean(live_server, new_page, screenshot, korean_campaign):
    campaign, jiwoo = korean_campaign
    base = live_server.url
    judge = f"/campaigns/{campaign.slug}/judge/"

    # The browser asks for English; the annotator switches to Korean on the login page, then logs in.
    page, watch = new_page(**DESKTOP)
    page.goto(base + judge)
    assert page.get_attribute("html", "lang") == "en"
    switch_to(page, "한국어")
    assert page.get_attribute("html", "lang") == "ko"
    assert page.inner_text("h1") == "RelJudge 로그인"
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'id_username'")
    page.keyboard.type("jiwoo")
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(base + judge)
    page.wait_for_selector("#judge .workspace[data-pair-id]")
    assert "판정하기" in page.inner_text(".campaign-nav")
    # the language switched before logging in is kept on the account once the annotator switches signed in
    switch_to(page, "English")
    switch_to(page, "한국어")
    assert AnnotatorProfile.objects.get(user=jiwoo).language == "ko"

    # Logged out, then in again from another browser that asks for English: still Korean.
    page.click(".account button[type=submit]")
    page.wait_for_url(f"{base}/accounts/login/")
    page, watch = new_page(**DESKTOP)
    log_in(page, base, judge)
    page.wait_for_selector("#judge .workspace[data-pair-id]")
    assert page.get_attribute("html", "lang") == "ko"
    page.wait_for_timeout(400)
    assert "부분 적합" in page.inner_text("#judge-form")  # the default grade names, in Korean
    assert page.inner_text(".query-text") in ("여성 경량 롱패딩", "방수 등산화")
    screenshot(page, "40-ko-desktop-judging")

    # A grade the scale does not have: the script's message comes from the Korean catalog.
    page.keyboard.press("7")
    page.wait_for_selector("#judge .notices .flash.warn")
    assert page.inner_text("#judge .notices .flash.warn") == "이 캠페인의 척도에는 7 등급이 없습니다."

    # Every pair, by keyboard, to the end.
    judged = 0
    while page.locator("#judge-form").count():
        before = page.get_attribute("#judge .workspace", "data-pair-id")
        docid = page.inner_text(".doc-meta .mono")
        page.keyboard.press(GRADES[docid])
        page.wait_for_function(
            "b => { const w = document.querySelector('#judge .workspace'); return w && w.dataset.pairId !== b; }",
            arg=before or "",
        )
        judged += 1
        if page.locator("#judge-form").count():
            assert "저장함" in page.inner_text(".last-action")
        page.wait_for_timeout(400)
    assert page.inner_text("#judge h1") == "판정할 쌍이 더 없습니다"
    assert "5개 쌍을 판정했습니다" in page.inner_text("#judge")
    assert judged == Pair.objects.filter(campaign=campaign).count() == 5
    mine = dict(Judgment.objects.filter(annotator=jiwoo).values_list("pair__document__docid", "grade__value"))
    assert mine == {docid: int(grade) for docid, grade in GRADES.items()}

    page.goto(base + f"/campaigns/{campaign.slug}/")
    assert "가이드라인" in page.inner_text("main")
    assert no_sideways_scroll(page)
    screenshot(page, "41-ko-desktop-campaign", full_page=True)
    page.goto(base + judge + "?pair=" + str(Pair.objects.get(document__docid="p1").public_id))
    page.wait_for_selector("#judge .workspace[data-pair-id]")
    assert "내 판정:" in page.inner_text("#judge-form")

    # English again with the switcher: the same pages in English.
    switch_to(page, "English")
    assert page.get_attribute("html", "lang") == "en"
    assert "Your judgment:" in page.inner_text("#judge-form")
    screenshot(page, "42-en-desktop-judging")
    page.goto(base + f"/campaigns/{campaign.slug}/")
    screenshot(page, "43-en-desktop-campaign", full_page=True)
    assert watch.errors == [] and watch.dialogs == []


@pytest.mark.parametrize("language", ["ko", "en"])
def test_korean_campaign_on_a_phone(live_server, new_page, screenshot, korean_campaign, language):
    campaign, jiwoo = korean_campaign
    AnnotatorProfile.objects.create(user=jiwoo, language=language)
    base = live_server.url
    judge = f"/campaigns/{campaign.slug}/judge/"
    page, watch = new_page(**PHONE)
    log_in(page, base, judge)
    page.wait_for_selector("#judge .workspace[data-pair-id]")
    assert page.get_attribute("html", "lang") == language
    assert no_sideways_scroll(page)
    screenshot(page, f"44-{language}-phone-judging")
    screenshot(page, f"45-{language}-phone-judging-full", full_page=True)
    page.goto(base + f"/campaigns/{campaign.slug}/")
    assert no_sideways_scroll(page)
    screenshot(page, f"46-{language}-phone-campaign", full_page=True)
    assert watch.errors == [] and watch.dialogs == []
