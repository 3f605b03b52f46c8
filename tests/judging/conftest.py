"""Fixtures for the Django app's tests."""
import pytest


@pytest.fixture(autouse=True)
def _fresh_score_caches():
    """Each test starts with empty in-process score caches, like a freshly started server process."""
    from judging import scoring

    scoring._SCORES.clear()
    scoring._CUBES.clear()
    yield
