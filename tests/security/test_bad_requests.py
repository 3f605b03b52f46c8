"""Tampered or out-of-range request parameters answer 400 naming the parameter, never a 500."""

from __future__ import annotations

import base64

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from judging.models import Membership
from judging.services import judgment_record, run_import
from tests.data import RUN_BM25


@pytest.fixture
def judged(campaign, annotator):
    """The demo campaign's pool, with three judgments by the annotator (so that pages have rows)."""
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    for pair in campaign.pairs.order_by("id")[:3]:
        judgment_record(pair=pair, annotator=annotator, grade=1)
    return campaign


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _cursor(querystring: str) -> str:
    return base64.b64encode(querystring.encode()).decode()


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"cursor": "abc"}, "cursor"),
        ({"cursor": _cursor("p=1e999")}, "cursor"),
        ({"cursor": _cursor("p=%00")}, "cursor"),
        ({"cursor": _cursor("p=99999999999999999999999")}, "cursor"),
        ({"cursor": _cursor("p=not-a-time"), "ordering": "-updated_at"}, "cursor"),
        ({"cursor": _cursor("p=0001-01-01 00:00:00+14:00"), "ordering": "updated_at"}, "cursor"),
        ({"updated_since": "0001-01-01T00:00:00+14:00"}, "updated_since"),
        ({"updated_since": "9999-12-31T23:59:59-14:00"}, "updated_since"),
    ],
    ids=["garbage", "p=1e999", "p=NUL", "p=huge", "p=not-a-time", "p=before-year-1", "since+14", "since-14"],
)
def test_judgments_list_bad_cursor_or_timestamp_is_400_naming_it(judged, annotator, params, field):
    response = api(annotator).get("/api/judgments/", {"campaign": judged.slug, **params})
    assert response.status_code == 400
    assert list(response.json()) == [field]


def test_judgments_list_cursor_links_still_page_through(judged, annotator):
    client = api(annotator)
    seen = []
    url = f"/api/judgments/?campaign={judged.slug}&page_size=1&ordering=-updated_at"
    while url:
        body = client.get(url).json()
        seen += [row["id"] for row in body["results"]]
        url = body["next"]
    assert len(seen) == len(set(seen)) == 3
    # and a cursor a client changed is refused, while the one it was given works
    first = client.get(f"/api/judgments/?campaign={judged.slug}&page_size=1").json()["next"]
    token = first.split("cursor=")[1].split("&")[0]
    assert client.get("/api/judgments/", {"campaign": judged.slug, "cursor": token + "x"}).status_code == 400


@pytest.mark.parametrize(
    ("post", "message"),
    [
        ({"action": "role", "user": "abc", "role": "lead"}, "user: Enter a whole number."),
        ({"action": "remove", "user": "1e9"}, "user: Enter a whole number."),
        ({"action": "remove", "user": "99999999999999999999999"}, "user: Ensure this value is less than or equal to"),
        ({"action": "role", "user": "\x00"}, "'user' holds a NUL character, which no field accepts."),
    ],
    ids=["role-abc", "remove-1e9", "remove-huge", "role-nul"],
)
def test_members_page_tampered_user_is_400_naming_the_field(client, campaign, lead, post, message):
    client.force_login(lead)
    response = client.post(reverse("judging:campaign_members", args=[campaign.slug]), post)
    assert response.status_code == 400
    if "\x00" in post["user"]:  # refused before the view, for every form (judging.nul_bytes)
        assert message.replace("'", "&#x27;") in response.content.decode()
        return
    shown = [str(m) for m in response.context["messages"]]
    assert len(shown) == 1 and shown[0].startswith(message)
    assert Membership.objects.filter(campaign=campaign).count() == 2
