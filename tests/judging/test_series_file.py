"""A restarted worker writes the API's per-query JSON from the rows another process of the machine saved."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from judging.api import leaderboard_text
from judging.models import Pair
from judging.scoring import leaderboard_data, series_file
from judging.scoring.cache import scores_clear
from judging.scoring.cube import cubes_clear
from judging.scoring.trust import caches_clear
from judging.services import judgment_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def saved_at_once(settings):
    settings.RELJUDGE_BACKGROUND_INLINE = True  # as every test has it (tests/conftest.py): saved in the request
    series_file.series_clear()
    yield
    series_file.series_clear()


def _restart():
    cubes_clear()
    scores_clear()
    caches_clear()
    leaderboard_text.text_caches_clear()
    series_file.series_clear()


def _judge(campaign, annotator, grade):
    pair = Pair.objects.filter(campaign=campaign, pooled=True, judgment_count=0).order_by("id").first()
    judgment_record(pair=pair, annotator=annotator, grade=grade)


def _per_query(body: dict) -> dict:
    return {s["name"]: s["per_query"] for s in body["systems"]}


def _expected(campaign) -> dict:
    """The per-query values as the general path (a dict per query, no text) gives them."""
    return {s["name"]: s["per_query"] for s in leaderboard_data(campaign=campaign, bounds=False)["systems"]}


def _files(folder, campaign):
    return sorted(Path(folder).glob(f"text-{campaign.pk}-*.bin"))


def test_a_restarted_worker_starts_from_the_saved_rows(
    pooled, annotator, as_lead, saved_at_once, monkeypatch, _cube_dir
):
    url = f"/api/campaigns/{pooled.slug}/leaderboard/?per_query=true"
    _judge(pooled, annotator, 2)
    first = as_lead.get(url).json()
    assert len(_files(_cube_dir, pooled)) == 2  # one per system

    _restart()

    def no_formatting(*args, **kwargs):
        raise AssertionError("every row formatted again")

    monkeypatch.setattr(leaderboard_text._PerQueryText, "_rows", no_formatting)
    again = as_lead.get(url).json()
    assert _per_query(again) == _per_query(first) == _expected(pooled)

    # a judgment since the save: the moved rows are written again, the others come from the file
    _restart()
    _judge(pooled, annotator, 0)  # q1 again: the same queries are scored
    after = as_lead.get(url).json()
    assert _per_query(after) == _expected(pooled) != _per_query(first)


def test_a_damaged_file_is_removed_and_rows_of_other_queries_are_not_used(
    pooled, annotator, as_lead, saved_at_once, caplog, _cube_dir
):
    url = f"/api/campaigns/{pooled.slug}/leaderboard/?per_query=true"
    _judge(pooled, annotator, 2)
    as_lead.get(url)
    damaged, other = _files(_cube_dir, pooled)
    raw = bytearray(damaged.read_bytes())
    raw[-3] ^= 0xFF  # inside the text: the file's size is right, its text no longer decodes or no longer matches
    damaged.write_bytes(bytes(raw[:-1]))  # and truncated
    _restart()
    with caplog.at_level(logging.WARNING, logger="judging.scoring.series_file"):
        body = as_lead.get(url).json()
    assert "truncated" in caplog.text
    assert _per_query(body) == _expected(pooled)

    # a query's first label changes the scored queries: the saved rows are of other queries, and are not used
    caplog.clear()
    _restart()
    q2 = (
        Pair.objects.filter(campaign=pooled, pooled=True, judgment_count=0)
        .exclude(query=Pair.objects.filter(campaign=pooled, judgment_count__gt=0).values("query")[:1])
        .order_by("id")
        .first()
    )
    judgment_record(pair=q2, annotator=annotator, grade=1)
    with caplog.at_level(logging.WARNING, logger="judging.scoring.series_file"):
        body = as_lead.get(url).json()
    assert caplog.text == "" and _per_query(body) == _expected(pooled)
    assert json.dumps(body)  # plain JSON


def test_a_series_of_no_scored_queries_is_saved_and_read_back(saved_at_once):
    """Before any label no query is scored: the empty per-query object is saved like any other (an empty part
    of the file once failed to be written, in the saving thread)."""
    import numpy as np

    text, starts = leaderboard_text.object_text([])
    assert text == b"{}"
    series_file.series_save_later(9, "table:system", ("P@10",), (), np.zeros((0, 1)), text, starts)
    values, got_text, got_starts = series_file.series_load(9, "table:system", ("P@10",), ())
    assert values.shape == (0, 1) and got_text == b"{}" and got_starts.tolist() == starts.tolist()


def test_a_file_another_worker_saved_lately_is_not_written_again(saved_at_once, monkeypatch):
    """The machine's workers save a series once per SAVE_EVERY between them, not each: a worker that finds the
    file younger than that leaves it (and does not even read its values); an older file is written anew."""
    import os

    import numpy as np

    text, starts = leaderboard_text.object_text([b'"q1":{"P@10":0.5}'])
    series_file.series_save_later(9, "table:lately", ("P@10",), ("q1",), np.full((1, 1), 0.5), text, starts)
    series_file.series_clear()  # another worker: it has saved nothing itself

    def unread():
        raise AssertionError("the values were read for nothing")

    newer, newer_starts = leaderboard_text.object_text([b'"q1":{"P@10":0.25}'])
    series_file.series_save_later(9, "table:lately", ("P@10",), ("q1",), unread, newer, newer_starts)
    assert series_file.series_load(9, "table:lately", ("P@10",), ("q1",))[1] == text

    path = series_file._path(series_file.cube_file.cube_dir(), 9, "table:lately")
    old = path.stat().st_mtime - series_file.SAVE_EVERY - 1
    os.utime(path, (old, old))
    series_file.series_clear()
    series_file.series_save_later(
        9, "table:lately", ("P@10",), ("q1",), lambda: np.full((1, 1), 0.25), newer, newer_starts
    )
    assert series_file.series_load(9, "table:lately", ("P@10",), ("q1",))[1] == newer
