"""One copy of a campaign's run arrays per machine: a file in ``RELJUDGE_CUBE_DIR`` every worker maps read-only.

The run cube (judging.scoring.cube.RunCube: every system's ranked document ids, systems x queries x depth) is the
largest array the scores read, 8 bytes an entry: 800 MB at 100M ranked entries. Built in each gunicorn worker it
cost every worker its own copy and every restarted worker a full read of the rankings. Here it is written once per
runs state (the cube's key: the campaign, its systems' fingerprints and its queries) to a file, and every process
maps that file with ``mmap``: the pages live once in the machine's page cache, counted once in the workers'
proportional memory, and a restarted worker maps the existing file instead of reading the database.

Judgments never touch the file: labels are read from the database per query, and the ranked labels the trust
measures read (one byte an entry) have a file of their own, judging.scoring.grid_file. New runs or queries are a
new state, a new file; the old files of the campaign go when the new one is in place (a worker still mapping one
keeps its pages until it lets go: unlinking a mapped file is safe).

The layout: an 8-byte magic, the header's length (8 bytes) and CRC-32 (4 bytes), the header (JSON: the format
version, the digest of the state, the shape, the systems and queries), then, from the next 4096-byte boundary, the
document ids as little-endian int64 in C order. A file is used only when its magic, format, header CRC and state
digest match and its size is exactly what the header says; anything else (a truncated copy, another version,
another state) is deleted and rebuilt, never trusted. A file is written under a temporary name and renamed into
place, so a reader never sees half of one; a full disk leaves the previous file in use with a warning in the log.

Several app servers: the folder is per machine (a local disk); each machine builds its own copy from the database
the first time one of its workers needs it. The state digest includes the database's name, so two databases
never share a file. Remove the setting (empty ``RELJUDGE_CUBE_DIR``) to keep the cube in each process's memory.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import struct
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection, transaction

logger = logging.getLogger(__name__)

FORMAT = 1
MAGIC = b"RJCUBE\x00\x01"
_PREFIX = struct.Struct("<8sQI")  # magic, header length, header CRC-32
_ALIGN = 4096  # the data starts on a page boundary
TEMP_MAX_AGE = 3600.0  # seconds after which a temporary file nobody renamed (a killed writer) is removed


@dataclass
class CubeFile:
    """What a cube file holds: the systems and queries of the state and its mapped document ids."""

    system_ids: np.ndarray
    system_names: list[str]
    query_ids: np.ndarray
    qids: list[str]
    doc_ids: np.ndarray  # (S, Q, D) int64, a read-only memory map of the file
    path: Path


def cube_dir() -> Path | None:
    """The folder of the cube files, or None when the cube stays in each process's memory."""
    raw = getattr(settings, "RELJUDGE_CUBE_DIR", "")
    return Path(raw) if raw else None


def state_digest(key: tuple[object, ...]) -> str:
    """The digest naming a runs state: the cube's key and the database it was read from."""
    raw = repr((FORMAT, connection.settings_dict.get("NAME"), connection.vendor, key))
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def _path(folder: Path, campaign_pk: int, digest: str) -> Path:
    return folder / f"cube-{campaign_pk}-{digest}.bin"


@contextlib.contextmanager
def build_lock(folder: Path, campaign_pk: int) -> Iterator[None]:
    """Held while one process builds a campaign's cube file: the other workers of the machine wait for it and map
    the result instead of each reading every ranking from the database at once."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"cube-{campaign_pk}.lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


ANOTHER_STATE = "another state"


def read_header(path: Path, magic: bytes, digest: str, data_bytes: Any) -> tuple[dict[str, Any], int] | str | None:
    """The header of a file written by :func:`write_file` and the offset of its data: None when there is no file,
    else why it cannot be used (a message) when its magic, header CRC, format or state digest differ, or when
    its size is not the header's offset plus ``data_bytes(header)``."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(_PREFIX.size)
            found, length, crc = _PREFIX.unpack(head) if len(head) == _PREFIX.size else (b"", 0, 0)
            raw = handle.read(length) if found == magic and length < 64 * 1024 * 1024 else b""
        size = path.stat().st_size
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"unreadable: {exc}"
    if found != magic:
        return "not a file of this kind and version"
    if len(raw) != length or zlib.crc32(raw) != crc:
        return "header damaged"
    try:
        header = json.loads(raw)
        if header.get("format") != FORMAT:
            return f"format {header.get('format')!r}, expected {FORMAT}"
        if header.get("state") != digest:
            return ANOTHER_STATE
        offset = _data_offset(length)
        expected = offset + int(data_bytes(header))
    except (ValueError, TypeError, KeyError, AttributeError):
        return "header damaged"
    if size != expected:
        return f"{size} bytes, expected {expected} (truncated)"
    return header, offset


def sound_header(
    path: Path,
    magic: bytes,
    digest: str,
    data_bytes: Any,
    *,
    log: logging.Logger,
    kind: str,
    other_state_ok: bool = False,
) -> tuple[dict[str, Any], int] | None:
    """:func:`read_header`, with a file that is not sound removed and a warning in ``log`` naming it as ``kind``
    (None then, as when there is no file). ``other_state_ok``: a file of another state is left alone, quietly (the
    next write replaces it)."""
    got = read_header(path, magic, digest, data_bytes)
    if got is None or (other_state_ok and got == ANOTHER_STATE):
        return None
    if isinstance(got, str):
        log.warning("%s %s not used (%s): rebuilding it", kind, path.name, got)
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    return got


def write_file(path: Path, magic: bytes, header: dict[str, Any], parts: Iterator[np.ndarray]) -> bool:
    """Write a file of ``header`` (JSON, with ``format``) and the raw bytes of ``parts`` (from the next page
    boundary), under a temporary name renamed into place once synced, so a reader never sees half of one.
    False (and a warning in the log) when it could not be written: a full disk, a read-only folder."""
    raw = json.dumps({"format": FORMAT, **header}, ensure_ascii=False).encode()
    temp = path.parent / f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temp, "wb") as handle:
            handle.write(_PREFIX.pack(magic, len(raw), zlib.crc32(raw)))
            handle.write(raw)
            handle.write(b"\0" * (_data_offset(len(raw)) - _PREFIX.size - len(raw)))
            for part in parts:
                if part.size:  # an empty part has no bytes (and a memoryview of it cannot be cast)
                    handle.write(np.ascontiguousarray(part).data.cast("B"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temp.unlink()
        full = " (the disk is full)" if exc.errno == errno.ENOSPC else ""
        logger.warning("%s not written%s: %s; the previous one stays in use", path.name, full, exc)
        return False
    return True


def cube_load(folder: Path, campaign_pk: int, digest: str) -> CubeFile | None:
    """Map the cube file of this state if a sound one exists; a file that is not sound is removed (None)."""
    path = _path(folder, campaign_pk, digest)
    got = sound_header(path, MAGIC, digest, lambda h: int(np.prod(h["shape"])) * 8, log=logger, kind="cube file")
    if got is None:
        return None
    header, offset = got
    shape = tuple(int(n) for n in header["shape"])
    doc_ids: np.ndarray
    if all(shape):
        doc_ids = np.memmap(path, dtype="<i8", mode="r", offset=offset, shape=shape)
    else:  # no system or no query: an empty cube of document ids, integers as the mapped ones are
        doc_ids = np.zeros(shape, dtype=np.int64)
    return CubeFile(
        np.array(header["system_ids"], dtype=np.int64),
        [str(n) for n in header["system_names"]],
        np.array(header["query_ids"], dtype=np.int64),
        [str(q) for q in header["qids"]],
        doc_ids,
        path,
    )


def _data_offset(header_length: int) -> int:
    return -(-(_PREFIX.size + header_length) // _ALIGN) * _ALIGN


def cube_save(
    folder: Path,
    campaign_pk: int,
    digest: str,
    *,
    system_ids: np.ndarray,
    system_names: list[str],
    query_ids: np.ndarray,
    qids: list[str],
    doc_ids: np.ndarray,
) -> CubeFile | None:
    """Write the state's cube file (a temporary name, then a rename) and map it; the campaign's older states'
    files go. None when it could not be written (a full disk, a read-only folder): the caller keeps its
    in-memory cube, and whatever file was in place stays in use."""
    header = {
        "state": digest,
        "campaign": campaign_pk,
        "shape": list(doc_ids.shape),
        "system_ids": system_ids.tolist(),
        "system_names": system_names,
        "query_ids": query_ids.tolist(),
        "qids": qids,
    }
    final = _path(folder, campaign_pk, digest)
    # in slices of systems: a write of the whole 800 MB array would need it as one bytes copy
    data = (np.asarray(doc_ids[s], dtype="<i8") for s in range(doc_ids.shape[0]))
    if not write_file(final, MAGIC, header, data):
        return None
    _clean(folder, campaign_pk, keep=final)
    return cube_load(folder, campaign_pk, digest)


def _clean(folder: Path, campaign_pk: int, *, keep: Path) -> None:
    """Remove the campaign's files of older states, and temporary files a killed writer left behind."""
    for path in folder.glob(f"cube-{campaign_pk}-*.bin"):
        if path != keep:
            with contextlib.suppress(OSError):
                path.unlink()
                logger.info("cube file %s of an older state removed", path.name)
    # labels files (judging.scoring.grid_file) of the older runs states: their names begin with the cube's digest
    current = f"grid-{campaign_pk}-{keep.stem.rsplit('-', 1)[1][:16]}-"
    for path in folder.glob(f"grid-{campaign_pk}-*.bin"):
        if not path.name.startswith(current):
            with contextlib.suppress(OSError):
                path.unlink()
    # per-query texts (judging.scoring.series_file) of the older runs' score tables
    for path in folder.glob(f"text-{campaign_pk}-*.bin"):
        with contextlib.suppress(OSError):
            path.unlink()
    now = time.time()
    for path in [*folder.glob(".cube-*.tmp"), *folder.glob(".grid-*.tmp"), *folder.glob(".text-*.tmp")]:
        with contextlib.suppress(OSError):
            if now - path.stat().st_mtime > TEMP_MAX_AGE:
                path.unlink()


def campaign_deleted(sender: object, instance: object, **kwargs: object) -> None:
    """post_delete of a Campaign: its cube files go once the deletion is committed."""
    pk = getattr(instance, "pk", None)
    if isinstance(pk, int):
        transaction.on_commit(lambda: cube_files_remove(pk))


def cube_files_remove(campaign_pk: int) -> None:
    """Remove every cube file, labels file (judging.scoring.grid_file) and per-query text file
    (judging.scoring.series_file) of a campaign (it was deleted)."""
    folder = cube_dir()
    if folder is None or not folder.is_dir():
        return
    for kind in ("cube", "grid", "text"):
        for path in folder.glob(f"{kind}-{campaign_pk}-*.bin"):
            with contextlib.suppress(OSError):
                path.unlink()
