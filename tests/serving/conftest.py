"""Fixtures for the serving tests: one migrated database of their own, and servers stopped after each test."""

from __future__ import annotations

import pytest

from tests.serving.servers import Site


@pytest.fixture(scope="session")
def site_db(tmp_path_factory):
    """A database for real servers (SQLite file, or PostgreSQL `<test db>_srv` under DATABASE_URL)."""
    site = Site.create("srv", tmp_dir=tmp_path_factory.mktemp("site"))
    yield site
    site.drop()


@pytest.fixture
def site(site_db, tmp_path):
    """The session's database; every process a test starts is stopped when it ends."""
    site_db.logs = tmp_path
    yield site_db
    site_db.stop_all()
