"""The database cache's batched set_many (judging.cache_db): what Django's own get reads, written in one go."""

from __future__ import annotations

import numpy as np
import pytest
from django.core.cache import caches
from django.test.utils import CaptureQueriesContext

from judging.cache_db import BatchedDatabaseCache


@pytest.fixture
def cache(db):
    backend = caches["default"]
    assert isinstance(backend, BatchedDatabaseCache)
    backend.clear()  # which forgets the backend's last count of the table, as a new process starts
    yield backend
    backend.clear()


def test_set_many_writes_what_get_many_reads_in_a_few_statements(cache):
    from django.db import connection

    blocks = {f"block:{b}": (np.arange(b, b + 16), np.full((9, 3, 16), b / 7)) for b in range(40)}
    with CaptureQueriesContext(connection) as queries:
        assert cache.set_many(blocks, timeout=60) == []
    # a count and one upsert (plus the savepoint Django's atomic may add), not four statements per key
    assert len([q for q in queries.captured_queries if "reljudge_cache" in q["sql"]]) == 2
    got = cache.get_many(list(blocks))
    assert set(got) == set(blocks)
    for key, (versions, scores) in blocks.items():
        np.testing.assert_array_equal(got[key][0], versions)
        np.testing.assert_array_equal(got[key][1], scores)
    # a second write of some keys replaces their values
    cache.set_many({"block:3": "new", "block:4": "newer", "other": 1}, timeout=60)
    assert cache.get_many(["block:3", "block:4", "other"]) == {"block:3": "new", "block:4": "newer", "other": 1}
    assert cache.get("block:5")[0][0] == 5


def test_set_many_culls_as_django_does_beyond_max_entries(cache, monkeypatch):
    monkeypatch.setattr(cache, "_max_entries", 30)
    cache.set_many({f"a:{i}": i for i in range(25)}, timeout=60)
    cache.set_many({f"b:{i}": i for i in range(20)}, timeout=60)  # 45 entries would pass the bound: culled first
    kept = cache.get_many([f"a:{i}" for i in range(25)] + [f"b:{i}" for i in range(20)])
    assert len(kept) < 45
    assert all(kept.get(f"b:{i}") == i for i in range(20))  # the batch itself is written whole


def test_expired_entries_are_not_read(cache):
    cache.set_many({"x": 1, "y": 2}, timeout=-1)
    assert cache.get_many(["x", "y"]) == {}


@pytest.mark.django_db(transaction=True)
def test_writes_after_the_answer_arrive_once_with_the_newest_value(monkeypatch, settings):
    """The leaderboard writes its shared entries in a writer thread after the answer (scoring.cache
    shared_write_later): what was asked arrives, a key asked twice holds its newer value, and a failed write is
    logged, not raised into a request."""
    import threading
    import time

    from judging.scoring import cache as scoring_cache

    backend = caches["default"]
    backend.clear()
    settings.RELJUDGE_BACKGROUND_INLINE = False  # the writer thread itself
    started = threading.Event()
    real = scoring_cache.shared_write
    calls: list[dict] = []

    def slow_write(blocks):
        calls.append(dict(blocks))
        started.set()
        time.sleep(0.3)  # the writer is busy: what comes meanwhile waits, merged
        real(blocks)

    monkeypatch.setattr(scoring_cache, "shared_write", slow_write)
    scoring_cache.shared_write_later({"a": 1})
    assert started.wait(5)
    scoring_cache.shared_write_later({"b": 2, "c": 3})
    scoring_cache.shared_write_later({"b": 20})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and backend.get_many(["a", "b", "c"]) != {"a": 1, "b": 20, "c": 3}:
        time.sleep(0.05)
    assert backend.get_many(["a", "b", "c"]) == {"a": 1, "b": 20, "c": 3}
    assert calls == [{"a": 1}, {"b": 20, "c": 3}]  # two writes: the second merged what waited

    def broken(blocks):
        raise RuntimeError("database gone")

    monkeypatch.setattr(scoring_cache, "shared_write", broken)
    scoring_cache.shared_write_later({"d": 4})  # logged in the thread; the caller goes on
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and scoring_cache._WRITING:
        time.sleep(0.05)
    assert not scoring_cache._WRITING and backend.get("d") is None
    backend.clear()


def test_the_table_is_counted_once_every_few_writes_and_still_kept_in_bound(cache, monkeypatch):
    """A count reads the whole table (20,000 rows at its bound): it runs at the first write and once every
    CULL_EVERY writes, not at each one; one key's set is one upsert that Django's get reads; and many small writes
    still keep the table within its bound, as the estimate passes it before the table does."""
    from django.db import connection

    from judging import cache_db

    cache.set("first", 1, timeout=60)
    with CaptureQueriesContext(connection) as queries:
        for i in range(10):
            cache.set(f"k:{i}", {"i": i}, timeout=60)
    sql = [q["sql"] for q in queries.captured_queries if "reljudge_cache" in q["sql"]]
    assert not [s for s in sql if "COUNT(" in s.upper()]
    assert len(sql) == 10  # one upsert a key
    assert cache.get_many([f"k:{i}" for i in range(10)]) == {f"k:{i}": {"i": i} for i in range(10)}
    with CaptureQueriesContext(connection) as queries:
        for i in range(cache_db.CULL_EVERY + 1):
            cache.set(f"m:{i}", i, timeout=60)
    assert sum("COUNT(" in q["sql"].upper() for q in queries.captured_queries) == 1
    monkeypatch.setattr(cache, "_max_entries", 40)
    for i in range(200):
        cache.set(f"n:{i}", i, timeout=60)
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM reljudge_cache")
        assert cursor.fetchone()[0] <= 40 + 1
    assert cache.get("n:199") == 199


@pytest.mark.django_db(transaction=True)
def test_the_exit_flush_waits_for_the_writer_and_gives_up_after_its_time(monkeypatch, settings, caplog):
    """scoring.cache.shared_writes_flush (run at the process's exit): True once what the writer thread was handed
    is written; False, with a warning, when the writer is still busy at the end of its time."""
    import threading
    import time

    from judging.scoring import cache as scoring_cache

    backend = caches["default"]
    backend.clear()
    settings.RELJUDGE_BACKGROUND_INLINE = False
    release = threading.Event()
    real = scoring_cache.shared_write

    def held(blocks):
        release.wait(10)
        real(blocks)

    monkeypatch.setattr(scoring_cache, "shared_write", held)
    scoring_cache.shared_write_later({"exit-a": 1})
    scoring_cache.shared_write_later({"exit-b": 2})
    started = time.monotonic()
    assert scoring_cache.shared_writes_flush(timeout=0.2) is False
    assert 0.2 <= time.monotonic() - started < 2
    assert "had not finished at exit" in caplog.text
    release.set()
    assert scoring_cache.shared_writes_flush(timeout=10) is True
    assert backend.get_many(["exit-a", "exit-b"]) == {"exit-a": 1, "exit-b": 2}
    backend.clear()
