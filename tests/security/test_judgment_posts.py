"""Judgment posts: contradictory fields are a 400 naming the field, and of many identical parallel first
posts exactly one is answered 201 (PostgreSQL, where the requests really run at once)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.urls import reverse
from rest_framework.test import APIClient

from judging.models import Judgment, JudgmentRevision, Pair
from judging.services import campaign_create, membership_add, run_import
from tests.data import RUN_BM25, run_concurrently


@pytest.fixture
def pooled(campaign):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    return campaign


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_api_judgment_unsure_with_grade_and_tentative_grade_is_400_naming_grade(pooled, annotator):
    body = {"campaign": "demo", "qid": "q1", "docid": "d1", "unsure": True, "grade": 2, "tentative_grade": 1}
    response = api(annotator).post("/api/judgments/", body, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "grade": ["an unsure judgment has no grade: send the tentative grade alone, or drop unsure"]
    }
    assert not Judgment.objects.exists()


def test_web_judgment_unsure_with_grade_and_tentative_grade_names_grade(client, pooled, annotator):
    client.force_login(annotator)
    pair = Pair.objects.get(query__qid="q1", document__docid="d1")
    response = client.post(
        reverse("judging:judge_record", args=[pooled.slug, pair.public_id]),
        {"unsure": "on", "grade": "2", "tentative_grade": "1"},
    )
    assert response.status_code == 422
    assert response.context["errors"] == [
        "an unsure judgment has no grade: send the tentative grade alone, or drop unsure"
    ]
    assert not Judgment.objects.exists()


@pytest.mark.postgres
def test_api_identical_parallel_first_posts_one_201_the_rest_200(transactional_db, make_user):
    if connection.vendor != "postgresql":
        pytest.skip("parallel requests are tested on PostgreSQL (CI runs the suite there too)")
    campaign = campaign_create(slug="race", pool_depth=5)
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    user = make_user("racer")
    membership_add(campaign=campaign, user=user, role="annotator")
    body = {"campaign": "race", "qid": "q1", "docid": "d1", "grade": 2, "note": "same"}
    statuses: list[int] = []

    def post():
        statuses.append(api(user).post("/api/judgments/", body, format="json").status_code)

    errors = run_concurrently(post, [()] * 20)
    assert not errors, errors
    assert sorted(statuses) == [200] * 19 + [201]
    assert Judgment.objects.filter(annotator=user).count() == 1
    assert JudgmentRevision.objects.filter(judgment__annotator=user).count() == 1
