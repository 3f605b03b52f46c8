"""The live leaderboard: per-query scores cached per parameter set, rescored only where labels moved."""

from __future__ import annotations

import atexit
import hashlib
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

import numpy as np
from django.core.cache import cache, caches
from django.core.cache.backends.db import DatabaseCache
from django.core.exceptions import ValidationError
from django.db import DEFAULT_DB_ALIAS, connections, router, transaction
from django.db.models import Sum
from django.utils import timezone
from django.utils.translation import gettext as _

import metrics
from judging import runtime
from judging.aggregation import POLICIES
from judging.compiled import compiled_sql, int_slot
from judging.errors import RequestError
from judging.models import LABELS_SHARDS, Campaign, LabelsChange, LabelsCounter, Query
from judging.scoring.cube import (
    RunCube,
    cursor_rows,
    label_arrays,
    label_source_judge,
    labels_for,
    run_cube,
    segment_mask,
)
from judging.scoring.hybrid import draws_for, hybrid_fit, hybrid_judge, hybrid_scores
from judging.scoring.memory import built_large
from metrics.measures import LEADERBOARD

# Queries per shared-cache entry: a new label rewrites one block (16 queries x 20 systems x 9 measures is
# 23 kB), not the whole table. Blocks of 64 took 10-20 ms to write on PostgreSQL's database cache after each
# judgment, 16 took 2-8 (bench/leaderboard_bench.py, VERDICTS); a cold process reads 313 blocks at 5,000 queries.
BLOCK = 16

logger = logging.getLogger(__name__)


CACHE_SECONDS = 7 * 24 * 3600

# The leaderboard's measures in its column order (the registry's, metrics.measures).
LEADERBOARD_MEASURES = LEADERBOARD


def measure_names(k: int) -> list[str]:
    """The leaderboard's measure names with cutoff ``k``: ``["P@10", ..., "Judged@10"]``."""
    return [str(metrics.Measure(base).at(k)) for base in LEADERBOARD_MEASURES]


_LOCK = threading.Lock()
_SCORES: dict[str, ScoreTable] = runtime.keep(
    "scoring.scores",
    {},
    bound=None,
    grows_with="score table (campaign x parameter set)",
    invalidated_by="labels versions: the queries whose version moved are rescored in place",
    lock=_LOCK,
)


@dataclass(frozen=True)
class Params:
    k: int = 10
    gain: str = "linear"
    threshold: int = 1
    judged_only: bool = False
    policy: str | None = None  # None: the campaign's own policy (the stored labels)
    labels: str = "humans"  # or "model:NAME" / "hybrid:NAME": which judgments the labels come from
    # Only the queries carrying this tag count in the means (judging.scoring.cube.segment_mask); the
    # per-query scores are the same, so the score table is shared with the whole leaderboard.
    segment: str | None = None

    @classmethod
    def from_settings(cls, data: Mapping[str, Any]) -> Params:
        """The parameters named in ``data`` (a leaderboard form's or an API serializer's cleaned settings;
        other keys such as ``measure`` are ignored, missing ones keep their defaults)."""
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})

    def validate(self) -> Params:
        if not isinstance(self.k, int) or not 1 <= self.k <= 1000:
            raise RequestError("k", "k must be a whole number from 1 to 1000")
        if self.gain not in metrics.GAINS:
            raise RequestError("gain", f"gain must be one of {', '.join(metrics.GAINS)}")
        if not isinstance(self.threshold, int) or not 0 <= self.threshold <= 100:
            raise RequestError("threshold", "threshold must be a whole number from 0 to 100")
        if self.policy is not None and self.policy not in POLICIES:
            raise RequestError("policy", f"policy must be one of {', '.join(POLICIES)}")
        label_source_judge(self.labels)
        if self.segment is not None and (not isinstance(self.segment, str) or not 0 < len(self.segment) <= 100):
            raise RequestError("segment", "segment must be a tag of 1 to 100 characters")
        return self


def threshold_check(threshold: int, *, top: int) -> int:
    """The leaderboard page's limit on the relevance threshold, which the API holds annotators to as well: no
    higher than the campaign's top grade ``top`` (above it every binary measure is 0). A ValidationError
    says so in the reader's language."""
    if threshold > top:
        raise ValidationError(_("must be between 0 and %(top)d, the top grade of this campaign's scale") % {"top": top})
    return threshold


@dataclass
class ScoreTable:
    """Per-query scores of one parameter set, with the labels versions they were computed from."""

    versions: np.ndarray  # (Q,)
    scores: np.ndarray  # (M, S, Q)
    labelled: np.ndarray  # (Q,) bool: the query has at least one label (it counts in the means)


@dataclass
class Leaderboard:
    campaign: Campaign
    params: Params
    cube: RunCube
    table: ScoreTable
    measures: list[str]
    computed_at: datetime = field(default_factory=timezone.now)
    rescored: int = 0
    key: str = ""  # the score table's cache key: campaign, runs and parameters (and the segment's queries)
    base_key: str = ""  # the same without the segment: whole-campaign arrays are cached under it
    seconds: float = 0.0  # how long leaderboard() took
    _means: np.ndarray | None = field(default=None, repr=False)

    @property
    def state(self) -> str:
        """Fingerprint of everything the scores depend on (runs, parameters, every query's labels version):
        results derived from the scores, such as confidence intervals, are cached under it."""
        h = hashlib.sha256(self.key.encode())
        h.update(self.table.versions.tobytes())
        return h.hexdigest()[:24]

    @property
    def n_scored(self) -> int:
        return int(self.table.labelled.sum())

    def measure_index(self, measure: str | metrics.Measure) -> int:
        return self.measures.index(str(measure))

    def per_query(self, measure: str | metrics.Measure) -> np.ndarray:
        """(S, Q_scored) per-query values of one measure over the mean's query set."""
        values: np.ndarray = self.table.scores[self.measure_index(measure)][:, self.table.labelled]
        return values

    def means(self) -> np.ndarray:
        """(M, S) macro means over the queries that have a label (trec_eval -c)."""
        if self._means is None:
            n = int(self.table.labelled.sum())
            if n == 0:
                self._means = np.zeros(self.table.scores.shape[:2])
            else:
                # a sum over the mask instead of a mean over a masked copy of the (M, S, Q) table
                self._means = (self.table.scores @ self.table.labelled.astype(np.float64)) / n
        means: np.ndarray = self._means
        return means

    def scored_qids(self) -> list[str]:
        return [q for q, m in zip(self.cube.qids, self.table.labelled, strict=True) if m]


def score_queries(
    cube: RunCube, q_idx: np.ndarray, labels: tuple[np.ndarray, ...], params: Params
) -> tuple[np.ndarray, np.ndarray]:
    """Score the queries at positions ``q_idx`` of the cube: (M, S, len(q_idx)) scores and a labelled mask."""
    grid, qrels, _, counts = label_arrays(cube, q_idx, labels)
    return _score(grid, qrels, counts, params)


def _score(grid: np.ndarray, qrels: np.ndarray, counts: np.ndarray, params: Params) -> tuple[np.ndarray, np.ndarray]:
    result = metrics.evaluate(
        grid, qrels, k=params.k, threshold=params.threshold, gain=params.gain, judged_only=params.judged_only
    )
    names = measure_names(params.k)
    return np.stack([result[n] for n in names]), counts > 0


# The ranked labels and qrels of the queries the last rescoring of each table read (every query on a cold
# start, the judged query after a judgment), until the trust measures take them (judging.scoring.trust.arrays):
# they read the same arrays, and reading the labels and probing the ranked documents again would double a cold
# leaderboard's cost, and add a query and a probe to every request after a judgment. The latest per table:
# 10 MB at 10M entries when it is the whole campaign.
_KEEP_RESCORED = 8
_RESCORED: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = runtime.keep(
    "scoring.rescored_labels",
    {},
    bound=_KEEP_RESCORED,
    invalidated_by="taken once by the trust arrays, or the labels versions they were read at",
    lock=_LOCK,
)


def rescored_label_arrays_take(
    key: str, versions: np.ndarray, positions: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """(ranked labels (S, P, D), qrels rows (P, M)) of the queries at cube ``positions`` of the table ``key``
    (a Leaderboard's ``base_key``) if the last rescoring of that table read exactly those queries at these
    labels ``versions``, else None; forgotten either way."""
    with _LOCK:
        got = _RESCORED.pop(key, None)
    if got is None or not np.array_equal(got[0], versions) or not np.array_equal(got[1], positions):
        return None
    return got[2], got[3]


def shared_write(blocks: dict[str, Any]) -> None:
    """Write score blocks (or other entries stamped with a labels state) to the shared cache. On the database
    cache: one transaction (it would otherwise commit, and sync to disk, once per block), and on PostgreSQL
    without waiting for the commit to reach the disk
    (``synchronous_commit`` off for this transaction only). A block lost in a crash is only work to redo: it is
    stamped with its labels versions and scored again where it is missing. The wait for the disk was most of
    what writing a block cost after a judgment (bench/leaderboard_bench.py, VERDICTS)."""
    backend = caches["default"]
    if not isinstance(backend, DatabaseCache):
        cache.set_many(blocks, timeout=CACHE_SECONDS)
        return
    alias = router.db_for_write(backend.cache_model_class) or DEFAULT_DB_ALIAS  # where the cache writes
    # Inside another transaction (a judging request's, judging.request_transaction) the setting would hold for
    # all of it, a judgment's commit included: there the blocks wait for the disk with the rest.
    own = not connections[alias].in_atomic_block
    with transaction.atomic(using=alias):
        if own and connections[alias].vendor == "postgresql":
            with connections[alias].cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit = off")
        cache.set_many(blocks, timeout=CACHE_SECONDS)


# Shared-cache writes happen after the answer, in one writer thread per process (runtime.later; tests write in
# the request, to read the entries at once): the write was 10 ms of the leaderboard request after each judgment
# on PostgreSQL's database cache (bench/scale_bench.py), and the next process to need a block before it is
# written scores it itself (a few queries), as after a crash.
_PENDING: dict[str, Any] = runtime.hold(
    "scoring.shared_writes_pending",
    {},
    grows_with="shared-cache entry waiting for the writer thread",
    why="entries the writer thread has still to write (cleared as it writes them)",
)
_PENDING_LOCK = threading.Lock()
_WRITING = False


def shared_write_later(blocks: dict[str, Any]) -> None:
    """shared_write(blocks) in this process's writer thread, after whatever it has still to write (an entry
    waiting there is replaced by a newer one of the same key, never written twice)."""
    global _WRITING
    if runtime.background_inline():
        shared_write(blocks)
        return
    with _PENDING_LOCK:
        _PENDING.update(blocks)
        if _WRITING:
            return
        _WRITING = True
    runtime.later(_write_pending, name="shared-cache-write")


def _write_pending() -> None:
    global _WRITING
    try:
        while True:
            with _PENDING_LOCK:
                batch = dict(_PENDING)
                _PENDING.clear()
                if not batch:
                    _WRITING = False
                    return
            try:
                shared_write(batch)
            except Exception:  # the entries are only work saved for other processes
                logger.exception("%d shared score cache entries not written", len(batch))
    finally:
        with _PENDING_LOCK:
            _WRITING = False


# How long a process leaving waits for its writer thread (atexit below): under gunicorn's graceful timeout.
EXIT_FLUSH_SECONDS = 10.0


def shared_writes_flush(timeout: float = EXIT_FLUSH_SECONDS) -> bool:
    """Wait, at most ``timeout`` seconds, until the writer thread has written every entry it was handed; whether
    it has. Run when the process exits (a gunicorn worker stopped for a restart or a deploy): the writer is a daemon
    thread, and the entries it still held went with it, so that the restarted workers computed again the score
    blocks and verdicts of the state they had just been computed for (the likely cause of the first leaderboard
    after a restart taking 13.5-14.9 s at 100M ranked entries in two runs of bench/scale_bench.py, 0.2-0.3 s in
    the others)."""
    deadline = time.monotonic() + timeout
    while True:
        with _PENDING_LOCK:
            writing, waiting = _WRITING, len(_PENDING)
        if not writing and not waiting:
            return True
        if time.monotonic() >= deadline:
            logger.warning("the shared score cache's writer had not finished at exit (%d entries waiting)", waiting)
            return False
        time.sleep(0.02)


atexit.register(shared_writes_flush)


def _table_key(campaign: Campaign, cube: RunCube, params: Params) -> str:
    raw = repr(
        (cube.key, params.k, params.gain, params.threshold, params.judged_only, params.policy or campaign.aggregation)
        + ((params.labels,) if params.labels != "humans" else ())
    )
    # the block size names the layout: blocks written with another size (an older release) are never read
    return f"reljudge:lb{BLOCK}:{campaign.pk}:{hashlib.sha256(raw.encode()).hexdigest()[:24]}"


# Every query's labels version, per run cube, with the campaign's labels counters (one per shard) they were read
# at: a request whose counters have not moved since (no label changed: the lead's polls, the queue's lists) reads
# the counters' few rows; one whose counters moved by a few bumps reads the labels log's lines since them
# (LabelsChange: after a judgment, one line) instead of every query's version (5,000 rows at 5,000 queries).
_KEEP_VERSIONS = 16
_VERSIONS: dict[tuple[object, ...], tuple[np.ndarray, np.ndarray]] = runtime.keep(
    "scoring.labels_versions",
    {},
    bound=_KEEP_VERSIONS,
    invalidated_by="the campaign's labels counters moving (patched from the labels log)",
    lock=_LOCK,
)
# Past this many lines since the kept counters (a bulk import, a process that was away) every version is read.
LOG_READ_MAX = 2048
# the counters' seen values that match no line: a process with no versions kept reads the counters alone
_NO_LINES = 2**62
_SHARD_SPAN = 2**40  # (shard, counter value) as one number: no counter reaches 2**40 bumps


def labels_counter(campaign: Campaign) -> int:
    """The sum of the campaign's labels counters (LabelsCounter, bumped by services.labels_bump with every
    labels_version): it moves whenever a label of the campaign may have moved."""
    return int(LabelsCounter.objects.filter(campaign_id=campaign.pk).aggregate(v=Sum("version"))["v"] or 0)


def labels_versions(campaign: Campaign, cube: RunCube) -> np.ndarray:
    """(Q,) every query's labels_version in the cube's query order (read-only). Sound because
    services.labels_bump, the one writer of labels_version, adds to the campaign's LabelsCounter and writes the
    labels log in the same transaction: the counters and the log's lines past the kept ones are read in one
    statement (one snapshot), so the lines name every query that moved up to the counters read, with its version
    (see LabelsChange); the counters are read before every query's version is, so versions kept with counter
    values are at least that new."""
    with _LOCK:
        got = _VERSIONS.get(cube.key)
    if got is not None and got[1].shape != (len(cube.query_ids),):
        got = None
    counters, lines = _labels_state(campaign, got[0] if got is not None else None)
    versions = None
    if got is not None:
        if np.array_equal(got[0], counters):
            return got[1]
        versions = _versions_since(cube, *got, counters, lines)
    if versions is None:
        queries = Query.objects.filter(campaign=campaign).order_by("id").values_list("labels_version")
        versions = np.array([v for (v,) in cursor_rows(queries)], dtype=np.int64)
    versions.flags.writeable = False  # shared by the requests that find the counters where they were
    with _LOCK:
        _VERSIONS.pop(cube.key, None)
        _VERSIONS[cube.key] = (counters, versions)
        while len(_VERSIONS) > _KEEP_VERSIONS:
            _VERSIONS.pop(next(iter(_VERSIONS)))
    return versions


def _labels_state(campaign: Campaign, seen: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(LABELS_SHARDS,) the campaign's labels counters and (n, 4) the labels log's lines past ``seen`` (each
    shard's counter value; None: no lines) as (shard, version, query id, the query's labels_version), at most
    LOG_READ_MAX + 1 of them: one compiled statement (judging.compiled), run at every leaderboard request and
    queue list (building it with the ORM cost more of the app's CPU than running it: see docs/benchmarks.md)."""
    marks = np.full(LABELS_SHARDS, _NO_LINES, dtype=np.int64) if seen is None else seen
    values: dict[str, int] = {"campaign_id": campaign.pk, "limit": LOG_READ_MAX + 1}
    values.update((f"seen{shard}", mark) for shard, mark in enumerate(marks.tolist()))
    rows = compiled_sql(("labels_state",), _labels_state_sql).rows(values)
    got = np.array(rows, dtype=np.int64).reshape(-1, 5)
    counters = np.zeros(LABELS_SHARDS, dtype=np.int64)
    counter_rows = got[got[:, 0] == 0]
    counters[counter_rows[:, 1]] = counter_rows[:, 2]
    return counters, got[got[:, 0] == 1][:, 1:]


def _labels_state_sql() -> tuple[str, tuple[Any, ...]]:
    """One range of the log's index (campaign, shard, version) per shard, joined by UNION ALL: each reads the
    lines past its shard's mark and no other. The same condition written as one OR of the shards' ranges was
    planned as a scan of the campaign's whole log (up to LABELS_LOG_KEEP lines a shard) with the OR as a filter:
    1,065 rows read per judgment on the load bench, against the one or two lines since (tests/judging/
    test_judging_pace.py counts them). Each line's query version is a probe by the query's key: written as a join, the
    plan made without values (a prepared statement) could hash the lines to the queries table read whole, in each
    shard's branch (16 x every campaign's queries a leaderboard request; seen on the load bench as 900-1,300 query
    rows a judgment in some runs). A line whose query is gone has version -1, which no cube holds: every version is
    then read, as when the join left the line out."""
    counter, line, query = (m._meta.db_table for m in (LabelsCounter, LabelsChange, Query))
    version = f"COALESCE((SELECT q.labels_version FROM {query} q WHERE q.id = l.query_id), -1)"
    since = " UNION ALL ".join(
        f"SELECT 1, l.shard, l.version, l.query_id, {version} FROM {line} l "
        f"WHERE l.campaign_id = %s AND l.shard = {shard} AND l.version > %s"
        for shard in range(LABELS_SHARDS)
    )
    sql = (
        f"SELECT 0, shard, version, 0, 0 FROM {counter} WHERE campaign_id = %s UNION ALL "
        f"SELECT * FROM ({since} LIMIT %s) AS lines"
    )
    slots = ("campaign_id", *(name for shard in range(LABELS_SHARDS) for name in ("campaign_id", f"seen{shard}")))
    return sql, tuple(int_slot(name) for name in (*slots, "limit"))


def _versions_since(
    cube: RunCube, seen: np.ndarray, kept: np.ndarray, counters: np.ndarray, lines: np.ndarray
) -> np.ndarray | None:
    """``kept`` (the versions read at counters ``seen``) brought to ``counters`` from the labels log's ``lines``
    since ``seen`` (_labels_state's), each with its query's labels_version; None where the log cannot tell
    (lines pruned, too many of them, a counter that went back, a query the cube does not have): then every
    version is read."""
    moved = np.flatnonzero(counters != seen)
    behind = counters[moved] - seen[moved]
    if (behind < 0).any() or len(lines) > LOG_READ_MAX:
        return None
    # every bump has one value of its shard's counter and at least one line: as many values as bumps
    shard_values = np.unique(lines[:, 0] * _SHARD_SPAN + lines[:, 1]) // _SHARD_SPAN
    if not np.array_equal(np.bincount(shard_values, minlength=LABELS_SHARDS)[moved], behind):
        return None
    at = np.searchsorted(cube.query_ids, lines[:, 2])
    if (at >= len(cube.query_ids)).any() or not np.array_equal(cube.query_ids[at], lines[:, 2]):
        return None
    versions = kept.copy()
    versions[at] = lines[:, 3]
    return versions


def leaderboard(campaign: Campaign, params: Params | None = None) -> Leaderboard:
    """Current per-query scores of every system, rescoring only queries whose labels moved.

    One function: the table it publishes is built under one reading of the labels versions (the process's copy,
    the blocks other processes scored, the queries still stale, the shared cache written later); split, each
    part would take that reading and the copy-on-write table as arguments.
    """
    started = time.perf_counter()
    params = (params or Params()).validate()
    cube = run_cube(campaign)
    versions = labels_versions(campaign, cube)
    n_q, n_m = len(cube.query_ids), len(measure_names(params.k))
    key = _table_key(campaign, cube, params)
    judge = hybrid_judge(params.labels)
    # hybrid:NAME: the people's labels, the model's answers in expectation under the fit (its seed names the table)
    fit = hybrid_fit(campaign, cube, judge, versions) if judge is not None else None
    if fit is not None:
        key = f"{key}:h{fit.seed}"
    with _LOCK:
        table = _SCORES.get(key)
    if table is None or table.versions.shape != versions.shape:
        table = ScoreTable(np.full(n_q, -1, np.int64), np.zeros((n_m, len(cube.system_ids), n_q)), np.zeros(n_q, bool))
    stale = np.flatnonzero(table.versions != versions)
    dirty = stale
    if stale.size:
        # Copy on write: other threads may be reading the published table right now.
        table = ScoreTable(table.versions.copy(), table.scores.copy(), table.labelled.copy())
        # another process may have scored these blocks already
        stale_blocks = np.unique(stale // BLOCK).tolist()
        shared = cache.get_many([f"{key}:{b}" for b in stale_blocks])
        for b in stale_blocks:
            got = shared.get(f"{key}:{b}")
            if got is None:
                continue
            sl = slice(b * BLOCK, min((b + 1) * BLOCK, n_q))
            bv, bs, bl = got
            if bv.shape != versions[sl].shape or bs.shape[:2] != table.scores.shape[:2]:
                continue
            ok = bv == versions[sl]
            table.versions[sl] = np.where(ok, bv, table.versions[sl])
            table.scores[:, :, sl] = np.where(ok, bs, table.scores[:, :, sl])
            table.labelled[sl] = np.where(ok, bl, table.labelled[sl])
        dirty = np.flatnonzero(table.versions != versions)
    if dirty.size:
        built_large()
        source = "humans" if fit is not None else params.labels
        labels = labels_for(campaign, cube.query_ids[dirty], params.policy, total=n_q, labels=source)
        grid, qrels, docs, counts = label_arrays(cube, dirty, labels)
        if fit is None:
            scores, labelled = _score(grid, qrels, counts, params)
        else:
            scores, labelled = hybrid_scores(
                fit,
                cube.query_ids[dirty],
                docs,
                grid,
                qrels,
                counts,
                measures=measure_names(params.k),
                k=params.k,
                threshold=params.threshold,
                gain=params.gain,
                judged_only=params.judged_only,
                draws=draws_for(int(cube.doc_ids.size)),  # the campaign's, not the rescored queries': one answer
            )
        del docs
        with _LOCK:
            _RESCORED.pop(key, None)
            if dirty.size == n_q:
                _RESCORED.clear()  # one whole campaign's arrays at a time
            elif len(_RESCORED) >= _KEEP_RESCORED:
                _RESCORED.pop(next(iter(_RESCORED)))
            _RESCORED[key] = (versions.copy(), dirty.copy(), grid, qrels)
        del grid, qrels
        table.scores[:, :, dirty] = scores
        table.labelled[dirty] = labelled
        table.versions[dirty] = versions[dirty]
        touched = np.unique(dirty // BLOCK).tolist()
        blocks = {
            f"{key}:{b}": (
                table.versions[b * BLOCK : (b + 1) * BLOCK].copy(),
                table.scores[:, :, b * BLOCK : (b + 1) * BLOCK].copy(),
                table.labelled[b * BLOCK : (b + 1) * BLOCK].copy(),
            )
            for b in touched
        }
        shared_write_later(blocks)
    with _LOCK:
        _SCORES[key] = table
    seconds = time.perf_counter() - started
    if dirty.size:
        # every query rescored is a cold computation (a new parameter set, new runs, a restarted process
        # with an empty shared cache); a few queries are the everyday case of new labels
        logger.log(
            logging.INFO if dirty.size == n_q else logging.DEBUG,
            "leaderboard of %s (k=%d, gain=%s, threshold=%d, condensed=%s, policy=%s): rescored %d of %d "
            "queries for %d systems in %.2f s",
            campaign.slug,
            params.k,
            params.gain,
            params.threshold,
            params.judged_only,
            params.policy or campaign.aggregation,
            dirty.size,
            n_q,
            len(cube.system_ids),
            seconds,
        )
    base_key = key
    if params.segment is not None:
        inside = segment_mask(campaign, cube, params.segment)
        # A view of the shared table: the same scores, fewer queries in the means (and in their cache keys).
        table = ScoreTable(table.versions, table.scores, table.labelled & inside)
        key = f"{key}:segment:{hashlib.sha256(np.packbits(inside).tobytes()).hexdigest()[:16]}"
    return Leaderboard(
        campaign,
        params,
        cube,
        table,
        measure_names(params.k),
        rescored=int(dirty.size),
        key=key,
        seconds=seconds,
        base_key=base_key,
    )


def scores_clear() -> None:
    """Forget this process's score tables (the shared cache in Django's cache stays)."""
    with _LOCK:
        _SCORES.clear()
        _RESCORED.clear()
        _VERSIONS.clear()
