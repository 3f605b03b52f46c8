"""Hybrid judging: what a model judge's answers say about the human label, and scores in expectation over it.

People judge some pooled pairs; a model judge (an LLM prompted with the guidelines) answers a grade for many more.
The model's grade is evidence, not a label: on the same campaign, the pairs both have graded show how human grades
spread behind each model grade. This module turns that into a calibrated distribution of the human grade of every
pair the model answered and no person judged, and scores systems in expectation over it:

* :func:`calibrate` estimates P(human grade h | model grade m, rank bucket b) from the pairs both graded, a table per
  bucket of the pair's best rank among the systems (ranks 1, 2-3, 4-7, ...: relevance falls with rank whatever the
  model says, and the people's pairs are not a random sample of ranks), each row shrunk toward the model grade's row
  over all ranks and that toward the human grades' overall distribution (Dirichlet pseudo-counts). The model's
  confusion matrix P(m | h) is what the LLM-judge literature reports (Thomas et al., SIGIR 2024; the LLMJudge
  challenge, Rahmani et al. 2024); the posterior P(h | m) is its calibrated reading, estimated directly per model
  grade so that a queue that picks pairs by the model's grade does not bias it (Dawid & Skene 1979 estimate the
  same kind of table from labels alone).
* :func:`pair_distributions` gives each pair's distribution over human grades: the calibrated row of the model's
  grade, or, where the model was asked several times (``judge_with_model --repeat``), the mixture of the rows of its
  answers weighted by how often it gave each (its doubt widens the distribution).
* :func:`sample_grades` draws human grades from those distributions, deterministically per pair and draw (a hash of
  the pair's key), so every system sees the same draw of a document and a state of the labels has one answer.
* :func:`expected_scores` is each system's expected per-query score of every measure of :func:`metrics.evaluate`
  under those draws, the judged pairs at their human labels (a Monte Carlo mean over completions: E[nDCG] itself,
  not the nDCG of expected gains), with each draw's values for the covariances between systems.

References
----------
Carterette, B., Allan, J. & Sitaraman, R. (2006). Minimal test collections for retrieval evaluation. SIGIR.
Dawid, A. P. & Skene, A. M. (1979). Maximum likelihood estimation of observer error-rates using the EM algorithm.
Applied Statistics 28(1).
Thomas, P., Spielman, S., Craswell, N. & Mitra, B. (2024). Large language models can accurately predict searcher
preferences. SIGIR.
Takehi, R., Voorhees, E. M., Sakai, T. & Soboroff, I. (2025). LLM-assisted relevance assessments: when should we
ask LLMs for help? SIGIR (LARA).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from metrics._types import FloatArray, IntArray
from metrics.keys import pair_keys as make_pair_keys  # the name pair_keys is hybrid_order's argument
from metrics.ranking import PAD, UNJUDGED, evaluate, gain_values
from metrics.selection import Selection, adjacent_coefficients, mtc_weights, unjudged_entries

__all__ = [
    "PRIOR_WEIGHT",
    "RANK_BUCKETS",
    "Calibration",
    "answer_likelihood",
    "calibrate",
    "expected_scores",
    "hybrid_order",
    "pair_distributions",
    "rank_bucket",
    "sample_grades",
]

#: Pseudo-pairs behind each row of the table: a model grade seen on few judged pairs reads as the prior row.
PRIOR_WEIGHT = 5.0
#: The prior belief about a model judge before the campaign's own pairs show it: P(model grade | human grade) of a
#: judge of today's quality (the LLMJudge challenge's submissions reached a quadratic-weighted kappa of 0.4-0.5
#: with TREC's assessors: most answers on or next to the human grade). A model grade's prior row is the posterior
#: P(h | m) under it and the campaign's human grades; with the campaign's pairs the table moves to what they show
#: (a judge that answers at random, or reversed, is found out after a few dozen pairs).
GENERIC_CONFUSION = np.array(
    [
        [0.50, 0.27, 0.16, 0.07],
        [0.27, 0.34, 0.26, 0.13],
        [0.12, 0.24, 0.35, 0.29],
        [0.07, 0.16, 0.30, 0.47],
    ]
)
#: Rank buckets of a pair's best rank: 1, 2-3, 4-7, 8-15, 16 and below.
RANK_BUCKETS = 5


def rank_bucket(best_rank: npt.ArrayLike) -> IntArray:
    """The bucket of a 1-based best rank: 0 for rank 1, 1 for 2-3, 2 for 4-7, ... capped at RANK_BUCKETS - 1
    (ranks past the end, 0 or negative, count as the last bucket)."""
    rank = np.asarray(best_rank, dtype=np.int64)
    bucket = np.where(rank >= 1, np.floor(np.log2(np.maximum(rank, 1))).astype(np.int64), RANK_BUCKETS - 1)
    out: IntArray = np.minimum(bucket, RANK_BUCKETS - 1)
    return out


class Calibration(NamedTuple):
    """P(human grade | model grade, rank bucket) learned from the pairs both graded (see :func:`calibrate`)."""

    #: (B, G, G): table[b, m, h] = P(human grade h | model grade m, rank bucket b); each row sums to 1.
    table: FloatArray
    #: (G,) the human grades' distribution over every human label (smoothed): the row of a grade never seen.
    prior: FloatArray
    #: (B, G, G) pairs both graded, by rank bucket, model grade and human grade.
    counts: IntArray
    #: pairs both graded
    n_pairs: int
    #: quadratic-weighted Cohen's kappa between the model's and the people's grades on those pairs (NaN with
    #: fewer than 2 pairs or no spread): above 0 the model carries information, at or below it none.
    kappa: float

    @property
    def top_grade(self) -> int:
        return int(self.table.shape[-1]) - 1


def _weighted_kappa(human: IntArray, model: IntArray, n_grades: int) -> float:
    """Quadratic-weighted Cohen's kappa (Cohen 1968) of two raters on one scale; NaN without spread."""
    if human.size < 2:
        return float("nan")
    observed = np.zeros((n_grades, n_grades))
    np.add.at(observed, (human, model), 1.0)
    observed /= human.size
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    grades = np.arange(n_grades)
    weights = (grades[:, None] - grades[None, :]) ** 2 / max((n_grades - 1) ** 2, 1)
    denominator = float((weights * expected).sum())
    if denominator <= 0:
        return float("nan")
    return 1.0 - float((weights * observed).sum()) / denominator


def generic_confusion(n_grades: int) -> FloatArray:
    """:data:`GENERIC_CONFUSION` for a scale of ``n_grades`` grades. On another scale than 0-3, the same shape as a
    kernel: P(m | h) proportional to exp(-0.6 |m - h| * 3 / (n_grades - 1)), which on four grades is the matrix's
    first row (0.50, 0.27, 0.15, 0.08)."""
    if n_grades == 4:
        return GENERIC_CONFUSION.copy()
    if n_grades == 1:
        return np.ones((1, 1))
    grades = np.arange(n_grades)
    kernel = np.exp(-0.6 * np.abs(grades[:, None] - grades[None, :]) * 3.0 / (n_grades - 1))
    out: FloatArray = kernel / kernel.sum(axis=1, keepdims=True)
    return out


def calibrate(
    human: npt.ArrayLike,
    model: npt.ArrayLike,
    bucket: npt.ArrayLike,
    *,
    human_all: npt.ArrayLike,
    top_grade: int,
    prior_weight: float = PRIOR_WEIGHT,
) -> Calibration:
    """The calibration table from the pairs both a person and the model graded.

    Parameters
    ----------
    human, model, bucket : int arrays, shape (N,)
        For each pair both graded: the human label, the model's grade and the rank bucket of its best rank
        (:func:`rank_bucket`).
    human_all : int array
        Every human label of the campaign (the overall distribution the rows shrink toward).
    top_grade : int
        The scale's top grade; grades are 0..top_grade.
    prior_weight : float
        Dirichlet pseudo-counts of each shrinkage step.

    Returns
    -------
    Calibration

    Raises
    ------
    ValueError
        On arrays of different lengths, grades off the scale, buckets out of range or a negative weight.
    """
    h = np.asarray(human, dtype=np.int64).reshape(-1)
    m = np.asarray(model, dtype=np.int64).reshape(-1)
    b = np.asarray(bucket, dtype=np.int64).reshape(-1)
    every = np.asarray(human_all, dtype=np.int64).reshape(-1)
    if isinstance(top_grade, bool) or not isinstance(top_grade, int | np.integer) or top_grade < 0:
        raise ValueError(f"top_grade must be a whole number >= 0, got {top_grade!r}")
    if not (h.size == m.size == b.size):
        raise ValueError(f"human, model and bucket must have one length, got {h.size}, {m.size} and {b.size}")
    g = int(top_grade) + 1
    for name, values in (("human", h), ("model", m), ("human_all", every)):
        if values.size and (values.min() < 0 or values.max() > top_grade):
            raise ValueError(f"{name} grades must lie in 0..{top_grade}")
    if b.size and (b.min() < 0 or b.max() >= RANK_BUCKETS):
        raise ValueError(f"bucket must lie in 0..{RANK_BUCKETS - 1}")
    if not prior_weight >= 0:
        raise ValueError(f"prior_weight must be >= 0, got {prior_weight!r}")
    prior = (np.bincount(every, minlength=g) + 1.0) / (every.size + g)
    counts = np.zeros((RANK_BUCKETS, g, g), dtype=np.int64)
    np.add.at(counts, (b, m, h), 1)
    by_grade = counts.sum(axis=0).astype(np.float64)  # (G, G) over every bucket
    believed = prior[None, :] * generic_confusion(g).T  # (m, h): P(h) P(m | h) before the campaign's pairs
    prior_rows = believed / believed.sum(axis=1, keepdims=True)
    grade_rows = (by_grade + prior_weight * prior_rows) / (by_grade.sum(axis=1, keepdims=True) + prior_weight)
    cells = counts.astype(np.float64)
    table = (cells + prior_weight * grade_rows[None]) / (cells.sum(axis=2, keepdims=True) + prior_weight)
    if prior_weight == 0:  # rows never seen: the overall distribution, not 0 / 0
        table = np.where(cells.sum(axis=2, keepdims=True) > 0, table, prior[None, None, :])
        table = np.nan_to_num(table, nan=0.0)
    return Calibration(table, prior, counts, int(h.size), _weighted_kappa(h, m, g))


def pair_distributions(answers: npt.ArrayLike, bucket: npt.ArrayLike, calibration: Calibration) -> FloatArray:
    """(P, G) each pair's distribution over human grades.

    ``answers`` (P, G): how often the model gave each grade for the pair (a one-hot row for a single answer, the
    histogram of its repeated answers otherwise; a row of zeros for a pair the model never answered, which gets the
    overall distribution ``calibration.prior``). ``bucket`` (P,): each pair's rank bucket. The distribution is the
    mixture of the calibrated rows of the model's answers, weighted by their frequencies.
    """
    a = np.asarray(answers, dtype=np.float64)
    b = np.asarray(bucket, dtype=np.int64).reshape(-1)
    g = calibration.table.shape[-1]
    if a.ndim != 2 or a.shape[1] != g or a.shape[0] != b.size:
        raise ValueError(f"answers must be ({b.size}, {g}) to match bucket and the calibration, got {a.shape}")
    if (a < 0).any():
        raise ValueError("answers must be counts >= 0")
    total = a.sum(axis=1, keepdims=True)
    weights = np.divide(a, total, out=np.zeros_like(a), where=total > 0)
    dist: FloatArray = np.einsum("pm,pmh->ph", weights, calibration.table[b])
    none = total[:, 0] == 0
    dist[none] = calibration.prior
    return dist


def answer_likelihood(
    answers: npt.ArrayLike, bucket: npt.ArrayLike, calibration: Calibration, answered_by_bucket: npt.ArrayLike
) -> FloatArray:
    """(P, G) P(the model's answers for a pair | its human grade h), up to a factor per pair: the evidence the
    model's answers carry, to be weighed against another prior for the pair (its systems and ranks under the
    relevance model, metrics.relevance_model) instead of the campaign-wide rows of the table.

    The model's confusion P(m | h, b) comes from the calibrated table and how often the model gave each grade in
    each rank bucket over every pair it answered (``answered_by_bucket`` (B, G) counts): Bayes' rule,
    P(m | h, b) = P(h | m, b) P(m | b) / sum over m' of the same. Both factors are unbiased when the pairs people
    judge were chosen by the model's grade and the pair's ranks (the queues do), as the module's table is. A pair's
    repeated answers give the mixture of their rows, as in :func:`pair_distributions`; a pair never answered has
    a likelihood of 1 (no evidence).
    """
    a = np.asarray(answers, dtype=np.float64)
    b = np.asarray(bucket, dtype=np.int64).reshape(-1)
    seen = np.asarray(answered_by_bucket, dtype=np.float64)
    table = calibration.table
    n_b, g = table.shape[0], table.shape[-1]
    if a.ndim != 2 or a.shape != (b.size, g):
        raise ValueError(f"answers must be ({b.size}, {g}) to match bucket and the calibration, got {a.shape}")
    if seen.shape != (n_b, g) or (seen < 0).any() or (a < 0).any():
        raise ValueError(f"answered_by_bucket must be ({n_b}, {g}) counts >= 0 and answers counts >= 0")
    p_m = (seen + 1.0) / (seen.sum(axis=1, keepdims=True) + g)  # (B, m): P(m | b), Laplace-smoothed
    joint = table * p_m[:, :, None]  # (B, m, h): P(h | m, b) P(m | b)
    confusion = joint / np.maximum(joint.sum(axis=1, keepdims=True), 1e-300)  # P(m | h, b)
    total = a.sum(axis=1, keepdims=True)
    weights = np.divide(a, total, out=np.zeros_like(a), where=total > 0)
    out: FloatArray = np.einsum("pm,pmh->ph", weights, confusion[b])
    out[total[:, 0] == 0] = 1.0
    return out


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 arrays (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        out: np.ndarray = z ^ (z >> np.uint64(31))
        return out


def sample_grades(dist: npt.ArrayLike, keys: npt.ArrayLike, draws: int, *, seed: int = 0) -> npt.NDArray[np.int8]:
    """(P, draws) int8 human grades drawn from each pair's distribution ``dist`` (P, G) by inverse CDF.

    The uniforms are hashes of the pair's ``keys`` (P,) (e.g. :func:`metrics.keys.pair_keys`), the draw's
    number and ``seed``: the same pair gets the same draws wherever it appears (in every system's ranking and in
    its query's qrels), and the same labels state gives the same draws in any process.
    """
    d = np.asarray(dist, dtype=np.float64)
    k = np.asarray(keys).astype(np.uint64).reshape(-1)
    if d.ndim != 2 or d.shape[0] != k.size:
        raise ValueError(f"dist must be (len(keys), G), got {d.shape} for {k.size} keys")
    if isinstance(draws, bool) or not isinstance(draws, int | np.integer) or draws < 1:
        raise ValueError(f"draws must be a whole number >= 1, got {draws!r}")
    cdf = np.cumsum(d, axis=1)
    cdf /= np.where(cdf[:, -1:] > 0, cdf[:, -1:], 1.0)
    with np.errstate(over="ignore"):
        base = _mix(k * _GOLDEN + np.uint64(seed) * np.uint64(0xD1B54A32D192ED03))
        z = _mix(base[:, None] ^ (np.arange(1, draws + 1, dtype=np.uint64) * _GOLDEN)[None, :])
    u = (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))  # (P, draws) in [0, 1)
    grade = np.zeros(u.shape, dtype=np.int8)
    for edge in range(d.shape[1] - 1):  # over grades, a handful
        grade += (u >= cdf[:, edge : edge + 1]).astype(np.int8)
    return grade


# Ranked entries x draws evaluated at once by expected_scores (about 100 MB of temporaries).
_BLOCK_ENTRIES = 4_000_000


def expected_scores(
    labels: npt.ArrayLike,
    rows: npt.ArrayLike,
    qrels: npt.ArrayLike,
    qrels_rows: npt.ArrayLike,
    sampled: npt.ArrayLike,
    *,
    k: int = 10,
    threshold: int = 1,
    gain: str = "linear",
    judged_only: bool = False,
) -> tuple[dict[str, FloatArray], dict[str, FloatArray]]:
    """Each system's expected per-query score of every measure of :func:`metrics.evaluate`, over completions of the
    labels drawn from calibrated distributions.

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Ranked human labels (``UNJUDGED`` where no person judged, ``PAD`` past a run's end).
    rows : int array, shape (S, Q, D)
        For each UNJUDGED entry the model answered: its row in ``sampled``; -1 elsewhere (an entry no person and
        no model graded stays UNJUDGED, as in the human leaderboard).
    qrels : int array, shape (Q, M)
        Every human label of each query, padded with UNJUDGED.
    qrels_rows : int array, shape (Q, N)
        Each query's model-answered pairs without a human label (their rows in ``sampled``), padded with -1: they
        join the query's qrels in each completion (num_rel and the ideal ranking).
    sampled : int array, shape (P, T)
        T draws of each model-answered pair's human grade (:func:`sample_grades`).
    k, threshold, gain, judged_only
        As in :func:`metrics.evaluate` (condensed: a completion's drawn pairs count as judged).

    Returns
    -------
    means : dict of str to float arrays (S, Q)
        The mean over the T completions of each measure (the keys of metrics.evaluate).
    draws : dict of str to float arrays (S, Q, T)
        Each completion's values, for covariances between systems.
    """
    lab = np.asarray(labels)
    row = np.asarray(rows, dtype=np.int64)
    q = np.asarray(qrels)
    qr = np.asarray(qrels_rows, dtype=np.int64)
    draws = np.asarray(sampled, dtype=np.int8)
    if lab.ndim != 3 or row.shape != lab.shape:
        raise ValueError(f"labels and rows must be (S, Q, D) arrays of one shape, got {lab.shape} and {row.shape}")
    n_s, n_q, depth = lab.shape
    if q.ndim != 2 or q.shape[0] != n_q or qr.ndim != 2 or qr.shape[0] != n_q:
        raise ValueError("qrels and qrels_rows must have one row per query")
    if draws.ndim != 2:
        raise ValueError(f"sampled must be (P, T), got {draws.shape}")
    n_t = draws.shape[1]
    if row.size and row.max() >= draws.shape[0] or qr.size and qr.max() >= draws.shape[0]:
        raise ValueError("rows and qrels_rows must index sampled")
    if ((row >= 0) & (lab != UNJUDGED)).any():
        raise ValueError("rows may point only at UNJUDGED entries (a human label wins)")
    block = max(1, _BLOCK_ENTRIES // max(n_s * max(depth, 1) * n_t, 1))
    means: dict[str, FloatArray] = {}
    every: dict[str, FloatArray] = {}
    for start in range(0, n_q, block):  # blocks of queries, each with all its draws at once
        stop = min(start + block, n_q)
        nq = stop - start
        part_lab, part_row = lab[:, start:stop], row[:, start:stop]
        filled = np.repeat(part_lab[:, :, None, :], n_t, axis=2)  # (S, q, T, D)
        si, qi, di = np.nonzero(part_row >= 0)
        filled[si, qi, :, di] = draws[part_row[si, qi, di]]
        extra_rows = qr[start:stop]
        width = extra_rows.shape[1]
        extra = np.full((nq, n_t, width), UNJUDGED, dtype=np.int8)
        qj, wj = np.nonzero(extra_rows >= 0)
        extra[qj, :, wj] = draws[extra_rows[qj, wj]]
        rows_q = np.concatenate([np.repeat(q[start:stop, None, :], n_t, axis=1), extra], axis=2)
        result = evaluate(
            filled.reshape(n_s, nq * n_t, depth),
            rows_q.reshape(nq * n_t, -1),
            k=k,
            threshold=threshold,
            gain=gain,
            judged_only=judged_only,
        )
        for name, values in result.items():
            shaped = np.asarray(values, dtype=np.float64).reshape(n_s, nq, n_t)
            if name not in every:
                every[name] = np.empty((n_s, n_q, n_t))
            every[name][:, start:stop] = shaped
    for name, values in every.items():
        means[name] = values.mean(axis=2)
    if not every:  # no query: evaluate's keys with empty arrays
        empty = evaluate(np.full((n_s, 0, max(depth, 1)), PAD, dtype=np.int8), np.zeros((0, 1), np.int8), k=k)
        means = {name: np.zeros((n_s, 0)) for name in empty}
        every = {name: np.zeros((n_s, 0, n_t)) for name in empty}
    return means, every


def hybrid_order(
    labels: npt.ArrayLike,
    qrels: npt.ArrayLike,
    doc_ids: npt.ArrayLike,
    pair_keys: npt.ArrayLike,
    pair_dist: npt.ArrayLike,
    prior: npt.ArrayLike,
    expected: npt.ArrayLike,
    *,
    query_ids: npt.ArrayLike,
    k: int = 10,
    gain: str = "linear",
) -> Selection:
    r"""Every unjudged pooled pair in the order hybrid judging serves it to people: first those the model judge did not
    answer (nothing else stands for them), then by how much a person's label would move the ranking given the
    model's calibrated reading of the pair.

    A system's nDCG@k is, to first order, its known part plus ``sum_d w_s(d) x_d`` over its unjudged documents
    (``x_d`` the document's gain as a share of the top grade's, ``w_s(d)`` its rank's discount over the query's
    ideal DCG so far: :func:`metrics.selection.mtc_weights`, after Carterette, Allan & Sitaraman, SIGIR 2006). For
    systems a and b adjacent in the ranking by ``expected`` (S,) (the hybrid leaderboard's expected means over the
    queries), the difference moves with ``c_d = w_a(d) - w_b(d)`` per document; with the
    documents' variances ``v_d`` under their distributions (the calibrated ones of ``pair_dist``, the campaign's
    ``prior`` for documents the model did not answer), the difference's standard deviation is
    :math:`\sigma_{ab} = \sqrt{\sum_d c_d^2 v_d} / Q` for the means (documents independent). A document's score is

    .. math:: \sum_{(a, b)} |c_d| \sqrt{v_d}\; \varphi(\Delta_{ab} / \sigma_{ab}) / \sigma_{ab}

    the expected movement of each comparison's difference that judging it brings (uncertainty sampling: a pair the
    model is sure of moves nothing), weighted by the density at zero of that difference (MTC's "where the order is
    still uncertain", made smooth: comparisons far from a flip count little). People judge where it matters and
    the model labels the rest (LARA, Takehi et al., SIGIR 2025, chooses the pairs to ask people by the model's
    uncertainty alike).

    Parameters
    ----------
    labels, qrels, doc_ids
        The human labels as :func:`metrics.selection.mtc_order` takes them, (S, Q, D), (Q, M), (S, Q, D).
    pair_keys : int array (A,)
        Sorted keys (:func:`metrics.keys.pair_keys`) of the pairs the model answered (people-judged ones may be
        among them: only unjudged entries are looked up).
    pair_dist : float array (A, G)
        Each of those pairs' distribution over the grades 0..G-1 (:func:`pair_distributions`).
    prior : float array (G,)
        The grade distribution of a pair the model did not answer.
    expected : float array (S,)
        Each system's expected mean score over the Q queries: the ranking whose adjacent comparisons are weighed.
    query_ids : int array (Q,)
        The query id of each query position (the keys' high half).
    k, gain
        nDCG's cutoff and gain.

    Returns
    -------
    Selection
        Query positions, document ids and scores, most urgent first; the unanswered pairs first (score
        ``1 + their own score``, scores of answered pairs are below 1 only after scaling: see the code).
    """
    lab = np.asarray(labels)
    ids = np.asarray(doc_ids, dtype=np.int64)
    keys = np.asarray(pair_keys, dtype=np.int64)
    dist = np.asarray(pair_dist, dtype=np.float64)
    base = np.asarray(prior, dtype=np.float64)
    qids = np.asarray(query_ids, dtype=np.int64)
    score_s = np.asarray(expected, dtype=np.float64)
    n_s, n_q, depth = lab.shape
    n_g = base.size
    top_grade = n_g - 1
    _, weights = mtc_weights(lab, qrels, measure="nDCG", k=k, top_grade=max(top_grade, 1), gain=gain)
    ent = unjudged_entries(lab, ids, None)
    n_pairs = ent.query.size
    if n_pairs == 0:
        return Selection(ent.query, ent.doc, np.zeros(0))
    grade_gain = np.asarray(gain_values(np.arange(n_g), gain), dtype=np.float64)
    share = grade_gain / max(float(grade_gain[-1]), 1e-12)  # x for each grade: its gain as a share of the top's
    wanted = make_pair_keys(qids[ent.query], ent.doc)
    at = np.minimum(np.searchsorted(keys, wanted), max(keys.size - 1, 0))
    answered = (keys.size > 0) & (keys[at] == wanted) if keys.size else np.zeros(n_pairs, dtype=bool)
    rows = np.where(answered[:, None], dist[at] if keys.size else base[None, :], base[None, :])
    mean_x = rows @ share
    var_x = np.maximum(rows @ share**2 - mean_x**2, 0.0)
    w = weights[ent.system, ent.query[ent.pair], ent.rank]
    order = np.lexsort((np.arange(n_s), -score_s))
    score = np.zeros(n_pairs)
    for a, b, touched, coef in adjacent_coefficients(ent.system, ent.pair, w, order):
        # the weights move one query's score: the mean over the Q queries moves by 1/Q of it
        sigma = float(np.sqrt(np.sum(coef**2 * var_x[touched]))) / max(n_q, 1)
        if sigma <= 0:
            continue
        delta = score_s[a] - score_s[b]
        density = np.exp(-0.5 * (delta / sigma) ** 2) / (np.sqrt(2 * np.pi) * sigma)
        score[touched] += np.abs(coef) * np.sqrt(var_x[touched]) * density
    tier = (~answered).astype(np.int64)  # the pairs the model did not answer: people first
    best_rank = np.full(n_pairs, np.iinfo(np.int64).max)
    np.minimum.at(best_rank, ent.pair, ent.rank)
    ranked = np.lexsort((ent.doc, ent.query, best_rank, -np.round(score, 12), -tier))
    return Selection(ent.query[ranked], ent.doc[ranked], (score + tier * (1.0 + score.max(initial=0.0)))[ranked])
