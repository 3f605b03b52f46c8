"""Which unjudged document to judge next: Minimal Test Collections and multi-armed bandit adjudication.

Both take the ranked labels of every system (``labels``, (S, Q, D): a grade, ``UNJUDGED`` or ``PAD``) and the
ranked document ids (``doc_ids``, (S, Q, D), -1 after the end of a run) and return every unjudged
(query, document) pair once, most urgent first. Neither returns, nor orders by, anything an annotator could
read a system from: the caller hands out the pairs alone.

- :func:`mtc_order`: Carterette, Allan & Sitaraman, "Minimal test collections for retrieval evaluation",
  SIGIR 2006. A measure's difference between two systems is (to first order) a weighted sum of the unjudged
  documents' relevance; the next document is the one with the largest total weight over the comparisons
  whose sign is still uncertain.
- :func:`bandit_order`: Losada, Parapar & Barreiro, "Feeling lucky? Multi-armed bandits for ordering
  judgements in pooling-based evaluation", SAC 2016, and "Multi-armed bandits for adjudicating documents in
  pooling-based evaluation of information retrieval systems", Information Processing & Management 53(5), 2017:
  runs are arms, a pull judges the arm's next unjudged document, and MM-NS pulls the arm with the highest
  expected relevance rate under a Beta posterior whose older evidence fades.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from metrics._types import FloatArray, IntArray
from metrics.ranking import PAD, UNJUDGED, check_gain, check_k, check_labels, gain_values, idcg_at_k, rank_discounts

MTC_MEASURES = ("nDCG", "P", "MAP")


class Selection(NamedTuple):
    """Unjudged (query, document) pairs, most urgent first."""

    #: (P,) query index (position on the Q axis).
    query: IntArray
    #: (P,) document id.
    doc: IntArray
    #: (P,) the strategy's score, larger first (MTC: the weight over uncertain comparisons; bandit: the
    #: expected relevance rate of the arm the pair is served from).
    score: FloatArray


class _Unjudged(NamedTuple):
    system: IntArray  # (E,) per unjudged ranked entry
    rank: IntArray  # (E,) 0-based
    pair: IntArray  # (E,) index into keys
    query: IntArray  # (U,) per distinct unjudged pair
    doc: IntArray  # (U,)


def unjudged_entries(labels: IntArray, doc_ids: IntArray, depth: int | None) -> _Unjudged:
    """The unjudged ranked entries within ``depth`` and the distinct (query, document) pairs they hold."""
    mask = labels == UNJUDGED
    mask &= doc_ids >= 0
    if depth is not None:
        mask[:, :, depth:] = False
    s, q, r = np.nonzero(mask)
    d = doc_ids[s, q, r].astype(np.int64)
    keys = (q.astype(np.int64) << 40) | d
    uniq, pair = np.unique(keys, return_inverse=True)
    return _Unjudged(s, r, pair.reshape(-1), uniq >> 40, uniq & ((1 << 40) - 1))


def _check_arrays(labels: npt.ArrayLike, doc_ids: npt.ArrayLike) -> tuple[IntArray, IntArray]:
    checked = check_labels(labels)
    ids = np.asarray(doc_ids)
    if ids.ndim == 3 and ids.shape[-1] == 0 and ids.shape[:-1] == checked.shape[:-1]:
        ids = np.full(checked.shape, -1, dtype=np.int64)  # no ranks at all: check_labels padded one column
    if ids.shape != checked.shape:
        raise ValueError(f"doc_ids must have the labels' shape {checked.shape}, not {ids.shape}")
    if not np.issubdtype(ids.dtype, np.integer):
        raise ValueError("doc_ids must be integers")
    return checked, ids.astype(np.int64, copy=False)


# --------------------------------------------------------------------------------------------------------
# Minimal test collections


def mtc_weights(
    labels: npt.ArrayLike,
    qrels: npt.ArrayLike,
    *,
    measure: str = "nDCG",
    k: int = 10,
    top_grade: int = 1,
    gain: str = "linear",
    threshold: float = 1,
) -> tuple[FloatArray, FloatArray]:
    """Each system's known per-query score and each ranked entry's weight in it (MTC's linear form).

    A system's score on a query is taken as ``known + sum(w * x)`` over its unjudged documents, ``x`` in
    [0, 1] the document's share of the top grade. ``known`` counts unjudged documents as not relevant (as the
    leaderboard does). ``w`` is what the document adds when it turns out top-grade relevant:

    - ``P``: 1/k within the top k.
    - ``nDCG``: the top grade's gain times the rank's discount within the top k, over the query's ideal DCG
      from its labels so far (at least one top-grade document's), the normaliser MTC holds fixed.
    - ``MAP``: the document's own precision term plus one more relevant document above each known relevant
      one below it, over the query's known relevant count (at least 1): Carterette et al.'s AP weights
      with the pairwise terms of the still unjudged documents left out (first order).

    Returns ``known`` (S, Q) and ``w`` (S, Q, D), 0 at judged and padded entries.
    """
    lab = check_labels(labels)
    qr = np.asarray(qrels)
    if measure not in MTC_MEASURES:
        raise ValueError(f"measure must be one of {', '.join(MTC_MEASURES)}, not {measure!r}")
    k = check_k(k)
    gain = check_gain(gain)
    depth = lab.shape[-1]
    unjudged = lab == UNJUDGED
    weights = np.zeros(lab.shape, dtype=np.float64)
    if measure == "P":
        rel = (lab >= threshold)[..., :k]
        known = rel.sum(axis=-1) / k
        weights[..., :k] = np.where(unjudged[..., :k], 1.0 / k, 0.0)
        return known.astype(np.float64), weights
    if measure == "nDCG":
        top_gain = float(gain_values(np.array([top_grade]), gain)[0]) or 1.0
        norm = np.maximum(idcg_at_k(qr, k, gain), top_gain)  # (Q,)
        disc = rank_discounts(min(k, depth))
        known = (gain_values(lab[..., :k], gain) * disc).sum(axis=-1) / norm
        weights[..., :k] = np.where(unjudged[..., :k], top_gain * disc / norm[:, None], 0.0)
        return known, weights
    # MAP
    rel = lab >= threshold
    norm = np.maximum((qr >= threshold).sum(axis=-1), 1).astype(np.float64)  # (Q,)
    ranks = np.arange(1, depth + 1, dtype=np.float64)
    above: IntArray = np.cumsum(rel, axis=-1) - rel  # known relevant documents above each rank
    known = np.where(rel, (above + 1) / ranks, 0.0).sum(axis=-1) / norm
    # sum over known relevant documents below rank r of 1/rank: a reversed cumulative sum
    inv = np.where(rel, 1.0 / ranks, 0.0)
    below = np.cumsum(inv[..., ::-1], axis=-1)[..., ::-1] - inv
    weights = np.where(unjudged, ((above + 1) / ranks + below) / norm[None, :, None], 0.0)
    return known, weights


def adjacent_coefficients(
    system: IntArray, pair: IntArray, weight: FloatArray, order: IntArray
) -> Iterator[tuple[int, int, IntArray, FloatArray]]:
    """For each comparison of systems adjacent in ``order`` (a above b): the pairs either system ranks
    (``touched``, sorted) and each one's coefficient in a - b (its weight for a minus its weight for b), from the
    unjudged entries' ``system``, ``pair`` and ``weight``. Comparisons that touch no pair are left out. The one
    walk over adjacent systems that mtc_order and metrics.hybrid.hybrid_order share."""
    by_system = np.argsort(system, kind="stable")
    bounds = np.searchsorted(system[by_system], np.arange(len(order) + 1))
    for a, b in zip(order[:-1].tolist(), order[1:].tolist(), strict=True):
        ea = by_system[bounds[a] : bounds[a + 1]]
        eb = by_system[bounds[b] : bounds[b + 1]]
        idx = np.concatenate([pair[ea], pair[eb]])
        if idx.size == 0:
            continue
        touched, at = np.unique(idx, return_inverse=True)
        coef = np.bincount(at.reshape(-1), np.concatenate([weight[ea], -weight[eb]]), minlength=touched.size)
        yield a, b, touched, coef.astype(np.float64, copy=False)


def mtc_order(
    labels: npt.ArrayLike,
    qrels: npt.ArrayLike,
    doc_ids: npt.ArrayLike,
    *,
    measure: str = "nDCG",
    k: int = 10,
    top_grade: int = 1,
    gain: str = "linear",
    threshold: float = 1,
) -> Selection:
    """Every unjudged pair, in the order Minimal Test Collections judges them (Carterette, Allan & Sitaraman,
    SIGIR 2006).

    Systems are ranked by their known mean score (:func:`mtc_weights`, summed over queries; ties by index).
    For each pair (a, b) adjacent in that ranking the difference ``a - b`` is ``known + sum_d c_d x_d`` with
    ``c_d`` the document's weight in a's score minus its weight in b's (a document both retrieve at the same
    rank cancels out). The comparison is uncertain while its lowest and highest possible values
    (every ``x_d`` at 0 or 1 where it lowers or raises the sum) have different signs. A document's score is
    the sum of ``|c_d|`` over the uncertain comparisons: judging it moves the most uncertain differences the
    most. Ties, and the documents no uncertain comparison depends on, are ordered by the sum over every
    adjacent comparison, then by the best rank any system gives them, then by query and document.

    ``labels`` (S, Q, D), ``qrels`` (Q, M) padded with UNJUDGED, ``doc_ids`` (S, Q, D): as the metrics
    module's other functions take them; ``top_grade``: the best grade of the scale.
    """
    ent, _, ranked, score = _mtc_ranked(
        labels, qrels, doc_ids, measure=measure, k=k, top_grade=top_grade, gain=gain, threshold=threshold
    )
    return Selection(ent.query[ranked], ent.doc[ranked], score[ranked])


def _mtc_ranked(
    labels: npt.ArrayLike, qrels: npt.ArrayLike, doc_ids: npt.ArrayLike, **measure: Any
) -> tuple[_Unjudged, FloatArray, IntArray, FloatArray]:
    """mtc_order's work (``measure``: its keyword arguments, as mtc_weights takes them): the unjudged entries,
    their weights, the distinct pairs' order and their scores."""
    lab, ids = _check_arrays(labels, doc_ids)
    known, weights = mtc_weights(lab, qrels, **measure)
    ent = unjudged_entries(lab, ids, None)
    n_pairs = ent.query.size
    w = weights[ent.system, ent.query[ent.pair], ent.rank]
    if n_pairs == 0:
        return ent, w, np.zeros(0, dtype=np.int64), np.zeros(0)
    total = known.sum(axis=1)  # (S,)
    order = np.lexsort((np.arange(total.size), -total))
    uncertain_score = np.zeros(n_pairs)
    any_score = np.zeros(n_pairs)
    for a, b, touched, coef in adjacent_coefficients(ent.system, ent.pair, w, order):
        size = np.abs(coef)
        any_score[touched] += size
        diff = total[a] - total[b]
        low, high = diff + coef[coef < 0].sum(), diff + coef[coef > 0].sum()
        if low < 0 < high:
            uncertain_score[touched] += size
    best_rank = np.full(n_pairs, np.iinfo(np.int64).max)
    np.minimum.at(best_rank, ent.pair, ent.rank)
    ranked = np.lexsort((ent.doc, ent.query, best_rank, -np.round(any_score, 12), -np.round(uncertain_score, 12)))
    return ent, w, ranked, uncertain_score


class Schedule(NamedTuple):
    """Unjudged pairs in the order a queue serves them, each with its weight in some comparisons."""

    #: (P,) query index (position on the Q axis).
    query: IntArray
    #: (P,) document id.
    doc: IntArray
    #: (P,) the sum over the comparisons of the pair's ``|c_d|`` in their differences (MTC's coefficients).
    weight: FloatArray


def mtc_schedule(
    labels: npt.ArrayLike,
    qrels: npt.ArrayLike,
    doc_ids: npt.ArrayLike,
    above: npt.ArrayLike,
    below: npt.ArrayLike,
    *,
    measure: str = "nDCG",
    k: int = 10,
    top_grade: int = 1,
    gain: str = "linear",
    threshold: float = 1,
) -> Schedule:
    """Every unjudged pair in :func:`mtc_order`'s order (Carterette, Allan & Sitaraman, SIGIR 2006), each with
    its weight in the comparisons (above[i], below[i]): the sum over them of ``|c_d|``, the document's weight in
    the upper system's score minus its weight in the lower's (0 for a pair neither system ranks, or both at the
    same rank). What metrics.final_order.judgments_to_stop reads as the schedule of a queue in MTC's order: which
    queries' pairs come first, and how much of each query's uncertainty about those comparisons they hold.
    Arguments as :func:`mtc_order`'s."""
    ent, w, ranked, _ = _mtc_ranked(
        labels, qrels, doc_ids, measure=measure, k=k, top_grade=top_grade, gain=gain, threshold=threshold
    )
    a = np.asarray(above, dtype=np.int64).reshape(-1)
    b = np.asarray(below, dtype=np.int64).reshape(-1)
    c, n_pairs = a.size, ent.query.size
    # each system's sign in each comparison: +1 above, -1 below (S, C)
    sign = np.zeros((np.shape(labels)[0], c))
    np.add.at(sign, (a, np.arange(c)), 1.0)
    np.add.at(sign, (b, np.arange(c)), -1.0)
    cell = (ent.pair[:, None] * c + np.arange(c)).reshape(-1)
    coef = np.bincount(cell, (sign[ent.system] * w[:, None]).reshape(-1), minlength=n_pairs * c).reshape(n_pairs, c)
    weight = np.abs(coef).sum(axis=1)
    return Schedule(ent.query[ranked], ent.doc[ranked], weight[ranked])


# --------------------------------------------------------------------------------------------------------
# Multi-armed bandits (MM-NS)


def bandit_rates(
    labels: npt.ArrayLike, *, depth: int | None = None, threshold: float = 1, decay: float = 0.9
) -> FloatArray:
    """(S, Q) each arm's expected relevance rate under MM-NS (Losada, Parapar & Barreiro, IP&M 2017).

    An arm is one system's ranking of one query, down to ``depth`` (the pool depth). Its prior is
    Beta(1, 1); each judged document of the arm adds its relevance (``>= threshold``) to alpha or to beta,
    weighted ``decay ** m`` where ``m`` is the number of judged documents of the arm ranked below it. The
    deepest judged document, the latest a pull of this arm reaches, weighs 1 and older evidence fades: the
    non-stationary variant, since a run's relevance rate falls as one goes down its ranking. The rate is
    the posterior mean alpha / (alpha + beta) ("maximum mean": no sampling, so the order is reproducible).
    A document judged through another arm counts for every arm that ranks it.
    """
    lab = check_labels(labels)
    if not 0 < decay <= 1:
        raise ValueError(f"decay must be in (0, 1], not {decay!r}")
    if depth is not None:
        lab = lab[..., :depth]
    judged = lab >= 0
    rel = lab >= threshold
    below: IntArray = np.cumsum(judged[..., ::-1], axis=-1)[..., ::-1] - judged
    weight = np.where(judged, decay ** below.astype(np.float64), 0.0)
    alpha = 1.0 + (weight * rel).sum(axis=-1)
    beta = 1.0 + (weight * (judged & ~rel)).sum(axis=-1)
    rates: FloatArray = alpha / (alpha + beta)
    return rates


def bandit_order(
    labels: npt.ArrayLike,
    doc_ids: npt.ArrayLike,
    *,
    depth: int | None = None,
    threshold: float = 1,
    decay: float = 0.9,
) -> Selection:
    """Every unjudged pair within ``depth``, in the order MM-NS pulls them (Losada, Parapar & Barreiro, SAC
    2016; IP&M 2017), across queries.

    Arms are (system, query) rankings with the rates of :func:`bandit_rates`. The best arm is pulled first:
    its unjudged documents in rank order; then the next arm. Arms with the same rate (every arm before its
    first judgment) take turns, first documents first. A document several arms hold comes with the first of
    them. The order is the bandit's as long as no new judgment comes in: the caller computes it again per
    labels state, so each judgment updates the arm's rate before the next pull. Every query's arms compete
    in one bandit, so queries are interleaved.
    """
    lab, ids = _check_arrays(labels, doc_ids)
    rates = bandit_rates(lab, depth=depth, threshold=threshold, decay=decay)
    ent = unjudged_entries(lab, ids, depth)
    if ent.query.size == 0:
        return Selection(ent.query, ent.doc, np.zeros(0))
    q = ent.query[ent.pair]
    # position of each entry among its arm's unjudged entries: entries come sorted by (system, query, rank)
    arm = ent.system.astype(np.int64) * lab.shape[1] + q
    starts = np.flatnonzero(np.r_[True, arm[1:] != arm[:-1]])
    position = np.arange(arm.size) - np.repeat(starts, np.diff(np.r_[starts, arm.size]))
    rate = rates[ent.system, q]
    ranked = np.lexsort((ent.system, q, ent.rank, position, -np.round(rate, 12)))
    pair = ent.pair[ranked]
    _, first = np.unique(pair, return_index=True)
    keep = np.sort(first)
    chosen = pair[keep]
    return Selection(ent.query[chosen], ent.doc[chosen], rate[ranked][keep])


__all__ = [
    "MTC_MEASURES",
    "PAD",
    "Schedule",
    "Selection",
    "bandit_order",
    "bandit_rates",
    "mtc_order",
    "mtc_schedule",
    "mtc_weights",
]
