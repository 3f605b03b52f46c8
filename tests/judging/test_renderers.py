"""The leaderboard's JSON text and the bounded text caches behind it (judging.api.renderers)."""

from __future__ import annotations

import sys

import pytest
from rest_framework.renderers import JSONRenderer

from judging.api import renderers
from judging.api.renderers import TextLRU, leaderboard_json
from judging.models import Pair
from judging.scoring import leaderboard_data
from judging.services import judgment_record


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
    assert first.encode() == _drf(campaign, k=2)
    assert len(renderers.BLOCK_TEXTS) == 2  # bm25 and dense
    assert leaderboard_json(campaign=campaign, k=2) == first  # nothing changed: the kept text
    pair = Pair.objects.get(campaign=campaign, query__qid="q1", document__docid="d1")
    for annotator in (world.annotator, world.annotator2):  # q1's d1: relevant, now not relevant
        judgment_record(pair=pair, annotator=annotator, grade=0)
    after = leaderboard_json(campaign=campaign, k=2)
    assert after.encode() == _drf(campaign, k=2)
    assert after != first


def test_leaderboard_texts_stay_within_their_bounds(world, monkeypatch):
    monkeypatch.setattr(renderers, "BLOCK_TEXTS", TextLRU(max_entries=3, max_bytes=10**6))
    monkeypatch.setattr(renderers, "ROW_TEXTS", TextLRU(max_entries=5, max_bytes=10**6))
    for k in (1, 2, 3, 4):  # four parameter sets: four blocks of per-query values for each of two systems
        assert leaderboard_json(campaign=world.campaign, k=k).encode() == _drf(world.campaign, k=k)
    assert len(renderers.BLOCK_TEXTS) == 3 and len(renderers.ROW_TEXTS) == 5


def test_the_kept_rows_of_each_system_stay_within_their_bound(world, monkeypatch):
    """Each system's latest per-query items are kept to patch the next state's text; four parameter sets
    with room for about one leave the most recent only, and the texts are still DRF's."""
    monkeypatch.setattr(renderers, "_SERIES", type(renderers._SERIES)())
    leaderboard_json(campaign=world.campaign, k=1)
    one_table = sum(v[3] for v in renderers._SERIES.values())
    monkeypatch.setattr(renderers, "_SERIES_BYTES", one_table)
    for k in (2, 3, 4):
        assert leaderboard_json(campaign=world.campaign, k=k).encode() == _drf(world.campaign, k=k)
    kept = list(renderers._SERIES.values())
    assert 0 < sum(v[3] for v in kept) <= one_table
    assert 1 <= len(renderers._SERIES) <= 2  # k=4's systems, as many as the bound holds
