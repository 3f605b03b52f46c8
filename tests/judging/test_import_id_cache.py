"""The run import's cache of docids and their document ids (imports.service.stubs): read whole when the
campaign's documents fit its byte budget, looked up by the (campaign, docid) index when they do not; either way
every ranking gets the right documents and no docid gets a second one."""

from __future__ import annotations

import numpy as np
import pytest

from judging.imports.parse import parse_run
from judging.imports.parse import stream as stream_module
from judging.imports.service import stubs as stubs_module
from judging.imports.service.stubs import StubIds
from judging.models import Document
from judging.services import campaign_create, run_import
from tests.judging.test_import_stream import run_text, stored


@pytest.fixture
def look_ups(monkeypatch):
    """The docids the import looked up in the database, statement by statement."""
    seen: list[list[str]] = []
    real = StubIds._existing

    def spy(self, model, key, values):
        seen.append(list(values))
        return real(self, model, key, values)

    monkeypatch.setattr(StubIds, "_existing", spy)
    return seen


def _second_run_is_right(campaign, text: str, before: set) -> None:
    run_import(campaign=campaign, data=text.encode(), filename="new.run")
    after = dict(Document.objects.filter(campaign=campaign).values_list("docid", "id"))
    assert before <= set(after.items())  # the documents there before kept their ids
    expected = {("new", r.qid): r.docids for r in parse_run(text.encode(), filename="x")["new"]}
    got = {key: docids for key, (docids, _) in stored(campaign)["rankings"].items() if key[0] == "new"}
    assert got == expected
    assert len(after) == len({d for docids in got.values() for d in docids} | {d for d, _ in before})


@pytest.mark.parametrize("cache_bytes", [40 * 20, 32 * 2**20])
def test_docids_past_the_id_cache_are_looked_up_and_keep_their_documents(db, monkeypatch, cache_bytes):
    """A campaign with documents already, and a run of more docids than the cache holds: the known docids are
    found (no second document for a docid), the new ones made once, every ranking's ids right."""
    monkeypatch.setattr(stubs_module, "CACHE_BYTES", cache_bytes)
    monkeypatch.setattr(stream_module, "PIECE_BYTES", 800)
    campaign = campaign_create(slug=f"cache-{cache_bytes}")
    run_import(campaign=campaign, data=run_text(queries=5, depth=30, tag="old", docs=100).encode(), filename="o")
    before = set(Document.objects.filter(campaign=campaign).values_list("docid", "id"))
    _second_run_is_right(campaign, run_text(queries=20, depth=40, tag="new", docs=400, seed=5), before)


def test_a_campaign_whose_documents_fit_is_read_in_chunks_and_nothing_is_looked_up(db, monkeypatch, look_ups):
    """More documents than one chunk of the read: all of them are read before the first block, so that the
    file's docids are found in the cache or made, without a look-up statement."""
    monkeypatch.setattr(stubs_module, "READ_CHUNK", 7)
    monkeypatch.setattr(stream_module, "PIECE_BYTES", 800)
    campaign = campaign_create(slug="fits")
    run_import(campaign=campaign, data=run_text(queries=5, depth=30, tag="old", docs=100).encode(), filename="o")
    before = set(Document.objects.filter(campaign=campaign).values_list("docid", "id"))
    assert len(before) > 7 * 3
    ids = StubIds(campaign)
    assert ids._complete and ids._known() == len(before)
    docids = np.array(sorted(d.encode() for d, _ in before), dtype=bytes)
    assert dict(zip(docids.tolist(), ids.documents(docids).tolist(), strict=True)) == {
        d.encode(): pk for d, pk in before
    }
    _second_run_is_right(campaign, run_text(queries=20, depth=40, tag="new", docs=400, seed=5), before)
    assert look_ups == []


def test_a_campaign_too_large_for_the_cache_is_not_read_and_its_docids_are_looked_up(db, monkeypatch, look_ups):
    """Documents that fit the budget by their count but not once their docids are read (the read gives up at
    the chunk that shows it): the import looks the file's docids up instead, and still makes none twice."""
    monkeypatch.setattr(stubs_module, "READ_CHUNK", 10)
    monkeypatch.setattr(stream_module, "PIECE_BYTES", 800)
    campaign = campaign_create(slug="too-large")
    run_import(campaign=campaign, data=run_text(queries=5, depth=30, tag="old", docs=100).encode(), filename="o")
    before = set(Document.objects.filter(campaign=campaign).values_list("docid", "id"))
    # each docid ("d12") takes 3 bytes + 16: room for all of them at 1 byte each, not at their width
    monkeypatch.setattr(stubs_module, "CACHE_BYTES", len(before) * 18)
    ids = StubIds(campaign)
    assert not ids._complete and ids._known() == 0
    _second_run_is_right(campaign, run_text(queries=20, depth=40, tag="new", docs=400, seed=5), before)
    looked_up = {d for batch in look_ups for d in batch}
    assert {d for d, _ in before} & looked_up  # the known docids were found by a look-up, not made again


def test_a_campaign_of_wide_docids_is_read_into_a_dict(db, monkeypatch, look_ups):
    """Docids wider than the parser's arrays take (WIDE_DOCID): the campaign's are read into the dict form of the
    cache, and a run of them makes no second document."""
    monkeypatch.setattr(stubs_module, "READ_CHUNK", 4)
    campaign = campaign_create(slug="wide")
    wide = "x" * (stream_module.WIDE_DOCID + 5)
    old = "".join(f"q{q} Q0 {wide}{d} {d + 1} {10 - d} old\n" for q in range(3) for d in range(6))
    run_import(campaign=campaign, data=old.encode(), filename="o")
    before = set(Document.objects.filter(campaign=campaign).values_list("docid", "id"))
    ids = StubIds(campaign)
    assert ids._complete and ids._dict is not None and len(ids._dict) == 6
    new = "".join(f"q{q} Q0 {wide}{d} {d + 1} {10 - d} new\n" for q in range(4) for d in range(2, 9))
    _second_run_is_right(campaign, new, before)
    assert look_ups == []
    assert Document.objects.filter(campaign=campaign).count() == 9


def test_docids_whose_hashes_collide_keep_their_own_documents(db, monkeypatch):
    """The id cache finds docids by a hash: with a hash that gives many docids one value (odds of about 3 in 10**8
    at a million docids with the real one) it turns into a dict, and every docid still gets its own document, once."""
    monkeypatch.setattr(stubs_module, "docid_hashes", lambda docids: np.char.str_len(docids).astype(np.uint64))
    monkeypatch.setattr(stream_module, "PIECE_BYTES", 700)
    campaign = campaign_create(slug="collide")
    run_import(campaign=campaign, data=run_text(queries=5, depth=30, tag="old", docs=100).encode(), filename="o")
    before = set(Document.objects.filter(campaign=campaign).values_list("docid", "id"))
    _second_run_is_right(campaign, run_text(queries=10, depth=30, tag="new", docs=200, seed=2), before)
