"""The live leaderboard: per-query scores cached per parameter set, rescored only where labels moved."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field, fields
from datetime import datetime

import numpy as np
from django.core.cache import cache, caches
from django.core.cache.backends.db import DatabaseCache
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

import metrics
from judging.aggregation import POLICIES
from judging.models import Campaign, Query
from judging.scoring.cube import _CUBES, _LOCK, RunCube, _KeyIndex, _rows, label_source_judge, labels_for, run_cube

# Queries per shared-cache entry: a new label rewrites one block (64 queries x 20 systems x 8 measures is
# 80 kB), not the whole table.
BLOCK = 64

logger = logging.getLogger(__name__)


CACHE_SECONDS = 7 * 24 * 3600

# The leaderboard's measures in its column order.
LEADERBOARD_MEASURES = ("P", "R", "F1", "Hit", "MRR", "MAP", "nDCG", "bpref", "Judged")


def measure_names(k: int) -> list[str]:
    """The leaderboard's measure names with cutoff ``k``: ``["P@10", ..., "Judged@10"]``."""
    return [str(metrics.Measure(base).at(k)) for base in LEADERBOARD_MEASURES]


_SCORES: dict[str, ScoreTable] = {}


@dataclass(frozen=True)
class Params:
    k: int = 10
    gain: str = "linear"
    threshold: int = 1
    judged_only: bool = False
    policy: str | None = None  # None: the campaign's own policy (the stored labels)
    labels: str = "humans"  # or "model:NAME" / "hybrid:NAME": which judgments the labels come from
    # Only the queries carrying this tag count in the means (judging.scoring.trust.segment_mask); the
    # per-query scores are the same, so the score table is shared with the whole leaderboard.
    segment: str | None = None

    @classmethod
    def from_settings(cls, data: Mapping) -> Params:
        """The parameters named in ``data`` (a leaderboard form's or an API serializer's cleaned settings;
        other keys such as ``measure`` are ignored, missing ones keep their defaults)."""
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})

    def validate(self) -> Params:
        if not isinstance(self.k, int) or not 1 <= self.k <= 1000:
            raise ValueError("k must be a whole number from 1 to 1000")
        if self.gain not in metrics.GAINS:
            raise ValueError(f"gain must be one of {', '.join(metrics.GAINS)}")
        if not isinstance(self.threshold, int) or not 0 <= self.threshold <= 100:
            raise ValueError("threshold must be a whole number from 0 to 100")
        if self.policy is not None and self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}")
        label_source_judge(self.labels)
        if self.segment is not None and (not isinstance(self.segment, str) or not 0 < len(self.segment) <= 100):
            raise ValueError("segment must be a tag of 1 to 100 characters")
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
        return self.table.scores[self.measure_index(measure)][:, self.table.labelled]

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


def label_arrays(cube: RunCube, q_idx: np.ndarray, labels: tuple[np.ndarray, ...]):
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
    return grid, qrels, sub, counts


def score_queries(cube: RunCube, q_idx: np.ndarray, labels: tuple[np.ndarray, ...], params: Params):
    """Score the queries at positions ``q_idx`` of the cube: (M, S, len(q_idx)) scores and a labelled mask."""
    grid, qrels, _, counts = label_arrays(cube, q_idx, labels)
    result = metrics.evaluate(
        grid, qrels, k=params.k, threshold=params.threshold, gain=params.gain, judged_only=params.judged_only
    )
    names = measure_names(params.k)
    return np.stack([result[n] for n in names]), counts > 0


def _table_key(campaign: Campaign, cube: RunCube, params: Params) -> str:
    raw = repr(
        (cube.key, params.k, params.gain, params.threshold, params.judged_only, params.policy or campaign.aggregation)
        + ((params.labels,) if params.labels != "humans" else ())
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
        labels = labels_for(campaign, cube.query_ids[dirty], params.policy, total=n_q, labels=params.labels)
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
        # Imported here: judging.scoring.trust imports this module (Leaderboard, Params, leaderboard).
        from judging.scoring.trust import segment_mask

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


def leaderboard_data(
    *,
    campaign: Campaign,
    k: int = 10,
    gain: str = "linear",
    threshold: int = 1,
    judged_only: bool = False,
    policy: str | None = None,
    labels: str = "humans",
    per_query: bool = True,
    segment: str | None = None,
    measure: str | None = None,
    bounds: bool = True,
    attribute: str | None = None,
    micro: bool = False,
    per_query_text: Callable[..., str] | None = None,
) -> dict:
    """The SPEC §4 JSON shape shared by `scores --json` and the API.

    With ``bounds`` (the default) each system gains ``"bounds"`` and the top level ``"settled"`` for the
    systems adjacent in the ranking by ``measure`` (default nDCG@k); ``attribute`` adds ILD@k and
    Coverage@k over that document attribute, ``micro`` the micro-averaged P@k and R@k (see
    judging.scoring.trust). ``segment`` restricts the means to the queries carrying that tag.

    ``per_query_text`` (judging.api.renderers.leaderboard_json): called as ``per_query_text(values, qids,
    names, block=...)`` for each system, with ``values()`` its (Q_scored, M) per-query values and ``block``
    naming them (the scores' state and the system), it returns what stands in the data for that system's
    per-query object.
    """
    params = Params(
        k=k,
        gain=gain,
        threshold=threshold,
        judged_only=judged_only,
        policy=policy,
        labels=labels or "humans",
        segment=segment,
    )
    lb = leaderboard(campaign, params)
    means = lb.means()
    names = lb.measures
    qids = lb.scored_qids()
    systems = []
    state = lb.state if per_query and per_query_text is not None else ""
    for s, name in enumerate(lb.cube.system_names):
        entry = {"name": name, "measures": {m: float(means[i, s]) for i, m in enumerate(names)}}
        if per_query and per_query_text is not None:
            entry["per_query"] = per_query_text(
                lambda s=s: lb.table.scores[:, s][:, lb.table.labelled].T, qids, names, block=f"{state}:{s}"
            )
        elif per_query:
            values = lb.table.scores[:, s][:, lb.table.labelled].T.tolist()  # (Q_scored, M)
            entry["per_query"] = {q: dict(zip(names, row, strict=True)) for q, row in zip(qids, values, strict=True)}
        systems.append(entry)
    data = {
        "campaign": campaign.slug,
        "k": k,
        "gain": gain,
        "threshold": threshold,
        "judged_only": judged_only,
        "policy": policy or campaign.aggregation,
        "labels": lb.params.labels,
        "queries": len(qids),
        "systems": systems,
    }
    if segment is not None:
        data["segment"] = segment
    if bounds or attribute or micro:
        from judging.scoring import trust  # imported here: trust imports this module

        trust.leaderboard_data_extend(
            lb, data, measure=measure, with_bounds=bounds, attribute=attribute, with_micro=micro, per_query=per_query
        )
    return data


def process_caches_clear() -> None:
    """Forget this process's run cubes and score tables, as a freshly started server process would not have
    them (the shared cache in Django's cache stays): for tests and benchmarks."""
    with _LOCK:
        _SCORES.clear()
        _CUBES.clear()
