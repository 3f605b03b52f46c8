"""Shared test data and plain helpers: tiny TREC-style files, hand-checkable grades, API clients.

Fixtures live in the conftest.py files; everything here is a constant or an ordinary function that test
modules import (no test module imports another test module or a conftest).
"""

from __future__ import annotations

import threading

from django.db import connections
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

TOPICS = "q1\twool knit sweater\tA warm sweater knitted from wool.\nq2\train jacket\tA waterproof jacket.\n"
DOCS = (
    '{"docid": "d1", "title": "Merino wool sweater", "text": "Soft merino knit."}\n'
    '{"docid": "d2", "title": "Cotton tee", "text": "Light cotton."}\n'
    '{"docid": "d3", "title": "Cable knit jumper", "text": "Chunky wool cable knit."}\n'
    '{"docid": "d4", "title": "Rain shell", "text": "Waterproof shell jacket."}\n'
)
# bm25 ranks d1, d3, d2 for q1 and d4, d2 for q2; dense ranks d3, d2, d1 and d2, d4.
RUN_BM25 = "q1 Q0 d1 1 9.5 bm25\nq1 Q0 d3 2 8.0 bm25\nq1 Q0 d2 3 7.5 bm25\nq2 Q0 d4 1 3.0 bm25\nq2 Q0 d2 2 1.0 bm25\n"
RUN_DENSE = (
    "q1 Q0 d3 1 0.9 dense\nq1 Q0 d2 2 0.8 dense\nq1 Q0 d1 3 0.7 dense\nq2 Q0 d2 1 0.6 dense\nq2 Q0 d4 2 0.5 dense\n"
)
# The systems' names: an annotator's responses must never contain them.
SYSTEM_NAMES = ("bm25", "dense")

# Grades of alice, bob and carol for 8 pairs d0..d7 (None = not judged); d3 and d5 are two apart (disputed).
THREE_ANNOTATOR_GRADES = [
    (2, 2, 2),
    (1, 2, None),
    (0, 0, 0),
    (2, 0, 1),
    (1, 1, None),
    (0, 1, 2),
    (2, 2, None),
    (1, 0, 1),
]


def client_for(user=None):
    """An API client authenticated the way scripts are: with the user's token."""
    client = APIClient()
    if user is not None:
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def body_of(response) -> bytes:
    """A response's body, streamed or not."""
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)
    return response.content


def run_concurrently(target, args_list, *, timeout: float = 180) -> list[Exception]:
    """Run ``target(*args)`` in one thread per entry of ``args_list``, all released at once, each with its
    own database connection; return what they raised (a thread's exception is otherwise swallowed)."""
    errors: list[Exception] = []
    barrier = threading.Barrier(len(args_list))

    def work(*args):
        try:
            barrier.wait()
            target(*args)
        except Exception as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=args) for args in args_list]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    return errors
