"""A misbehaving model endpoint: one that echoes the key, redirects, answers at a link-local address or nests its
answer a million deep. Nothing of the key reaches a job's result, page, log or judgment; a redirect leaves the
pair unjudged with the reason in the job's log."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from judging import jobs
from judging.models import Job, Judgment
from judging.services import documents_import, qrels_import, queries_import, run_import
from judging.services.model_client import ChatClient, Endpoint, ModelCallError
from judging.services.model_judge import ANSWER_EXCERPT_CHARS
from tests.data import DOCS, RUN_BM25, RUN_DENSE, TOPICS

KEY = "sk-live-7f3c9a1b2d4e6f8091a2b3c4"


class Endpoint_:
    """An HTTP server on an ephemeral port of 127.0.0.1 whose every POST gets ``reply(auth_header)``:
    (status, headers, body bytes)."""

    def __init__(self, reply):
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                status, headers, body = reply(self.headers.get("Authorization", ""))
                self.send_response(status)
                for name, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.endpoint = endpoint

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve():
    servers = []

    def start(reply) -> Endpoint_:
        servers.append(Endpoint_(reply))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def pooled_campaign(campaign, annotator):
    queries_import(campaign=campaign, data=TOPICS.encode(), filename="t.tsv")
    documents_import(campaign=campaign, data=DOCS.encode(), filename="d.jsonl")
    run_import(campaign=campaign, data=(RUN_BM25 + RUN_DENSE).encode(), filename="r.trec")
    qrels = "q1 0 d1 2\nq1 0 d3 1\nq1 0 d2 0\nq2 0 d4 2\nq2 0 d2 0\n"
    qrels_import(campaign=campaign, data=qrels.encode(), filename="h.qrels", annotator=annotator)
    return campaign


def _run(campaign, lead, url, monkeypatch, **kw) -> Job:
    monkeypatch.setenv("RELJUDGE_MODEL_API_KEY", KEY)
    job = jobs.model_judge_job_start(
        campaign=campaign, user=lead, model="tiny", pairs="all", endpoint=url, concurrency=2, retries=0,
        timeout=5, enqueue=False, **kw,
    )  # fmt: skip
    jobs.job_run(job_id=job.pk)
    return Job.objects.get(pk=job.pk)


def _everything_shown(client, job: Job, campaign) -> str:
    """The job's API answer and page, and the judgments API and CSV export, as one text."""
    answers = [
        client.get(f"/api/jobs/{job.pk}/"),
        client.get(f"/campaigns/{campaign.slug}/jobs/{job.pk}/"),
        client.get("/api/judgments/", {"campaign": campaign.slug}),
        client.get("/api/judgments/", {"campaign": campaign.slug, "format": "csv"}),
    ]
    parts = [b"".join(a.streaming_content).decode() if a.streaming else a.content.decode() for a in answers]
    return "\n".join(parts) + json.dumps(job.result) + json.dumps(job.error)


def test_a_401_echoing_the_key_shows_it_nowhere(pooled_campaign, lead, serve, monkeypatch, caplog, client):
    def reply(auth):
        body = {"error": {"message": f"Incorrect API key provided: {auth}. Also tried sk-other-1234567890abc."}}
        return 401, {"Content-Type": "application/json"}, json.dumps(body).encode()

    server = serve(reply)
    with caplog.at_level(logging.INFO):
        job = _run(pooled_campaign, lead, server.url, monkeypatch)
    assert job.result["failed"] == 5 and job.result["errors"]
    assert "HTTP 401: " in job.result["errors"][0] and "Bearer [redacted]" in job.result["errors"][0]
    client.force_login(lead)
    api = APIClient()
    api.force_authenticate(lead)
    shown = (
        _everything_shown(api, job, pooled_campaign) + client.get(f"/campaigns/demo/jobs/{job.pk}/").content.decode()
    )
    for secret in (KEY, "sk-other-1234567890abc", KEY[3:]):
        assert secret not in shown and secret not in caplog.text
    assert "got no judgment: HTTP 401" in caplog.text


def test_a_200_echoing_the_key_as_text_is_stored_redacted_and_short(pooled_campaign, lead, serve, monkeypatch, caplog):
    def reply(auth):
        return (
            200,
            {"Content-Type": "text/plain"},
            (f"<html>debug: your header was {auth}</html>" + "x" * 5000).encode(),
        )

    server = serve(reply)
    with caplog.at_level(logging.INFO):
        job = _run(pooled_campaign, lead, server.url, monkeypatch)
    assert job.result["unsure"] == 5
    notes = list(Judgment.objects.filter(annotator__username="tiny").values_list("note", flat=True))
    assert len(notes) == 5
    for note in notes:
        assert KEY not in note and "Bearer [redacted]" in note
        assert len(note) <= len("model answer could not be read as a grade: ") + ANSWER_EXCERPT_CHARS
    api = APIClient()
    api.force_authenticate(lead)
    assert KEY not in _everything_shown(api, job, pooled_campaign) and KEY not in caplog.text


def test_a_chat_completion_echoing_the_key_is_redacted(serve, monkeypatch):
    monkeypatch.setenv("RELJUDGE_MODEL_API_KEY", KEY)

    def reply(auth):
        content = json.dumps({"grade": 1, "reason": f"the caller sent {auth} and {KEY}"})
        return 200, {}, json.dumps({"choices": [{"message": {"content": content}}]}).encode()

    client = ChatClient(Endpoint.configured(url=serve(reply).url, model="m", retries=0))
    answer = client.complete([{"role": "user", "content": "Document d1"}])
    client.close()
    assert KEY not in answer and json.loads(answer)["grade"] == 1


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_leaves_the_pairs_unjudged_with_the_reason_in_the_log(
    pooled_campaign, lead, serve, monkeypatch, caplog, status
):
    def reply(auth):
        return (
            status,
            {"Location": "http://elsewhere.example/v1?key=abc123456789", "Content-Type": "text/html"},
            (b"<html>moved</html>"),
        )

    server = serve(reply)
    with caplog.at_level(logging.INFO):
        job = _run(pooled_campaign, lead, server.url, monkeypatch)
    assert not Judgment.objects.filter(annotator__username="tiny").exists()
    assert job.result["failed"] == 5 and job.result["unsure"] == 0
    assert (
        f"got no judgment: HTTP {status}: the endpoint answered with a redirect, which is not followed" in caplog.text
    )
    assert "http://elsewhere.example/v1)" in caplog.text and "abc123456789" not in caplog.text
    assert "<html>" not in caplog.text


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/v1",
        "http://169.254.0.1:8080/v1",
        "http://[fe80::1]/v1",
        "http://[fe80::1%25eth0]:8000/v1",
        "http://[::ffff:169.254.169.254]/v1",
    ],
)
def test_a_link_local_endpoint_is_refused_unless_allowed(pooled_campaign, lead, url, settings):
    with pytest.raises(ValueError, match="link-local address"):
        Endpoint.configured(url=url, model="m")
    with pytest.raises(CommandError, match="RELJUDGE_MODEL_ALLOW_LINK_LOCAL=1"):
        call_command("judge_with_model", "demo", "--endpoint", url, "--model", "m")
    settings.RELJUDGE_MODEL_ALLOW_LINK_LOCAL = True
    assert Endpoint.configured(url=url, model="m").display.startswith("http://")


def test_a_name_resolving_to_a_link_local_address_is_refused_when_connecting(monkeypatch):
    import socket

    real = socket.getaddrinfo

    def resolve(host, *args, **kw):
        if host == "metadata.internal.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", 80))]
        return real(host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    client = ChatClient(Endpoint.configured(url="http://metadata.internal.test/v1", model="m", retries=3))
    with pytest.raises(ModelCallError, match="link-local address"):
        client.complete([{"role": "user", "content": "Document d1"}])
    client.close()


def test_an_answer_nested_a_million_deep_is_an_unreadable_answer_not_a_crash(pooled_campaign, lead, serve, monkeypatch):
    def reply(auth):
        content = "[" * 1_000_000
        return 200, {}, json.dumps({"choices": [{"message": {"content": content}}]}).encode()

    job = _run(pooled_campaign, lead, serve(reply).url, monkeypatch)
    assert job.status == Job.Status.DONE and job.result["unsure"] == 5
    raw = b"[" * 500_000
    server = serve(lambda auth: (200, {}, raw))
    client = ChatClient(Endpoint.configured(url=server.url, model="m", retries=0))
    assert client.complete([{"role": "user", "content": "Document d1"}]) == raw.decode()
    client.close()


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Incorrect API key provided: Bearer abc123456", "Incorrect API key provided: Bearer [redacted]"),
        ("key sk-proj-XYZ1234567abc here", "key [redacted] here"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic [redacted]"),
        ("The page gives basic information only", "The page gives basic information only"),
        ("a bearer shares certificate; sk-learn docs", "a bearer shares certificate; sk-learn docs"),
    ],
)
def test_tokens_are_redacted_and_words_are_not(text, shown):
    from judging.endpoints import secrets_redacted

    assert secrets_redacted(text) == shown
