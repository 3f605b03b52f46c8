"""The shared score files on disk (RELJUDGE_CUBE_DIR): a payload changed in place, a file truncated under a worker's
mapping, a symlink planted at a file's or a lock's name, a folder that is a symlink, and who may read them."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from judging.api import leaderboard_text
from judging.models import Pair
from judging.scoring import cube_file, grid_file, leaderboard, series_file
from judging.scoring.cache import scores_clear
from judging.scoring.cube import cube_read, cubes_clear, run_cube, systems_key
from judging.scoring.trust import caches_clear
from judging.scoring.trust.arrays import campaign_arrays
from judging.services import judgment_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def folder(tmp_path, settings):
    """A cube folder of this test's own (its permissions and links are the test's subject)."""
    path = tmp_path / "cubes"
    settings.RELJUDGE_CUBE_DIR = str(path)
    _restart()
    yield path
    _restart()


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


def _judge(campaign, annotator, grade=2):
    pair = Pair.objects.filter(campaign=campaign, pooled=True, judgment_count=0).order_by("id").first()
    judgment_record(pair=pair, annotator=annotator, grade=grade)


def _one(folder: Path, kind: str, campaign) -> Path:
    [path] = sorted(folder.glob(f"{kind}-{campaign.pk}-*.bin"))
    return path


def _flip_payload_byte(path: Path, at: int = -1) -> None:
    """Change one byte of the data (not the header), keeping the file's length."""
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0x01
    path.write_bytes(bytes(raw))


# --------------------------------------------------------------------------- payload checksums


def test_a_cube_file_whose_document_ids_were_overwritten_is_rebuilt(pooled, folder, caplog):
    good = np.array(run_cube(pooled).doc_ids)
    path = _one(folder, "cube", pooled)
    raw = bytearray(path.read_bytes())
    header_end = len(raw) - good.nbytes
    ids = np.frombuffer(bytes(raw[header_end:]), dtype="<i8").copy()
    ids[ids >= 0] = ids[ids >= 0][::-1]  # another order of the same documents: same length, same values
    raw[header_end:] = ids.tobytes()
    path.write_bytes(bytes(raw))
    _restart()
    with caplog.at_level(logging.WARNING, logger="judging.scoring.cube_file"):
        cube = run_cube(pooled)
    assert "payload checksum differs" in caplog.text and "rebuilding it" in caplog.text
    np.testing.assert_array_equal(cube.doc_ids, good)
    np.testing.assert_array_equal(cube.doc_ids, cube_read(pooled, systems_key(pooled)).doc_ids)


def test_a_labels_file_with_a_changed_label_is_rebuilt(pooled, annotator, folder, caplog):
    _judge(pooled, annotator)
    before = np.array(campaign_arrays(leaderboard(pooled)).labels)
    path = _one(folder, "grid", pooled)
    _flip_payload_byte(path, at=path.stat().st_size - 1 - 8)  # inside the labels or qrels rows
    _restart()
    with caplog.at_level(logging.WARNING, logger="judging.scoring.grid_file"):
        after = campaign_arrays(leaderboard(pooled))
    assert "payload checksum differs" in caplog.text
    np.testing.assert_array_equal(np.asarray(after.labels), before)


def test_a_per_query_text_file_changed_in_place_is_not_reported(
    pooled, annotator, as_lead, folder, saved_at_once, caplog
):
    url = f"/api/campaigns/{pooled.slug}/leaderboard/?per_query=true"
    _judge(pooled, annotator)
    first = as_lead.get(url).json()
    path = sorted(folder.glob(f"text-{pooled.pk}-*.bin"))[0]
    raw = path.read_bytes()
    # a value in the text changed, same length (the red team's "0.5" -> "0.9")
    digits = [i for i in range(len(raw) - 200, len(raw)) if raw[i : i + 1].isdigit()]
    tampered = bytearray(raw)
    tampered[digits[-1]] = ord("7") if raw[digits[-1]] != ord("7") else ord("3")
    path.write_bytes(bytes(tampered))
    _restart()
    with caplog.at_level(logging.WARNING, logger="judging.scoring.series_file"):
        again = as_lead.get(url).json()
    assert "payload checksum differs" in caplog.text
    assert again["systems"] == first["systems"]


# --------------------------------------------------------------------------- files changed under a worker


def test_a_cube_file_truncated_under_a_worker_is_mapped_anew_not_read(pooled, folder):
    """A read of the truncated mapping would kill the worker (SIGBUS): the next use finds the size changed."""
    held = run_cube(pooled)
    good = np.array(held.doc_ids)
    path = _one(folder, "cube", pooled)
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size - 4096)
    assert held.guard is not None and not held.guard.sound()
    cube = run_cube(pooled)  # on the old code: the cached cube, whose next read is SIGBUS
    assert cube is not held and cube.guard is not None and cube.guard.sound()
    np.testing.assert_array_equal(cube.doc_ids, good)


def test_a_file_replaced_by_rename_keeps_the_workers_mapping(pooled, folder):
    held = run_cube(pooled)
    path = _one(folder, "cube", pooled)
    copy = path.with_suffix(".copy")
    copy.write_bytes(path.read_bytes())
    os.replace(copy, path)  # what write_file does: the mapped inode stays whole
    assert held.guard.sound() and run_cube(pooled) is held


# --------------------------------------------------------------------------- links and permissions


def test_a_symlink_planted_at_the_lock_is_never_followed(pooled, folder, tmp_path, caplog):
    outside = tmp_path / "outside"
    outside.mkdir()
    folder.mkdir(mode=0o700)
    (folder / f"cube-{pooled.pk}.lock").symlink_to(outside / "created-by-the-app")
    with caplog.at_level(logging.WARNING, logger="judging.scoring.cube_file"):
        cube = run_cube(pooled)
    assert not list(outside.iterdir())  # nothing created outside the folder
    assert not (folder / f"cube-{pooled.pk}.lock").is_symlink()
    assert "is a symlink, never followed" in caplog.text
    np.testing.assert_array_equal(cube.doc_ids, cube_read(pooled, systems_key(pooled)).doc_ids)


def test_a_symlink_planted_at_a_data_file_is_never_followed(pooled, folder, tmp_path, caplog):
    good = np.array(run_cube(pooled).doc_ids)
    path = _one(folder, "cube", pooled)
    elsewhere = tmp_path / "elsewhere.bin"
    elsewhere.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(elsewhere)
    _restart()
    with caplog.at_level(logging.WARNING, logger="judging.scoring.cube_file"):
        cube = run_cube(pooled)
    assert "a symlink, never followed" in caplog.text
    assert elsewhere.exists() and not path.is_symlink()  # the link went, its target was left alone
    np.testing.assert_array_equal(cube.doc_ids, good)


def test_a_folder_that_is_a_symlink_is_refused_unless_allowed(pooled, folder, tmp_path, settings, caplog):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    settings.RELJUDGE_CUBE_DIR = str(link)
    with caplog.at_level(logging.ERROR, logger="judging.scoring.cube_file"):
        assert cube_file.cube_dir() is None
        cube = run_cube(pooled)
    assert "is a symlink: not used" in caplog.text
    assert not isinstance(cube.doc_ids, np.memmap) and not list(real.iterdir())
    settings.RELJUDGE_CUBE_DIR_ALLOW_SYMLINK = True
    _restart()
    assert cube_file.cube_dir() == link
    assert isinstance(run_cube(pooled).doc_ids, np.memmap) and list(real.glob("cube-*.bin"))


def test_score_files_are_0600_in_a_0700_folder(pooled, annotator, as_lead, folder, saved_at_once):
    folder.mkdir(mode=0o755)  # an existing folder others may read: taken down to 0700
    os.chmod(folder, 0o755)
    _judge(pooled, annotator)
    as_lead.get(f"/api/campaigns/{pooled.slug}/leaderboard/?per_query=true")
    campaign_arrays(leaderboard(pooled))
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    files = list(folder.iterdir())
    kinds = {p.name.split("-")[0] for p in files}
    assert {"cube", "grid", "text"} <= kinds, kinds
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name


def test_a_new_folder_is_made_0700(pooled, folder):
    run_cube(pooled)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert grid_file.MAGIC and stat.S_IMODE(_one(folder, "cube", pooled).stat().st_mode) == 0o600
