"""The run cube: every system's ranked lists as one (systems x queries x depth) array, and the labels that index it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from django.db import connections
from django.db.models import QuerySet
from django.utils.translation import gettext

import metrics
from judging import runtime
from judging.aggregation import aggregate_grades
from judging.compiled import compiled_sql, int_slot
from judging.errors import RequestError
from judging.models import Adjudication, AnnotatorProfile, Campaign, Judgment, Pair, Query, QueryTag, Ranking, System
from judging.pgcopy import pg_type
from judging.scoring import cube_file

logger = logging.getLogger(__name__)

_LOCK = threading.Lock()


_CUBES: dict[tuple[object, ...], RunCube] = runtime.keep(
    "scoring.run_cubes",
    {},
    bound=None,
    grows_with="campaign (its newest runs state only)",
    invalidated_by="the campaign's runs state (a run imported or deleted): the older cube is dropped",
    lock=_LOCK,
)


@dataclass
class RunCube:
    """Every system's ranking of every query of a campaign, as document ids; -1 pads short runs."""

    key: tuple[object, ...]
    system_ids: np.ndarray
    system_names: list[str]
    query_ids: np.ndarray  # (Q,) every query of the campaign, ascending id
    qids: list[str]
    doc_ids: np.ndarray  # (S, Q, D) int64
    guard: cube_file.MappedFile | None = None  # the cube file doc_ids maps: used only while it keeps its size

    @cached_property
    def answered(self) -> np.ndarray:
        """(S, Q) bool: the system returned at least one document for the query."""
        return self.doc_ids[:, :, 0] >= 0


def cursor_rows(qs: QuerySet[Any, Any]) -> list[tuple[Any, ...]]:
    """The rows of a ``values_list`` queryset straight from the database cursor.

    Callers clear the models' default ordering (``order_by()``): Pair and Ranking order by related models,
    which joins three more tables and sorts every row.

    The ORM's per-row conversion costs a few microseconds a row: a third of a cold leaderboard when it
    reads 100,000 rankings and 150,000 labels. The columns read here need no conversion (integers and
    bytes; BinaryField values may come back as memoryview, which every caller passes through bytes()).

    On PostgreSQL the rows come through binary COPY (``COPY (query) TO STDOUT (FORMAT BINARY)``) where every
    column has a binary COPY type: Django's cursor binds parameters client-side and reads results as text, which
    sends a ``bytea`` column as hex, twice its size, for psycopg to decode. A cold leaderboard at 100M entries
    reads 800 MB of rankings: 8.4 s as text, 3.1 s through COPY (bench/scale_bench.py's cold start).
    tests/judging/test_cube_read.py checks these rows against the ORM's.
    """
    compiler = qs.query.get_compiler(using=qs.db)
    sql, params = compiler.as_sql()
    db = connections[qs.db]
    types = copy_types(compiler) if db.vendor == "postgresql" else None
    with db.cursor() as cursor:
        if types is None:
            cursor.execute(sql, params)
            rows: list[tuple[Any, ...]] = cursor.fetchall()
            return rows
        statement = f"COPY ({sql}) TO STDOUT (FORMAT BINARY)"
        with _logged(cursor, statement, params), cursor.cursor.copy(statement, params) as copy:
            copy.set_types(types)
            return list(copy.rows())


# The column types read through COPY: those psycopg loads from binary as the text cursor gives them to Django. Not
# JSON (binary gives the parsed value where Django reads the text: tests/judging/test_cube_read.py) nor timestamps
# (their loaders are Django's own): no caller reads them here.
_COPY_READ = frozenset({"int8", "int4", "int2", "bytea", "text", "bool", "float8"})


def copy_types(compiler: Any) -> list[str] | None:
    """The binary COPY type of each column the compiled query selects (its ``select``, filled by ``as_sql``), or
    None when one has none that reads as the text cursor's (judging.pgcopy.pg_type, _COPY_READ)."""
    try:
        types = [pg_type(col.output_field.db_type(compiler.connection)) for col, _, _ in compiler.select]
    except (ValueError, AttributeError):
        return None
    return types if _COPY_READ.issuperset(types) else None


@contextmanager
def _logged(cursor: Any, sql: str, params: Any) -> Iterator[None]:
    """Log ``sql`` as Django's debug cursor logs what it runs (connection.queries, CaptureQueriesContext): a
    COPY runs on the driver's cursor, past the wrapper that logs."""
    debug_sql = getattr(cursor, "debug_sql", None)
    if debug_sql is None:
        yield
        return
    with debug_sql(sql, params):
        yield


def systems_key(campaign: Campaign) -> tuple[object, ...]:
    """What the campaign's run cube depends on: its systems (by name) and its queries, read at every leaderboard
    request and queue list by one compiled statement (judging.compiled: the two ORM queries it replaces took
    2.7 ms of a leaderboard request at 20 systems x 5,000 queries, most of it building them)."""
    rows = compiled_sql(("runs_key",), _systems_key_sql).rows({"campaign_id": campaign.pk})
    # names too: the cube file keeps them, and a renamed system must not come back under its old name
    systems = tuple((int(r[1]), r[3], r[4]) for r in rows if r[0] == 0)
    queries = next((None if r[1] is None else int(r[1]), int(r[2])) for r in rows if r[0] == 1)
    # created_at tells a campaign from a deleted one whose ids the database handed out again
    return (campaign.pk, campaign.created_at.isoformat(), systems, queries)


def _systems_key_sql() -> tuple[str, tuple[Any, ...]]:
    """The campaign's systems (id, fingerprint, name; by name) then one line of its queries' largest id and
    count: what ``System.objects.filter(campaign=...).order_by("name")`` and an aggregate of its queries read."""
    system, query = System._meta.db_table, Query._meta.db_table
    sql = (
        f"SELECT 0, id, 0, fingerprint, name FROM {system} WHERE campaign_id = %s UNION ALL "
        f"SELECT 1, MAX(id), COUNT(id), '', '' FROM {query} WHERE campaign_id = %s ORDER BY 1, 5"
    )
    return sql, (int_slot("campaign_id"), int_slot("campaign_id"))


def run_cube(campaign: Campaign) -> RunCube:
    """The campaign's run cube at its current runs state: this process's copy, else the machine's cube file
    mapped read-only (judging.scoring.cube_file), else read from the database (and written to that file, one
    process of the machine at a time)."""
    key = systems_key(campaign)
    with _LOCK:
        cube = _CUBES.get(key)
    if cube is not None and (cube.guard is None or cube.guard.sound()):
        return cube
    folder = cube_file.cube_dir()
    if folder is None:
        cube = cube_read(campaign, key)
    else:
        digest = cube_file.state_digest(key)
        found = cube_file.cube_load(folder, campaign.pk, digest)
        if found is None:
            with cube_file.build_lock(folder, campaign.pk):
                # another worker may have built it while this one waited for the lock
                found = cube_file.cube_load(folder, campaign.pk, digest)
                if found is None:
                    cube = cube_read(campaign, key)
                    found = cube_file.cube_save(
                        folder,
                        campaign.pk,
                        digest,
                        system_ids=cube.system_ids,
                        system_names=cube.system_names,
                        query_ids=cube.query_ids,
                        qids=cube.qids,
                        doc_ids=cube.doc_ids,
                    )
        if found is not None:
            cube = RunCube(
                key, found.system_ids, found.system_names, found.query_ids, found.qids, found.doc_ids, found.guard
            )
    assert cube is not None
    with _LOCK:
        # runs are immutable per key; keep only the newest cube per campaign
        for old in [k for k in _CUBES if k[0] == campaign.pk]:
            del _CUBES[old]
        _CUBES[key] = cube
    return cube


def cube_read(campaign: Campaign, key: tuple[object, ...]) -> RunCube:
    """The run cube read from the database's rankings."""
    started = time.perf_counter()
    systems = list(System.objects.filter(campaign=campaign).order_by("name").values_list("id", "name"))
    query_rows = list(Query.objects.filter(campaign=campaign).order_by("id").values_list("id", "qid"))
    system_ids = np.array([s[0] for s in systems], dtype=np.int64)
    query_ids = np.array([q[0] for q in query_rows], dtype=np.int64)
    rows = cursor_rows(
        Ranking.objects.filter(system__campaign=campaign)
        .order_by()
        .values_list("system_id", "query_id", "length", "doc_ids")
    )
    lengths = np.array([r[2] for r in rows], dtype=np.int64)
    depth = max(int(lengths.max()) if lengths.size else 1, 1)
    n_s, n_q = len(systems), len(query_ids)
    # Every (system, query) cell's ranking, padded with -1 (eight 0xff bytes) to the depth, in the cube's order:
    # joined, the bytes are the cube. Writing the rankings into an array of -1 first cost a second pass over its
    # 800 MB at 100M entries (2.6 s of a cold start).
    cell_row = np.full(n_s * n_q, len(rows), dtype=np.int64)  # a cell without a ranking: the empty one
    if rows:
        # systems are ordered by name, so their ids are not sorted: search through a sorter
        by_id = np.argsort(system_ids)
        s_idx = by_id[np.searchsorted(system_ids, np.array([r[0] for r in rows], dtype=np.int64), sorter=by_id)]
        q_idx = np.searchsorted(query_ids, np.array([r[1] for r in rows], dtype=np.int64))
        cell_row[s_idx * n_q + q_idx] = np.arange(len(rows))
    docs = [bytes(r[3]) for r in rows] + [b""]
    missing = (depth - np.append(lengths, 0)[cell_row]).tolist()
    pads = {n: b"\xff" * (8 * n) for n in set(missing)}
    pieces = [b for i, n in zip(cell_row.tolist(), missing, strict=True) for b in (docs[i], pads[n])]
    del docs
    doc_ids = np.frombuffer(b"".join(pieces), dtype=np.int64).reshape(n_s, n_q, depth)
    del pieces
    del rows
    cube = RunCube(key, system_ids, [s[1] for s in systems], query_ids, [q[1] for q in query_rows], doc_ids)
    logger.info(
        "run cube of %s read: %d systems x %d queries x %d ranks in %.2f s",
        campaign.slug,
        *doc_ids.shape,
        time.perf_counter() - started,
    )
    return cube


def cubes_clear() -> None:
    """Forget every run cube read by this process (for tests and benchmarks)."""
    with _LOCK:
        _CUBES.clear()


def segment_mask(campaign: Campaign, cube: RunCube, segment: str) -> np.ndarray:
    """(Q,) bool over the cube's queries: the query carries the tag. ValueError for a tag no query has."""
    ids = np.fromiter(
        QueryTag.objects.filter(query__campaign=campaign, tag=segment).order_by().values_list("query_id", flat=True),
        dtype=np.int64,
    )
    if ids.size == 0:
        raise RequestError(
            "segment", gettext("segment: no query of this campaign has the tag %(tag)r") % {"tag": segment[:100]}
        )
    return np.isin(cube.query_ids, ids)


def _query_chunks(campaign: Campaign, query_ids: np.ndarray, total: int | None = None) -> list[list[int] | None]:
    """Filters for reading these queries' rows: None (the whole campaign) when most queries are wanted."""
    if total is None:
        total = Query.objects.filter(campaign=campaign).count()
    if len(query_ids) * 2 >= total:
        return [None]
    ids = np.asarray(query_ids).tolist()
    return [ids[i : i + 5000] for i in range(0, len(ids), 5000)]


# Ranked entries probed at a time by label_arrays: every temporary of a probe (keys, slots, hits) is a few bytes per
# entry, and at 16 MB or less the allocator reuses its memory from block to block. Probing the 100M entries of a cold
# leaderboard in one piece made temporaries of 800 MB each, every page of them faulted in afresh.
PROBE_ENTRIES = 1 << 21

LABEL_SOURCES = ("humans", "model:NAME", "hybrid:NAME")


def label_source_judge(labels: str) -> tuple[str, str | None]:
    """Split a label source into its kind and model judge name: "humans", "model:NAME" or "hybrid:NAME"
    (human label where one exists, the model's otherwise). ValueError for anything else."""
    if labels == "humans":
        return "humans", None
    kind, sep, name = (labels or "").partition(":")
    if not sep or kind not in ("model", "hybrid") or not name.strip():
        raise RequestError("labels", f"labels must be one of {', '.join(LABEL_SOURCES)}, not {labels!r}")
    return kind, name.strip()


def labels_for(
    campaign: Campaign,
    query_ids: np.ndarray,
    policy: str | None,
    *,
    total: int | None = None,
    labels: str = "humans",
) -> tuple[np.ndarray, ...]:
    """(query_id, document_id, label) arrays of the labelled pairs of these queries, sorted by key.

    The campaign's own policy reads the stored labels; another policy aggregates the confident
    judgments afresh (an adjudication still wins). ``total`` (the campaign's number of queries) saves a
    count when the caller knows it. Either way only human judgments count, unless ``labels`` names a
    model judge: "model:NAME" scores its confident grades alone, "hybrid:NAME" the human label where
    one exists and the model's elsewhere.
    """
    kind, name = label_source_judge(labels)
    chunks = _query_chunks(campaign, query_ids, total)
    if kind == "humans":
        arr = _human_labels(campaign, chunks, policy)
    else:
        judge = (
            AnnotatorProfile.objects.filter(kind=AnnotatorProfile.Kind.MODEL, user__username=name)
            .values_list("user_id", flat=True)
            .first()
        )
        if judge is None:
            raise RequestError("labels", f"no model judge named {name!r}")
        model_rows: list[tuple[int, int, int]] = []
        for chunk in chunks:
            js = Judgment.objects.filter(annotator_id=judge, unsure=False)
            js = js.filter(pair__campaign=campaign) if chunk is None else js.filter(pair__query_id__in=chunk)
            model_rows.extend(
                cursor_rows(js.order_by().values_list("pair__query_id", "pair__document_id", "grade__value"))
            )
        arr = np.array(model_rows, dtype=np.int64).reshape(-1, 3)
        if kind == "hybrid":
            human = _human_labels(campaign, chunks, policy)
            have = np.isin(metrics.pair_keys(arr[:, 0], arr[:, 1]), metrics.pair_keys(human[:, 0], human[:, 1]))
            arr = np.concatenate([human, arr[~have]])
    q, d, lab = arr[:, 0], arr[:, 1], arr[:, 2]
    order = np.lexsort((d, q))
    return q[order], d[order], lab[order]


def _human_labels(campaign: Campaign, chunks: list[list[int] | None], policy: str | None) -> np.ndarray:
    """(n, 3) rows (query_id, document_id, label) aggregated from human judgments, unsorted."""
    # A chunk of query ids implies the campaign: filtering on the campaign as well can make the planner
    # (PostgreSQL before its first ANALYZE of a freshly imported table) scan the whole campaign's pairs.
    if policy is None or policy == campaign.aggregation:
        rows: list[tuple[int, int, int]] = []
        for chunk in chunks:
            if chunk is None:
                qs = Pair.objects.filter(campaign=campaign, label__isnull=False)
            else:
                qs = Pair.objects.filter(query_id__in=chunk, label__isnull=False)
            rows.extend(cursor_rows(qs.order_by().values_list("query_id", "document_id", "label")))
        arr = np.array(rows, dtype=np.int64).reshape(-1, 3)
    else:
        model_judges = AnnotatorProfile.model_user_ids()
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
            if model_judges:
                js = js.exclude(annotator_id__in=model_judges)
            jrows.extend(cursor_rows(js.order_by().values_list("pair_id", "grade__value")))
            adj.extend(ad.order_by().values_list("pair_id", "grade__value"))
            pair_rows.extend(cursor_rows(ps.order_by().values_list("id", "query_id", "document_id")))
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
    return arr


def label_arrays(
    cube: RunCube, q_idx: np.ndarray, labels: tuple[np.ndarray, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The metrics inputs of the queries at positions ``q_idx`` of the cube.

    Returns the ranked labels (S, len(q_idx), D) int8 (``metrics.UNJUDGED`` for unjudged documents,
    ``metrics.PAD`` after the end of a run), the qrels rows (len(q_idx), M) padded with UNJUDGED, the
    document ids (S, len(q_idx), D) and each query's number of labels.
    """
    lq, ld, lab = labels
    q_idx = np.asarray(q_idx)
    # q_idx is ascending: all of it means the whole cube, which need not be copied
    everything = len(q_idx) == len(cube.query_ids)
    sub = cube.doc_ids if everything else cube.doc_ids[:, q_idx, :]  # (S, Qd, D)
    qids = cube.query_ids[q_idx]
    keep = np.isin(lq, qids)
    lq, ld, lab = lq[keep], ld[keep], lab[keep]
    # int8 labels: grades are 0..100 and metrics is fastest on the smallest dtype
    grid = np.empty(sub.shape, dtype=np.int8)
    index = _KeyIndex(metrics.pair_keys(lq, ld), lab.astype(np.int8)) if lq.size else None
    n_s, n_q, depth = sub.shape
    step = max(1, PROBE_ENTRIES // max(n_s * depth, 1))
    for start in range(0, n_q, step):  # over blocks of queries: temporaries of PROBE_ENTRIES entries
        part = sub[:, start : start + step]
        if index is not None:
            # padding (-1) becomes document 0, which no label has
            probe = metrics.pair_keys(qids[start : start + step][None, :, None], np.maximum(part, 0))
            block = index.get(probe, metrics.UNJUDGED)
        else:
            block = np.full(part.shape, metrics.UNJUDGED, dtype=np.int8)
        block[part < 0] = metrics.PAD
        grid[:, start : start + step] = block
    # qrels rows: every label of each query, padded with UNJUDGED
    q_of_label = np.searchsorted(qids, lq)
    counts = np.bincount(q_of_label, minlength=len(qids)) if lq.size else np.zeros(len(qids), np.int64)
    width = max(int(counts.max()) if counts.size else 0, 1)
    qrels = np.full((len(qids), width), metrics.UNJUDGED, dtype=np.int8)
    if lq.size:
        starts = np.cumsum(counts) - counts
        qrels[q_of_label, np.arange(lq.size) - starts[q_of_label]] = lab
    return grid, qrels, sub, counts


class _KeyIndex:
    """A read-only hash table from unique non-negative int64 keys to int8 values, built and probed with
    whole-array operations (open addressing, linear probing, load factor <= 1/8).

    numpy has no hash map, and a binary search of each of 10M ranked (query, document) keys among
    150,000 labels was the slowest step of a cold leaderboard; one multiply-shift and one gather per key
    answer almost every probe here, and only the few that land on another key's slot probe again.
    """

    _MULT = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the top bits of key * 2^64 / phi

    def __init__(self, keys: np.ndarray, values: np.ndarray) -> None:
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
