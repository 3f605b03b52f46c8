"""Fixtures shared by the test suite: users, a small campaign and tiny TREC-style files."""

from __future__ import annotations

import pytest

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


@pytest.fixture
def make_user(db):
    from django.contrib.auth import get_user_model

    def make(username: str, **extra):
        return get_user_model().objects.create_user(username=username, password="pw-" + username, **extra)

    return make


@pytest.fixture
def lead(make_user):
    return make_user("lead")


@pytest.fixture
def annotator(make_user):
    return make_user("ann")


@pytest.fixture
def campaign(db, lead, annotator):
    from judging.services import campaign_create, membership_add

    c = campaign_create(slug="demo", name="Demo", pool_depth=2)
    membership_add(campaign=c, user=lead, role="lead")
    membership_add(campaign=c, user=annotator, role="annotator")
    return c


@pytest.fixture
def write(tmp_path):
    """Write text (or bytes) to a file in tmp_path and return its path as a string."""

    def _write(name: str, content: str | bytes) -> str:
        p = tmp_path / name
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
        return str(p)

    return _write
