"""Each system's per-query JSON rows of a recent labels state: one file per machine and series (RELJUDGE_CUBE_DIR).

The API's leaderboard writes every system's per-query values as JSON text (judging.api.leaderboard_text): 100,000
rows of nine floats at 20 systems x 5,000 queries, 0.8 s of a restarted worker's first request (float formatting),
against a few milliseconds in a worker that keeps the previous state's rows and rewrites only the moved ones. Here
a worker that wrote a series (one system's rows in one score table) saves them, with their values and queries, at
most every :data:`SAVE_EVERY` seconds (and only when the file is older than that: one worker of the machine saves
it, not each) and in a thread; a worker that has none of its own reads the file and rewrites only the rows whose
values moved since. A file of other queries or names is not used; a damaged one (its payload's checksum included)
is removed (a warning in the log); new runs remove the campaign's files (judging.scoring.cube_file), as does
deleting the campaign.

Layout (judging.scoring.cube_file's header): the values (Q x M float64), where each query's item starts in the
text (Q + 1 int64, in bytes; judging.api.leaderboard_text.object_text) and the per-query object's text (UTF-8).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from judging import runtime
from judging.scoring import cube_file

logger = logging.getLogger(__name__)

MAGIC = b"RJTEXT\x00\x02"  # 2: offsets in bytes (1 counted characters)
SAVE_EVERY = 30.0  # seconds between two saves of one series (by one process, and of its file)

_LOCK = threading.Lock()
_SAVED: dict[Path, float] = runtime.keep(
    "scoring.series_saved",
    {},
    bound=None,
    grows_with="leaderboard text series saved",
    invalidated_by="SAVE_EVERY seconds (saved again)",
    lock=_LOCK,
)


def _path(folder: Path, campaign_pk: int, series: str) -> Path:
    return folder / f"text-{campaign_pk}-{hashlib.sha256(series.encode()).hexdigest()[:32]}.bin"


def _digest(series: str, names: tuple[str, ...], qids: tuple[str, ...]) -> str:
    h = hashlib.sha256(repr((series, names)).encode())
    h.update("\n".join(qids).encode())
    return h.hexdigest()[:32]


def series_load(
    campaign_pk: int, series: str, names: tuple[str, ...], qids: tuple[str, ...]
) -> tuple[np.ndarray, bytes, np.ndarray] | None:
    """The values (Q, M), the per-query object's text and its items' starts (judging.api.leaderboard_text.object_text)
    saved for this series, queries and names, or None."""
    folder = cube_file.cube_dir()
    if folder is None:
        return None
    path = _path(folder, campaign_pk, series)
    n_q, n_m = len(qids), len(names)
    got = cube_file.sound_header(
        path,
        MAGIC,
        _digest(series, names, qids),
        lambda h: n_q * n_m * 8 + (n_q + 1) * 8 + int(h["text_bytes"]),
        log=logger,
        kind="per-query text file",
        other_state_ok=True,  # of other queries: the next save replaces it
    )
    if got is None:
        return None
    header, offset = got.header, got.offset
    try:
        with got.handle as handle:  # the file that was verified, not whatever has its name now
            handle.seek(offset)
            values = np.frombuffer(handle.read(n_q * n_m * 8), dtype="<f8").reshape(n_q, n_m)
            starts = np.frombuffer(handle.read((n_q + 1) * 8), dtype="<i8")
            text = handle.read(int(header["text_bytes"]))
    except (OSError, ValueError) as exc:
        logger.warning("per-query text file %s not used (%s)", path.name, exc)
        return None
    if starts.size != n_q + 1 or int(starts[-1]) != len(text) or np.any(np.diff(starts) < 1) or int(starts[0]) < 1:
        return None
    return values.astype(np.float64), text, starts.astype(np.int64)


def series_save_later(
    campaign_pk: int,
    series: str,
    names: tuple[str, ...],
    qids: tuple[str, ...],
    values: np.ndarray | Callable[[], np.ndarray],
    text: bytes,
    starts: np.ndarray,
) -> None:
    """Save the series' object for other processes, unless this process saved it, or the file was written,
    less than SAVE_EVERY seconds ago (each worker rewrote it every SAVE_EVERY: 23 MB a worker each time at 20
    systems x 5,000 queries). ``values`` (or what calling it gives, only when it saves) and ``starts`` are not
    changed afterwards (the renderer makes new ones per state)."""
    folder = cube_file.cube_dir()
    if folder is None:
        return
    path = _path(folder, campaign_pk, series)
    now = time.monotonic()
    with _LOCK:
        if now - _SAVED.get(path, -SAVE_EVERY) < SAVE_EVERY:
            return
        _SAVED[path] = now
    try:
        if time.time() - path.stat().st_mtime < SAVE_EVERY:
            return  # another process of the machine saved it lately: once per machine, not once per worker
    except OSError:
        pass  # not saved yet (or removed as damaged)
    if callable(values):
        values = values()

    def run() -> None:
        header = {"state": _digest(series, names, qids), "campaign": campaign_pk, "text_bytes": len(text)}
        parts = iter([np.asarray(values, dtype="<f8"), np.asarray(starts, dtype="<i8"), np.frombuffer(text, np.uint8)])
        cube_file.write_file(path, MAGIC, header, parts)

    runtime.later(run, name=f"series-save-{campaign_pk}")  # tests save in the request, to see the file at once


def series_clear() -> None:
    """Forget when this process last saved each series (tests)."""
    with _LOCK:
        _SAVED.clear()
