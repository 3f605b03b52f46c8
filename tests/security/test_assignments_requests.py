"""The assignments API and page against tampered requests: ids past 64 bits, usernames in another case, the range's
fields named as the request named them, NUL characters."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from judging.models import QueryAssignment
from judging.services import membership_add, run_import
from judging.services.assignments import assignments_add, queries_of_batch
from tests.data import RUN_BM25


@pytest.fixture
def team(campaign, lead, annotator, make_user):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    alice = make_user("alice")
    membership_add(campaign=campaign, user=alice, role="annotator")
    assignments_add(
        campaign=campaign, by=lead, annotator="ann", queries=queries_of_batch(campaign=campaign, qids=["q1"])
    )
    return campaign


@pytest.fixture
def api(lead):
    client = APIClient()
    client.force_authenticate(lead)
    return client


URL = "/api/campaigns/demo/assignments/"


@pytest.mark.parametrize("value", [2**63, 99999999999999999999, 9223372036854775807 + 10**30])
def test_api_remove_with_an_id_past_64_bits_is_400_naming_ids(team, api, value):
    response = api.delete(URL, {"ids": [value]}, format="json")
    assert response.status_code == 400
    assert list(response.json()) == ["ids"]
    assert QueryAssignment.objects.count() == 1


def test_api_remove_with_the_largest_64_bit_id_removes_nothing(team, api):
    response = api.delete(URL, {"ids": [2**63 - 1]}, format="json")
    assert response.status_code == 200 and response.json() == {"removed": 0}


@pytest.mark.parametrize(
    "value",
    ["9" * 30, "9223372036854775808", "1e3", "-1", "9" * 5000, "１"],
    ids=["30-nines", "2**63", "1e3", "-1", "5000-digits", "fullwidth-1"],
)
def test_page_remove_with_a_tampered_id_is_400_naming_ids(team, client, lead, value):
    client.force_login(lead)
    response = client.post(reverse("judging:assignments", args=["demo"]), {"action": "remove", "ids": [value]})
    assert response.status_code == 400
    assert "ids: " in response.content.decode() and "is not an assignment id" in response.content.decode()
    assert QueryAssignment.objects.count() == 1


@pytest.mark.parametrize("typed", ["ALICE", "Alice", "ａｌｉｃｅ"])
def test_api_finds_the_annotator_in_any_case(team, api, typed):
    response = api.post(URL, {"annotator": typed, "qids": ["q2"]}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["annotator"] == "alice"
    removed = api.delete(URL, {"annotator": typed.upper()}, format="json")
    assert removed.status_code == 200 and removed.json() == {"removed": 1}


def test_api_names_a_look_alike_annotator(team, api):
    response = api.post(URL, {"annotator": "ɑlice", "qids": ["q2"]}, format="json")
    assert response.status_code == 400
    assert "looks like the existing account 'alice'" in response.json()["annotator"][0]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"annotator": "alice", "from": ["q1"], "to": "q2"}, "from"),
        ({"annotator": "alice", "from": "q1", "to": "x" * 201}, "to"),
        ({"annotator": "alice", "from": "q1", "to": None}, "to"),
        ({"annotator": "alice", "from": "q1", "to": "nope"}, "to"),
        ({"annotator": "alice", "from": "q1"}, "to"),
    ],
)
def test_api_range_errors_name_from_and_to_as_the_request_did(team, api, body, field):
    response = api.post(URL, body, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field], response.json()


def test_api_range_in_a_form_body_works(team, api):
    response = api.post(URL, {"annotator": "alice", "from": "q2", "to": "q2"})
    assert response.status_code == 201, response.json()


@pytest.mark.parametrize("field", ["annotator", "qids", "tag"])
def test_page_form_with_a_nul_is_400_naming_the_field(team, client, lead, field):
    client.force_login(lead)
    form = {"batch": {"qids": "qids", "tag": "tag"}.get(field, "qids"), "annotator": "alice", "qids": "q2"}
    form[field] = "x\x00y"
    response = client.post(reverse("judging:assignments", args=["demo"]), form)
    assert response.status_code == 400
    assert f"&#x27;{field}&#x27; holds a NUL character" in response.content.decode()
    assert QueryAssignment.objects.count() == 1
