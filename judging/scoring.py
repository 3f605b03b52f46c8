"""DB -> arrays -> metrics -> leaderboard: the bridge between stored runs and labels and metrics/.

Runs are fixed once imported, so each process keeps a campaign's run cube (systems x queries x depth
document ids) keyed by the systems' content fingerprints. Labels change all the time: per-query scores
are cached per parameter set, each block stamped with the labels versions of its queries, in Django's
cache (shared by every server process) and in process memory. A request reads the versions (one small
query), rescores only the queries whose version moved, and averages.

Derived results are cached under the same fingerprint (``Leaderboard.state``): bootstrap confidence
intervals and significance tests (``stats_refresh``, ``pairwise_cached``). The drill-down pages read one
query's ranked lists and labels with ``query_rankings`` and the judging timeline with ``judging_timeline``.
"""

from __future__ import annotations

import hashlib
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property

import numpy as np
from django.core.cache import cache, caches
from django.core.cache.backends.db import DatabaseCache
from django.db import connections, transaction
from django.db.models import Count, Max, Min, QuerySet
from django.db.models.functions import TruncDay, TruncHour
from django.utils import timezone

import metrics
from judging.aggregation import POLICIES, aggregate_grades
from judging.models import Adjudication, Campaign, Document, Judgment, Pair, Query, Ranking, System

GAINS = ("linear", "exponential")
# Queries per shared-cache entry: a new label rewrites one block (64 queries x 20 systems x 8 measures is
# 80 kB), not the whole table.
BLOCK = 64
CACHE_SECONDS = 7 * 24 * 3600
_LOCK = threading.Lock()
_CUBES: dict[tuple, RunCube] = {}
_SCORES: dict[str, ScoreTable] = {}


def measure_names(k: int) -> list[str]:
    return [f"P@{k}", f"R@{k}", f"F1@{k}", f"Hit@{k}", "MRR", "MAP", f"nDCG@{k}", f"Judged@{k}"]


@dataclass(frozen=True)
class Params:
    k: int = 10
    gain: str = "linear"
    threshold: int = 1
    judged_only: bool = False
    policy: str | None = None  # None: the campaign's own policy (the stored labels)

    def validate(self) -> Params:
        if not isinstance(self.k, int) or not 1 <= self.k <= 1000:
            raise ValueError("k must be a whole number from 1 to 1000")
        if self.gain not in GAINS:
            raise ValueError(f"gain must be one of {', '.join(GAINS)}")
        if not isinstance(self.threshold, int) or not 0 <= self.threshold <= 100:
            raise ValueError("threshold must be a whole number from 0 to 100")
        if self.policy is not None and self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}")
        return self


@dataclass
class RunCube:
    """Every system's ranking of every query of a campaign, as document ids; -1 pads short runs."""

    key: tuple
    system_ids: np.ndarray
    system_names: list[str]
    query_ids: np.ndarray  # (Q,) every query of the campaign, ascending id
    qids: list[str]
    doc_ids: np.ndarray  # (S, Q, D) int64

    @cached_property
    def answered(self) -> np.ndarray:
        """(S, Q) bool: the system returned at least one document for the query."""
        return self.doc_ids[:, :, 0] >= 0


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
    key: str = ""  # the score table's cache key: campaign, runs and parameters
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

    def measure_index(self, measure: str) -> int:
        return self.measures.index(measure)

    def per_query(self, measure: str) -> np.ndarray:
        """(S, Q_scored) per-query values of one measure over the mean's query set."""
        return self.table.scores[self.measures.index(measure)][:, self.table.labelled]

    def means(self) -> np.ndarray:
        """(M, S) macro means over the queries that have a label (trec_eval -c)."""
        if self._means is None:
            n = int(self.table.labelled.sum())
            if n == 0:
                self._means = np.zeros(self.table.scores.shape[:2])
            else:
                # a sum over the mask instead of a mean over a masked copy of the (M, S, Q) table
                self._means = (self.table.scores @ self.table.labelled.astype(np.float64)) / n
        return self._means

    def scored_qids(self) -> list[str]:
        return [q for q, m in zip(self.cube.qids, self.table.labelled, strict=True) if m]


# --------------------------------------------------------------------------- loading


def _rows(qs: QuerySet) -> list[tuple]:
    """The rows of a ``values_list`` queryset straight from the database cursor.

    Callers clear the models' default ordering (``order_by()``): Pair and Ranking order by related models,
    which joins three more tables and sorts every row.

    The ORM's per-row conversion costs a few microseconds a row: a third of a cold leaderboard when it
    reads 100,000 rankings and 150,000 labels. The columns read here need no conversion (integers and
    bytes; BinaryField values may come back as memoryview, which every caller passes through bytes()).
    """
    sql, params = qs.query.get_compiler(using=qs.db).as_sql()
    with connections[qs.db].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _systems_key(campaign: Campaign) -> tuple:
    systems = tuple(System.objects.filter(campaign=campaign).order_by("name").values_list("id", "fingerprint"))
    queries = Query.objects.filter(campaign=campaign).aggregate(n=Max("id"), c=Count("id"))
    # created_at tells a campaign from a deleted one whose ids the database handed out again
    return (campaign.pk, campaign.created_at.isoformat(), systems, (queries["n"], queries["c"]))


def run_cube(campaign: Campaign) -> RunCube:
    key = _systems_key(campaign)
    with _LOCK:
        cube = _CUBES.get(key)
    if cube is not None:
        return cube
    systems = list(System.objects.filter(campaign=campaign).order_by("name").values_list("id", "name"))
    query_rows = list(Query.objects.filter(campaign=campaign).order_by("id").values_list("id", "qid"))
    system_ids = np.array([s[0] for s in systems], dtype=np.int64)
    query_ids = np.array([q[0] for q in query_rows], dtype=np.int64)
    rows = _rows(
        Ranking.objects.filter(system__campaign=campaign)
        .order_by()
        .values_list("system_id", "query_id", "length", "doc_ids")
    )
    lengths = np.array([r[2] for r in rows], dtype=np.int64)
    depth = max(int(lengths.max()) if lengths.size else 1, 1)
    doc_ids = np.full((len(systems), len(query_ids), depth), -1, dtype=np.int64)
    if rows:
        # systems are ordered by name, so their ids are not sorted: search through a sorter
        by_id = np.argsort(system_ids)
        s_idx = by_id[np.searchsorted(system_ids, np.array([r[0] for r in rows], dtype=np.int64), sorter=by_id)]
        q_idx = np.searchsorted(query_ids, np.array([r[1] for r in rows], dtype=np.int64))
        # Rankings grouped by length: each group is one (n, length) block written with one fancy index.
        order = np.argsort(lengths, kind="stable")
        flat = np.frombuffer(b"".join([bytes(rows[i][3]) for i in order.tolist()]), dtype=np.int64)
        sorted_len = lengths[order]
        bounds = np.flatnonzero(np.diff(sorted_len)) + 1
        pos = 0
        for start, stop in zip([0, *bounds.tolist()], [*bounds.tolist(), len(rows)], strict=True):
            length, sel = int(sorted_len[start]), order[start:stop]
            block = flat[pos : pos + len(sel) * length].reshape(len(sel), length)
            doc_ids[s_idx[sel], q_idx[sel], :length] = block
            pos += len(sel) * length
    del rows
    cube = RunCube(key, system_ids, [s[1] for s in systems], query_ids, [q[1] for q in query_rows], doc_ids)
    with _LOCK:
        # runs are immutable per key; keep only the newest cube per campaign
        for old in [k for k in _CUBES if k[0] == campaign.pk]:
            del _CUBES[old]
        _CUBES[key] = cube
    return cube


def _query_chunks(campaign: Campaign, query_ids: np.ndarray, total: int | None = None) -> list[list[int] | None]:
    """Filters for reading these queries' rows: None (the whole campaign) when most queries are wanted."""
    if total is None:
        total = Query.objects.filter(campaign=campaign).count()
    if len(query_ids) * 2 >= total:
        return [None]
    ids = np.asarray(query_ids).tolist()
    return [ids[i : i + 5000] for i in range(0, len(ids), 5000)]


def labels_for(
    campaign: Campaign, query_ids: np.ndarray, policy: str | None, *, total: int | None = None
) -> tuple[np.ndarray, ...]:
    """(query_id, document_id, label) arrays of the labelled pairs of these queries, sorted by key.

    The campaign's own policy reads the stored labels; another policy aggregates the confident
    judgments afresh (an adjudication still wins). ``total`` (the campaign's number of queries) saves a
    count when the caller knows it.
    """
    chunks = _query_chunks(campaign, query_ids, total)
    # A chunk of query ids implies the campaign: filtering on the campaign as well can make the planner
    # (PostgreSQL before its first ANALYZE of a freshly imported table) scan the whole campaign's pairs.
    if policy is None or policy == campaign.aggregation:
        rows: list[tuple[int, int, int]] = []
        for chunk in chunks:
            if chunk is None:
                qs = Pair.objects.filter(campaign=campaign, label__isnull=False)
            else:
                qs = Pair.objects.filter(query_id__in=chunk, label__isnull=False)
            rows.extend(_rows(qs.order_by().values_list("query_id", "document_id", "label")))
        arr = np.array(rows, dtype=np.int64).reshape(-1, 3)
    else:
        jrows: list[tuple[int, int]] = []
        adj: list[tuple[int, int]] = []
        pair_rows: list[tuple[int, int, int]] = []
        for chunk in chunks:
            if chunk is None:
                js = Judgment.objects.filter(pair__campaign=campaign, unsure=False)
                ad = Adjudication.objects.filter(pair__campaign=campaign)
                ps = Pair.objects.filter(campaign=campaign, judgment_count__gt=0)
            else:
                js = Judgment.objects.filter(pair__query_id__in=chunk, unsure=False)
                ad = Adjudication.objects.filter(pair__query_id__in=chunk)
                ps = Pair.objects.filter(query_id__in=chunk, judgment_count__gt=0)
            jrows.extend(_rows(js.order_by().values_list("pair_id", "grade__value")))
            adj.extend(ad.order_by().values_list("pair_id", "grade__value"))
            pair_rows.extend(_rows(ps.order_by().values_list("id", "query_id", "document_id")))
            pair_rows.extend(ad.order_by().values_list("pair_id", "pair__query_id", "pair__document_id"))
        j = np.array(jrows, dtype=np.int64).reshape(-1, 2)
        keys, labels = aggregate_grades(j[:, 0], j[:, 1], policy=policy)
        if adj:
            a = np.array(adj, dtype=np.int64)
            keys = np.concatenate([keys, a[:, 0]])
            labels = np.concatenate([labels, a[:, 1]])
            # the adjudications (appended last) win: keep each key's last occurrence
            rev_keys, first = np.unique(keys[::-1], return_index=True)
            keys, labels = rev_keys, labels[::-1][first]
        pr = np.unique(np.array(pair_rows, dtype=np.int64).reshape(-1, 3), axis=0)
        idx = np.searchsorted(pr[:, 0], keys)
        arr = np.column_stack([pr[idx, 1], pr[idx, 2], labels]) if keys.size else np.empty((0, 3), np.int64)
    q, d, lab = arr[:, 0], arr[:, 1], arr[:, 2]
    order = np.lexsort((d, q))
    return q[order], d[order], lab[order]


class _KeyIndex:
    """A read-only hash table from unique non-negative int64 keys to int8 values, built and probed with
    whole-array operations (open addressing, linear probing, load factor <= 1/8).

    numpy has no hash map, and a binary search of each of 10M ranked (query, document) keys among
    150,000 labels was the slowest step of a cold leaderboard; one multiply-shift and one gather per key
    answer almost every probe here, and only the few that land on another key's slot probe again.
    """

    _MULT = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the top bits of key * 2^64 / phi

    def __init__(self, keys: np.ndarray, values: np.ndarray):
        self.bits = max(4, int(np.ceil(np.log2(max(keys.size, 1) * 8))))
        size = 1 << self.bits
        self.keys = np.full(size, -1, dtype=np.int64)
        self.values = np.zeros(size, dtype=np.int8)
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        pending = np.arange(keys.size)
        slot = self._hash(keys)
        while pending.size:
            free = self.keys[slot] == -1
            # among the keys that found a free slot, the first one per slot takes it; the rest move on
            taken, first = np.unique(slot[free], return_index=True)
            winners = pending[free][first]
            self.keys[taken] = keys[winners]
            self.values[taken] = values[winners]
            placed = np.zeros(pending.size, bool)
            placed[np.flatnonzero(free)[first]] = True
            pending, slot = pending[~placed], (slot[~placed] + 1) & (size - 1)

    def _hash(self, keys: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return ((keys.view(np.uint64) * self._MULT) >> np.uint64(64 - self.bits)).astype(np.intp)

    def get(self, probe: np.ndarray, missing: int) -> np.ndarray:
        """The value of each probe key, ``missing`` for keys not in the table (any shape)."""
        flat = np.ascontiguousarray(probe, dtype=np.int64).reshape(-1)
        mask = len(self.keys) - 1
        slot = self._hash(flat)
        found = self.keys[slot]
        hit = found == flat
        out = np.where(hit, self.values[slot], np.int8(missing))
        idx = np.flatnonzero(~hit & (found != -1))
        slot = (slot[idx] + 1) & mask
        while idx.size:
            found = self.keys[slot]
            hit = found == flat[idx]
            out[idx[hit]] = self.values[slot[hit]]
            go_on = ~hit & (found != -1)
            idx, slot = idx[go_on], (slot[go_on] + 1) & mask
        return out.reshape(probe.shape)


def score_queries(cube: RunCube, q_idx: np.ndarray, labels: tuple[np.ndarray, ...], params: Params):
    """Score the queries at positions ``q_idx`` of the cube: (M, S, len(q_idx)) scores and a labelled mask."""
    lq, ld, lab = labels
    q_idx = np.asarray(q_idx)
    # q_idx is ascending: all of it means the whole cube, which need not be copied
    everything = len(q_idx) == len(cube.query_ids)
    sub = cube.doc_ids if everything else cube.doc_ids[:, q_idx, :]  # (S, Qd, D)
    qids = cube.query_ids[q_idx]
    keep = np.isin(lq, qids)
    lq, ld, lab = lq[keep], ld[keep], lab[keep]
    # int8 labels: grades are 0..100 and metrics is fastest on the smallest dtype
    if lq.size:
        index = _KeyIndex((lq << 32) | ld, lab.astype(np.int8))
        probe = np.maximum(sub, 0)  # padding (-1) becomes document 0, which no label has
        probe |= (qids << 32)[None, :, None]
        grid = index.get(probe, metrics.UNJUDGED)
        del probe
    else:
        grid = np.full(sub.shape, metrics.UNJUDGED, dtype=np.int8)
    grid[sub < 0] = metrics.PAD
    # qrels rows: every label of each query, padded with UNJUDGED
    q_of_label = np.searchsorted(qids, lq)
    counts = np.bincount(q_of_label, minlength=len(qids)) if lq.size else np.zeros(len(qids), np.int64)
    width = max(int(counts.max()) if counts.size else 0, 1)
    qrels = np.full((len(qids), width), metrics.UNJUDGED, dtype=np.int8)
    if lq.size:
        starts = np.cumsum(counts) - counts
        qrels[q_of_label, np.arange(lq.size) - starts[q_of_label]] = lab
    result = metrics.evaluate(
        grid, qrels, k=params.k, threshold=params.threshold, gain=params.gain, judged_only=params.judged_only
    )
    names = measure_names(params.k)
    return np.stack([result[n] for n in names]), counts > 0


# --------------------------------------------------------------------------- the cached leaderboard


def _table_key(campaign: Campaign, cube: RunCube, params: Params) -> str:
    raw = repr(
        (cube.key, params.k, params.gain, params.threshold, params.judged_only, params.policy or campaign.aggregation)
    )
    return f"reljudge:lb:{campaign.pk}:{hashlib.sha256(raw.encode()).hexdigest()[:24]}"


def leaderboard(campaign: Campaign, params: Params | None = None) -> Leaderboard:
    """Current per-query scores of every system, rescoring only queries whose labels moved."""
    started = time.perf_counter()
    params = (params or Params()).validate()
    cube = run_cube(campaign)
    versions = np.array(
        [v for (v,) in _rows(Query.objects.filter(campaign=campaign).order_by("id").values_list("labels_version"))],
        dtype=np.int64,
    )
    n_q, n_m = len(cube.query_ids), len(measure_names(params.k))
    key = _table_key(campaign, cube, params)
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
        labels = labels_for(campaign, cube.query_ids[dirty], params.policy, total=n_q)
        scores, labelled = score_queries(cube, dirty, labels, params)
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
        # one transaction: the database cache would otherwise commit (and sync to disk) once per block
        with transaction.atomic() if isinstance(caches["default"], DatabaseCache) else nullcontext():
            cache.set_many(blocks, timeout=CACHE_SECONDS)
    with _LOCK:
        _SCORES[key] = table
    return Leaderboard(
        campaign,
        params,
        cube,
        table,
        measure_names(params.k),
        rescored=int(dirty.size),
        key=key,
        seconds=time.perf_counter() - started,
    )


def leaderboard_data(
    *,
    campaign: Campaign,
    k: int = 10,
    gain: str = "linear",
    threshold: int = 1,
    judged_only: bool = False,
    policy: str | None = None,
    per_query: bool = True,
) -> dict:
    """The SPEC §4 JSON shape shared by `scores --json` and the API."""
    lb = leaderboard(campaign, Params(k=k, gain=gain, threshold=threshold, judged_only=judged_only, policy=policy))
    means = lb.means()
    names = lb.measures
    qids = lb.scored_qids()
    systems = []
    for s, name in enumerate(lb.cube.system_names):
        entry = {"name": name, "measures": {m: float(means[i, s]) for i, m in enumerate(names)}}
        if per_query:
            values = lb.table.scores[:, s][:, lb.table.labelled].T.tolist()  # (Q_scored, M)
            entry["per_query"] = {q: dict(zip(names, row, strict=True)) for q, row in zip(qids, values, strict=True)}
        systems.append(entry)
    return {
        "campaign": campaign.slug,
        "k": k,
        "gain": gain,
        "threshold": threshold,
        "judged_only": judged_only,
        "policy": policy or campaign.aggregation,
        "queries": len(qids),
        "systems": systems,
    }


# --------------------------------------------------------------------------- statistics over the scores

ALPHA = 0.05
TESTS = {
    "randomization": "paired randomization test, Holm-corrected",
    "ttest": "paired t-test, Holm-corrected",
    "tukey": "randomized Tukey HSD (controls the familywise error itself)",
}


@dataclass
class RankingStats:
    """Confidence intervals of one measure's means and the tests of every system against the best."""

    measure: str
    state: str  # Leaderboard.state the numbers were computed from
    means: np.ndarray  # (S,)
    ci_low: np.ndarray  # (S,) 95% percentile bootstrap CI of the mean over queries
    ci_high: np.ndarray
    best: int  # index of the system with the highest mean (-1 without systems)
    p_vs_best: np.ndarray  # (S,) Holm-adjusted p-values of best vs each other system; NaN for the best
    n_queries: int
    n_resamples: int
    n_permutations: int
    alpha: float = ALPHA
    computed_at: datetime = field(default_factory=timezone.now)
    seconds: float = 0.0

    @property
    def worse(self) -> np.ndarray:
        """(S,) bool: significantly worse than the best at ``alpha``."""
        return np.nan_to_num(self.p_vs_best, nan=1.0) < self.alpha


@dataclass
class PairwiseStats:
    """Every pair of systems on one measure: mean differences and adjusted p-values."""

    measure: str
    test: str
    state: str
    diff: np.ndarray  # (S, S) mean of row minus mean of column
    p: np.ndarray  # (S, S) adjusted p-values, NaN on the diagonal
    n_queries: int
    alpha: float = ALPHA
    computed_at: datetime = field(default_factory=timezone.now)
    seconds: float = 0.0


def ranking_stats(
    lb: Leaderboard, measure: str, *, n_resamples: int = 2000, n_permutations: int = 5000, seed: int = 0
) -> RankingStats:
    """95% bootstrap CIs of every system's mean ``measure`` and a paired randomization test of the best
    system against each other one, Holm-corrected over those S - 1 comparisons.

    Fixed seeds: the same labels always give the same intervals and p-values.
    """
    started = time.perf_counter()
    x = lb.per_query(measure)  # (S, Q)
    n_sys, n_q = x.shape
    nan = np.full(n_sys, np.nan)
    means = x.mean(axis=1) if n_q else np.zeros(n_sys)
    best = int(np.argmax(means)) if n_sys else -1
    low, high, p_best = nan.copy(), nan.copy(), nan.copy()
    if n_q:
        low, high = metrics.bootstrap_ci(x, n_resamples=n_resamples, confidence=0.95, seed=seed)
        low, high = np.atleast_1d(low), np.atleast_1d(high)
    if n_q and n_sys > 1:
        p = metrics.permutation_test_matrix(x, n_permutations=n_permutations, seed=seed)
        others = np.arange(n_sys) != best
        p_best[others] = metrics.holm(p[best, others])
    return RankingStats(
        measure,
        lb.state,
        means,
        low,
        high,
        best,
        p_best,
        n_q,
        n_resamples,
        n_permutations,
        seconds=time.perf_counter() - started,
    )


def pairwise_stats(
    lb: Leaderboard, measure: str, *, test: str = "randomization", n_permutations: int = 5000, seed: int = 0
) -> PairwiseStats:
    """All S(S-1)/2 comparisons of one measure with the chosen test (see ``TESTS``)."""
    if test not in TESTS:
        raise ValueError(f"test must be one of {', '.join(TESTS)}")
    started = time.perf_counter()
    x = lb.per_query(measure)
    n_sys, n_q = x.shape
    means = x.mean(axis=1) if n_q else np.zeros(n_sys)
    diff = means[:, None] - means[None, :]
    p = np.full((n_sys, n_sys), np.nan)
    if n_q and n_sys > 1:
        if test == "randomization":
            p = metrics.holm(metrics.permutation_test_matrix(x, n_permutations=n_permutations, seed=seed))
        elif test == "tukey":
            p = metrics.tukey_hsd_randomized(x, n_permutations=n_permutations, seed=seed)
        else:
            _, raw = metrics.paired_ttest(x[:, None, :], x[None, :, :])
            raw = np.array(raw, dtype=np.float64)
            np.fill_diagonal(raw, np.nan)
            p = metrics.holm(raw, symmetric=True)
    return PairwiseStats(measure, test, lb.state, diff, p, n_q, seconds=time.perf_counter() - started)


def _stats_key(lb: Leaderboard, what: str) -> str:
    return f"{lb.key}:stats:{hashlib.sha256(what.encode()).hexdigest()[:16]}"


def stats_cached(lb: Leaderboard, measure: str) -> RankingStats | None:
    """The last ranking statistics computed for these parameters, current or not (compare ``.state``)."""
    got = cache.get(_stats_key(lb, f"rank:{measure}"))
    return got if isinstance(got, RankingStats) else None


def stats_refresh(lb: Leaderboard, measure: str) -> RankingStats:
    """Compute the ranking statistics of the current scores and share them with every process."""
    stats = ranking_stats(lb, measure)
    cache.set(_stats_key(lb, f"rank:{measure}"), stats, timeout=CACHE_SECONDS)
    return stats


def pairwise_cached(lb: Leaderboard, measure: str, test: str) -> PairwiseStats:
    """The pairwise matrix of the current scores, computed on the first request for this labels state."""
    key = _stats_key(lb, f"pairs:{measure}:{test}")
    got = cache.get(key)
    if isinstance(got, PairwiseStats) and got.state == lb.state:
        return got
    stats = pairwise_stats(lb, measure, test=test)
    cache.set(key, stats, timeout=CACHE_SECONDS)
    return stats


# --------------------------------------------------------------------------- reads for the drill-down pages


@dataclass
class QueryRankings:
    """One query's ranked lists: every system's documents with their labels, for the drill-down page."""

    doc_ids: np.ndarray  # (S, D) document pks, -1 after the end of a run
    labels: np.ndarray  # (S, D) label, metrics.UNJUDGED, or metrics.PAD
    unsure: set[int]  # documents someone was unsure about that have no label
    documents: dict[int, tuple[str, str, str]]  # pk -> (docid, title, url) of every document shown
    qrels: list[tuple[int, int]]  # (document pk, label) of every labelled document, best first
    unretrieved: list[tuple[int, int]]  # labelled relevant documents no shown system retrieved in the depth


def query_rankings(lb: Leaderboard, q: int, *, depth: int, systems: np.ndarray | None = None) -> QueryRankings:
    """The top ``depth`` of the chosen systems (indices, default all) for the query at cube position ``q``.

    A handful of queries whatever the size: the query's labels (under the leaderboard's policy), its
    unsure pairs, and the titles of the documents on the page.
    """
    cube = lb.cube
    sel = np.arange(len(cube.system_ids)) if systems is None else np.asarray(systems, dtype=np.intp)
    docs = cube.doc_ids[sel, q, :depth]
    query_id = int(cube.query_ids[q])
    lq, ld, lab = labels_for(lb.campaign, np.array([query_id]), lb.params.policy, total=len(cube.query_ids))
    order = np.argsort(ld)
    ld, lab = ld[order], lab[order]
    if ld.size:
        pos = np.minimum(np.searchsorted(ld, docs), ld.size - 1)
        labels = np.where(ld[pos] == docs, lab[pos], metrics.UNJUDGED)
    else:
        labels = np.full(docs.shape, metrics.UNJUDGED)
    labels = np.where(docs >= 0, labels, metrics.PAD)
    unsure = set(
        Judgment.objects.filter(pair__query_id=query_id, unsure=True)
        .order_by()
        .values_list("pair__document_id", flat=True)
        .distinct()
    ) - set(ld.tolist())
    by_label = np.lexsort((ld, -lab))
    qrels = list(zip(ld[by_label].tolist(), lab[by_label].tolist(), strict=True))
    retrieved = set(docs[docs >= 0].tolist())
    unretrieved = [(d, g) for d, g in qrels if g >= lb.params.threshold and d not in retrieved]
    wanted = retrieved | {d for d, _ in qrels}
    rows = Document.objects.filter(id__in=wanted).order_by().values_list("id", "docid", "title", "url")
    documents = {pk: (docid, title, url) for pk, docid, title, url in rows}
    return QueryRankings(docs, labels, unsure, documents, qrels, unretrieved)


@dataclass
class Timeline:
    """Judgments over time for the progress chart."""

    times: list[datetime]
    cumulative: list[int]
    bucket: str  # "hour" or "day"
    goal: int  # pooled pairs times annotators per pair


def judging_timeline(campaign: Campaign) -> Timeline:
    """Cumulative count of judgments (first judgments of a pair by an annotator, when they were made) per
    hour when judging spans up to three days, per day otherwise. Three small aggregate queries."""
    judgments = Judgment.objects.filter(pair__campaign=campaign)
    span = judgments.aggregate(first=Min("created_at"), last=Max("created_at"))
    goal = Pair.objects.filter(campaign=campaign, pooled=True).count() * campaign.redundancy
    if span["first"] is None:
        return Timeline([], [], "day", goal)
    bucket = "hour" if span["last"] - span["first"] <= timedelta(days=3) else "day"
    trunc = TruncHour if bucket == "hour" else TruncDay
    rows = list(
        judgments.annotate(t=trunc("created_at"))
        .values("t")
        .annotate(n=Count("id"))
        .order_by("t")
        .values_list("t", "n")
    )
    times = [t for t, _ in rows]
    cumulative = np.cumsum([n for _, n in rows]).tolist()
    return Timeline(times, cumulative, bucket, goal)
