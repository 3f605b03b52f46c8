"""DB -> arrays -> metrics -> leaderboard: the bridge between stored runs and labels and metrics/.

Runs are fixed once imported, so each process keeps a campaign's run cube (systems x queries x depth
document ids) keyed by the systems' content fingerprints. Labels change all the time: per-query scores
are cached per parameter set, each block stamped with the labels versions of its queries, in Django's
cache (shared by every server process) and in process memory. A request reads the versions (one small
query), rescores only the queries whose version moved, and averages.
"""
from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field

import numpy as np
from django.core.cache import cache
from django.db.models import Max
from django.utils import timezone

import metrics
from judging.aggregation import POLICIES, aggregate_grades
from judging.models import Adjudication, Campaign, Judgment, Pair, Query, Ranking, System

GAINS = ("linear", "exponential")
BLOCK = 256  # queries per shared-cache entry: a new label rewrites one small block, not the whole table
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
    computed_at: object = field(default_factory=timezone.now)
    rescored: int = 0

    @property
    def query_mask(self) -> np.ndarray:
        return self.table.labelled

    def per_query(self, measure: str) -> np.ndarray:
        """(S, Q_scored) per-query values of one measure over the mean's query set."""
        return self.table.scores[self.measures.index(measure)][:, self.table.labelled]

    def means(self) -> np.ndarray:
        """(M, S) macro means over the queries that have a label (trec_eval -c)."""
        n = int(self.table.labelled.sum())
        if n == 0:
            return np.zeros(self.table.scores.shape[:2])
        return self.table.scores[:, :, self.table.labelled].mean(axis=2)

    def scored_qids(self) -> list[str]:
        return [q for q, m in zip(self.cube.qids, self.table.labelled, strict=True) if m]


# --------------------------------------------------------------------------- loading

def _systems_key(campaign: Campaign) -> tuple:
    systems = tuple(System.objects.filter(campaign=campaign).order_by("name").values_list("id", "fingerprint"))
    queries = Query.objects.filter(campaign=campaign).aggregate(n=Max("id"))["n"], Query.objects.filter(
        campaign=campaign).count()
    # created_at tells a campaign from a deleted one whose ids the database handed out again
    return (campaign.pk, campaign.created_at.isoformat(), systems, queries)


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
    sys_col, q_col, lengths, blobs = [], [], [], []
    for sid, qid, length, raw in Ranking.objects.filter(system__campaign=campaign).values_list(
        "system_id", "query_id", "length", "doc_ids"
    ).iterator(chunk_size=10000):
        sys_col.append(sid)
        q_col.append(qid)
        lengths.append(length)
        blobs.append(raw)
    lengths_a = np.array(lengths, dtype=np.int64)
    depth = int(lengths_a.max()) if lengths_a.size else 1
    doc_ids = np.full((len(systems), len(query_ids), max(depth, 1)), -1, dtype=np.int64)
    if lengths_a.size:
        flat = np.frombuffer(b"".join(bytes(b) for b in blobs), dtype=np.int64)
        s_idx = np.searchsorted(system_ids, np.array(sys_col, dtype=np.int64))
        q_idx = np.searchsorted(query_ids, np.array(q_col, dtype=np.int64))
        starts = np.cumsum(lengths_a) - lengths_a
        rank = np.arange(flat.size) - np.repeat(starts, lengths_a)
        doc_ids[np.repeat(s_idx, lengths_a), np.repeat(q_idx, lengths_a), rank] = flat
    cube = RunCube(key, system_ids, [s[1] for s in systems], query_ids, [q[1] for q in query_rows], doc_ids)
    with _LOCK:
        # runs are immutable per key; keep only the newest cube per campaign
        for old in [k for k in _CUBES if k[0] == campaign.pk]:
            del _CUBES[old]
        _CUBES[key] = cube
    return cube


def _query_chunks(campaign: Campaign, query_ids: np.ndarray) -> list[list[int] | None]:
    """Filters for reading these queries' rows: None (the whole campaign) when most queries are wanted."""
    total = Query.objects.filter(campaign=campaign).count()
    if len(query_ids) * 2 >= total:
        return [None]
    ids = query_ids.tolist()
    return [ids[i:i + 5000] for i in range(0, len(ids), 5000)]


def labels_for(campaign: Campaign, query_ids: np.ndarray, policy: str | None) -> tuple[np.ndarray, ...]:
    """(query_id, document_id, label) arrays of the labelled pairs of these queries, sorted by key.

    The campaign's own policy reads the stored labels; another policy aggregates the confident
    judgments afresh (an adjudication still wins).
    """
    chunks = _query_chunks(campaign, query_ids)
    if policy is None or policy == campaign.aggregation:
        rows: list[tuple[int, int, int]] = []
        for chunk in chunks:
            qs = Pair.objects.filter(campaign=campaign, label__isnull=False)
            if chunk is not None:
                qs = qs.filter(query_id__in=chunk)
            rows.extend(qs.values_list("query_id", "document_id", "label").iterator(chunk_size=20000))
        arr = np.array(rows, dtype=np.int64).reshape(-1, 3)
    else:
        jrows: list[tuple[int, int]] = []
        adj: list[tuple[int, int]] = []
        pair_rows: list[tuple[int, int, int]] = []
        for chunk in chunks:
            js = Judgment.objects.filter(pair__campaign=campaign, unsure=False)
            ad = Adjudication.objects.filter(pair__campaign=campaign)
            ps = Pair.objects.filter(campaign=campaign, judgment_count__gt=0)
            if chunk is not None:
                js, ad = js.filter(pair__query_id__in=chunk), ad.filter(pair__query_id__in=chunk)
                ps = ps.filter(query_id__in=chunk)
            jrows.extend(js.values_list("pair_id", "grade__value").iterator(chunk_size=20000))
            adj.extend(ad.values_list("pair_id", "grade__value"))
            pair_rows.extend(ps.values_list("id", "query_id", "document_id").iterator(chunk_size=20000))
            pair_rows.extend(ad.values_list("pair_id", "pair__query_id", "pair__document_id"))
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


def score_queries(cube: RunCube, q_idx: np.ndarray, labels: tuple[np.ndarray, ...], params: Params):
    """Score the queries at positions ``q_idx`` of the cube: (M, S, len(q_idx)) scores and a labelled mask."""
    lq, ld, lab = labels
    sub = cube.doc_ids[:, q_idx, :]  # (S, Qd, D)
    qids = cube.query_ids[q_idx]
    keep = np.isin(lq, qids)
    lq, ld, lab = lq[keep], ld[keep], lab[keep]
    key_l = (lq << 32) | ld
    key_c = (qids[None, :, None] << 32) | np.where(sub >= 0, sub, 0)
    if key_l.size:
        pos = np.minimum(np.searchsorted(key_l, key_c), key_l.size - 1)
        grid = np.where(key_l[pos] == key_c, lab[pos], metrics.UNJUDGED)
    else:
        grid = np.full(sub.shape, metrics.UNJUDGED, dtype=np.int64)
    grid = np.where(sub >= 0, grid, metrics.PAD)
    # qrels rows: every label of each query, padded with UNJUDGED
    q_of_label = np.searchsorted(qids, lq)
    counts = np.bincount(q_of_label, minlength=len(qids)) if lq.size else np.zeros(len(qids), np.int64)
    width = max(int(counts.max()) if counts.size else 0, 1)
    qrels = np.full((len(qids), width), metrics.UNJUDGED, dtype=np.int64)
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
    raw = repr((cube.key, params.k, params.gain, params.threshold, params.judged_only,
                params.policy or campaign.aggregation))
    return f"reljudge:lb:{campaign.pk}:{hashlib.sha256(raw.encode()).hexdigest()[:24]}"


def leaderboard(campaign: Campaign, params: Params | None = None) -> Leaderboard:
    """Current per-query scores of every system, rescoring only queries whose labels moved."""
    params = (params or Params()).validate()
    cube = run_cube(campaign)
    versions = np.array(
        Query.objects.filter(campaign=campaign).order_by("id").values_list("labels_version", flat=True),
        dtype=np.int64,
    )
    n_q, n_m = len(cube.query_ids), len(measure_names(params.k))
    key = _table_key(campaign, cube, params)
    with _LOCK:
        table = _SCORES.get(key)
    if table is None or table.versions.shape != versions.shape:
        table = ScoreTable(np.full(n_q, -1, np.int64), np.zeros((n_m, len(cube.system_ids), n_q)),
                           np.zeros(n_q, bool))
    stale_blocks = np.unique(np.flatnonzero(table.versions != versions) // BLOCK)
    if stale_blocks.size:
        # another process may have scored these blocks already
        shared = cache.get_many([f"{key}:{b}" for b in stale_blocks.tolist()])
        for b in stale_blocks.tolist():
            got = shared.get(f"{key}:{b}")
            if got is None:
                continue
            sl = slice(b * BLOCK, min((b + 1) * BLOCK, n_q))
            bv, bs, bl = got
            fresh = bv == table.versions[sl]
            ok = bv == versions[sl]
            table.versions[sl] = np.where(ok | fresh, bv, table.versions[sl])
            table.scores[:, :, sl] = np.where(ok, bs, table.scores[:, :, sl])
            table.labelled[sl] = np.where(ok, bl, table.labelled[sl])
    dirty = np.flatnonzero(table.versions != versions)
    if dirty.size:
        labels = labels_for(campaign, cube.query_ids[dirty], params.policy)
        scores, labelled = score_queries(cube, dirty, labels, params)
        table.scores[:, :, dirty] = scores
        table.labelled[dirty] = labelled
        table.versions[dirty] = versions[dirty]
        touched = np.unique(dirty // BLOCK).tolist()
        cache.set_many({
            f"{key}:{b}": (
                table.versions[b * BLOCK:(b + 1) * BLOCK].copy(),
                table.scores[:, :, b * BLOCK:(b + 1) * BLOCK].copy(),
                table.labelled[b * BLOCK:(b + 1) * BLOCK].copy(),
            )
            for b in touched
        }, timeout=7 * 24 * 3600)
    with _LOCK:
        _SCORES[key] = table
    return Leaderboard(campaign, params, cube, table, measure_names(params.k), rescored=int(dirty.size))


def leaderboard_data(
    *, campaign: Campaign, k: int = 10, gain: str = "linear", threshold: int = 1, judged_only: bool = False,
    policy: str | None = None, per_query: bool = True,
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
        "campaign": campaign.slug, "k": k, "gain": gain, "threshold": threshold,
        "judged_only": judged_only, "policy": policy or campaign.aggregation,
        "queries": len(qids), "systems": systems,
    }
