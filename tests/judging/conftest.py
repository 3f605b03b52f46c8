"""Fixtures for the Django app's tests: fresh score caches, PostgreSQL-only tests."""

from __future__ import annotations

import pytest
from django.db import connection


@pytest.fixture(autouse=True)
def _fresh_score_caches():
    """Each test starts with empty in-process score caches and leaderboard texts, like a freshly started
    server process."""
    from judging import scoring
    from judging.api import renderers

    scoring.process_caches_clear()
    renderers.text_caches_clear()
    yield


@pytest.fixture
def pg_only(transactional_db):
    """Row-level locking only exists on PostgreSQL; SQLite serializes writers, so the race cannot happen there."""
    if connection.vendor != "postgresql":
        pytest.skip("row-level locking is tested on PostgreSQL (CI runs the suite there too)")
