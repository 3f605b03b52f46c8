"""Issue 11 #15: a plain GET of the judging page holds nothing (a foreign page could trigger it); the hold on
the pair shown is taken by the panel's htmx POST, with the page's CSRF token."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from judging.models import Assignment, Campaign, Judgment, Pair
from judging.services import membership_add, run_import
from tests.data import RUN_BM25, in_browser

PAIR_ID = re.compile(r'data-pair-id="(\d+)"')
HOLD = re.compile(r'<span hidden data-hold hx-post="([^"]+)" hx-trigger="load" hx-target="#judge"></span>')
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def pooled(campaign):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    return campaign


def judge_url() -> str:
    return reverse("judging:judge", args=["demo"])


def csrf_client(user) -> tuple[Client, str]:
    """A browser-like client that enforces CSRF, with the token the judging page hands out."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    page = client.get(judge_url()).content.decode()
    token = re.search(r'hx-headers=\'\{"X-CSRFToken": "([^"]+)"\}\'', page).group(1)
    return client, token


@pytest.mark.django_db
def test_get_of_the_judging_page_holds_nothing(pooled, annotator):
    client = Client()
    client.force_login(annotator)
    for _ in range(3):  # opened, reloaded, or loaded by a foreign page's <img> / link
        page = client.get(judge_url(), HTTP_REFERER="https://evil.example/")
        assert page.status_code == 200 and PAIR_ID.search(page.content.decode())
    assert not Assignment.objects.exists()
    # An htmx GET (history restore, a panel reload) holds nothing either.
    client.get(judge_url(), **HTMX)
    assert not Assignment.objects.exists()


@pytest.mark.django_db
def test_panel_takes_the_hold_by_post_with_the_csrf_token(pooled, annotator):
    client, token = csrf_client(annotator)
    page = client.get(judge_url()).content.decode()
    shown = int(PAIR_ID.search(page).group(1))
    hold_url = HOLD.search(page).group(1)
    assert hold_url == reverse("judging:judge_hold", args=["demo", shown])
    assert not re.search(r"<script(?![^>]*\bsrc=)", page)  # no inline script does it
    # A foreign page's form post has no token: refused, nothing held.
    assert client.post(hold_url, **HTMX).status_code == 403
    assert not Assignment.objects.exists()
    response = client.post(hold_url, HTTP_X_CSRFTOKEN=token, **HTMX)
    assert response.status_code == 204
    assert Assignment.objects.get(annotator=annotator).pair.public_id == shown
    # Judging it ends the hold, and the next pair (shown after a POST) is held at once.
    record = reverse("judging:judge_record", args=["demo", shown])
    nxt = client.post(record, {"grade": 1}, HTTP_X_CSRFTOKEN=token, **HTMX).content.decode()
    assert Assignment.objects.get(annotator=annotator).pair.public_id == int(PAIR_ID.search(nxt).group(1))
    assert not HOLD.search(nxt)  # no second request for a pair already held


@pytest.mark.django_db
def test_hold_of_a_pair_taken_meanwhile_swaps_in_the_next(pooled, annotator, make_user):
    """Two annotators open the page at once and are shown the same pair (a GET reserves nothing): the first
    hold wins, the second gets the next pair of the queue in its panel."""
    other = make_user("ann2")
    membership_add(campaign=pooled, user=other, role="annotator")
    Campaign.objects.filter(pk=pooled.pk).update(redundancy=1)
    (a, token_a), (b, token_b) = csrf_client(annotator), csrf_client(other)
    # Same (least-judged, shuffled) queue order is per annotator: show both the same pair by id.
    pair = Pair.objects.filter(query__qid="q2").order_by("public_id").first()
    hold = reverse("judging:judge_hold", args=["demo", pair.public_id])
    assert a.post(hold, HTTP_X_CSRFTOKEN=token_a, **HTMX).status_code == 204
    response = b.post(hold, HTTP_X_CSRFTOKEN=token_b, **HTMX)
    assert response.status_code == 200
    swapped = int(PAIR_ID.search(response.content.decode()).group(1))
    assert swapped != pair.public_id
    assert "just taken by another annotator" in response.content.decode()
    assert Assignment.objects.get(annotator=other).pair.public_id == swapped
    # A hold arriving after the annotator judged the pair (a fast key press) changes nothing.
    record = reverse("judging:judge_record", args=["demo", swapped])
    b.post(record, {"grade": 2}, HTTP_X_CSRFTOKEN=token_b, **HTMX)
    late = reverse("judging:judge_hold", args=["demo", swapped])
    assert b.post(late, HTTP_X_CSRFTOKEN=token_b, **HTMX).status_code == 204
    assert Judgment.objects.filter(annotator=other).count() == 1


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_browser_page_takes_its_hold_and_stays_keyboard_first(live_server, pooled, annotator):
    seen: dict = {}

    def check(page):
        page.goto(live_server.url + "/accounts/login/?next=" + judge_url())
        page.keyboard.type("ann")
        page.keyboard.press("Tab")
        page.keyboard.type("pw-ann")  # tests.conftest.make_user's password
        # The panel's hx-trigger="load" POST runs in the background, as the page loads. The browser tells when
        # it is answered; the test does not read the database while the live server writes it (SQLite's
        # shared in-memory test database refuses a reader then: "database table is locked").
        with page.expect_response(lambda r: r.request.method == "POST" and "/hold/" in r.url) as hold:
            page.keyboard.press("Enter")
        page.wait_for_selector("#judge .workspace[data-pair-id]")
        seen["shown"] = shown = int(page.get_attribute("#judge .workspace", "data-pair-id"))
        seen["hold"] = (hold.value.status, hold.value.url)
        page.wait_for_timeout(350)  # the page ignores grade keys for 300 ms after a new document appears
        page.keyboard.press("2")
        page.wait_for_function(
            "before => document.querySelector('#judge .workspace').dataset.pairId !== String(before)", arg=shown
        )

    assert in_browser(check) == []
    status, url = seen["hold"]
    assert status == 204 and url.endswith(reverse("judging:judge_hold", args=["demo", seen["shown"]]))
    assert Judgment.objects.get(annotator=annotator).pair.public_id == seen["shown"]


# --------------------------------------------------------------------------- GET /api/campaigns/SLUG/next/


@pytest.mark.django_db
def test_api_next_by_get_from_a_browser_session_holds_nothing(pooled, annotator):
    """A link on another site (GET, the session cookie goes with it) must not take holds in a member's name."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(annotator)
    for _ in range(3):
        response = client.get("/api/campaigns/demo/next/", HTTP_REFERER="https://evil.example/")
        assert response.status_code == 200 and response.json()["held_until"] is None
    assert not Assignment.objects.exists()


@pytest.mark.django_db
def test_api_next_by_post_from_a_browser_session_needs_the_csrf_token_and_holds(pooled, annotator):
    client, token = csrf_client(annotator)
    assert client.post("/api/campaigns/demo/next/").status_code == 403  # a foreign form's post: no token
    assert not Assignment.objects.exists()
    response = client.post("/api/campaigns/demo/next/", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 200 and response.json()["held_until"]
    assert Assignment.objects.get(annotator=annotator).pair.public_id == response.json()["pair"]


@pytest.mark.django_db
def test_api_next_by_get_with_a_token_still_holds(pooled, annotator):
    from tests.data import client_for

    response = client_for(annotator).get("/api/campaigns/demo/next/")
    assert response.status_code == 200 and response.json()["held_until"]
    assert Assignment.objects.get(annotator=annotator).pair.public_id == response.json()["pair"]
