"""The arrays the trust measures read: ranked labels, qrels and document ids, rebuilt once per labels state."""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from dataclasses import dataclass, replace

import numpy as np
from django.utils.translation import gettext

import metrics
from judging import runtime
from judging.errors import RequestError
from judging.models import Campaign
from judging.reads import grade_top
from judging.scoring import cube_file, grid_file
from judging.scoring.cache import LEADERBOARD_MEASURES, Leaderboard, rescored_label_arrays_take
from judging.scoring.cube import label_arrays, labels_for
from judging.scoring.hybrid import hybrid_judge
from judging.scoring.trust.store import LOCK, recall, remember
from metrics import Measure

_KEEP_ARRAYS = 2  # the latest states: a request of an older one holds its own reference
_ARRAYS: OrderedDict[str, TrustArrays] = runtime.keep(
    "trust.arrays",
    OrderedDict(),
    bound=_KEEP_ARRAYS,
    invalidated_by="a newer labels state (least recently used out)",
    lock=LOCK,
    group="trust",
)
# The latest whole-campaign arrays per score table (unsegmented key): the base of the next state's arrays.
_LATEST: dict[str, tuple[np.ndarray, TrustArrays]] = runtime.keep(
    "trust.latest_arrays",
    {},
    bound=None,
    grows_with="score table",
    invalidated_by="replaced by the next state's arrays (patched from it)",
    lock=LOCK,
    group="trust",
)
PATCH_QUERIES = 256  # queries whose labels moved up to which the previous arrays are patched, not rebuilt

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- measure names


def resolve_measure(raw: str | None, k: int) -> str:
    """A measure as a user writes it ("nDCG", "nDCG@10", "MRR", "bpref") -> its leaderboard name at cutoff ``k``
    ("nDCG@10", "MRR"): the one reading of a user's measure, for the leaderboard page's form and the API.

    ValueError in the reader's language for an unknown measure, a cutoff on a whole-run measure or a cutoff
    other than ``k`` (metrics.Measure.parse checks the same, in English, for library callers)."""
    raw = (raw or "nDCG").strip()
    base, at, cut = raw.partition("@")
    if base not in LEADERBOARD_MEASURES:
        raise RequestError(
            "measure",
            gettext("unknown measure %(measure)r; expected one of %(choices)s")
            % {"measure": raw[:40], "choices": ", ".join(LEADERBOARD_MEASURES)},
        )
    if at and base in metrics.WHOLE_RUN:
        raise RequestError("measure", gettext("%(measure)s has no cutoff") % {"measure": base})
    if at and cut != str(k):
        raise RequestError("measure", gettext("%(measure)s does not match k=%(k)d") % {"measure": raw[:40], "k": k})
    return str(Measure(base).at(k))


def cutoff_of(measure: str, k: int) -> int | None:
    """The depth a measure (a leaderboard name) looks at: k for the @k measures, the whole run for MRR, MAP
    and bpref."""
    return None if Measure.parse(measure).base in metrics.WHOLE_RUN else k


def ranking_order(lb: Leaderboard, measure: str) -> np.ndarray:
    """Systems by the measure's mean, best first; ties by name (the leaderboard page's order)."""
    means = lb.means()[lb.measure_index(measure)]
    names = np.array(lb.cube.system_names, dtype=str)
    return np.lexsort((names, -np.round(means, 12))) if len(names) else np.zeros(0, np.intp)


# --------------------------------------------------------------------------- the arrays


@dataclass
class TrustArrays:
    """The metrics inputs of the queries in a leaderboard's means (its ``labelled`` mask)."""

    labels: np.ndarray  # (S, Qs, D) int8 ranked labels, UNJUDGED / PAD
    qrels: np.ndarray  # (Qs, M) int8 qrels rows padded with UNJUDGED
    doc_ids: np.ndarray  # (S, Qs, D) int64 document pks, -1 after the end of a run
    positions: np.ndarray  # (Qs,) cube positions of these queries


def campaign_arrays(lb: Leaderboard) -> TrustArrays:
    """Ranked labels, qrels and document ids of every query of the campaign, built once per labels state.

    Cached under the unsegmented table key and the labels versions. After a few new judgments only the
    queries whose labels version moved are read and probed again: a copy of the previous state's arrays
    with those columns replaced (reading every label and probing 10M ranked documents is most of the
    cost otherwise).
    """
    h = hashlib.sha256(lb.base_key.encode())
    versions = lb.table.versions
    h.update(versions.tobytes())
    key = h.hexdigest()[:24]
    full = recall(_ARRAYS, key)
    if full is None:
        full = remember(_ARRAYS, key, _arrays_build(lb), _KEEP_ARRAYS)
        with LOCK:
            _LATEST[lb.base_key] = (versions.copy(), full)
    return full


def has_arrays(lb: Leaderboard) -> bool:
    """Whether this process holds whole-campaign arrays of ``lb``'s table (of some labels state): the next state's
    are then patched, not built."""
    with LOCK:
        return lb.base_key in _LATEST


def trust_arrays(lb: Leaderboard) -> TrustArrays:
    """The arrays of the leaderboard's scored queries (its ``labelled`` mask, a segment's): taken out of
    :func:`campaign_arrays`, or those themselves when every query is scored."""
    full = campaign_arrays(lb)
    wanted = np.flatnonzero(lb.table.labelled)
    if wanted.size == full.positions.size:
        return full
    return TrustArrays(full.labels[:, wanted], full.qrels[wanted], full.doc_ids[:, wanted], wanted)


def _arrays_build(lb: Leaderboard) -> TrustArrays:
    if cube_file.cube_dir() is not None:
        return _arrays_from_file(lb)
    n_q = len(lb.cube.query_ids)
    versions = lb.table.versions
    with LOCK:
        previous = _LATEST.get(lb.base_key)
    if previous is not None and previous[0].shape == versions.shape:
        dirty = np.flatnonzero(previous[0] != versions)
        if dirty.size <= PATCH_QUERIES:
            old = previous[1]
            grid, qrels = _columns(lb, dirty)
            patched = old.labels.copy()
            patched[:, dirty] = grid
            return TrustArrays(patched, _rows_replaced(old.qrels, dirty, qrels), old.doc_ids, old.positions)
    grid, qrels = _whole(lb)
    return TrustArrays(grid, qrels, lb.cube.doc_ids, np.arange(n_q))


def arrays_source(labels: str) -> str:
    """The label source the trust arrays of a leaderboard on ``labels`` hold: a hybrid leaderboard's are the people's
    labels (the model's answers enter its verdicts as calibrated distributions, judging.scoring.trust.final, and
    settle nothing: read as labels they were taken as certain), any other leaderboard's its own."""
    return "humans" if hybrid_judge(labels) is not None else labels


def _columns(lb: Leaderboard, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ranked labels (S, P, D) and qrels rows (P, M) of the queries at cube ``positions``: those the leaderboard
    just rescored if they are these, else read and probed."""
    kept = rescored_label_arrays_take(lb.base_key, lb.table.versions, positions)
    if kept is not None:  # the leaderboard just rescored these queries from the same labels
        return kept
    n_q = len(lb.cube.query_ids)
    source = arrays_source(lb.params.labels)
    labels = labels_for(lb.campaign, lb.cube.query_ids[positions], lb.params.policy, total=n_q, labels=source)
    grid, qrels, _, _ = label_arrays(lb.cube, positions, labels)
    return grid, qrels


def _whole(lb: Leaderboard) -> tuple[np.ndarray, np.ndarray]:
    """Ranked labels and qrels rows of every query: those of the leaderboard's last whole scoring when it was
    just done from the same labels, else read and probed."""
    return _columns(lb, np.arange(len(lb.cube.query_ids)))


def _rows_replaced(rows: np.ndarray, positions: np.ndarray, new: np.ndarray) -> np.ndarray:
    """A copy of the qrels rows with those at ``positions`` replaced by ``new`` (widened as needed)."""
    width = max(rows.shape[1], new.shape[1])
    out = np.full((rows.shape[0], width), metrics.UNJUDGED, dtype=np.int8)
    out[:, : rows.shape[1]] = rows
    out[positions] = metrics.UNJUDGED
    out[positions, : new.shape[1]] = new
    return out


# --------------------------------------------------------------------------- one copy per machine


@dataclass
class _Grid:
    """This process's view of a labels file (judging.scoring.grid_file): the file, and the columns of the
    queries whose labels moved since it was written, at the versions they were read at."""

    file: grid_file.GridFile
    qrels: np.ndarray  # the file's qrels rows
    moved: np.ndarray  # (k,) ascending cube positions of the columns held
    versions: np.ndarray  # (k,) the labels version each column was read at
    columns: np.ndarray  # (S, k, D) int8 their ranked labels
    rows: np.ndarray  # (k, M) int8 their qrels rows


_GRIDS: dict[str, _Grid] = runtime.keep(
    "trust.label_files",
    {},
    bound=None,
    grows_with="labels source (campaign, policy, labels)",
    invalidated_by="the file written anew (rebased) or replaced by another process",
    lock=LOCK,
    group="trust",
)
_REBASING: set[str] = runtime.hold(
    "trust.label_files_rebasing",
    set(),
    grows_with="labels file being written",
    why="sources whose file a background thread of this process is writing anew",
)


def grid_source(lb: Leaderboard) -> tuple[str, str]:
    cube_digest = cube_file.state_digest(lb.cube.key)
    source = (lb.params.policy or lb.campaign.aggregation, arrays_source(lb.params.labels))
    return cube_digest, grid_file.source_digest(cube_digest, source)


def _grid_of(found: grid_file.GridFile | None, lb: Leaderboard) -> _Grid | None:
    """A view of a labels file with no columns put in yet; None for no file or one of another shape."""
    s, q, d = lb.cube.doc_ids.shape
    if found is None or found.shape != (s, q, d):
        return None
    empty = np.zeros(0, np.int64)
    return _Grid(found, found.qrels(), empty, empty, np.zeros((s, 0, d), np.int8), np.zeros((0, 1), np.int8))


def _arrays_from_file(lb: Leaderboard) -> TrustArrays:
    """The arrays of ``lb``'s labels state as a private mapping of the machine's labels file with the columns of
    the queries judged since it was written put in; the file is written first when there is none (or too many
    queries moved since), by one process of the machine while the others wait for it."""
    folder = cube_file.cube_dir()
    assert folder is not None
    cube_digest, digest = grid_source(lb)
    versions = lb.table.versions

    def opened() -> _Grid | None:
        return _grid_of(grid_file.grid_load(folder, lb.campaign.pk, cube_digest, digest), lb)

    with LOCK:
        held = _GRIDS.get(digest)
    # a file truncated since (sound() False) is mapped anew, never read: its pages would raise SIGBUS
    grid = held if held is not None and held.file.shape == lb.cube.doc_ids.shape and held.file.sound() else None
    if grid is None or (
        np.count_nonzero(grid.file.versions != versions) > grid_file.REBASE_QUERIES and grid.file.replaced()
    ):
        reopened = opened()
        if reopened is not None:  # the columns already read are kept: they may be newer than the file's
            grid = reopened if grid is None else replace(grid, file=reopened.file, qrels=reopened.qrels)
    if grid is None or np.count_nonzero(grid.file.versions != versions) > PATCH_QUERIES:
        with cube_file.build_lock(folder, lb.campaign.pk):
            grid = opened()  # another worker may have written it while this one waited
            if grid is None or np.count_nonzero(grid.file.versions != versions) > PATCH_QUERIES:
                labels, qrels = _whole(lb)
                saved = grid_file.grid_save(
                    folder, lb.campaign.pk, cube_digest, digest, versions=versions, labels=labels, qrels=qrels
                )
                grid = _grid_of(saved, lb)
                if grid is None:  # not written (a full disk): this process keeps its arrays in memory
                    return TrustArrays(labels, qrels, lb.cube.doc_ids, np.arange(len(versions)))
    moved = np.flatnonzero(grid.file.versions != versions)
    arrays, grid = _patched(lb, grid, moved)
    with LOCK:
        _GRIDS[digest] = grid
    if moved.size > grid_file.REBASE_QUERIES:
        _rebase(lb, grid, arrays, cube_digest, digest)
    return arrays


def _patched(lb: Leaderboard, grid: _Grid, moved: np.ndarray) -> tuple[TrustArrays, _Grid]:
    """A fresh private mapping of the grid's file with the columns of the ``moved`` queries put in: those held
    at the current version reused, the others read."""
    versions = lb.table.versions
    s, _, d = grid.file.shape
    at = np.minimum(np.searchsorted(grid.moved, moved), max(grid.moved.size - 1, 0))
    held = (grid.moved[at] == moved) & (grid.versions[at] == versions[moved]) if grid.moved.size else moved < 0
    need = moved[~held]
    columns = np.empty((s, moved.size, d), dtype=np.int8)
    columns[:, held] = grid.columns[:, at[held]]
    width = grid.rows.shape[1]
    if need.size:
        new, new_rows = _columns(lb, need)
        columns[:, ~held] = new
        width = max(width, new_rows.shape[1])
    rows = np.full((moved.size, width), metrics.UNJUDGED, dtype=np.int8)
    rows[held, : grid.rows.shape[1]] = grid.rows[at[held]]
    if need.size:
        rows[~held, : new_rows.shape[1]] = new_rows
    labels = grid.file.labels()
    if moved.size:
        labels[:, moved] = columns  # these pages become this process's own; the rest stay the file's
    labels.flags.writeable = False  # the arrays of a state never change: readers in other threads
    qrels = _rows_replaced(grid.qrels, moved, rows)
    arrays = TrustArrays(labels, qrels, lb.cube.doc_ids, np.arange(len(versions)))
    return arrays, _Grid(grid.file, grid.qrels, moved, versions[moved].copy(), columns, rows)


def _rebase(lb: Leaderboard, grid: _Grid, arrays: TrustArrays, cube_digest: str, digest: str) -> None:
    """Write this state's arrays as the labels file (once per process at a time, and by one process of the
    machine: the one that takes the file's lock), in a thread: the next arrays map it with fewer columns put in."""
    folder = cube_file.cube_dir()
    assert folder is not None
    with LOCK:
        if digest in _REBASING:
            return
        _REBASING.add(digest)
    versions = lb.table.versions.copy()
    pk = lb.campaign.pk

    def run() -> None:
        try:
            with cube_file.file_lock(folder / f"grid-{pk}.lock", wait=False) as locked:
                if not locked:
                    return  # another process of the machine is writing it
                if grid.file.replaced():
                    return  # another process wrote a newer one: the next arrays map it
                grid_file.grid_save(
                    folder, pk, cube_digest, digest, versions=versions, labels=arrays.labels, qrels=arrays.qrels
                )
        except Exception:
            logger.exception("the labels file of campaign %s could not be written anew", pk)
        finally:
            with LOCK:
                _REBASING.discard(digest)

    runtime.later(run, name=f"labels-rebase-{pk}")  # tests write it in the request, to see it at once


def scored_labels(lb: Leaderboard, arrays: TrustArrays) -> np.ndarray:
    return metrics.condense(arrays.labels) if lb.params.judged_only else arrays.labels


def top_grade(campaign: Campaign, qrels: np.ndarray) -> int:
    """The best grade of the campaign's scale (or of its labels, should an import have gone beyond it)."""
    return max(grade_top(campaign=campaign), int(qrels.max()) if qrels.size else 0, 0)
