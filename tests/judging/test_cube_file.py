"""The shared run-cube file: one copy per machine, mapped read-only by every worker, rebuilt when not sound."""

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

from judging.models import Pair
from judging.scoring import cube_file, leaderboard
from judging.scoring.cache import scores_clear
from judging.scoring.cube import cube_read, cubes_clear, run_cube, systems_key
from judging.services import judgment_record, run_import
from tests.data import RUN_BM25

pytestmark = pytest.mark.django_db


def _fresh_cube(campaign):
    """The cube as a restarted worker gets it: nothing in this process's memory."""
    cubes_clear()
    scores_clear()
    return run_cube(campaign)


def _files(folder: str, campaign) -> list[Path]:
    return sorted(Path(folder).glob(f"cube-{campaign.pk}-*.bin"))


def test_the_cube_is_written_once_and_mapped_read_only(pooled, _cube_dir):
    cube = _fresh_cube(pooled)
    files = _files(_cube_dir, pooled)
    assert len(files) == 1
    assert isinstance(cube.doc_ids, np.memmap) and not cube.doc_ids.flags.writeable
    # the mapped cube is the one the database gives
    read = cube_read(pooled, systems_key(pooled))
    np.testing.assert_array_equal(cube.doc_ids, read.doc_ids)
    assert cube.system_names == read.system_names and cube.qids == read.qids
    np.testing.assert_array_equal(cube.query_ids, read.query_ids)
    # a restarted worker maps the same file: no new file, the same bytes
    stamp = files[0].stat().st_mtime_ns
    again = _fresh_cube(pooled)
    assert _files(_cube_dir, pooled) == files and files[0].stat().st_mtime_ns == stamp
    np.testing.assert_array_equal(again.doc_ids, read.doc_ids)


# A process of its own, with no Django set up and no memory shared with the test's except the file: it loads the
# reader (judging/scoring/cube_file.py) by its path and prints what it mapped.
_CHILD = """
import hashlib, importlib.util, json, sys
spec = importlib.util.spec_from_file_location("cube_file", sys.argv[1])
module = sys.modules["cube_file"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from pathlib import Path
found = module.cube_load(Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
print(json.dumps([list(found.doc_ids.shape), hashlib.sha256(found.doc_ids.tobytes()).hexdigest(), found.system_names]))
"""


def test_several_processes_map_the_same_file_and_agree_with_the_cube(pooled, _cube_dir):
    cube = _fresh_cube(pooled)
    digest = cube_file.state_digest(cube.key)
    args = [sys.executable, "-c", _CHILD, cube_file.__file__, _cube_dir, str(pooled.pk), digest]
    children = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    expected = hashlib.sha256(np.ascontiguousarray(cube.doc_ids).tobytes()).hexdigest()
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        shape, digest_of_data, names = json.loads(out)
        assert tuple(shape) == cube.doc_ids.shape and digest_of_data == expected and names == cube.system_names


def test_a_judgment_moves_only_the_label_arrays(pooled, annotator, _cube_dir):
    before = leaderboard(pooled)
    [path] = _files(_cube_dir, pooled)
    stamp = (path.stat().st_ino, path.stat().st_mtime_ns)
    pair = Pair.objects.filter(campaign=pooled, pooled=True).order_by("id").first()
    judgment_record(pair=pair, annotator=annotator, grade=2)
    after = leaderboard(pooled)
    assert after.cube is before.cube  # the same mapped runs
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == stamp and _files(_cube_dir, pooled) == [path]
    assert after.state != before.state and after.n_scored == 1


def test_new_runs_are_a_new_file_and_the_old_one_goes(pooled, _cube_dir):
    old = _fresh_cube(pooled)
    [old_path] = _files(_cube_dir, pooled)
    run_import(campaign=pooled, data=RUN_BM25.replace("bm25", "bm25b").encode(), filename="bm25b.run")
    new = run_cube(pooled)
    [new_path] = _files(_cube_dir, pooled)
    assert new_path != old_path and not old_path.exists()
    assert len(new.system_names) == len(old.system_names) + 1 and "bm25b" in new.system_names


def test_a_truncated_file_is_rebuilt_not_trusted(pooled, _cube_dir, caplog):
    good = np.array(_fresh_cube(pooled).doc_ids)
    [path] = _files(_cube_dir, pooled)
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(size - 8)
    with caplog.at_level(logging.WARNING, logger="judging.scoring.cube_file"):
        cube = _fresh_cube(pooled)
    assert "truncated" in caplog.text
    np.testing.assert_array_equal(cube.doc_ids, good)
    assert path.stat().st_size == size


@pytest.mark.parametrize("damage", ["magic", "header", "format"])
def test_a_damaged_or_foreign_version_file_is_rebuilt(pooled, _cube_dir, damage):
    good = np.array(_fresh_cube(pooled).doc_ids)
    [path] = _files(_cube_dir, pooled)
    raw = bytearray(path.read_bytes())
    if damage == "magic":
        raw[7] ^= 0xFF  # another version's magic
    elif damage == "header":
        raw[cube_file._PREFIX.size + 3] ^= 0x01  # a flipped bit: the CRC no longer matches
    else:
        # a CRC made for the other format, below
        raw = bytearray(raw.replace(f'"format": {cube_file.FORMAT}'.encode(), b'"format": 9'))
        _, length, _, payload = cube_file._PREFIX.unpack_from(raw)
        header = bytes(raw[cube_file._PREFIX.size : cube_file._PREFIX.size + length])
        crc = cube_file.zlib.crc32(header)
        raw[: cube_file._PREFIX.size] = cube_file._PREFIX.pack(cube_file.MAGIC, length, crc, payload)
    path.write_bytes(bytes(raw))
    cube = _fresh_cube(pooled)
    np.testing.assert_array_equal(cube.doc_ids, good)
    assert cube_file.cube_load(Path(_cube_dir), pooled.pk, cube_file.state_digest(cube.key)) is not None


def test_a_file_of_another_state_is_never_used(pooled, _cube_dir):
    _fresh_cube(pooled)
    [old_path] = _files(_cube_dir, pooled)
    stale = old_path.read_bytes()
    run_import(campaign=pooled, data=RUN_BM25.replace("bm25", "bm25b").encode(), filename="bm25b.run")
    cubes_clear()
    key = systems_key(pooled)
    digest = cube_file.state_digest(key)
    # the old state's bytes under the new state's name: its header names the other state
    (Path(_cube_dir) / f"cube-{pooled.pk}-{digest}.bin").write_bytes(stale)
    cube = run_cube(pooled)
    assert "bm25b" in cube.system_names
    np.testing.assert_array_equal(cube.doc_ids, cube_read(pooled, key).doc_ids)


def test_a_full_disk_keeps_the_old_file_in_use(pooled, _cube_dir, monkeypatch, caplog):
    _fresh_cube(pooled)
    [old_path] = _files(_cube_dir, pooled)
    run_import(campaign=pooled, data=RUN_BM25.replace("bm25", "bm25b").encode(), filename="bm25b.run")
    cubes_clear()

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cube_file.os, "fsync", no_space)
    with caplog.at_level(logging.WARNING, logger="judging.scoring.cube_file"):
        cube = run_cube(pooled)
    assert "the disk is full" in caplog.text and "previous one stays in use" in caplog.text
    # the new state is served from memory; the old file and no temporary file remain
    assert "bm25b" in cube.system_names and not isinstance(cube.doc_ids, np.memmap)
    assert _files(_cube_dir, pooled) == [old_path]
    assert not list(Path(_cube_dir).glob(".cube-*.tmp"))


def test_without_a_folder_the_cube_stays_in_memory(pooled, settings, tmp_path):
    settings.RELJUDGE_CUBE_DIR = ""
    cube = _fresh_cube(pooled)
    assert not isinstance(cube.doc_ids, np.memmap)


def test_a_deleted_campaign_takes_its_files(pooled, _cube_dir, django_capture_on_commit_callbacks):
    _fresh_cube(pooled)
    assert _files(_cube_dir, pooled)
    pk = pooled.pk
    with django_capture_on_commit_callbacks(execute=True):
        pooled.delete()
    assert not list(Path(_cube_dir).glob(f"cube-{pk}-*.bin"))
