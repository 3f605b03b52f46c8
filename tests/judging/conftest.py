"""Fixtures for the Django app's tests: fresh score caches, PostgreSQL-only tests."""

from __future__ import annotations

import pytest
from django.db import connection


@pytest.fixture(autouse=True)
def _fresh_score_caches():
    """Each test starts with empty in-process score caches and leaderboard texts, like a freshly started
    server process."""
    from judging import scoring
    from judging.api import leaderboard_text

    scoring.process_caches_clear()
    leaderboard_text.text_caches_clear()
    yield


@pytest.fixture
def pg_only(transactional_db):
    """Row-level locking only exists on PostgreSQL; SQLite serializes writers, so the race cannot happen there."""
    if connection.vendor != "postgresql":
        pytest.skip("row-level locking is tested on PostgreSQL (CI runs the suite there too)")


@pytest.fixture
def judged(campaign, annotator):
    """The conftest campaign with two systems pooled to depth 2 and human labels on every pooled pair."""
    from judging.services import documents_import, qrels_import, queries_import, run_import
    from tests.data import DOCS, RUN_BM25, RUN_DENSE, TOPICS

    queries_import(campaign=campaign, data=TOPICS.encode(), filename="t.tsv")
    documents_import(campaign=campaign, data=DOCS.encode(), filename="d.jsonl")
    run_import(campaign=campaign, data=(RUN_BM25 + RUN_DENSE).encode(), filename="r.trec")
    campaign.guidelines = "Judge the product, not the brand."
    campaign.save()
    qrels = "q1 0 d1 2\nq1 0 d3 1\nq1 0 d2 0\nq2 0 d4 2\nq2 0 d2 0\n"
    qrels_import(campaign=campaign, data=qrels.encode(), filename="h.qrels", annotator=annotator)
    return campaign
