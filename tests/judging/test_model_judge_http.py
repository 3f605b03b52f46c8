"""The model judge's client against misbehaving endpoints (threads on 127.0.0.1, ephemeral ports): an answer too
large, one dripped a byte at a time, and the worker's memory while it refuses them."""

from __future__ import annotations

import gzip
import json
import logging
import socket
import threading
import time
import tracemalloc

import pytest

from judging.services.model_client import ChatClient, Endpoint, ModelCallError

ANSWER = json.dumps({"choices": [{"message": {"role": "assistant", "content": '{"grade": 1}'}}]}).encode()
MESSAGES = [{"role": "user", "content": "Query: q\nDocument d1\n"}]


class RawServer:
    """A bare TCP server whose ``reply(conn)`` writes whatever bytes it likes after reading the request."""

    def __init__(self, reply):
        self.reply = reply
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.sent = 0
        self.closed = threading.Event()
        self.stopping = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _serve(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int([h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0].split(b":")[1])
            while len(body) < length:
                body += conn.recv(65536)
            self.request = head
            try:
                self.reply(self, conn, body)
            except OSError:
                pass  # the client hung up: what these tests want
            finally:
                self.closed.set()

    def send(self, conn, data: bytes):
        conn.sendall(data)
        self.sent += len(data)

    def close(self):
        self.stopping.set()
        self.sock.close()


@pytest.fixture
def serve():
    servers = []

    def start(reply) -> RawServer:
        server = RawServer(reply)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def _endpoint(url: str, **kw) -> Endpoint:
    return Endpoint.configured(url=url, model="tiny", **{"timeout": 2.0, "retries": 0, "backoff": 0.01, **kw})


def _huge(server, conn, *, length: bool):
    """300 MB of answer, made as it is sent (the server itself holds 1 MB at a time)."""
    total = 300 * 1024 * 1024
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {total}\r\n".encode() if length else b"Transfer-Encoding: chunked\r\n"
    server.send(conn, head + b"\r\n")
    block = b"x" * (1024 * 1024)
    for _ in range(300):
        server.send(conn, block if length else b"%x\r\n%s\r\n" % (len(block), block))


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "chunked"])
def test_a_huge_answer_is_refused_without_growing_the_worker(serve, length):
    server = serve(lambda s, c, b: _huge(s, c, length=length))
    client = ChatClient(_endpoint(server.url))
    tracemalloc.start()
    try:
        started = time.monotonic()
        with pytest.raises(ModelCallError, match="larger than 1048576 bytes"):
            client.complete(MESSAGES)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        client.close()
    assert peak < 6 * 1024 * 1024, f"the client grew by {peak / 1e6:.1f} MB"
    assert time.monotonic() - started < 5
    server.closed.wait(10)
    assert server.sent < 50 * 1024 * 1024  # it stopped reading: the server could not send the 300 MB


def test_a_compressed_answer_is_capped_once_inflated(serve):
    bomb = gzip.compress(b" " * (200 * 1024 * 1024), compresslevel=9)  # 200 kB that inflate to 200 MB

    def reply(server, conn, body):
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
            b"Content-Length: %d\r\n\r\n" % len(bomb)
        )
        server.send(conn, head + bomb)

    server = serve(reply)
    client = ChatClient(_endpoint(server.url))
    tracemalloc.start()
    try:
        with pytest.raises(ModelCallError, match="larger than"):
            client.complete(MESSAGES)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        client.close()
    assert peak < 6 * 1024 * 1024


def test_a_small_compressed_answer_reads(serve):
    packed = gzip.compress(ANSWER)

    def reply(server, conn, body):
        head = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(
            packed
        )
        server.send(conn, head + packed)

    client = ChatClient(_endpoint(serve(reply).url))
    assert client.complete(MESSAGES) == '{"grade": 1}'
    client.close()


def _drip(server, conn, *, headers_too: bool):
    whole = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(ANSWER) + ANSWER
    if not headers_too:
        head, _, whole = whole.partition(b"\r\n\r\n")
        server.send(conn, head + b"\r\n\r\n")
    for byte in whole:
        server.send(conn, bytes([byte]))
        time.sleep(0.25)


@pytest.mark.parametrize("headers_too", [False, True], ids=["body", "headers-and-body"])
def test_a_dripping_answer_ends_at_the_deadline(serve, headers_too):
    """A byte every 0.25 s never trips a 1.5 s read timeout; the deadline of the call as a whole stops it."""
    server = serve(lambda s, c, b: _drip(s, c, headers_too=headers_too))
    client = ChatClient(_endpoint(server.url, timeout=1.5))
    started = time.monotonic()
    with pytest.raises(ModelCallError, match=r"no whole answer within 1.5 s"):
        client.complete(MESSAGES)
    took = time.monotonic() - started
    client.close()
    assert took < 2.2, f"the call lasted {took:.2f} s past its 1.5 s deadline"


def test_retries_keep_each_attempt_to_its_deadline(serve):
    server = serve(lambda s, c, b: _drip(s, c, headers_too=False))
    client = ChatClient(_endpoint(server.url, timeout=0.6, retries=2))
    started = time.monotonic()
    with pytest.raises(ModelCallError, match="gave up after 3 attempts"):
        client.complete(MESSAGES)
    client.close()
    assert time.monotonic() - started < 3 * 0.6 + 1.0


def test_the_key_and_the_query_string_never_show(serve, monkeypatch, caplog):
    monkeypatch.setenv("RELJUDGE_MODEL_API_KEY", "sk-secret-key")

    def reply(server, conn, body):
        body = b'{"error": "no such model"}'
        server.send(conn, b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    server = serve(reply)
    url = f"http://user:pass@127.0.0.1:{server.port}/v1?api-key=sk-query-secret"
    endpoint = _endpoint(url)
    assert endpoint.display == f"http://127.0.0.1:{server.port}/v1/chat/completions"
    assert "sk-" not in repr(endpoint)
    client = ChatClient(endpoint)
    with caplog.at_level(logging.DEBUG), pytest.raises(ModelCallError) as refused:
        client.complete(MESSAGES)
    client.close()
    # Sent as configured (the key as a Bearer token, user info never), shown in no error.
    assert b"api-key=sk-query-secret" in server.request and b"Bearer sk-secret-key" in server.request
    assert "sk-" not in str(refused.value) and "pass" not in str(refused.value)
    assert "sk-" not in caplog.text


def test_a_job_leaves_pairs_with_too_large_or_too_slow_answers_unjudged_and_logs_why(
    judged, lead, serve, monkeypatch, caplog
):
    from judging import jobs
    from judging.models import Job, Judgment

    server = serve(_by_document({"d1": "huge", "d3": "drip"}))
    monkeypatch.setenv("RELJUDGE_MODEL_API_KEY", "sk-secret-key")
    job = jobs.model_judge_job_start(
        campaign=judged, user=lead, model="tiny", pairs="all", endpoint=server.url + "?key=sk-query-secret",
        concurrency=2, retries=0, timeout=1.5, enqueue=False,
    )  # fmt: skip
    with caplog.at_level(logging.INFO):
        assert jobs.job_run(job_id=job.pk)["status"] == "done"
    job = Job.objects.get(pk=job.pk)
    assert job.result["failed"] == 2 and job.result["graded"] == 3
    judged_docs = set(
        Judgment.objects.filter(annotator__username="tiny").values_list("pair__document__docid", flat=True)
    )
    assert "d1" not in judged_docs and "d3" not in judged_docs
    assert "docid d1 got no judgment: the answer was larger than 1048576 bytes" in caplog.text
    assert "docid d3 got no judgment: gave up after 1 attempts (no whole answer within 1.5 s)" in caplog.text
    assert "sk-" not in caplog.text and "sk-" not in json.dumps(job.result)
    # the operator's lines: who started the job, and the run's summary, never the endpoint's query string
    assert f"job {job.pk} started (attempt 1)" in caplog.text and f"queued by {lead.username}" in caplog.text
    summary = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("model judge tiny on"))
    assert f"on campaign {judged.slug} via " in summary and "3 graded" in summary and "2 failed" in summary
    assert "key=" not in caplog.text
    from django.contrib.auth import get_user_model

    profile = get_user_model().objects.get(username="tiny").annotator_profile
    assert "sk-query-secret" not in profile.description and server.url in profile.description


def _by_document(behaviour: dict[str, str]):
    """A reply by the document the prompt names: "huge", "drip", or a good answer."""

    def reply(server, conn, body):
        docid = body.split(b"Document ")[1].split(b"\\n")[0].decode()
        kind = behaviour.get(docid)
        if kind == "huge":
            _huge(server, conn, length=False)
        elif kind == "drip":
            _drip(server, conn, headers_too=False)
        else:
            good = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
            server.send(conn, good % (len(ANSWER), ANSWER))

    return reply
