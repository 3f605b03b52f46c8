"""The API against its own OpenAPI schema: schemathesis generates requests for every operation and runs them
in-process through the WSGI app as a lead; no response may be a server error or differ from the schema. Twice:
on the small demo campaign, and on one built by bench/synthetic.py's realistic preset."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from rest_framework.authtoken.models import Token
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from bench import synthetic
from judging.services import (
    audit_draw,
    campaign_create,
    judgment_record,
    membership_add,
    qrels_import,
    queries_import,
    run_import,
    scale_from_values,
)

# Examples per operation: valid requests, then invalid ones (which must get a 4xx, never a 5xx).
# About a minute for the whole API; raise it locally to search harder.
EXAMPLES = int(os.environ.get("RELJUDGE_SCHEMATHESIS_EXAMPLES", "20"))
MODES = ((GenerationMode.POSITIVE, EXAMPLES), (GenerationMode.NEGATIVE, max(1, EXAMPLES // 3)))
TOKEN = "0123456789abcdef0123456789abcdef01234567"
# The run against the realistic campaign: fewer examples (each leaderboard there scores 48 systems), and a time
# budget shared out between the operations, so that CI's time stays bounded whatever the machine.
EXAMPLES_REAL = max(1, EXAMPLES // 4)
MODES_REAL = ((GenerationMode.POSITIVE, EXAMPLES_REAL), (GenerationMode.NEGATIVE, max(1, EXAMPLES_REAL // 3)))
SECONDS_REAL = float(os.environ.get("RELJUDGE_SCHEMATHESIS_SECONDS", "120"))
TOKEN_REAL = "fedcba9876543210fedcba9876543210fedcba98"


def _finished_job(campaign, user):
    """A finished background import of the campaign, for /api/jobs/{id}/ (retrying it is refused)."""
    from judging.models import Job

    job, _ = Job.objects.get_or_create(
        campaign=campaign, started_by=user, kind="run", filename="big.run", defaults={"status": "done"}
    )
    return job


@dataclass
class Target:
    """The campaign the requests go to, as its lead, and real objects for the path parameters (so that requests
    reach the views rather than 404 on every try)."""

    slug: str
    username: str  # a member other than the lead
    token: str
    resource_ids: dict[str, object]  # path prefix -> id
    restore_state: Callable[[], None]

    def path_parameters(self, path: str) -> dict:
        params: dict[str, object] = {}
        if "{slug}" in path:
            params["slug"] = self.slug
        if "{username}" in path:
            params["username"] = self.username
        if "{id}" in path:
            params["id"] = next(v for prefix, v in self.resource_ids.items() if path.startswith(prefix))
        return params


def _demo_target(world) -> Target:
    def restore_state():
        # Generated requests may revoke the token, demote the lead or remove a member: put them back so
        # that every request runs as a lead of the demo campaign.
        Token.objects.get_or_create(user=world.lead, defaults={"key": TOKEN})
        membership_add(campaign=world.campaign, user=world.lead, role="lead")
        membership_add(campaign=world.campaign, user=world.annotator2, role="annotator")

    ids = {
        "/api/queries/": world.query.id,
        "/api/documents/": world.document.id,
        "/api/systems/": world.system.id,
        "/api/pairs/": world.pair.public_id,
        "/api/judgments/": world.judgment2.id,
        "/api/jobs/": _finished_job(world.campaign, world.lead).id,
    }
    return Target("demo", "ann2", TOKEN, ids, restore_state)


@pytest.fixture
def keep_connection():
    """Requests go straight to the WSGI app, not through Django's test Client, so do what that client does:
    keep request_started/finished from closing the connection that holds the test's transaction."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


class _Budget:
    """The requests of one operation in one mode, and whether its share of the time budget is spent (never
    before its first request)."""

    def __init__(self, seconds: float | None):
        self.seconds, self.started, self.requests = seconds, time.monotonic(), 0

    def spent(self) -> bool:
        return self.seconds is not None and self.requests > 0 and time.monotonic() - self.started > self.seconds


def _checker(strategy, examples: int, target: Target, budget: _Budget):
    headers = {"Authorization": f"Token {target.token}"}

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],
    )
    @given(case=strategy)
    def check(case):
        if budget.spent():
            return
        target.restore_state()
        budget.requests += 1
        response = case.call(headers=headers)
        case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])

    return check


def _check_every_operation(target: Target, modes, seconds: float | None = None) -> tuple[int, int, list[str]]:
    """Run the generated requests of every operation of the schema; (operations, requests, failures).

    ``seconds``: a time budget shared out evenly between the operations and their modes; one whose share is
    spent makes no more requests (its first one always goes)."""
    from django.core.wsgi import get_wsgi_application

    schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())
    operations = [result.ok() for result in schema.get_all_operations()]
    failures: list[str] = []
    requests = 0
    for operation in operations:
        for mode, examples in modes:
            budget = _Budget(None if seconds is None else seconds / len(operations) / len(modes))
            strategy = operation.as_strategy(mode, path_parameters=target.path_parameters(operation.path))
            try:
                _checker(strategy, examples, target, budget)()
            except Unsatisfiable:
                assert mode == GenerationMode.NEGATIVE  # an operation with nothing that can be made invalid
            except Exception as exc:  # noqa: BLE001 - every operation's failure is collected, then reported
                failures.append(f"{operation.label} ({mode.value}): {exc}")
            requests += budget.requests
    return len(operations), requests, failures


def test_api_conforms_to_its_schema(world, keep_connection):
    operations, _, failures = _check_every_operation(_demo_target(world), MODES)
    assert operations >= 30
    assert not failures, "\n\n".join(failures)


@pytest.fixture
def realistic(make_user):
    """Campaign "real" built from the realistic preset (bench/synthetic.py: 48 systems in families, near ties,
    tied scores, a run that missed queries, grades 0-3) over 12 queries, pooled to depth 10: 40% of the pool
    labelled by one person, one judgment by another, a model judge "bot" on every pooled pair, 4 queries drawn
    for the audit, a finished job."""
    from judging.models import Document, Pair, Query, System
    from judging.services.model_judge import model_judge_get_or_create

    coll = synthetic.generate("realistic", queries=12, seed=1)
    campaign = campaign_create(slug="real", name="Realistic", pool_depth=10, scale=scale_from_values(coll.scale))
    lead, person, other = make_user("real-lead"), make_user("real-ann"), make_user("real-ann2")
    membership_add(campaign=campaign, user=lead, role="lead")
    membership_add(campaign=campaign, user=person, role="annotator")
    membership_add(campaign=campaign, user=other, role="annotator")
    queries_import(campaign=campaign, data=coll.topics_text().encode(), filename="topics.tsv")
    runs = "".join(coll.run_text(s) for s in range(len(coll.systems)))
    run_import(campaign=campaign, data=runs.encode(), filename="runs.trec")
    rng = np.random.default_rng(1)
    pairs = list(Pair.objects.filter(campaign=campaign, pooled=True).values_list("query__qid", "document__docid"))
    truth = {(q, d): int(coll.grades[coll.qids.index(q), int(d.rsplit("-", 1)[1])]) for q, d in pairs}
    human = "".join(f"{q} 0 {d} {g}\n" for (q, d), g in sorted(truth.items()) if rng.random() < 0.4)
    qrels_import(campaign=campaign, data=human.encode(), filename="h.qrels", annotator=person)
    model = "".join(
        f"{q} 0 {d} {g if rng.random() < 0.7 else int(rng.integers(0, 4))}\n" for (q, d), g in sorted(truth.items())
    )
    judge = model_judge_get_or_create(name="bot", campaign=campaign)
    qrels_import(campaign=campaign, data=model.encode(), filename="bot.qrels", annotator=judge)
    audit_draw(campaign=campaign, size=4, user=lead, seed=1)
    pair = Pair.objects.filter(campaign=campaign, pooled=True).order_by("id").first()
    judgment, _ = judgment_record(pair=pair, annotator=other, grade=1)

    def restore_state():
        Token.objects.get_or_create(user=lead, defaults={"key": TOKEN_REAL})
        membership_add(campaign=campaign, user=lead, role="lead")
        membership_add(campaign=campaign, user=other, role="annotator")

    ids = {
        "/api/queries/": Query.objects.filter(campaign=campaign).order_by("id").first().id,
        "/api/documents/": Document.objects.filter(campaign=campaign).order_by("id").first().id,
        "/api/systems/": System.objects.filter(campaign=campaign).order_by("id").first().id,
        "/api/pairs/": pair.public_id,
        "/api/judgments/": judgment.id,
        "/api/jobs/": _finished_job(campaign, lead).id,
    }
    return Target("real", "real-ann2", TOKEN_REAL, ids, restore_state)


def test_api_conforms_to_its_schema_on_a_realistic_campaign(realistic, keep_connection):
    """The same run against a campaign the size and shape of a TREC track's (few examples per operation, within
    RELJUDGE_SCHEMATHESIS_SECONDS)."""
    operations, requests, failures = _check_every_operation(realistic, MODES_REAL, seconds=SECONDS_REAL)
    assert operations >= 30 and requests >= operations
    assert not failures, "\n\n".join(failures)
