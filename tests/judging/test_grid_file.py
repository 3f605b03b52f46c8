"""The shared labels file: the ranked labels of a state written once per machine, mapped copy-on-write by every
worker, patched per judgment in the worker's own pages, written anew past a mark, rebuilt when not sound."""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from judging import runtime
from judging.models import Pair
from judging.scoring import grid_file, leaderboard
from judging.scoring.cache import scores_clear
from judging.scoring.cube import cubes_clear
from judging.scoring.trust import caches_clear, campaign_arrays
from judging.services import judgment_record, run_import
from tests.data import RUN_BM25

pytestmark = pytest.mark.django_db


def _restart() -> None:
    """What a restarted worker has in memory: nothing."""
    cubes_clear()
    scores_clear()
    caches_clear()


def _files(folder: str, campaign) -> list[Path]:
    return sorted(Path(folder).glob(f"grid-{campaign.pk}-*.bin"))


def _in_memory(campaign, settings):
    """The arrays as a process without the folder builds them, from the database alone."""
    folder = settings.RELJUDGE_CUBE_DIR
    settings.RELJUDGE_CUBE_DIR = ""
    try:
        _restart()
        arrays = campaign_arrays(leaderboard(campaign))
        return np.array(arrays.labels), np.array(arrays.qrels)
    finally:
        settings.RELJUDGE_CUBE_DIR = folder
        _restart()


def _same(arrays, expected) -> None:
    labels, qrels = expected
    np.testing.assert_array_equal(np.asarray(arrays.labels), labels)
    width = max(arrays.qrels.shape[1], qrels.shape[1])
    # qrels rows are padded with UNJUDGED to the widest row a process has seen: compare them at one width
    pad = np.full((qrels.shape[0], width), -1, np.int8)
    got, want = pad.copy(), pad.copy()
    got[:, : arrays.qrels.shape[1]] = arrays.qrels
    want[:, : qrels.shape[1]] = qrels
    np.testing.assert_array_equal(got, want)


def _judge(campaign, annotator, n: int, grade: int = 2) -> None:
    for pair in Pair.objects.filter(campaign=campaign, pooled=True, judgment_count=0).order_by("id")[:n]:
        judgment_record(pair=pair, annotator=annotator, grade=grade)


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return (st.st_ino, st.st_mtime_ns)


def test_the_labels_are_written_once_and_every_state_maps_them(pooled, annotator, settings, _cube_dir):
    _judge(pooled, annotator, 2)
    _restart()
    arrays = campaign_arrays(leaderboard(pooled))
    [path] = _files(_cube_dir, pooled)
    assert isinstance(arrays.labels, np.memmap) and not arrays.labels.flags.writeable
    _same(arrays, _in_memory(pooled, settings))

    # a restarted worker maps the same file, unchanged
    stamp = _stamp(path)
    again = campaign_arrays(leaderboard(pooled))
    assert isinstance(again.labels, np.memmap) and _stamp(path) == stamp
    _same(again, _in_memory(pooled, settings))

    # a judgment: a fresh mapping of the same file with the judged query's column put in; the file stays
    before = (np.array(again.labels), np.array(again.qrels))
    _judge(pooled, annotator, 1, grade=1)
    after = campaign_arrays(leaderboard(pooled))
    assert after.labels is not again.labels and isinstance(after.labels, np.memmap)
    assert _files(_cube_dir, pooled) == [path] and _stamp(path) == stamp
    _same(after, _in_memory(pooled, settings))
    # the earlier state's arrays, which a request may still be reading, did not change
    _same(again, before)
    assert not np.array_equal(np.asarray(again.labels), np.asarray(after.labels))


def test_past_the_mark_the_state_is_written_as_the_new_file(pooled, annotator, settings, monkeypatch, _cube_dir):
    monkeypatch.setattr(grid_file, "REBASE_QUERIES", 0)
    settings.RELJUDGE_BACKGROUND_INLINE = True  # as every test has it (tests/conftest.py): written in the request
    campaign_arrays(leaderboard(pooled))
    [path] = _files(_cube_dir, pooled)
    stamp = _stamp(path)
    _judge(pooled, annotator, 1)
    lb = leaderboard(pooled)
    campaign_arrays(lb)
    [path] = _files(_cube_dir, pooled)
    assert _stamp(path) != stamp  # written anew at this state
    _restart()
    found = campaign_arrays(leaderboard(pooled))
    [grid] = runtime.kept("trust.label_files").store.values()
    np.testing.assert_array_equal(grid.file.versions, lb.table.versions)
    assert grid.moved.size == 0  # nothing to put in: the file is this state
    _same(found, _in_memory(pooled, settings))


# A process of its own that loads the reader (judging/scoring/grid_file.py and the cube file's, by path, without
# Django) and prints a digest of what it mapped.
_CHILD = """
import hashlib, importlib.util, json, sys, types
pkg = types.ModuleType("judging.scoring"); pkg.__path__ = []
sys.modules["judging"] = types.ModuleType("judging"); sys.modules["judging.scoring"] = pkg
for name, path in (("cube_file", sys.argv[1]), ("grid_file", sys.argv[2])):
    spec = importlib.util.spec_from_file_location("judging.scoring." + name, path)
    module = sys.modules["judging.scoring." + name] = importlib.util.module_from_spec(spec)
    setattr(pkg, name, module)
    spec.loader.exec_module(module)
from pathlib import Path
found = module.grid_load(Path(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6])
labels = found.labels()
print(json.dumps([list(labels.shape), hashlib.sha256(labels.tobytes()).hexdigest(), found.versions.tolist()]))
"""


def test_several_processes_map_the_same_labels_file_and_agree(pooled, annotator, _cube_dir):
    from judging.scoring import cube_file
    from judging.scoring.trust.arrays import grid_source

    _judge(pooled, annotator, 3)
    lb = leaderboard(pooled)
    arrays = campaign_arrays(lb)
    cube_digest, digest = grid_source(lb)
    args = [sys.executable, "-c", _CHILD, cube_file.__file__, grid_file.__file__, _cube_dir, str(pooled.pk)]
    children = [
        subprocess.Popen([*args, cube_digest, digest], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    expected = hashlib.sha256(np.ascontiguousarray(arrays.labels).tobytes()).hexdigest()
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        shape, got, versions = json.loads(out)
        assert tuple(shape) == arrays.labels.shape and got == expected and versions == lb.table.versions.tolist()


@pytest.mark.parametrize("damage", ["truncated", "header", "another source"])
def test_a_labels_file_that_is_not_sound_is_rebuilt(pooled, annotator, settings, _cube_dir, damage, caplog):
    _judge(pooled, annotator, 2)
    campaign_arrays(leaderboard(pooled))
    [path] = _files(_cube_dir, pooled)
    raw = bytearray(path.read_bytes())
    if damage == "truncated":
        raw = raw[:-1]
    elif damage == "header":
        raw[grid_file.cube_file._PREFIX.size + 3] ^= 0x01  # a flipped bit: the CRC no longer matches
    else:  # another label source's bytes under this name: its header names the other source
        _, length, _, payload = grid_file.cube_file._PREFIX.unpack_from(raw)
        start = grid_file.cube_file._PREFIX.size
        header = json.loads(bytes(raw[start : start + length]))
        header["state"] = "0" * 32
        text = json.dumps(header).encode()
        assert len(text) <= length
        text = text.ljust(length)
        raw[start : start + length] = text
        crc = grid_file.cube_file.zlib.crc32(text)
        raw[:start] = grid_file.cube_file._PREFIX.pack(grid_file.MAGIC, length, crc, payload)
    path.write_bytes(bytes(raw))
    _restart()
    with caplog.at_level(logging.WARNING, logger="judging.scoring.grid_file"):
        arrays = campaign_arrays(leaderboard(pooled))
    assert "not used" in caplog.text and "rebuilding it" in caplog.text
    _same(arrays, _in_memory(pooled, settings))
    [rebuilt] = _files(_cube_dir, pooled)
    assert rebuilt.stat().st_size == len(raw) + (1 if damage == "truncated" else 0)


def test_a_full_disk_keeps_the_arrays_in_memory(pooled, annotator, settings, _cube_dir, monkeypatch, caplog):
    _judge(pooled, annotator, 2)

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(grid_file.cube_file.os, "fsync", no_space)
    _restart()
    with caplog.at_level(logging.WARNING, logger="judging.scoring.cube_file"):
        lb = leaderboard(pooled)
        arrays = campaign_arrays(lb)
    assert "the disk is full" in caplog.text
    from judging.scoring.trust.arrays import grid_source

    this_state = f"grid-{pooled.pk}-{grid_source(lb)[0][:16]}-"
    assert not isinstance(arrays.labels, np.memmap)
    assert not [p for p in _files(_cube_dir, pooled) if p.name.startswith(this_state)]
    assert not list(Path(_cube_dir).glob(".grid-*.tmp"))
    monkeypatch.undo()
    _same(arrays, _in_memory(pooled, settings))


def test_new_runs_leave_the_old_labels_file_behind(pooled, annotator, _cube_dir):
    _judge(pooled, annotator, 1)
    campaign_arrays(leaderboard(pooled))
    [old] = _files(_cube_dir, pooled)
    run_import(campaign=pooled, data=RUN_BM25.replace("bm25", "bm25b").encode(), filename="bm25b.run")
    arrays = campaign_arrays(leaderboard(pooled))
    [new] = _files(_cube_dir, pooled)
    assert new != old and not old.exists()
    assert arrays.labels.shape[0] == 3


def test_a_deleted_campaign_takes_its_labels_files(pooled, annotator, _cube_dir, django_capture_on_commit_callbacks):
    _judge(pooled, annotator, 1)
    campaign_arrays(leaderboard(pooled))
    assert _files(_cube_dir, pooled)
    pk = pooled.pk
    with django_capture_on_commit_callbacks(execute=True):
        pooled.delete()
    assert not list(Path(_cube_dir).glob(f"grid-{pk}-*.bin"))
