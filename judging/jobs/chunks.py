"""An import job's uploaded file as pieces in the database (JobChunk), written and read one piece at a time.

The web or API process copies the upload (a file on disk, see RELJUDGE_MAX_UPLOAD_MB) into the database a
piece at a time, counting its lines as it goes; the worker reads it back through chunk_file, a file object
that fetches one piece at a time. Neither holds the whole file to move it.
"""

from __future__ import annotations

import bisect
import io
from typing import IO, TYPE_CHECKING, BinaryIO, cast

from django.db.models.functions import Length

from judging.models import Job, JobChunk

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

# A quarter of the most a piece may hold: PostgreSQL's driver (client-side parameter binding) spells a piece out
# as text in its INSERT, several times its size for a moment, so the process starting a job peaks at about 2 MB
# on PostgreSQL (0.3 MB on SQLite) however large the file.
CHUNK_BYTES = JobChunk.MAX_BYTES // 4


def chunks_store(job: Job, upload: IO[bytes]) -> tuple[int, int]:
    """Write ``upload`` (read from its start) as ``job``'s pieces; ``(bytes, lines)`` of the file, a last line
    without its final newline counted. Call it inside the transaction that creates the job."""
    if upload.seekable():
        upload.seek(0)
    size = lines = seq = 0
    last = b""
    while piece := upload.read(CHUNK_BYTES):
        JobChunk.objects.create(job=job, seq=seq, data=piece)
        seq += 1
        size += len(piece)
        lines += piece.count(b"\n")
        last = piece[-1:]
        del piece  # let this piece go before the next one is read
    if size and last != b"\n":
        lines += 1
    return size, lines


def chunks_kept(job: Job) -> bool:
    """Whether ``job``'s uploaded file is still stored as pieces."""
    return JobChunk.objects.filter(job_id=job.pk).exists()


def chunks_drop(job: Job) -> int:
    """Delete ``job``'s pieces (one DELETE: the bytes are not read); how many there were."""
    return JobChunk.objects.filter(job_id=job.pk).delete()[0]


class _ChunkReader(io.RawIOBase):
    """The job's pieces as one seekable stream; only the piece being read is held."""

    def __init__(self, job_id: int) -> None:
        super().__init__()
        self._job_id = job_id
        pieces = (
            JobChunk.objects.filter(job_id=job_id).order_by("seq").annotate(n=Length("data")).values_list("seq", "n")
        )
        self._seqs: list[int] = []
        self._starts: list[int] = []
        self.size = 0
        for seq, n in pieces:
            if n:
                self._seqs.append(seq)
                self._starts.append(self.size)
                self.size += n
        self._pos = 0
        self._index = -1
        self._piece = b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer: WriteableBuffer) -> int:
        if self._pos >= self.size:
            return 0
        index = bisect.bisect_right(self._starts, self._pos) - 1
        if index != self._index:
            self._piece = b""  # let the last piece go before the next one is fetched
            data = JobChunk.objects.filter(job_id=self._job_id, seq=self._seqs[index]).values_list("data", flat=True)
            self._piece, self._index = bytes(data.get()), index
        offset = self._pos - self._starts[index]
        view = memoryview(buffer).cast("B")
        n = min(len(view), len(self._piece) - offset)
        view[:n] = self._piece[offset : offset + n]
        self._pos += n
        return n


class _ChunkFile(io.BufferedReader):
    """A buffered binary file over the pieces, with the file's ``size`` (as an upload has) for the import log."""

    @property
    def size(self) -> int:
        return cast(_ChunkReader, self.raw).size


def chunk_file(job: Job) -> BinaryIO:
    """``job``'s uploaded file as a read-only binary file object that fetches one piece at a time."""
    return _ChunkFile(_ChunkReader(job.pk), buffer_size=64 * 1024)
