"""The language of the pages: the browser's Accept-Language, the header's switcher, a user's saved choice,
the scripts' catalog, dates in the reader's language and measure values the same in both languages."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from judging.models import AnnotatorProfile, Grade
from judging.services import judgment_record

KO = {"HTTP_ACCEPT_LANGUAGE": "ko-KR,ko;q=0.9,en;q=0.5"}


def html_lang(response) -> str:
    return re.search(r'<html lang="([^"]+)"', response.content.decode()).group(1)


def test_pages_follow_the_browsers_language(client, db):
    english = client.get(reverse("login"))
    assert html_lang(english) == "en" and "Log in to RelJudge" in english.content.decode()
    korean = client.get(reverse("login"), **KO)
    assert html_lang(korean) == "ko"
    assert "RelJudge 로그인" in korean.content.decode()
    assert korean["Content-Language"] == "ko"


def test_switcher_sets_the_language_and_goes_back_to_a_page_of_this_site(client, db):
    response = client.post(reverse("set_language"), {"language": "ko", "next": "/accounts/login/?next=/"})
    assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=/"
    assert html_lang(client.get(reverse("login"))) == "ko"
    # another site is never a destination: back to the home page instead
    response = client.post(reverse("set_language"), {"language": "en", "next": "https://evil.example/"})
    assert response["Location"] == "/"
    assert html_lang(client.get(reverse("login"))) == "en"


def test_switcher_refuses_a_get_and_needs_the_csrf_token(db):
    client = Client(enforce_csrf_checks=True)
    assert client.get(reverse("set_language") + "?language=ko").status_code == 405
    assert client.post(reverse("set_language"), {"language": "ko"}).status_code == 403


def test_switcher_offers_each_language_in_its_own_name(client, db):
    page = client.get(reverse("login"), **KO).content.decode()
    assert '<span class="current" lang="ko" aria-current="true">한국어</span>' in page
    assert re.search(r'<button name="language" value="en" lang="en"[^>]*>English</button>', page)


def test_a_users_choice_follows_them_to_their_next_login(pooled, annotator):
    first = Client()
    first.force_login(annotator)
    first.post(reverse("set_language"), {"language": "ko", "next": "/"})
    assert AnnotatorProfile.objects.get(user=annotator).language == "ko"

    # Another browser, which asks for English and has no language cookie: the account's choice wins.
    second = Client(HTTP_ACCEPT_LANGUAGE="en")
    second.force_login(annotator)
    page = second.get(reverse("judging:home"))
    assert html_lang(page) == "ko" and "내 캠페인" in page.content.decode()
    # and the browser learns it, so that the page after logging out is Korean too
    assert page.cookies["django_language"].value == "ko"
    logged_out = second.post(reverse("logout"), follow=True)
    assert html_lang(logged_out) == "ko"

    first.post(reverse("set_language"), {"language": "en", "next": "/"})
    third = Client(HTTP_ACCEPT_LANGUAGE="ko")
    third.force_login(annotator)
    assert html_lang(third.get(reverse("judging:home"))) == "en"


def test_a_model_judge_keeps_its_kind_when_a_language_is_saved(make_user):
    from judging.services.languages import user_language_set

    judge = make_user("gpt")
    AnnotatorProfile.objects.create(user=judge, kind=AnnotatorProfile.Kind.MODEL)
    user_language_set(user=judge, language="ko")
    assert AnnotatorProfile.objects.get(user=judge).kind == AnnotatorProfile.Kind.MODEL


def test_api_follows_accept_language(client, db):
    english = client.get("/api/campaigns/")
    korean = client.get("/api/campaigns/", **KO)
    assert english.status_code == korean.status_code == 401
    assert english.json()["detail"] != korean.json()["detail"]
    assert re.search("[가-힣]", korean.json()["detail"])


def test_script_catalog_is_served_from_this_site_in_the_pages_language(client, db):
    from judging.languages import catalog_url

    page = client.get(reverse("login"), **KO).content.decode()
    korean_url, english_url = catalog_url("ko"), catalog_url("en")
    assert korean_url != english_url and korean_url.startswith("/i18n/ko/catalog-")
    assert f'<script src="{korean_url}" defer></script>' in page
    assert f'<script src="{english_url}" defer></script>' in client.get(reverse("login")).content.decode()
    # the catalog is JSON: Hangul comes as \u escapes; the URL decides the language, not the request's
    expired = "세션이 만료되었습니다".encode("unicode_escape").decode()
    catalog = client.get(korean_url)  # a browser asking for English: still the Korean catalog
    assert catalog.status_code == 200 and catalog["Content-Type"].startswith("text/javascript")
    assert expired in catalog.content.decode()
    assert expired not in client.get(english_url, **KO).content.decode()
    # one address per language and catalog version: kept a year, never revalidated against another language
    assert "immutable" in catalog["Cache-Control"] and "max-age=31536000" in catalog["Cache-Control"]
    assert not catalog.has_header("Last-Modified")


def test_script_catalog_of_another_version_goes_to_the_current_one(client, db):
    from judging.languages import catalog_url

    old = client.get("/i18n/ko/catalog-000000000000.js")
    assert old.status_code == 302 and old["Location"] == catalog_url("ko")
    assert client.get("/i18n/xx/catalog-000000000000.js").status_code == 404


def test_a_korean_account_gets_the_korean_catalog_from_an_english_browser(client, annotator):
    """The page is Korean for a Korean account whatever the browser asks: so is the catalog its page names."""
    from judging.languages import catalog_url
    from judging.services.languages import user_language_set

    user_language_set(user=annotator, language="ko")
    client.force_login(annotator)
    page = client.get("/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert f'<script src="{catalog_url("ko")}" defer></script>' in page


def test_default_grade_names_are_shown_in_the_readers_language_and_a_leads_names_as_written(pooled, annotator, client):
    client.force_login(annotator)
    page = client.get(reverse("judging:judge", args=[pooled.slug]), **KO).content.decode()
    assert "부적합" in page and "부분 적합" in page and "Partially relevant" not in page
    assert "Partially relevant" in client.get(reverse("judging:judge", args=[pooled.slug])).content.decode()

    Grade.objects.filter(campaign=pooled, value=1).update(name="Somewhat useful")
    page = client.get(reverse("judging:judge", args=[pooled.slug]), **KO).content.decode()
    assert "Somewhat useful" in page and "부분 적합" not in page


def test_dates_are_written_the_readers_way(pooled, annotator, client):
    pair = pooled.pairs.order_by("id").first()
    judgment_record(pair=pair, annotator=annotator, grade=1)
    client.force_login(annotator)
    url = reverse("judging:my_judgments", args=[pooled.slug])
    english = client.get(url).content.decode()
    korean = client.get(url, **KO).content.decode()
    # ISO day in English as always, and in Korean with zero-padded months and days too (issue 42)
    assert re.search(r"<time datetime=\"[^\"]+\">\d{4}-\d{2}-\d{2} \d{2}:\d{2}</time>", english)
    assert re.search(r"<time datetime=\"[^\"]+\">\d{4}-\d{2}-\d{2} \d{2}:\d{2}</time>", korean)


@pytest.mark.parametrize("measure", ["nDCG", "P"])
def test_measure_values_keep_a_dot_and_four_digits_in_korean(world, client, measure):
    client.force_login(world.lead)
    url = reverse("judging:leaderboard", args=[world.campaign.slug]) + f"?measure={measure}"
    pattern = re.compile(r'<td class="num lb-ranked"><strong>([^<]*)</strong></td>')
    english = pattern.findall(client.get(url).content.decode())
    korean = pattern.findall(client.get(url, **KO).content.decode())
    assert english and korean == english
    assert all(re.fullmatch(r"\d\.\d{4}", value) for value in korean), korean


def test_a_message_queued_in_korean_is_not_shown_after_switching_to_english(pooled, lead, annotator):
    """A flash message is text in the language it was queued in: one still waiting when the reader switches
    language is dropped, not shown in Korean on the English page (issue 42). Without a switch it shows."""
    client = Client()
    client.force_login(lead)
    client.post(reverse("set_language"), {"language": "ko", "next": "/"})
    url = reverse("judging:assignments", args=[pooled.slug])
    add = {"action": "add", "annotator": annotator.username, "batch": "qids"}
    assert client.post(url, {**add, "qids": "q1"}).status_code == 302  # the confirmation waits for the next page
    page = client.post(reverse("set_language"), {"language": "en", "next": url}, follow=True)
    html = page.content.decode()
    assert html_lang(page) == "en" and "배정했습니다" not in html and 'class="messages"' not in html
    assert "q1" in html  # what was done is on the page
    # and the other way round
    assert client.post(url, {**add, "qids": "q2"}).status_code == 302
    page = client.post(reverse("set_language"), {"language": "ko", "next": url}, follow=True)
    assert html_lang(page) == "ko" and "given to" not in page.content.decode()
    # without a switch, the next page shows it
    assert client.post(url, {**add, "qids": "q1"}).status_code == 302
    assert f"새로 배정한 질의가 없습니다. {annotator.username}에게" in client.get(url).content.decode()
