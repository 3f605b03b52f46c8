"""A NUL character in an address, a query string or a page's form: 400 naming where, on both databases (PostgreSQL
cannot store one, and answered 500 where a view passed it on), in the reader's language."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient


@pytest.mark.parametrize(
    "url",
    [
        "/campaigns/demo/leaderboard/queries/q%00/",
        "/campaigns/demo/leaderboard/queries/q1%00x/",
        "/campaigns/de%00mo/",
        "/campaigns/demo/judge/%00",
    ],
)
def test_a_nul_in_the_address_is_400(board, client, lead, url):
    client.force_login(lead)
    response = client.get(url)
    assert response.status_code == 400
    assert "The address holds a NUL character" in response.content.decode()


@pytest.mark.parametrize(
    ("url", "params", "field"),
    [
        ("/campaigns/demo/leaderboard/tags/", {"q": "x\x00"}, "q"),
        ("/campaigns/demo/leaderboard/", {"k": "1\x00"}, "k"),
        ("/campaigns/demo/my-judgments/", {"q": "\x00"}, "q"),
        ("/campaigns/demo/leaderboard/", {"x\x00": "1"}, "x\\x00"),
    ],
)
def test_a_nul_in_the_query_string_is_400_naming_the_parameter(board, client, lead, url, params, field):
    client.force_login(lead)
    response = client.get(url, params)
    assert response.status_code == 400
    assert f"&#x27;{field}&#x27; holds a NUL character" in response.content.decode()


def test_the_api_answers_json_naming_the_parameter(board, lead):
    api = APIClient()
    api.force_authenticate(lead)
    response = api.get("/api/judgments/", {"campaign": "demo\x00"})
    assert response.status_code == 400
    assert response.json() == {"campaign": ["'campaign' holds a NUL character, which no field accepts."]}
    assert api.get("/api/campaigns/demo%00/").status_code == 400


def test_the_page_is_in_korean_for_a_korean_reader(board, client, lead):
    client.force_login(lead)
    response = client.get("/campaigns/demo/leaderboard/tags/", {"q": "\x00"}, HTTP_ACCEPT_LANGUAGE="ko")
    assert response.status_code == 400
    assert "NUL 문자" in response.content.decode()


def test_a_page_form_with_a_nul_is_400_before_the_view(board, client, lead):
    client.force_login(lead)
    response = client.post("/campaigns/demo/settings/", {"name": "New\x00name"})
    assert response.status_code == 400
    board.refresh_from_db()
    assert board.name == "Demo"
