"""Issue 11 #7: with the leaderboard shown to annotators, the API gives them what the web page shows them (the
means at the page's parameters) and nothing more: no per-query drill-down, no threshold beyond the scale."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from judging.models import Campaign

pytestmark = pytest.mark.django_db
URL = "/api/campaigns/demo/leaderboard/"


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def test_leaderboard_api_gives_annotators_no_per_query_values(board, annotator, lead):
    data = api(annotator).get(URL, {"k": 2}).json()
    assert [s["name"] for s in data["systems"]] and all("per_query" not in s for s in data["systems"])
    # The means are the leads' means: what the page's main table shows.
    led = api(lead).get(URL, {"k": 2, "per_query": "true"}).json()
    assert all("per_query" in s for s in led["systems"])
    assert {s["name"]: s["measures"] for s in data["systems"]} == {s["name"]: s["measures"] for s in led["systems"]}


@pytest.mark.parametrize("value", ["true", "1", "True"])
@pytest.mark.parametrize("extra", [{}, {"format": "csv"}])
def test_leaderboard_api_refuses_annotators_the_drill_down(board, annotator, value, extra):
    response = api(annotator).get(URL, {"per_query": value, **extra})
    assert response.status_code == 403 and "per-query" in response.json()["detail"]
    # The web page refuses them the same drill-down.
    web = Client()
    web.force_login(annotator)
    assert web.get(reverse("judging:leaderboard_queries", args=["demo"])).status_code == 403


@pytest.mark.parametrize("params", [{"threshold": 3}, {"threshold": 100, "policy": "max", "k": 1000}])
def test_leaderboard_api_limits_annotators_parameters_as_the_page_does(board, annotator, lead, params):
    response = api(annotator).get(URL, params)
    assert response.status_code == 400
    message = "must be between 0 and 2, the top grade of this campaign's scale"
    assert response.json()["threshold"] == [message]
    web = Client()
    web.force_login(annotator)
    page = web.get(reverse("judging:leaderboard", args=["demo"]), params)
    assert page.status_code == 400 and escape(message) in page.content.decode()  # one rule, the same words
    assert api(lead).get(URL, params).status_code == 200  # leads' scripts keep the full range


def test_leaderboard_api_annotators_get_the_page_parameters(board, annotator):
    response = api(annotator).get(URL, {"k": 3, "threshold": 2, "gain": "exponential", "policy": "max"})
    assert response.status_code == 200
    data = response.json()
    assert (data["k"], data["threshold"], data["gain"]) == (3, 2, "exponential")
    # no per-query values for annotators; the bounds of the means are on their page too
    assert all(set(s) <= {"name", "measures", "bounds"} and "per_query" not in s for s in data["systems"])


def test_leaderboard_api_still_hidden_when_the_leads_say_so(board, annotator):
    Campaign.objects.filter(pk=board.pk).update(leaderboard_visible_to_annotators=False)
    assert api(annotator).get(URL, {"per_query": "false"}).status_code == 403


def test_online_api_gives_annotators_the_pages_per_query_rows_only(board, annotator, lead):
    """The page shows each metric's best measure per query; the API gave annotators every measure's."""
    from judging.services.online import online_import

    figures = b"bm25,ctr,0.3\ndense,ctr,0.2\nbm25,ctr,0.5,q1\ndense,ctr,0.4,q1\n"
    online_import(campaign=board, data=figures, filename="o.csv")
    url = "/api/campaigns/demo/online/"
    led = api(lead).get(url, {"k": 2}).json()
    assert len({row["measure"] for row in led["per_query"]}) > 1  # leads: every measure
    mine = api(annotator).get(url, {"k": 2})
    assert mine.status_code == 200
    data = mine.json()
    best = led["best"]["ctr"]["measure"]
    assert [(r["metric"], r["measure"]) for r in data["per_query"]] == [("ctr", best)]
    # the page shows the annotator the same rows
    web = Client()
    web.force_login(annotator)
    page = web.get(reverse("judging:online", args=["demo"]), {"k": 2})
    assert page.status_code == 200
    assert [(r["metric"], r["measure"]) for r in page.context["per_query"]] == [("ctr", best)]
