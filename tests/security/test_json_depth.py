"""Deeply nested JSON: refused with 400 before the recursive parser sees it, on every JSON endpoint (login too)."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from judging.json_depth import JSON_DEPTH_MAX, JSONTooDeep, json_depth, json_loads


def nested(levels: int, opener: str = "[") -> str:
    if opener == "{":
        return '{"a":' * levels + "1" + "}" * levels
    return "[" * levels + "1" + "]" * levels


@pytest.mark.parametrize("levels", [1_000, 100_000, JSON_DEPTH_MAX + 1])
@pytest.mark.parametrize("opener", ["[", "{"])
def test_login_refuses_deep_json_with_400_without_a_login(db, levels, opener):
    response = APIClient().post("/api/auth/token/", nested(levels, opener), content_type="application/json")
    assert response.status_code == 400
    assert f"nests {levels} levels deep; at most {JSON_DEPTH_MAX}" in response.json()["detail"]


def test_login_takes_json_within_the_limit(db, annotator):
    body = json.dumps({"username": "ann", "password": "pw-ann", "extra": json.loads(nested(JSON_DEPTH_MAX - 1))})
    response = APIClient().post("/api/auth/token/", body, content_type="application/json")
    assert response.status_code == 200 and response.json()["token"]


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("post", "/api/judgments/"),
        ("patch", "/api/campaigns/demo/"),
        ("post", "/api/campaigns/demo/assignments/"),
        ("delete", "/api/campaigns/demo/assignments/"),
        ("post", "/api/campaigns/demo/members/"),
    ],
)
def test_every_json_endpoint_refuses_deep_json(campaign, lead, method, url):
    client = APIClient()
    client.force_authenticate(lead)
    response = getattr(client, method)(url, nested(5_000), content_type="application/json")
    assert response.status_code == 400, response.content[:200]
    assert "at most 64 are accepted" in response.json()["detail"]


def test_brackets_inside_strings_do_not_nest():
    text = json.dumps({"note": "[" * 1_000 + '\\"{' * 500, "list": [[["x"]]]})
    assert json_depth(text) == json_depth(text.encode()) == 4
    assert json_loads(text)["list"] == [[["x"]]]
    assert json_depth('"just a string"') == json_depth("12") == 0


def test_json_loads_refuses_before_parsing():
    with pytest.raises(JSONTooDeep) as refused:
        json_loads("[" * 1_000_000)  # would be a RecursionError in json.loads
    assert refused.value.depth == 1_000_000 and isinstance(refused.value, ValueError)
