"""One copy of a campaign's ranked labels per machine: a file in ``RELJUDGE_CUBE_DIR`` that every worker maps.

The ranked labels (systems x queries x depth int8: the label of each ranked document, UNJUDGED or PAD) are what
the trust measures read (judging.scoring.trust.arrays), 1 byte an entry: 100 MB at 100M ranked entries. Each
worker used to build them from the database and copy them at every new labels state, so four workers held two
or three copies each. Here they are written to a file at some labels state (the *base*), with that state's
labels version of every query and its qrels rows, and each worker maps the file copy-on-write
(``mmap`` private): its pages live once in the page cache, and a worker's arrays of a newer state are a fresh
mapping of the same file with only the columns of the queries judged since the base written into it (those
pages, a few kilobytes a query, become the worker's own). When the queries moved since the base pass
:data:`REBASE_QUERIES`, a worker writes the current state as the new base, in the background; the others map it
when their own count passes the same mark.

One file per campaign, runs state (the cube's digest: new runs or queries make new files, and the old ones go
with the old cube file) and label source (the aggregation policy, and human or model labels); its name is
``grid-CAMPAIGN-CUBE-SOURCE.bin``. The layout is the cube file's (judging.scoring.cube_file): a magic, a header
with a CRC, then from a page boundary the versions (Q int64), the labels (S x Q x D int8) and the qrels rows
(Q x M int8). A file whose magic, format, header CRC, source digest, shape, size or payload checksum is wrong is
removed and rebuilt, never trusted; a file is written under a temporary name and renamed into place, never
rewritten in place; a full disk leaves the previous file in use (with a warning in the log), and the worker keeps
its arrays in memory. A worker maps the file it verified (its open handle, not its name).
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from judging.scoring import cube_file

logger = logging.getLogger(__name__)

MAGIC = b"RJGRID\x00\x01"
# Queries whose labels moved since the base up to which a worker patches a fresh mapping of the base; past it
# a new base is written. Each moved query costs each worker's arrays of a state about S pages of its own (the
# query's D bytes in each system's row): 64 queries x 20 systems x 4 kB is 5 MB at depth 1,000.
REBASE_QUERIES = 64


@dataclass
class GridFile:
    """A mapped labels file: the state it was written at and its arrays."""

    path: Path
    versions: np.ndarray  # (Q,) the labels version of every query when the file was written
    shape: tuple[int, int, int]  # (S, Q, D)
    width: int  # M, the qrels rows' width
    offset: int  # where the versions start
    identity: tuple[int, int, int] = field(default=(0, 0, 0))  # (device, inode, mtime ns): a new file is another
    mapped: cube_file.MappedFile | None = None  # the verified file, open: mapped and read through it

    @property
    def _labels_offset(self) -> int:
        return self.offset + _versions_bytes(self.shape[1])

    def labels(self) -> np.ndarray:
        """A fresh private mapping of the labels: writing into it changes this process's copy only (the written
        pages become its own), and another call maps the file anew."""
        if not all(self.shape):
            return np.zeros(self.shape, dtype=np.int8)
        return np.memmap(self._source, dtype=np.int8, mode="c", offset=self._labels_offset, shape=self.shape)

    @property
    def _source(self) -> Path | IO[bytes]:
        return self.mapped.handle if self.mapped is not None else self.path

    def sound(self) -> bool:
        """Whether the file this maps still has its size (False once truncated: its pages would raise SIGBUS)."""
        return self.mapped is None or self.mapped.sound()

    def qrels(self) -> np.ndarray:
        """The qrels rows (Q, M), read into memory (they are small)."""
        n_q = self.shape[1]
        if not n_q or not self.width:
            return np.zeros((n_q, self.width), dtype=np.int8)
        start = self._labels_offset + int(np.prod(self.shape))
        rows = np.frombuffer(_pread(self._source, n_q * self.width, start), dtype=np.int8)
        return rows.reshape(n_q, self.width)

    def replaced(self) -> bool:
        """Whether the file on disk is no longer this one (another worker wrote a newer base, or it went)."""
        return _identity(self.path) != self.identity


def _pread(source: Path | IO[bytes], count: int, offset: int) -> bytes:
    if isinstance(source, Path):
        with cube_file.open_nofollow(source, os.O_RDONLY) as handle:
            return os.pread(handle.fileno(), count, offset)
    return os.pread(source.fileno(), count, offset)


def _versions_bytes(n_q: int) -> int:
    # the labels start on a page boundary after the versions
    return -(-n_q * 8 // 4096) * 4096


def _identity(path: Path) -> tuple[int, int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, 0, 0)
    return (st.st_dev, st.st_ino, st.st_mtime_ns)


def source_digest(cube_digest: str, source: tuple[object, ...]) -> str:
    """The digest naming a label source of a runs state (the cube file's digest)."""
    return hashlib.sha256(repr((cube_file.FORMAT, cube_digest, source)).encode()).hexdigest()[:32]


def _path(folder: Path, campaign_pk: int, cube_digest: str, digest: str) -> Path:
    return folder / f"grid-{campaign_pk}-{cube_digest[:16]}-{digest[:16]}.bin"


def _data_bytes(header: dict[str, Any]) -> int:
    s, q, d = (int(n) for n in header["shape"])
    return _versions_bytes(q) + s * q * d + q * int(header["width"])


def grid_load(folder: Path, campaign_pk: int, cube_digest: str, digest: str) -> GridFile | None:
    """The labels file of this source if a sound one exists (None otherwise; a file that is not sound goes)."""
    path = _path(folder, campaign_pk, cube_digest, digest)
    identity = _identity(path)
    got = cube_file.sound_header(path, MAGIC, digest, _data_bytes, log=logger, kind="labels file")
    if got is None:
        return None
    header, offset = got.header, got.offset
    shape = tuple(int(n) for n in header["shape"])
    raw = os.pread(got.handle.fileno(), shape[1] * 8, offset) if shape[1] else b""
    versions = np.frombuffer(raw, dtype="<i8")
    return GridFile(
        path,
        versions.astype(np.int64),
        shape,  # type: ignore[arg-type]
        int(header["width"]),
        offset,
        identity,
        got.mapped(),
    )


def grid_save(
    folder: Path,
    campaign_pk: int,
    cube_digest: str,
    digest: str,
    *,
    versions: np.ndarray,
    labels: np.ndarray,
    qrels: np.ndarray,
) -> GridFile | None:
    """Write the labels of a state as the source's file (a temporary name, then a rename) and open it. None when
    it could not be written: the caller keeps its arrays in memory, and the previous file stays in use."""
    header = {"state": digest, "campaign": campaign_pk, "shape": list(labels.shape), "width": int(qrels.shape[1])}
    n_q = labels.shape[1]
    pad = np.zeros(_versions_bytes(n_q) - n_q * 8, dtype=np.uint8)
    parts = iter(
        [
            np.asarray(versions, dtype="<i8"),
            pad,
            # one system at a time: a write of the whole array would need it as one bytes copy
            *(np.asarray(labels[s], dtype=np.int8) for s in range(labels.shape[0])),
            np.asarray(qrels, dtype=np.int8),
        ]
    )
    path = _path(folder, campaign_pk, cube_digest, digest)
    if not cube_file.write_file(path, MAGIC, header, parts):
        return None
    logger.debug("labels file %s written (pid %d)", path.name, os.getpid())
    return grid_load(folder, campaign_pk, cube_digest, digest)
