"""A run import's database work on a thread of its own (WriteBehind): the same rows as an import that writes on
its own thread; a failure on either side, at any point, leaves nothing written, names the line, hangs nothing
and leaves no thread; the work queued for the thread stays within its bound."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import DatabaseError, connection

from judging.imports import behind as behind_module
from judging.imports.behind import WriteBehind
from judging.imports.errors import FormatError
from judging.imports.parse import stream as stream_module
from judging.imports.service import runs as runs_module
from judging.imports.service import stubs as stubs_module
from judging.models import Document, Pair, Query, Ranking, System
from judging.services import campaign_create, run_import
from tests.judging.test_import_stream import run_text, stored

THREADS = ("reljudge-import-write", "reljudge-run-parse")


def _threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name in THREADS]


@pytest.fixture
def behind(monkeypatch):
    """The writer's thread on either database (SQLite runs it inline by default), many blocks and pool steps."""
    monkeypatch.setattr(runs_module, "WRITE_BEHIND", frozenset({"postgresql", "sqlite"}))
    monkeypatch.setattr(stream_module, "PIECE_BYTES", 2048)
    monkeypatch.setattr(runs_module, "POOL_STEP", 100)


def _nothing_written(campaign) -> bool:
    return not (
        System.objects.filter(campaign=campaign).exists()
        or Ranking.objects.filter(system__campaign=campaign).exists()
        or Pair.objects.filter(campaign=campaign).exists()
        or Document.objects.filter(campaign=campaign).exists()
        or Query.objects.filter(campaign=campaign).exists()
    )


def test_the_writers_thread_stores_what_an_import_writing_on_its_own_thread_stores(db, behind, monkeypatch):
    """Stubs made across blocks (their ids drawn ahead, a few at a time), pool steps, two systems, one of them
    known: the same rankings, pool, systems and queries, whichever thread writes."""
    monkeypatch.setattr(stubs_module, "RESERVE_STEP", 16)
    old = run_text(queries=20, depth=30, tag="old", docs=200)
    data = (run_text(queries=40, depth=30, tag="bm25", docs=900) + run_text(tag="dense", seed=3)).encode()
    summaries = []
    campaigns = [campaign_create(slug="threaded"), campaign_create(slug="inline")]
    for campaign, vendors in zip(campaigns, [frozenset({"postgresql", "sqlite"}), frozenset()], strict=True):
        monkeypatch.setattr(runs_module, "WRITE_BEHIND", vendors)
        run_import(campaign=campaign, data=old.encode(), filename="old.run")
        summaries.append(run_import(campaign=campaign, data=data, filename="two.run").as_dict())
    assert summaries[0] == summaries[1]
    assert summaries[0]["added"] == 70 and summaries[0]["pairs_added"] > 0
    assert stored(campaigns[0]) == stored(campaigns[1])
    assert not _threads()


@pytest.mark.django_db(transaction=True)
def test_a_bad_line_late_in_the_file_while_the_writer_is_busy_stops_it_at_once(behind, monkeypatch):
    """The writer is in a slow pool merge with more merges queued when the parser reaches a bad last line: the
    error names that line, the queued merges are dropped (the import does not wait for them), nothing the file
    brought is written, and no thread is left."""
    campaign = campaign_create(slug="late-busy")
    good = run_text(queries=100, depth=50, tag="fresh", docs=3000)  # about 50 pool steps of 100 pairs
    run_import(campaign=campaign, data=good.replace("fresh", "old").encode(), filename="old.run")  # stubs known
    before = stored(campaign)
    merges: list[float] = []
    merge = runs_module.pool_merge
    merging = threading.Event()

    def slow_merge(**kwargs):
        merges.append(time.monotonic())
        merging.set()
        time.sleep(0.4)
        return merge(**kwargs)

    parse = stream_module._parse_piece

    def parse_once_the_writer_is_busy(raw, filename):
        # the parser reaches the bad line only once the writer is in its first merge (a fast machine parsed the
        # whole file before the writer had started one)
        if b" high " in raw:
            assert merging.wait(10)
        return parse(raw, filename)

    monkeypatch.setattr(runs_module, "pool_merge", slow_merge)
    monkeypatch.setattr(stream_module, "_parse_piece", parse_once_the_writer_is_busy)
    data = (good + "q0 Q0 dz 1 high fresh\n").encode()
    started = time.monotonic()
    with pytest.raises(FormatError) as caught:
        run_import(campaign=campaign, data=data, filename="fresh.run")
    took = time.monotonic() - started
    assert (caught.value.filename, caught.value.line, caught.value.field) == ("fresh.run", 5001, "score")
    assert 1 <= len(merges) <= 3 and took < 3  # queued: about 50 merges, 20 s of them
    assert not _threads()
    assert stored(campaign) == before


@pytest.mark.django_db(transaction=True)
def test_a_database_error_in_the_writer_while_the_parser_is_ahead_ends_the_import(behind, monkeypatch):
    """The database refuses the writer's second pool step (a statement that fails in the server, aborting the
    transaction) while the import's thread waits for room in a full queue and the parser has pieces ready: the
    import raises the database's error, promptly, writes nothing and leaves no thread."""
    monkeypatch.setattr(behind_module, "QUEUE_ITEMS", 3)
    campaign = campaign_create(slug="writer-fails")
    calls = []
    merge = runs_module.pool_merge

    def failing_merge(**kwargs):
        calls.append(1)
        if len(calls) == 2:
            time.sleep(0.3)  # the import's thread fills the queue and waits
            with connection.cursor() as cursor:
                cursor.execute("SELECT * FROM reljudge_no_such_table")
        return merge(**kwargs)

    monkeypatch.setattr(runs_module, "pool_merge", failing_merge)
    started = time.monotonic()
    with pytest.raises(DatabaseError) as caught:
        run_import(campaign=campaign, data=run_text(queries=100, depth=50, docs=3000).encode(), filename="bm25.run")
    assert "reljudge_no_such_table" in str(caught.value)
    assert len(calls) == 2 and time.monotonic() - started < 5
    assert not _threads()
    assert _nothing_written(campaign)
    campaign.refresh_from_db()  # the connection works on after the rollback


def test_the_work_queued_for_the_writer_stays_within_its_bound(db, monkeypatch):
    """The import's thread waits while the queue holds QUEUE_BYTES of payload: memory stays flat however far the
    parser could run ahead of a slow database."""
    monkeypatch.setattr(behind_module, "QUEUE_BYTES", 1000)
    held: list[int] = []

    def write(writer: WriteBehind) -> None:
        time.sleep(0.005)
        held.append(writer._bytes)  # the payload queued, this piece's included

    with WriteBehind() as writer:
        for _ in range(30):
            writer.later(write, writer, size=300)
        writer.drain()
    assert len(held) == 30 and max(held) == 900  # three pieces of 300 fit in 1,000 bytes, a fourth waits
    assert not _threads()


def test_an_error_in_the_writer_is_raised_on_the_import_thread_and_drops_what_follows(db):
    done: list[int] = []

    def fail() -> None:
        raise ValueError("the writer's error")

    with pytest.raises(ValueError, match="the writer's error"), WriteBehind() as writer:
        writer.later(fail)
        writer.later(done.append, 1)
        writer.drain()
    assert not done and not _threads()


def test_a_file_of_two_runs_under_one_system_name_is_refused_whole(db, behind):
    """The first tag's new system is made and its rankings written as the file is read; the second tag, under
    the same name, is found at the end: the import names both tags, and the first system is undone."""
    campaign = campaign_create(slug="one-name")
    data = (run_text(queries=30, depth=40, tag="bm25") + run_text(queries=30, depth=40, tag="dense", seed=3)).encode()
    with pytest.raises(FormatError) as caught:
        run_import(campaign=campaign, data=data, filename="two.run", system_name="mine")
    assert caught.value.field == "tag" and "bm25, dense" in str(caught.value)
    assert _nothing_written(campaign) and not _threads()
