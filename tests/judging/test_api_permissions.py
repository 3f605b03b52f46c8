"""The API's permission matrix: every endpoint x anonymous, annotator, other annotator and lead."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from tests.data import DOCS, SYSTEM_NAMES, TOPICS, body_of, client_for

ANON, ANN, OTHER, LEAD = "anonymous", "annotator", "other annotator", "lead"


def upload(name: str, content: str) -> dict:
    return {"file": SimpleUploadedFile(name, content.encode())}


# (method, path, body, {caller: expected status}). Paths are formatted with the world's ids.
# "other annotator" is an annotator of another campaign: for this one it is a non-member (404).
ENDPOINTS = [
    ("get", "/api/", None, {ANON: 401, ANN: 200, OTHER: 200, LEAD: 200}),
    ("get", "/api/campaigns/", None, {ANON: 401, ANN: 200, OTHER: 200, LEAD: 200}),
    ("post", "/api/campaigns/", {"slug": "fresh", "grades": [0, 1]}, {ANON: 401, ANN: 403, OTHER: 403, LEAD: 201}),
    ("get", "/api/campaigns/demo/", None, {ANON: 401, ANN: 200, OTHER: 404, LEAD: 200}),
    ("patch", "/api/campaigns/demo/", {"guidelines": "Be strict."}, {ANON: 401, ANN: 403, OTHER: 404, LEAD: 200}),
    ("get", "/api/campaigns/demo/progress/", None, {ANON: 401, ANN: 200, OTHER: 404, LEAD: 200}),
    ("get", "/api/campaigns/demo/leaderboard/", None, {ANON: 401, ANN: 403, OTHER: 404, LEAD: 200}),
    ("get", "/api/campaigns/demo/qrels/", None, {ANON: 401, ANN: 403, OTHER: 404, LEAD: 200}),
    ("get", "/api/campaigns/demo/members/", None, {ANON: 401, ANN: 403, OTHER: 404, LEAD: 200}),
    (
        "post",
        "/api/campaigns/demo/members/",
        {"username": "stranger", "role": "annotator"},
        {ANON: 401, ANN: 403, OTHER: 404, LEAD: 200},
    ),
    ("delete", "/api/campaigns/demo/members/ann2/", None, {ANON: 401, ANN: 403, OTHER: 404, LEAD: 204}),
    (
        "post",
        "/api/campaigns/demo/upload/topics/",
        lambda: upload("t.tsv", TOPICS),
        {ANON: 401, ANN: 403, OTHER: 404, LEAD: 200},
    ),
    (
        "post",
        "/api/campaigns/demo/upload/documents/",
        lambda: upload("d.jsonl", DOCS),
        {ANON: 401, ANN: 403, OTHER: 404, LEAD: 200},
    ),
    (
        "post",
        "/api/campaigns/demo/upload/run/",
        lambda: upload("x.run", "q1 Q0 d4 1 5.0 sparse\n"),
        {ANON: 401, ANN: 403, OTHER: 404, LEAD: 200},
    ),
    (
        "post",
        "/api/campaigns/demo/upload/qrels/",
        lambda: upload("x.qrels", "q1 0 d2 1\n"),
        {ANON: 401, ANN: 403, OTHER: 404, LEAD: 200},
    ),
    ("get", "/api/queries/?campaign=demo", None, {ANON: 401, ANN: 200, OTHER: 404, LEAD: 200}),
    ("get", "/api/queries/{query}/", None, {ANON: 401, ANN: 200, OTHER: 404, LEAD: 200}),
    ("get", "/api/documents/?campaign=demo", None, {ANON: 401, ANN: 200, OTHER: 404, LEAD: 200}),
    ("get", "/api/documents/{document}/", None, {ANON: 401, ANN: 200, OTHER: 404, LEAD: 200}),
    ("get", "/api/systems/?campaign=demo", None, {ANON: 401, ANN: 403, OTHER: 404, LEAD: 200}),
    ("get", "/api/systems/{system}/", None, {ANON: 401, ANN: 403, OTHER: 404, LEAD: 200}),
    ("get", "/api/systems/{system}/run/", None, {ANON: 401, ANN: 403, OTHER: 404, LEAD: 200}),
    ("get", "/api/pairs/?campaign=demo", None, {ANON: 401, ANN: 200, OTHER: 404, LEAD: 200}),
    ("get", "/api/pairs/{pair}/", None, {ANON: 401, ANN: 200, OTHER: 404, LEAD: 200}),
    ("post", "/api/pairs/{pair}/adjudicate/", {"grade": 2}, {ANON: 401, ANN: 403, OTHER: 404, LEAD: 200}),
    ("get", "/api/judgments/?campaign=demo", None, {ANON: 401, ANN: 200, OTHER: 404, LEAD: 200}),
    ("get", "/api/judgments/?campaign=demo&format=csv", None, {ANON: 401, ANN: 200, OTHER: 404, LEAD: 200}),
    (
        "get",
        "/api/judgments/?campaign=demo&format=jsonl&unsure=include",
        None,
        {ANON: 401, ANN: 200, OTHER: 404, LEAD: 200},
    ),
    ("get", "/api/judgments/{judgment}/", None, {ANON: 401, ANN: 200, OTHER: 404, LEAD: 200}),
    ("get", "/api/judgments/{judgment2}/", None, {ANON: 401, ANN: 404, OTHER: 404, LEAD: 200}),
    ("get", "/api/judgments/{judgment}/history/", None, {ANON: 401, ANN: 200, OTHER: 404, LEAD: 200}),
    ("get", "/api/judgments/{judgment2}/history/", None, {ANON: 401, ANN: 404, OTHER: 404, LEAD: 200}),
    (
        "post",
        "/api/judgments/",
        {"campaign": "demo", "qid": "q1", "docid": "d2", "grade": 1},
        {ANON: 401, ANN: 201, OTHER: 404, LEAD: 201},
    ),
    ("post", "/api/judgments/", {"pair": "{pair}", "grade": 0}, {ANON: 401, ANN: 200, OTHER: 404, LEAD: 201}),
    ("delete", "/api/auth/token/", None, {ANON: 401, ANN: 204, OTHER: 204, LEAD: 204}),
    ("get", "/api/schema/", None, {ANON: 200, ANN: 200, OTHER: 200, LEAD: 200}),
    ("get", "/api/docs/", None, {ANON: 200, ANN: 200, OTHER: 200, LEAD: 200}),
]


def _cases():
    for method, path, body, expected in ENDPOINTS:
        for caller, status in expected.items():
            yield pytest.param(method, path, body, caller, status, id=f"{method.upper()} {path} as {caller}")


@pytest.mark.parametrize(("method", "path", "body", "caller", "status"), list(_cases()))
def test_api_permission_matrix(world, method, path, body, caller, status):
    user = {ANON: None, ANN: world.annotator, OTHER: world.stranger, LEAD: world.lead}[caller]
    ids = {
        "query": world.query.id,
        "document": world.document.id,
        "system": world.system.id,
        "pair": world.pair.public_id,
        "judgment": world.judgment.id,
        "judgment2": world.judgment2.id,
    }
    url = path.format(**ids)
    if callable(body):
        data, fmt = body(), "multipart"
    else:
        data = {k: (v.format(**ids) if isinstance(v, str) else v) for k, v in (body or {}).items()} or None
        fmt = "json"
    response = getattr(client_for(user), method)(url, data, format=fmt)
    content = body_of(response)
    assert response.status_code == status, content[:500]
    if status == 401:
        assert response["WWW-Authenticate"] == "Token"
    if caller == ANN and not path.startswith("/api/schema") and not path.startswith("/api/docs"):
        # Annotators never see systems, runs or rankings.
        for name in SYSTEM_NAMES:
            assert name.encode() not in content.lower()


def test_api_annotator_sees_only_own_judgments_and_no_labels(world):
    client = client_for(world.annotator)
    rows = client.get("/api/judgments/", {"campaign": "demo", "unsure": "include"}).json()["results"]
    assert {r["annotator"] for r in rows} == {"ann"} and len(rows) == 3
    csv_text = body_of(client.get("/api/judgments/", {"campaign": "demo", "format": "csv"})).decode()
    assert "ann2" not in csv_text
    # Asking for someone else's judgments by name gives nothing rather than theirs.
    assert client.get("/api/judgments/", {"annotator": "ann2"}).json()["results"] == []
    pairs = client.get("/api/pairs/", {"campaign": "demo"}).json()["results"]
    assert pairs and all({"label", "adjudicated", "judgment_count"}.isdisjoint(p) for p in pairs)
    # Label filters cannot be used to probe the labels either.
    assert client.get("/api/pairs/", {"campaign": "demo", "labelled": "true"}).json()["count"] == 0
    assert client.get("/api/pairs/", {"label": 1}).json()["count"] == 0
    progress = client.get("/api/campaigns/demo/progress/").json()
    assert [row["username"] for row in progress["annotators"]] == ["ann"]


def test_api_lead_sees_labels_and_everyone(world):
    client = client_for(world.lead)
    rows = client.get("/api/judgments/", {"campaign": "demo"}).json()["results"]
    assert {r["annotator"] for r in rows} == {"ann", "ann2"}
    pair = client.get(f"/api/pairs/{world.pair.public_id}/").json()
    assert (pair["label"], pair["judgment_count"], pair["adjudicated"]) == (1, 2, False)
    assert client.get("/api/pairs/", {"campaign": "demo", "labelled": "true"}).json()["count"] == 4
    progress = client.get("/api/campaigns/demo/progress/").json()
    assert [row["username"] for row in progress["annotators"]] == ["ann", "ann2", "lead"]


def test_api_campaign_list_shows_only_callers_campaigns(world):
    assert [c["slug"] for c in client_for(world.stranger).get("/api/campaigns/").json()["results"]] == ["other"]
    mine = client_for(world.annotator).get("/api/campaigns/").json()["results"]
    assert [(c["slug"], c["role"]) for c in mine] == [("demo", "annotator")]


def test_api_non_member_list_without_campaign_filter_is_empty(world):
    client = client_for(world.stranger)
    for path in ("/api/queries/", "/api/documents/", "/api/pairs/", "/api/systems/"):
        assert client.get(path).json()["count"] == 0, path
    assert client.get("/api/judgments/").json()["results"] == []


def test_api_annotator_cannot_judge_unpooled_pair(world):
    from judging.services import qrels_import

    qrels_import(campaign=world.campaign, data=b"q2 0 d1 2\n", filename="old.qrels", annotator=world.annotator2)
    pair = world.pair_of("q2", "d1")
    assert not pair.pooled
    response = client_for(world.annotator).post("/api/judgments/", {"pair": pair.public_id, "grade": 1}, format="json")
    assert response.status_code == 404
    response = client_for(world.lead).post("/api/judgments/", {"pair": pair.public_id, "grade": 1}, format="json")
    assert response.status_code == 201


def test_api_leaderboard_visible_to_annotators_when_the_lead_says_so(world):
    world.campaign.leaderboard_visible_to_annotators = True
    world.campaign.save()
    response = client_for(world.annotator).get("/api/campaigns/demo/leaderboard/")
    assert response.status_code == 200
    # Systems and runs stay hidden all the same.
    assert client_for(world.annotator).get(f"/api/systems/{world.system.id}/").status_code == 403


def test_api_session_auth_enforces_csrf(world):
    from rest_framework.test import APIClient

    client = APIClient(enforce_csrf_checks=True)
    client.force_login(world.annotator)
    assert client.get("/api/campaigns/").status_code == 200
    body = {"campaign": "demo", "qid": "q1", "docid": "d2", "grade": 1}
    response = client.post("/api/judgments/", body, format="json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    client.get("/accounts/login/")  # sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    response = client.post("/api/judgments/", body, format="json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 201


def test_api_anonymous_requests_are_throttled(world, settings):
    from django.core.cache import cache

    cache.clear()
    client = client_for(None)
    statuses = [client.get("/api/campaigns/").status_code for _ in range(61)]
    assert statuses[:60] == [401] * 60 and statuses[60] == 429
    cache.clear()


@pytest.mark.parametrize(
    ("who", "may"),
    [("annotator", False), ("granted", True), ("superuser", True), ("lead", True)],
)
def test_who_may_create_campaigns_is_one_rule_for_the_page_and_the_api(world, make_user, who, may):
    """judging.access.can_create_campaigns decides for both: the API's permission reads it from the roles it
    already holds, the page asks it directly."""
    users = {"annotator": world.annotator, "lead": world.lead}
    if who == "granted":
        users[who] = make_user("granted")
        users[who].user_permissions.add(Permission.objects.get(codename="add_campaign"))
    elif who == "superuser":
        users[who] = make_user("root", is_superuser=True)
    user = users[who]
    response = client_for(user).post("/api/campaigns/", {"slug": f"new-{who}"}, format="json")
    assert response.status_code == (201 if may else 403)
    page = Client()
    page.force_login(user)
    assert page.get(reverse("judging:campaign_new")).status_code == (200 if may else 403)
