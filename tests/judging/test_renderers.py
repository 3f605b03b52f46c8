"""The leaderboard's JSON text and the bounded text caches behind it (judging.api.leaderboard_text)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.renderers import JSONRenderer

from judging.api import leaderboard_text
from judging.api.leaderboard_text import TextLRU, leaderboard_json
from judging.models import Pair
from judging.scoring import cache as cache_module
from judging.scoring import leaderboard_data
from judging.services import documents_import, judgment_record, queries_import, run_import
from metrics.numbers import NumberError


def test_text_lru_drops_the_least_recently_used_beyond_its_count():
    lru = TextLRU(max_entries=2, max_bytes=10**6)
    lru.put("a", "A")
    lru.put("b", "B")
    assert lru.get("a") == "A"  # now the most recently used
    lru.put("c", "C")
    assert (lru.get("a"), lru.get("b"), lru.get("c")) == ("A", None, "C")
    assert len(lru) == 2


def test_text_lru_keeps_within_its_bytes():
    text = "x" * 1000
    lru = TextLRU(max_entries=100, max_bytes=3 * sys.getsizeof(text))
    lru.put_many([(i, text) for i in range(10)])
    assert len(lru) == 3 and lru.bytes == 3 * sys.getsizeof(text)
    assert lru.get_many([6, 7, 8, 9]) == [None, text, text, text]
    lru.put("huge", "y" * (4 * sys.getsizeof(text)))  # more than the whole bound: not kept, nothing dropped
    assert lru.get("huge") is None and len(lru) == 3
    lru.put(9, "short")  # replacing a text counts its new size only
    assert lru.bytes == 2 * sys.getsizeof(text) + sys.getsizeof("short")
    lru.clear()
    assert len(lru) == 0 and lru.bytes == 0


@pytest.mark.parametrize("bounds", [(0, 10), (10, 0)])
def test_text_lru_refuses_bounds_that_keep_nothing(bounds):
    with pytest.raises(ValueError, match="must be positive"):
        TextLRU(max_entries=bounds[0], max_bytes=bounds[1])


def _drf(campaign, **params) -> bytes:
    """What DRF's JSONRenderer writes of leaderboard_data: what leaderboard_json must write, byte for byte."""
    return JSONRenderer().render(leaderboard_data(campaign=campaign, **params))


def test_leaderboard_json_follows_each_new_judgment(world):
    campaign = world.campaign
    first = leaderboard_json(campaign=campaign, k=2)
    assert first == _drf(campaign, k=2)
    assert len(leaderboard_text.BLOCK_TEXTS) == 2  # bm25 and dense
    assert leaderboard_json(campaign=campaign, k=2) == first  # nothing changed: the kept text
    pair = Pair.objects.get(campaign=campaign, query__qid="q1", document__docid="d1")
    for annotator in (world.annotator, world.annotator2):  # q1's d1: relevant, now not relevant
        judgment_record(pair=pair, annotator=annotator, grade=0)
    after = leaderboard_json(campaign=campaign, k=2)
    assert after == _drf(campaign, k=2)
    assert after != first


def test_after_a_judgment_only_the_judged_querys_rows_are_written_again(world, monkeypatch):
    """Each system's kept object is patched where a query's labels version moved (its values move only with
    it): one row per system after a judgment, and the text is still DRF's. The kept series hold the queries'
    versions, one array shared by the table's systems, not a copy of their values."""
    campaign = world.campaign
    leaderboard_json(campaign=campaign, k=2)
    kept = list(leaderboard_text._SERIES.values())
    assert len(kept) == 2 and kept[0][1] is kept[1][1] and kept[0][1].dtype == np.int64
    written: list[int] = []
    patched = leaderboard_text.object_patched

    def counting(text, starts, moved, new):
        written.append(moved.size)
        return patched(text, starts, moved, new)

    monkeypatch.setattr(leaderboard_text, "object_patched", counting)
    pair = Pair.objects.get(campaign=campaign, query__qid="q1", document__docid="d1")
    for annotator in (world.annotator, world.annotator2):
        judgment_record(pair=pair, annotator=annotator, grade=0)
    assert leaderboard_json(campaign=campaign, k=2) == _drf(campaign, k=2)
    assert written == [1, 1]  # q1's row of each system


def test_after_a_judgment_only_the_moved_rows_are_read_and_checked(world, monkeypatch):
    """The patch reads each system's values of the judged query only, not every query's (the whole table was
    copied and checked in every request: 7 MB at 20 systems x 5,000 queries); a value that is not finite is a
    broken invariant (metrics.numbers.NumberError, a logged 500), never NaN in the JSON."""
    campaign = world.campaign
    leaderboard_json(campaign=campaign, k=2)
    monkeypatch.setattr(leaderboard_text, "series_save_later", lambda *args: None)  # saving reads every row, by itself
    read: list[list[int] | None] = []
    text = leaderboard_text._PerQueryText._text

    def spying(self, values, *args, **kwargs):
        def spy(rows=None):
            read.append(None if rows is None else rows.tolist())
            return values() if rows is None else values(rows)

        return text(self, spy, *args, **kwargs)

    monkeypatch.setattr(leaderboard_text._PerQueryText, "_text", spying)
    pair = Pair.objects.get(campaign=campaign, query__qid="q1", document__docid="d1")
    for annotator in (world.annotator, world.annotator2):
        judgment_record(pair=pair, annotator=annotator, grade=0)
    assert leaderboard_json(campaign=campaign, k=2) == _drf(campaign, k=2)
    assert read == [[0], [0]]  # q1, the first scored query, of bm25 and of dense

    score = cache_module._score

    def not_finite(*args, **kwargs):
        scores, labelled = score(*args, **kwargs)
        return np.full_like(scores, np.nan), labelled

    monkeypatch.setattr(cache_module, "_score", not_finite)
    judgment_record(pair=pair, annotator=world.annotator, grade=2)
    with pytest.raises(NumberError, match="not a finite number"):  # a broken invariant: a 500, never NaN in JSON
        leaderboard_json(campaign=campaign, k=2)


def test_leaderboard_texts_stay_within_their_bounds(world, monkeypatch):
    monkeypatch.setattr(leaderboard_text, "BLOCK_TEXTS", TextLRU(max_entries=3, max_bytes=10**6))
    monkeypatch.setattr(leaderboard_text, "ROW_TEXTS", TextLRU(max_entries=5, max_bytes=10**6))
    for k in (1, 2, 3, 4):  # four parameter sets: four blocks of per-query values for each of two systems
        assert leaderboard_json(campaign=world.campaign, k=k) == _drf(world.campaign, k=k)
    assert len(leaderboard_text.BLOCK_TEXTS) == 3 and len(leaderboard_text.ROW_TEXTS) == 5


def test_the_kept_rows_of_each_system_stay_within_their_bound(world, monkeypatch):
    """Each system's latest per-query items are kept to patch the next state's text; four parameter sets
    with room for about one leave the most recent only, and the texts are still DRF's."""
    monkeypatch.setattr(leaderboard_text, "_SERIES", type(leaderboard_text._SERIES)())
    leaderboard_json(campaign=world.campaign, k=1)
    one_table = sum(v[-1] for v in leaderboard_text._SERIES.values())
    monkeypatch.setattr(leaderboard_text, "_SERIES_BYTES", one_table)
    for k in (2, 3, 4):
        assert leaderboard_json(campaign=world.campaign, k=k) == _drf(world.campaign, k=k)
    kept = list(leaderboard_text._SERIES.values())
    assert 0 < sum(v[-1] for v in kept) <= one_table
    assert 1 <= len(leaderboard_text._SERIES) <= 2  # k=4's systems, as many as the bound holds


def test_leaderboard_json_writes_any_query_id_as_drf_does(campaign, annotator):
    """Query ids are whatever the lead's files held: Korean text, a '%' (the rows' format character), a quote and
    a backslash (JSON escapes) come out as DRF writes them, byte for byte."""
    odd = ["검색질의", "50%", 'q"\\x']
    topics = "".join(f"{qid}\tquery {i}\n" for i, qid in enumerate(odd))
    queries_import(campaign=campaign, data=topics.encode(), filename="topics.tsv")
    documents_import(
        campaign=campaign, data=b'{"docid": "d1", "text": "a"}\n{"docid": "d2", "text": "b"}\n', filename="d.jsonl"
    )
    run = "".join(f"{qid} Q0 d{r} {r} {3 - r} sys\n" for qid in odd for r in (1, 2))
    run_import(campaign=campaign, data=run.encode(), filename="sys.run")
    for pair in Pair.objects.filter(campaign=campaign, pooled=True):
        judgment_record(pair=pair, annotator=annotator, grade=2 if pair.document.docid == "d1" else 0)
    body = leaderboard_json(campaign=campaign, k=2)
    assert body == _drf(campaign, k=2)
    assert "검색".encode() in body
    assert set(json.loads(body)["systems"][0]["per_query"]) == set(odd)


@given(
    items=st.lists(st.binary(min_size=1, max_size=12), max_size=30),
    data=st.data(),
)
@settings(max_examples=200, deadline=None)
def test_an_object_patched_is_the_object_of_the_new_items(items, data):
    """After a judgment each system's per-query object is patched where rows moved (object_patched): the text
    and the items' starts are exactly those of the object written afresh, for any items and moves."""
    text, starts = leaderboard_text.object_text(items)
    assert text == b"{" + b",".join(items) + b"}"
    assert [text[starts[i] : starts[i + 1] - 1] for i in range(len(items))] == items
    moved = sorted(data.draw(st.sets(st.integers(0, max(len(items) - 1, 0)), max_size=len(items))) if items else [])
    new = [data.draw(st.binary(min_size=1, max_size=20)) for _ in moved]
    after = list(items)
    for i, item in zip(moved, new, strict=True):
        after[i] = item
    patched_text, patched_starts = leaderboard_text.object_patched(text, starts, np.array(moved, dtype=np.int64), new)
    fresh_text, fresh_starts = leaderboard_text.object_text(after)
    assert patched_text == fresh_text
    np.testing.assert_array_equal(patched_starts, fresh_starts)


def test_the_api_writes_the_leaderboard_in_pieces_with_its_length(world, as_lead):
    """The API's leaderboard with per-query values is written as the kept objects one after the other (not
    joined into one more copy of the answer): its Content-Length is the body's, and the body is DRF's JSON."""
    response = as_lead.get(f"/api/campaigns/{world.campaign.slug}/leaderboard/?k=2&per_query=true")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    chunks = list(response)
    assert len(chunks) > 2  # the text around the objects, and each system's object
    body = b"".join(chunks)
    assert int(response["Content-Length"]) == len(body)
    assert body == response.content == _drf(world.campaign, k=2)


def test_an_api_answer_goes_once_the_server_has_it(world):
    """The view does not keep its answer: with the garbage collector off (as between its rare full passes in a
    busy worker), nothing holds the leaderboard's answer, and the per-query texts in it, once the caller drops it."""
    import gc
    import weakref

    from rest_framework.test import APIRequestFactory, force_authenticate

    from judging.api.views.campaigns import CampaignViewSet

    view = CampaignViewSet.as_view({"get": "leaderboard"})
    request = APIRequestFactory().get(f"/api/campaigns/{world.campaign.slug}/leaderboard/?per_query=true")
    force_authenticate(request, user=world.lead)
    gc.collect()
    gc.disable()
    try:
        response = view(request, slug=world.campaign.slug)
        assert response.status_code == 200 and b'"per_query"' in response.content
        gone = weakref.ref(response)
        del response
        assert gone() is None
    finally:
        gc.enable()
