"""Runs read a piece at a time and merged from temporary tables: the same rankings, pool and errors as a file read
whole; a bad line after many good ones writes nothing; the merge keeps the rules for systems already there."""

from __future__ import annotations

import hashlib
import io
import threading
from datetime import timedelta

import numpy as np
import pytest
from django.db import DatabaseError, connection
from django.utils import timezone, translation

from judging.imports.errors import FormatError, ImportConflict
from judging.imports.parse import parse_run
from judging.imports.parse import stream as stream_module
from judging.imports.parse.stream import ReadAhead, readable_apart, stream_run
from judging.imports.service import pool as pool_module
from judging.imports.service import runs as runs_module
from judging.jobs import job_rate
from judging.models import Document, Job, Judgment, Pair, Query, Ranking, System
from judging.services import campaign_create, qrels_import, run_import
from judging.views.job_presenters import job_context


def run_text(queries: int = 30, depth: int = 40, tag: str = "bm25", seed: int = 0, docs: int = 300) -> str:
    """A run of ``queries`` x ``depth`` lines, with ties (scores rounded) and docids in no order."""
    rng = np.random.default_rng(seed)
    lines = []
    for q in range(queries):
        chosen = rng.choice(docs, size=depth, replace=False)
        scores = np.round(rng.random(depth) * 5, 1)  # few distinct values: many ties, broken by docid
        lines.extend(f"q{q} Q0 d{d} {r + 1} {s} {tag}\n" for r, (d, s) in enumerate(zip(chosen, scores, strict=True)))
    return "".join(lines)


def stored(campaign) -> dict:
    """What a run import leaves in the database, by qids and docids (ids differ from import to import)."""
    docid = dict(Document.objects.filter(campaign=campaign).values_list("id", "docid"))
    rankings = {
        (system, qid): ([docid[i] for i in np.frombuffer(bytes(ids), dtype=np.int64).tolist()], bytes(scores))
        for system, qid, ids, scores in Ranking.objects.filter(system__campaign=campaign).values_list(
            "system__name", "query__qid", "doc_ids", "scores"
        )
    }
    pool = set(
        Pair.objects.filter(campaign=campaign).values_list("query__qid", "document__docid", "pooled", "judgment_count")
    )
    systems = set(System.objects.filter(campaign=campaign).values_list("name", "entries"))
    return {
        "rankings": rankings,
        "pool": pool,
        "systems": systems,
        "queries": Query.objects.filter(campaign=campaign).count(),
    }


def blocks_as_rankings(blocks) -> dict:
    out: dict = {}
    for block in blocks:
        start = 0
        for tag, qid, stop in zip(block.tags, block.qids, block.stops.tolist(), strict=True):
            docids = [block.docids[i].decode() for i in block.order[start:stop].tolist()]
            out.setdefault(tag, []).append((qid, docids, block.scores[start:stop].tolist()))
            start = stop
    return out


@pytest.mark.parametrize("piece_bytes", [64, 1000, 10_000, 1 << 22])
def test_pieces_of_any_size_give_the_rankings_of_the_whole_file(piece_bytes):
    """Two tags, ties, blank lines, CRLF line ends, extra columns and a ranking longer than a piece."""
    text = run_text(tag="a") + "\n\n" + run_text(queries=5, depth=200, tag="b", seed=1).replace("\n", " extra\r\n")
    data = ("\ufeff" + text).encode()
    whole = {
        tag: [(r.qid, r.docids, r.scores.tolist()) for r in rankings]
        for tag, rankings in parse_run(data, filename="x.run").items()
    }
    assert blocks_as_rankings(stream_run(data, filename="x.run", piece_bytes=piece_bytes)) == whole
    assert blocks_as_rankings(stream_run(io.BytesIO(data), filename="x.run", piece_bytes=piece_bytes)) == whole


def test_a_file_larger_than_a_piece_imports_as_one_read_whole(db, monkeypatch):
    data = (run_text(tag="bm25") + run_text(tag="dense", seed=3)).encode()
    small, whole = campaign_create(slug="small-pieces"), campaign_create(slug="one-piece")
    monkeypatch.setattr(stream_module, "PIECE_BYTES", 256)  # dozens of pieces, rankings cut across them
    monkeypatch.setattr(pool_module, "PAIR_BATCH", 7)  # new pool pairs inserted a few queries at a time
    summary = run_import(campaign=small, data=io.BytesIO(data), filename="two.run")
    monkeypatch.setattr(stream_module, "PIECE_BYTES", 1 << 24)
    monkeypatch.setattr(pool_module, "PAIR_BATCH", 100_000)
    other = run_import(campaign=whole, data=data, filename="two.run")
    assert summary.as_dict() == other.as_dict()
    assert summary.added == 60 and summary.pairs_added == other.pairs_added > 0
    assert stored(small) == stored(whole)
    assert len(stored(small)["rankings"]) == 60


def test_a_file_whose_rankings_are_scattered_is_read_whole_with_the_same_result(db, monkeypatch):
    lines = run_text(queries=8, depth=10).splitlines(keepends=True)
    scattered = "".join(lines[i::3][j] for i in range(3) for j in range(len(lines[i::3]))).encode()
    grouped = "".join(lines).encode()
    monkeypatch.setattr(stream_module, "PIECE_BYTES", 200)
    a, b = campaign_create(slug="scattered"), campaign_create(slug="grouped")
    run_import(campaign=a, data=scattered, filename="bm25.run")
    run_import(campaign=b, data=grouped, filename="bm25.run")
    assert stored(a)["rankings"] == stored(b)["rankings"]


@pytest.mark.parametrize(
    ("bad", "field", "message"),
    [
        ("q9 Q0 dx 1 high bm25", "score", "not a number"),
        ("q9 Q0 dx 1.5 2 bm25", "rank", "not an integer"),
        ("q9 Q0 dx 1", None, "expected 6 columns"),
        ("q9 Q0 d\u00a0x 1 2 bm25", "docid", "whitespace"),
    ],
)
def test_an_error_in_a_late_piece_names_its_line_in_the_file(db, monkeypatch, bad, field, message):
    good = run_text(queries=20, depth=50)
    data = (good + bad + "\n" + run_text(queries=2, depth=5, seed=9)).encode()
    line = good.count("\n") + 1
    monkeypatch.setattr(stream_module, "PIECE_BYTES", 4096)
    campaign = campaign_create(slug="late-error")
    with pytest.raises(FormatError) as caught:
        run_import(campaign=campaign, data=data, filename="late.run")
    assert (caught.value.line, caught.value.field) == (line, field)
    assert message in str(caught.value) and f"line {line}" in str(caught.value)
    assert not System.objects.filter(campaign=campaign).exists()
    assert (
        not Document.objects.filter(campaign=campaign).exists() and not Query.objects.filter(campaign=campaign).exists()
    )


def test_a_docid_twice_in_one_ranking_across_pieces_names_both_lines(db, monkeypatch):
    lines = run_text(queries=1, depth=300).splitlines()
    lines[250] = lines[3].replace(" 4 ", " 251 ", 1)  # the docid of line 4 again, far below
    monkeypatch.setattr(stream_module, "PIECE_BYTES", 512)
    campaign = campaign_create(slug="dup")
    with pytest.raises(FormatError) as caught:
        run_import(campaign=campaign, data="\n".join(lines).encode(), filename="dup.run")
    assert (caught.value.line, caught.value.field) == (251, "docid")
    assert "first on line 4" in str(caught.value)


@pytest.mark.django_db(transaction=True)
def test_a_bad_line_after_many_good_ones_rolls_back_everything(monkeypatch):
    """Many pieces staged and merged (stubs, rankings, pool) before the bad last line: the transaction rolls
    back whole, on PostgreSQL as on SQLite, and the campaign is as it was."""
    campaign = campaign_create(slug="rollback")
    run_import(campaign=campaign, data=run_text(queries=3, depth=10, tag="first").encode(), filename="first.run")
    before = stored(campaign)
    monkeypatch.setattr(stream_module, "PIECE_BYTES", 8192)
    good = run_text(queries=200, depth=50, tag="second", docs=5000)
    data = (good + "q0 Q0 dz 1 nan second\n").encode()
    with pytest.raises(FormatError) as caught:
        run_import(campaign=campaign, data=data, filename="second.run")
    assert caught.value.line == 10_001 and caught.value.field == "score"
    assert stored(campaign) == before
    assert Document.objects.filter(campaign=campaign).count() == len(
        {d for docs, _ in before["rankings"].values() for d in docs}
    )
    # Qrels: a label off the scale on the last of many lines.
    labels = "".join(f"q{q} 0 d{q}-{d} {(q + d) % 3}\n" for q in range(100) for d in range(100)) + "q0 0 dz 7\n"
    with pytest.raises(FormatError) as caught:
        qrels_import(campaign=campaign, data=labels.encode(), filename="old.qrels", annotator="trec-old")
    assert caught.value.line == 10_001 and caught.value.field == "label"
    assert stored(campaign) == before
    assert not Judgment.objects.filter(pair__campaign=campaign).exists()


def test_the_staged_merge_keeps_the_rules_for_a_system_already_there(db):
    campaign = campaign_create(slug="merge")
    first = run_text(queries=10, depth=20).encode()
    run_import(campaign=campaign, data=first, filename="bm25.run")
    kept = stored(campaign)
    # The same run again: unchanged, nothing written.
    again = run_import(campaign=campaign, data=first, filename="bm25.run")
    assert (again.unchanged, again.added, again.pairs_added) == (10, 0, 0)
    assert stored(campaign) == kept
    # A different run under the same name: refused without replace, the system as it was.
    other = run_text(queries=10, depth=20, seed=5).encode()
    with pytest.raises(ImportConflict):
        run_import(campaign=campaign, data=other, filename="bm25.run")
    assert stored(campaign) == kept
    # With replace: its rankings are the new run's, the pairs of the old one stay in the pool.
    summary = run_import(campaign=campaign, data=other, filename="bm25.run", replace=True)
    assert summary.updated == 10
    now = stored(campaign)
    assert now["rankings"] != kept["rankings"] and kept["pool"] <= now["pool"]
    reference = campaign_create(slug="merge-reference")
    run_import(campaign=reference, data=other, filename="bm25.run")
    assert now["rankings"] == stored(reference)["rankings"]


def test_a_fingerprint_stored_before_runs_were_streamed_still_finds_the_run_unchanged(db):
    campaign = campaign_create(slug="legacy")
    data = run_text(queries=6, depth=10).encode()
    run_import(campaign=campaign, data=data, filename="bm25.run")
    # The fingerprint as it was computed from the whole run in memory: rankings in qid order.
    h = hashlib.sha256()
    for qid, ids, scores in (
        Ranking.objects.filter(system__campaign=campaign)
        .order_by("query__qid")
        .values_list("query__qid", "doc_ids", "scores")
    ):
        h.update(qid.encode() + b"\0" + bytes(ids) + bytes(scores))
    System.objects.filter(campaign=campaign).update(fingerprint=h.hexdigest())
    summary = run_import(campaign=campaign, data=data, filename="bm25.run")
    assert summary.unchanged == 6 and summary.updated == 0


def test_a_run_pools_the_pairs_qrels_made_and_leaves_their_judgments(db):
    campaign = campaign_create(slug="pool-merge", pool_depth=5)
    qrels_import(campaign=campaign, data=b"q0 0 d1 2\nq0 0 d999 1\n", filename="old.qrels", annotator="trec-old")
    assert not Pair.objects.filter(campaign=campaign, pooled=True).exists()
    run = "".join(f"q0 Q0 d{d} {r} {10 - r} bm25\n" for r, d in enumerate([7, 1, 3, 4, 5, 6, 8], 1))
    summary = run_import(campaign=campaign, data=run.encode(), filename="bm25.run")
    pooled = set(Pair.objects.filter(campaign=campaign, pooled=True).values_list("document__docid", flat=True))
    assert pooled == {"d7", "d1", "d3", "d4", "d5"}
    assert summary.pairs_added == 5
    assert Pair.objects.get(campaign=campaign, document__docid="d1").label == 2  # its judgment kept
    assert not Pair.objects.get(campaign=campaign, document__docid="d999").pooled


def test_a_running_import_job_shows_its_rate(campaign, lead):
    job = Job.objects.create(
        kind=Job.Kind.RUN,
        campaign=campaign,
        started_by=lead,
        filename="big.run",
        status=Job.Status.RUNNING,
        total=1_000_000,
        done=300_000,
        started_at=timezone.now() - timedelta(seconds=2),
    )
    assert 100_000 < job_rate(job) <= 150_000
    context = job_context(job, lead)
    assert context["rate"] and context["rate"].replace(",", "").isdigit()
    job.status = Job.Status.DONE
    assert job_rate(job) is None and job_context(job, lead)["rate"] == ""


class _DatabaseLikeReader(io.RawIOBase):
    """A file with no descriptor, as a job's upload read from the database is: it may not be read from another
    thread, so the import parses it on its own thread."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._data.seek(offset, whence)

    def readinto(self, buffer) -> int:
        piece = self._data.read(len(buffer))
        buffer[: len(piece)] = piece
        return len(piece)


class _CountedReadAhead(ReadAhead):
    made = 0

    def __init__(self, *args, **kwargs) -> None:
        type(self).made += 1
        super().__init__(*args, **kwargs)


def _parse_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "reljudge-run-parse"]


def test_the_parser_thread_gives_the_rows_of_the_plain_pipeline(db, monkeypatch):
    """Bytes are parsed ahead on a thread; a file with no descriptor on the import's thread: the same rows, the
    pool merged a block at a time for the new systems."""
    monkeypatch.setattr(runs_module, "ReadAhead", _CountedReadAhead)
    monkeypatch.setattr(stream_module, "PIECE_BYTES", 700)  # dozens of blocks
    monkeypatch.setattr(runs_module, "POOL_STEP", 50)  # the pool merged every few blocks
    data = (run_text(tag="bm25") + run_text(tag="dense", seed=3)).encode()
    plain_reader = io.BufferedReader(_DatabaseLikeReader(data))
    assert readable_apart(data) and not readable_apart(plain_reader)
    ahead, plain = campaign_create(slug="ahead"), campaign_create(slug="plain")
    summary = run_import(campaign=ahead, data=data, filename="two.run")
    assert _CountedReadAhead.made == 1
    other = run_import(campaign=plain, data=plain_reader, filename="two.run")
    assert _CountedReadAhead.made == 1
    assert summary.as_dict() == other.as_dict()
    assert summary.added == 60 and summary.pairs_added > 0
    assert stored(ahead) == stored(plain)
    assert not _parse_threads()


@pytest.mark.django_db(transaction=True)
def test_an_error_the_parser_thread_finds_late_leaves_nothing_and_speaks_the_users_language(monkeypatch):
    """Blocks were written and pool pairs merged (a new system) while the thread parsed on, until a bad line:
    nothing stays, the error names the file's line, in the language of the request, and the thread is gone."""
    campaign = campaign_create(slug="late-thread")
    monkeypatch.setattr(stream_module, "PIECE_BYTES", 4096)
    monkeypatch.setattr(runs_module, "POOL_STEP", 100)
    good = run_text(queries=100, depth=50, tag="fresh", docs=3000)
    data = (good + "q0 Q0 dz 1 high fresh\n").encode()
    with translation.override("ko"), pytest.raises(FormatError) as caught:
        run_import(campaign=campaign, data=data, filename="fresh.run")
    assert (caught.value.line, caught.value.field) == (5001, "score")
    assert "숫자가 아닙니다" in str(caught.value)
    assert not _parse_threads()
    assert not System.objects.filter(campaign=campaign).exists()
    assert not Pair.objects.filter(campaign=campaign).exists()
    assert not Document.objects.filter(campaign=campaign).exists()


@pytest.mark.django_db(transaction=True)
def test_a_database_error_mid_file_stops_the_parser_thread_and_writes_nothing(monkeypatch):
    campaign = campaign_create(slug="db-error")
    monkeypatch.setattr(stream_module, "PIECE_BYTES", 2048)
    monkeypatch.setattr(runs_module, "POOL_STEP", 100)
    calls = []
    merge = runs_module.pool_merge

    def failing_merge(**kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise DatabaseError("the connection went away")
        return merge(**kwargs)

    monkeypatch.setattr(runs_module, "pool_merge", failing_merge)
    with pytest.raises(DatabaseError):
        run_import(campaign=campaign, data=run_text(queries=60, depth=40).encode(), filename="bm25.run")
    assert len(calls) == 3 and not _parse_threads()
    assert not Pair.objects.filter(campaign=campaign).exists() and not System.objects.filter(campaign=campaign).exists()


def test_numpy_columns_read_any_spacing_and_score_as_the_whole_file_parser(db):
    """Tabs, runs of spaces, CRLF, and scores in every form float() takes: the numpy reader takes such pieces
    (not the exact path) and gives parse_run's rankings."""
    lines = []
    forms = ["1e-3", "-.5", "5.", "+2", "0.25", "-0", "12", "3.000001", "1E2", "7.5e+1"]
    for q in range(6):
        for r, form in enumerate(forms):
            sep = ["\t", "  ", " \t "][(q + r) % 3]
            lines.append(sep.join([f"q{q}", "Q0", f"d{(q * 7 + r) % 11}", str(r + 1), form, "tag"]))
    data = ("\r\n".join(lines) + "\r\n").encode()
    assert stream_module._columns_fast(data) is not None
    whole = {
        tag: [(r.qid, r.docids, r.scores.tolist()) for r in rankings]
        for tag, rankings in parse_run(data, filename="x.run").items()
    }
    for piece_bytes in (100, 1 << 20):
        assert blocks_as_rankings(stream_run(data, filename="x.run", piece_bytes=piece_bytes)) == whole


def test_a_docid_wider_than_the_arrays_mid_file_keeps_every_id_right(db, monkeypatch):
    """A block with a docid past WIDE_DOCID bytes comes as a list: the id cache turns into a dict mid-import and
    every ranking still points at its own documents, old and new."""
    wide = "w" * (stream_module.WIDE_DOCID + 20)
    text = (
        run_text(queries=10, depth=20)
        + f"q99 Q0 {wide} 1 9.5 bm25\nq99 Q0 d1 2 9 bm25\n"
        + run_text(queries=5, depth=20, seed=4).replace("q", "r")
    )
    monkeypatch.setattr(stream_module, "PIECE_BYTES", 600)
    campaign = campaign_create(slug="wide")
    run_import(campaign=campaign, data=text.encode(), filename="bm25.run")
    expected = {
        ("bm25", r.qid): r.docids for rankings in parse_run(text.encode(), filename="x").values() for r in rankings
    }
    got = {key: docids for key, (docids, _) in stored(campaign)["rankings"].items()}
    assert got == expected and got[("bm25", "q99")] == [wide, "d1"]


def test_a_run_job_reads_its_stored_pieces_on_the_parser_thread_with_the_rows_of_a_direct_import(db, lead, monkeypatch):
    """A job's upload lives in the database (readable only on the import's connection): the job copies it to a
    temporary file a piece at a time, which the parser thread reads."""
    from judging.jobs import job_run, job_start_upload

    monkeypatch.setattr(runs_module, "ReadAhead", _CountedReadAhead)
    monkeypatch.setattr(stream_module, "PIECE_BYTES", 900)
    data = (run_text(tag="bm25") + run_text(tag="dense", seed=3)).encode()
    by_job, direct = campaign_create(slug="by-job"), campaign_create(slug="direct")
    job = job_start_upload(kind="run", campaign=by_job, user=lead, upload=io.BytesIO(data), filename="two.run")
    assert job.upload is None  # kept as pieces in the database
    made = _CountedReadAhead.made
    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.DONE and job.result["added"] == 60
    assert _CountedReadAhead.made == made + 1
    run_import(campaign=direct, data=data, filename="two.run")
    assert stored(by_job) == stored(direct)
    assert not _parse_threads()


def test_the_import_run_command_streams_the_file(db, tmp_path, monkeypatch):
    """The command hands the open file (not its bytes) to the import, which parses it on the thread."""
    from django.core.management import call_command

    monkeypatch.setattr(runs_module, "ReadAhead", _CountedReadAhead)
    seen = []
    real = runs_module.stream_run

    def spy(data, **kwargs):
        seen.append(data)
        return real(data, **kwargs)

    monkeypatch.setattr(runs_module, "stream_run", spy)
    path = tmp_path / "bm25.run"
    path.write_text(run_text(queries=4, depth=5))
    campaign = campaign_create(slug="command")
    made = _CountedReadAhead.made
    call_command("import_run", campaign.slug, str(path), stdout=io.StringIO(), stderr=io.StringIO())
    assert seen and all(not isinstance(d, bytes) and d.name == str(path) for d in seen)
    assert _CountedReadAhead.made == made + 1
    assert Ranking.objects.filter(system__campaign=campaign).count() == 4


def test_a_pool_merge_leaves_the_sessions_jit_setting_as_it_was(db):
    """The merges turn PostgreSQL's JIT off for themselves only."""
    if connection.vendor != "postgresql":
        pytest.skip("JIT is PostgreSQL's")
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('jit', 'on', true)")
        run_import(campaign=campaign_create(slug="jit"), data=run_text(queries=3, depth=5).encode(), filename="j")
        cursor.execute("SELECT current_setting('jit')")
        assert cursor.fetchone()[0] == "on"
