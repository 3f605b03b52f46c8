"""The final order: what judging the rest of the pool can still do to each adjacent comparison.

Per query of the campaign (labelled or not), kept in process memory and patched after a judgment for the
queries whose labels moved only (``store.per_query``):

* the sound score and numerator/denominator bounds of metrics.verdicts (``settled``: no grading of the
  pooled unjudged documents, those of queries without a label yet included, can flip the order);
* each system's expected final score and the covariance between systems, from Monte Carlo samples under a
  relevance model learned from the campaign's own judgments (``p_holds``, after Carterette, Allan &
  Sitaraman, SIGIR 2006, and Aslam, Pavlu & Yilmaz, SIGIR 2006; see metrics.verdicts).

The relevance model is fitted on the whole campaign and refitted once the judged pooled documents grew by
``REFIT_SHARE`` since the last fit (every query's samples are then drawn again); in between a judgment
redraws its own query only. Draws are keyed by query id and labels version, so a state gives one answer.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from judging import runtime
from judging.scoring.cache import Leaderboard
from judging.scoring.cube import segment_mask
from judging.scoring.hybrid import HybridFit, hybrid_fit, hybrid_judge
from judging.scoring.trust.arrays import PATCH_QUERIES, campaign_arrays, top_grade
from judging.scoring.trust.store import LOCK, cached, per_query, query_chunks
from metrics import Measure
from metrics.final_order import CONFIDENCE as CONFIDENCE
from metrics.final_order import QueryParts, QueryStack, order_verdicts, query_parts
from metrics.relevance_model import SAMPLES_MIN, Answers, LabelModel, answered_relevance, label_model
from metrics.verdicts import WHOLE_RUN_BASES, FinalPool, final_pool

TOP_K_DEFAULT = 3
REFIT_SHARE = 0.05  # refit the relevance model when the judged pooled documents grew by this share (or 20)
SAMPLE_ENTRIES = 2_560_000  # draws per query: about this many ranked entries x draws over the campaign, 32 to 64
# Up to this many ranked entries (within the measure's depth) the model is fitted afresh at every labels state:
# a few milliseconds there; at 200,000 (20 systems x 1,000 queries x 10) refitting and drawing every query again
# took 180 ms of CPU after each judgment, where patching the judged query takes a few.
REFIT_CELLS = 25_000


@dataclass(frozen=True)
class _Fit:
    judged: int
    model: LabelModel
    version: int


_MODELS: dict[str, _Fit] = runtime.keep(
    "trust.final_label_models",
    {},
    bound=None,
    grows_with="score table",
    invalidated_by="the judged pairs changing (fitted again)",
    lock=LOCK,
    group="trust",
)
_FIT_LOCK = threading.Lock()
_VERSION = [0]


def _depth(lb: Leaderboard, base: str, depth: int) -> int:
    """How deep the final pool is read: the pool depth, and the measure's cutoff (the whole run for MRR, MAP
    and bpref, and for condensed scoring, whose lists close up from below)."""
    pool_depth = int(lb.campaign.pool_depth)
    if base in WHOLE_RUN_BASES or lb.params.judged_only:
        return depth
    return min(depth, max(pool_depth, lb.params.k))


def _fit(lb: Leaderboard, judged: int) -> _Fit:
    arrays = campaign_arrays(lb)
    pd = min(int(lb.campaign.pool_depth), arrays.labels.shape[2])
    with _FIT_LOCK:
        pool = final_pool(arrays.labels[..., :pd], arrays.doc_ids[..., :pd], pool_depth=pd)
        grade = top_grade(lb.campaign, arrays.qrels)
        model = label_model(pool, top_grade=grade, n_systems=arrays.labels.shape[0], soft=_soft(lb, pool))
        _VERSION[0] += 1
        return _Fit(judged, model, _VERSION[0])


def _model(lb: Leaderboard, cells: int) -> _Fit:
    """The campaign's relevance model.

    Up to REFIT_CELLS ranked entries within the measure's depth it is fitted afresh at every labels state, and
    every query's samples drawn again: a state then has one answer, whichever process computes it. Above,
    it is refitted once the judged pooled documents grew by REFIT_SHARE (or 20), and a judgment redraws its
    own query only; until the next refit, a process that started later may differ in the last digits."""
    if cells <= REFIT_CELLS:
        return cached(lb, ("label-model",), lambda: _fit(lb, 0))
    judged = cached(lb, ("judged-in-pool",), lambda: _judged_in_pool(lb))
    key = lb.base_key
    with LOCK:
        fit = _MODELS.get(key)
    if fit is not None and abs(judged - fit.judged) <= max(20, REFIT_SHARE * fit.judged):
        return fit
    fit = _fit(lb, judged)
    with LOCK:
        _MODELS[key] = fit
    return fit


def _judged_in_pool(lb: Leaderboard) -> int:
    """Judged ranked entries within the pool depth (what the model's refit counts): once per labels state, from
    per-query counts recounted only for the queries whose labels moved (the whole count read every system's
    pool-depth head of every query, strided through the labels file: 4 ms a request at 100M entries)."""
    arrays = campaign_arrays(lb)
    pd = min(int(lb.campaign.pool_depth), arrays.labels.shape[2])

    def count(queries: np.ndarray | slice) -> np.ndarray:
        counted: np.ndarray = np.count_nonzero(arrays.labels[:, queries, :pd] >= 0, axis=(0, 2))
        return counted.astype(np.int64)

    def patch(old: np.ndarray, dirty: np.ndarray) -> np.ndarray:
        out = old.copy()
        out[dirty] = count(dirty)
        return out

    counts = per_query(
        lb, ("judged-in-pool",), token=pd, build=lambda: count(slice(None)), patch=patch, patch_queries=PATCH_QUERIES
    )
    return int(counts.sum())


def _compute(lb: Leaderboard, base: str, fit: _Fit, queries: np.ndarray, samples: int) -> QueryParts:
    arrays = campaign_arrays(lb)
    depth = _depth(lb, base, arrays.labels.shape[2])
    p = lb.params
    pool = final_pool(
        arrays.labels[:, queries, :depth],
        arrays.doc_ids[:, queries, :depth],
        pool_depth=int(lb.campaign.pool_depth),
        judged_only=p.judged_only,
    )
    # one seed per query and labels version: its draws stay the same whatever else moves
    seeds = lb.cube.query_ids[queries].astype(np.int64) * 1_000_003 + lb.table.versions[queries].astype(np.int64)
    return query_parts(
        base,
        pool,
        arrays.qrels[queries],
        fit.model,
        k=p.k,
        threshold=p.threshold,
        gain=p.gain,
        seeds=seeds,
        samples=samples,
        doc_ids=arrays.doc_ids[:, queries, : depth if base in WHOLE_RUN_BASES or p.judged_only else p.k],
        answers=_answers(lb, queries),
    )


def _hybrid(lb: Leaderboard) -> HybridFit | None:
    """The model judge's calibration of a ``hybrid:NAME`` leaderboard (judging.scoring.hybrid), else None."""
    judge = hybrid_judge(lb.params.labels)
    return None if judge is None else hybrid_fit(lb.campaign, lb.cube, judge, lb.table.versions)


def _answers(lb: Leaderboard, queries: np.ndarray) -> Answers | None:
    """hybrid:NAME: the unjudged pairs the model answered draw their grade from their calibrated distribution."""
    hybrid = _hybrid(lb)
    if hybrid is None:
        return None
    open_ = ~hybrid.human
    return Answers(lb.cube.query_ids[queries], hybrid.keys[open_], hybrid.dist[open_], hybrid.likelihood[open_])


def _soft(lb: Leaderboard, pool: FinalPool) -> np.ndarray | None:
    """hybrid:NAME: the relevance model's soft labels (metrics.relevance_model.answered_relevance), else None."""
    answers = _answers(lb, np.arange(lb.cube.query_ids.size))
    return None if answers is None else answered_relevance(pool, answers)


def final_parts(lb: Leaderboard, measure: str) -> QueryParts:
    """metrics.final_order.QueryParts of every query of the campaign, patched per judgment."""
    base = Measure.parse(measure).base
    arrays = campaign_arrays(lb)
    n_s, n_q, depth = arrays.labels.shape
    eval_depth = depth if base in WHOLE_RUN_BASES else min(depth, lb.params.k)
    fit = _model(lb, n_s * n_q * eval_depth)
    samples = int(np.clip(SAMPLE_ENTRIES // max(n_s * n_q * eval_depth, 1), SAMPLES_MIN, 64))
    parts: QueryParts = per_query(
        lb,
        ("final", measure),
        token=(fit.version, int(lb.campaign.pool_depth), samples, getattr(_hybrid(lb), "seed", None)),
        build=lambda: QueryParts.joined(
            [_compute(lb, base, fit, q, samples) for q in query_chunks(n_q, n_s * depth, align=QueryStack.BLOCK)]
        ),
        patch=lambda old, dirty: old.patched(_compute(lb, base, fit, dirty, samples), dirty),
        patch_queries=PATCH_QUERIES,
    )
    return parts


# --------------------------------------------------------------------------- the verdicts


@dataclass
class FinalVerdicts:
    """metrics.final_order.OrderVerdicts of the adjacent comparisons, and which queries they cover."""

    low: np.ndarray  # (C,) sum over the final queries of the per-query lower bounds of a - b
    high: np.ndarray
    p_holds: np.ndarray  # (C,)
    verdict: list[str]  # "settled", "tied", "likely" or "open"
    final_queries: np.ndarray  # (Q,) bool: the queries the final means will hold
    without_labels: int  # of those, queries with no label yet


def universe(lb: Leaderboard) -> np.ndarray:
    """(Q,) bool: the queries of the leaderboard's segment (every query without one)."""
    if lb.params.segment is None:
        return np.ones(len(lb.cube.query_ids), dtype=bool)
    return cached(lb, ("segment-mask",), lambda: segment_mask(lb.campaign, lb.cube, str(lb.params.segment)))


def final_verdicts(lb: Leaderboard, measure: str, above: np.ndarray, below: np.ndarray) -> FinalVerdicts:
    """Verdicts on the comparisons (above[i], below[i]) of the ranking by ``measure`` over the final queries:
    those of the segment with a label, and those with pooled pairs left (metrics.final_order.order_verdicts)."""
    parts = final_parts(lb, measure)
    final = universe(lb) & (lb.table.labelled | (parts.pending > 0))
    got = order_verdicts(parts, final, above, below, confidence=CONFIDENCE)
    without = int(np.count_nonzero(final & ~lb.table.labelled))
    return FinalVerdicts(got.low, got.high, got.p_holds, got.verdict, final, without)


def stop_signal(
    p_holds: np.ndarray, top_k: int, judgments_left: int, *, certain: bool = False, to_stop: int | None = None
) -> dict[str, Any]:
    """{"top_k", "confidence", "reached", "judgments_left_estimate", "settled", "judgments_to_settle"}: whether the
    order of the top ``top_k`` systems, and the border with the next, holds with CONFIDENCE together (Bonferroni: the
    chances that each comparison flips sum to at most 1 - CONFIDENCE; settled and tied comparisons add nothing).

    ``judgments_left`` is about how many judgments would settle those comparisons for certain as they stand
    (``certain``: they are all settled or tied already); ``judgments_to_settle`` says it. ``judgments_left_estimate``
    is what stands between the lead and the stop: 0 once it is reached, else ``to_stop`` (bounds.judgments_to_stop:
    the judgments whose labels take enough uncertainty out of the comparisons), or without it the count to
    settle."""
    head = p_holds[:top_k]
    reached = certain or bool(float(np.sum(1.0 - head)) <= 1.0 - CONFIDENCE + 1e-12)
    to_settle = 0 if certain else int(judgments_left)
    return {
        "top_k": int(top_k),
        "confidence": CONFIDENCE,
        "reached": reached,
        "judgments_left_estimate": 0 if reached else (to_settle if to_stop is None else int(to_stop)),
        "settled": bool(certain),
        "judgments_to_settle": to_settle,
    }
