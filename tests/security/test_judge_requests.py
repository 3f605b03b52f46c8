"""A model judge's template and run requests: JSON booleans are not numbers, seeds have a range, and identical
template saves (also at once, on PostgreSQL) make one version."""

from __future__ import annotations

import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from rest_framework.test import APIClient

from judging.models import JudgeTemplate
from judging.services import campaign_create, membership_add, run_import
from judging.services.model_judge import model_judge_get_or_create
from tests.data import RUN_BM25, run_concurrently

TEMPLATE = "/api/campaigns/{slug}/judges/tiny/template/"


@pytest.fixture
def api(campaign, lead):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    model_judge_get_or_create(name="tiny", campaign=campaign)
    client = APIClient()
    client.force_authenticate(lead)
    return client


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scale_low": 0, "scale_high": 100, "thresholds": [True, 67]}, "thresholds"),
        ({"scale_low": 0, "scale_high": 100, "thresholds": [33, False]}, "thresholds"),
        ({"scale_low": True, "scale_high": 100, "thresholds": [33, 67]}, "scale_low"),
        ({"scale_low": 0, "scale_high": True, "thresholds": [0.5, 1]}, "scale_high"),
    ],
)
def test_template_booleans_are_not_numbers(api, body, field):
    response = api.post(TEMPLATE.format(slug="demo"), body, format="json")
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert not JudgeTemplate.objects.filter(scale_low__isnull=False).exists()


@pytest.mark.parametrize("seed", [-1, 2**32, True, "1e3"])
def test_run_seed_out_of_range_is_400_naming_it(api, settings, monkeypatch, seed):
    monkeypatch.setenv("RELJUDGE_MODEL_ENDPOINT", "http://127.0.0.1:9/v1")
    response = api.post("/api/campaigns/demo/judges/run/", {"model": "tiny", "seed": seed}, format="json")
    assert response.status_code == 400
    assert list(response.json()) == ["seed"]


def test_command_seed_out_of_range_is_refused(api):
    with pytest.raises(CommandError, match="--seed must be a whole number from 0 to 4294967295"):
        call_command("judge_with_model", "demo", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--seed", "-1")


def test_identical_template_saves_make_one_version(api):
    body = {"text": "Grade it.", "scale_low": 0, "scale_high": 100, "thresholds": [33, 67]}
    statuses = [api.post(TEMPLATE.format(slug="demo"), body, format="json").status_code for _ in range(3)]
    assert statuses == [201, 200, 200]
    assert JudgeTemplate.objects.filter(text="Grade it.\n").count() == 1
    same_numbers = {**body, "thresholds": [33.0, 67.0]}
    assert api.post(TEMPLATE.format(slug="demo"), same_numbers, format="json").status_code == 200


@pytest.fixture
def pg_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent transactions are tested on PostgreSQL (SQLite writes one at a time)")


@pytest.mark.postgres
def test_eight_identical_template_saves_at_once_make_one_version(pg_only, make_user):
    lead = make_user("lead")
    campaign = campaign_create(slug="race", name="Race", pool_depth=2)
    membership_add(campaign=campaign, user=lead, role="lead")
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    model_judge_get_or_create(name="tiny", campaign=campaign)
    statuses: list[int] = []
    lock = threading.Lock()
    body = {"text": "Grade it, at once.", "scale_low": 0, "scale_high": 10, "thresholds": [3, 7]}

    def save():
        client = APIClient()
        client.force_authenticate(lead)
        response = client.post(TEMPLATE.format(slug="race"), body, format="json")
        with lock:
            statuses.append(response.status_code)

    errors = run_concurrently(save, [() for _ in range(8)])
    assert not errors, errors
    assert sorted(statuses) == [200] * 7 + [201], statuses
    assert JudgeTemplate.objects.filter(campaign=campaign, text="Grade it, at once.\n").count() == 1
