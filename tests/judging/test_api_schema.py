"""The API against its own OpenAPI schema: schemathesis generates requests for every operation and runs them
in-process through the WSGI app as a lead; no response may be a server error or differ from the schema."""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from rest_framework.authtoken.models import Token
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from judging.services import membership_add

# Examples per operation: valid requests, then invalid ones (which must get a 4xx, never a 5xx).
# About a minute for the whole API; raise it locally to search harder.
EXAMPLES = int(os.environ.get("RELJUDGE_SCHEMATHESIS_EXAMPLES", "20"))
MODES = ((GenerationMode.POSITIVE, EXAMPLES), (GenerationMode.NEGATIVE, max(1, EXAMPLES // 3)))
TOKEN = "0123456789abcdef0123456789abcdef01234567"


def _finished_job(world):
    """A finished background import of the demo campaign, for /api/jobs/{id}/ (retrying it is refused)."""
    from judging.models import Job

    job, _ = Job.objects.get_or_create(
        campaign=world.campaign, started_by=world.lead, kind="run", filename="big.run", defaults={"status": "done"}
    )
    return job


def _path_parameters(path: str, world) -> dict:
    """Real objects for the path parameters, so requests reach the views rather than 404 on every try."""
    resource_ids = {
        "/api/queries/": world.query.id,
        "/api/documents/": world.document.id,
        "/api/systems/": world.system.id,
        "/api/pairs/": world.pair.public_id,
        "/api/judgments/": world.judgment2.id,
        "/api/jobs/": _finished_job(world).id,
    }
    params = {}
    if "{slug}" in path:
        params["slug"] = "demo"
    if "{username}" in path:
        params["username"] = "ann2"
    if "{id}" in path:
        params["id"] = next(v for prefix, v in resource_ids.items() if path.startswith(prefix))
    return params


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


def test_api_conforms_to_its_schema(world, keep_connection):
    from django.core.wsgi import get_wsgi_application

    schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())
    headers = {"Authorization": f"Token {TOKEN}"}

    def restore_state():
        # Generated requests may revoke the token, demote the lead or remove a member: put them back so
        # that every request runs as a lead of the demo campaign.
        Token.objects.get_or_create(user=world.lead, defaults={"key": TOKEN})
        membership_add(campaign=world.campaign, user=world.lead, role="lead")
        membership_add(campaign=world.campaign, user=world.annotator2, role="annotator")

    failures, operations = [], 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        for mode, examples in MODES:
            strategy = operation.as_strategy(mode, path_parameters=_path_parameters(operation.path, world))

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
                restore_state()
                response = case.call(headers=headers)
                case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])

            try:
                check()
            except Unsatisfiable:
                assert mode == GenerationMode.NEGATIVE  # an operation with nothing that can be made invalid
            except Exception as exc:  # collect every operation's failure, then report them all
                failures.append(f"{operation.label} ({mode.value}): {exc}")
    assert operations >= 30
    assert not failures, "\n\n".join(failures)
