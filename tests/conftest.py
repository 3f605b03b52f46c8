"""Fixtures shared by the test suite: users, a small campaign (bare or pooled from tests/data.py's files)."""

from __future__ import annotations

import pytest

from tests.data import DOCS, RUN_BM25, RUN_DENSE, TOPICS


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
def pooled(campaign):
    """The campaign with topics, documents and both runs: 5 pooled pairs (q1: d1 d2 d3; q2: d2 d4)."""
    from judging.services import documents_import, queries_import, run_import

    queries_import(campaign=campaign, data=TOPICS.encode(), filename="t.tsv")
    documents_import(campaign=campaign, data=DOCS.encode(), filename="d.jsonl")
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    run_import(campaign=campaign, data=RUN_DENSE.encode(), filename="dense.run")
    return campaign


@pytest.fixture
def write(tmp_path):
    """Write text (or bytes) to a file in tmp_path and return its path as a string."""

    def _write(name: str, content: str | bytes) -> str:
        p = tmp_path / name
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
        return str(p)

    return _write
