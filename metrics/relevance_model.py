"""The relevance model behind ``p_holds``, and Monte Carlo draws of the final scores under it.

Each unjudged pooled document is relevant with a rate learned from the campaign's own judgments per system
and rank (shrunk to the rank's rate across systems, then to the campaign's), scaled by a per-query factor
drawn from its Gamma posterior (queries differ in how many relevant documents they hold). Per query, draws of
the final scores give each system's mean and the covariance between systems.

References
----------
Carterette, B., Allan, J. & Sitaraman, R. (2006). Minimal test collections for retrieval evaluation. SIGIR.
Aslam, J. A., Pavlu, V. & Yilmaz, E. (2006). A statistical method for system evaluation using incomplete
judgments. SIGIR.
Carterette, B. (2007). Robust test collections for retrieval evaluation. SIGIR.
Wilson, E. B. & Hilferty, M. M. (1931). The distribution of chi-square. PNAS 17(12).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import sparse
from scipy.special import ndtri

from metrics._types import FloatArray, IntArray
from metrics.bounds import grade_counts, idcg_from_counts
from metrics.keys import pair_keys
from metrics.ranking import (
    UNJUDGED,
    average_precision,
    bpref,
    f1,
    gain_values,
    hit,
    ndcg,
    precision,
    rank_discounts,
    recall,
    reciprocal_rank,
    safe_divide,
)
from metrics.verdicts import N_BUCKETS, WHOLE_RUN_BASES, FinalPool, rank_bucket

__all__ = ["SAMPLES_MIN", "Answers", "LabelModel", "doc_prior", "label_model", "list_signature", "sample_scores"]

# Beyond this many samples per query the per-query mean and covariance move no more than the model is worth.
SAMPLES_MAX = 256
SAMPLES_MIN = 32
SAMPLE_BUDGET = 1_500_000  # ranked entries x samples evaluated per call at most (about 50 ms)


# ------------------------------------------------------------------------------------------ the label model


class LabelModel(NamedTuple):
    """Relevance rates learned from the judged pooled documents (see the module's references)."""

    cell_rate: FloatArray  # (S * N_BUCKETS,) P(relevant) per system and rank bucket
    runs_factor: FloatArray  # (N_BUCKETS,) correction by how many runs pooled the document (bucketed)
    grade_cdf: FloatArray  # (top_grade,) CDF of the grade of a relevant document over grades 1..top
    kappa: float  # Gamma prior strength of the per-query factor (mean 1)
    top_grade: int


class Answers(NamedTuple):
    """A model judge's calibrated reading of the pairs it answered and no person judged (metrics.hybrid): their
    unjudged pooled documents draw their grade from ``dist`` instead of the relevance model (hybrid judging)."""

    query_ids: IntArray  # (Q,) the query id of each query of the pool, in the pool's order
    keys: IntArray  # (A,) sorted pair keys (metrics.keys.pair_keys)
    dist: FloatArray  # (A, G) each pair's distribution over the human grades 0..top
    #: (A, G) P(the model's answers | human grade h) up to a factor per pair (metrics.hybrid.answer_likelihood),
    #: or None. Given, a pair's grade is drawn from the relevance model's prior for it in that draw (its systems
    #: and ranks, its query's factor) times this likelihood, instead of from ``dist``: see :func:`_draw`.
    likelihood: FloatArray | None = None


def answered_relevance(pool: FinalPool, answers: Answers) -> FloatArray:
    """(P,) the calibrated P(relevant) of each pooled document a model judge answered and no person judged (1 minus
    its distribution's grade 0), NaN for the others: :func:`label_model`'s ``soft`` labels in hybrid judging.

    People judge the pairs a queue chose (in hybrid mode, those the model is unsure of), so their labels alone
    misstate the relevance rates of the rest; the model's calibrated answers cover every pair and are unbiased
    given the model's grade and the pair's best rank (metrics.hybrid), so the rates are learned from both."""
    soft = np.full(pool.pool_label.shape, np.nan)
    if answers.keys.size and pool.doc_id.size:
        wanted = pair_keys(answers.query_ids[pool.doc_query], pool.doc_id)
        at = np.minimum(np.searchsorted(answers.keys, wanted), answers.keys.size - 1)
        hit = answers.keys[at] == wanted
        soft[pool.unjudged_at[hit]] = 1.0 - answers.dist[at[hit], 0]
    return soft


PRIOR_WEIGHT = 10.0  # pseudo-judgments behind each shrunken rate
KAPPA_MAX = 5.0  # the per-query factor is never taken as surer than this many pseudo-documents


def _mean_rate(pool: FinalPool, cell_rate: FloatArray) -> FloatArray:
    """(P,) mean (system, rank) rate over the runs that pooled each document."""
    n = pool.pool_query.size
    total = np.bincount(pool.entry_doc, weights=cell_rate[pool.entry_cell], minlength=n)
    out: FloatArray = total / np.maximum(pool.pool_runs, 1)
    return out


def doc_prior(pool: FinalPool, model: LabelModel) -> FloatArray:
    """(P,) P(relevant) of every pooled document under ``model``, before its query's factor."""
    out: FloatArray = np.clip(
        _mean_rate(pool, model.cell_rate) * model.runs_factor[rank_bucket(pool.pool_runs - 1)], 1e-6, 0.999
    )
    return out


def label_model(pool: FinalPool, *, top_grade: int, n_systems: int, soft: FloatArray | None = None) -> LabelModel:
    """Fit the relevance rates on every judged pooled document of ``pool`` (the campaign's every query).

    P(relevant) (a grade of 1 or more) per system and rank bucket (ranks 1, 2-3, 4-7, ...) of the pool
    entries, shrunk toward the bucket's rate over all systems and that toward the campaign's rate
    (``PRIOR_WEIGHT`` pseudo-judgments each). A document's prior is the mean over the runs that pooled it,
    times a factor by how many runs did (a document many runs found is more often relevant), fitted on the
    judged documents the same way. Each query's factor has a Gamma(kappa, kappa) prior whose strength is
    fitted by moments on the queries' relevant counts against their expected ones (over-dispersion beyond
    Poisson noise), capped at ``KAPPA_MAX``: the judged documents were chosen by the queue, not at random.

    ``soft`` (P,): in hybrid judging, a model judge's calibrated P(relevant) of the pooled documents no person
    judged (NaN elsewhere; :func:`answered_relevance`): they count in the rates as fractional judgments, and the
    grade distribution and the queries' factor stay people's.
    """
    human = pool.pool_label >= 0
    rel = (pool.pool_label >= 1).astype(np.float64)
    judged = human
    if soft is not None:  # a model judge's calibrated P(relevant) stands in where no person judged
        known = ~human & np.isfinite(soft)
        rel = np.where(known, np.nan_to_num(soft), rel)
        judged = human | known
    entry_judged = judged[pool.entry_doc]
    n_cells = n_systems * N_BUCKETS
    n_cell = np.bincount(pool.entry_cell[entry_judged], minlength=n_cells).astype(np.float64)
    r_cell = np.bincount(pool.entry_cell[entry_judged], weights=rel[pool.entry_doc][entry_judged], minlength=n_cells)
    overall = (r_cell.sum() + 1.0) / (n_cell.sum() + 2.0)
    n_b = n_cell.reshape(n_systems, N_BUCKETS).sum(axis=0)
    r_b = r_cell.reshape(n_systems, N_BUCKETS).sum(axis=0)
    bucket_rate = (r_b + PRIOR_WEIGHT * overall) / (n_b + PRIOR_WEIGHT)
    cell_rate = (r_cell + PRIOR_WEIGHT * np.tile(bucket_rate, n_systems)) / (n_cell + PRIOR_WEIGHT)
    grades = np.bincount(pool.pool_label[human & (rel > 0)], minlength=top_grade + 1)[1 : top_grade + 1]
    grade_cdf = np.cumsum((grades + 1.0) / (grades.sum() + max(top_grade, 1))) if top_grade >= 1 else np.zeros(0)
    mean_rate = np.clip(_mean_rate(pool, cell_rate), 1e-6, 0.999)
    rb = rank_bucket(pool.pool_runs - 1)
    exp_b = np.bincount(rb[judged], weights=mean_rate[judged], minlength=N_BUCKETS)
    got_b = np.bincount(rb[judged], weights=rel[judged], minlength=N_BUCKETS)
    runs_factor = (got_b + PRIOR_WEIGHT * overall) / (exp_b + PRIOR_WEIGHT * overall)
    model = LabelModel(cell_rate, runs_factor, grade_cdf, 2.0, top_grade)
    n_q = pool.distinct.size
    got_q, exp_q = _query_evidence(pool, doc_prior(pool, model), n_q)
    seen = exp_q >= 1.0
    kappa = 2.0
    if seen.sum() >= 5:
        ratio = got_q[seen] / exp_q[seen]
        excess = float(np.var(ratio) - np.mean(ratio / exp_q[seen]))
        kappa = float(np.clip(1.0 / max(excess, 0.05), 0.5, KAPPA_MAX))
    return model._replace(kappa=kappa)


def pair_prior(pool: FinalPool, model: LabelModel) -> FloatArray:
    """(U, G) each unjudged pooled document's distribution over the grades 0..top under ``model`` in expectation
    over its query's factor: P(relevant) = its prior times the factor's posterior mean (kappa + relevant found)
    / (kappa + relevant expected), split over the relevant grades by ``model.grade_cdf``. What the Monte Carlo
    draws average to, as one row per document (hybrid judging weighs a model judge's answer against it)."""
    n_q = pool.distinct.size
    prior_all = doc_prior(pool, model)
    got_q, exp_q = _query_evidence(pool, prior_all, n_q)
    factor = (model.kappa + got_q) / (model.kappa + exp_q)
    p = np.clip(prior_all[pool.unjudged_at] * factor[pool.doc_query], 1e-6, 1.0 - 1e-6)
    if model.top_grade < 1:
        return np.ones((p.size, 1))
    shares = np.diff(model.grade_cdf, prepend=0.0) / max(float(model.grade_cdf[-1]), 1e-12)
    out: FloatArray = np.concatenate([(1.0 - p)[:, None], p[:, None] * shares[None, :]], axis=1)
    return out


def _query_evidence(pool: FinalPool, prior: FloatArray, n_q: int) -> tuple[FloatArray, FloatArray]:
    """(Q,) relevant judged pooled documents per query, and how many the model expected of them."""
    judged = pool.pool_label >= 0
    rel = (pool.pool_label[judged] >= 1).astype(np.float64)
    got: FloatArray = np.bincount(pool.pool_query[judged], weights=rel, minlength=n_q).astype(np.float64)
    expected: FloatArray = np.bincount(pool.pool_query[judged], weights=prior[judged], minlength=n_q).astype(np.float64)
    return got, expected


# ------------------------------------------------------------------------------------------ Monte Carlo


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 arrays (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        out: np.ndarray = z ^ (z >> np.uint64(31))
        return out


def _key(*parts: np.ndarray) -> np.ndarray:
    """A uint64 hash of integer arrays (broadcast), mixed after each part."""
    z = np.zeros(np.broadcast_shapes(*(p.shape for p in parts)), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for part in parts:
            z = _mix((z ^ part.astype(np.uint64)) + _GOLDEN)
    return z


def _gamma_quantile(shape: FloatArray, u: FloatArray) -> FloatArray:
    """Gamma(shape, 1) quantiles by the Wilson-Hilferty cube of a normal (Wilson & Hilferty, PNAS 1931),
    0 below: close for shapes from 1 on, and a far cheaper draw than the exact inverse."""
    z = ndtri(np.clip(u, 1e-12, 1 - 1e-12))
    cube = np.maximum(1.0 - 1.0 / (9.0 * shape) + z / (3.0 * np.sqrt(shape)), 0.0)
    out: FloatArray = shape * cube**3
    return out


def list_signature(doc_ids: npt.ArrayLike) -> np.ndarray:
    """(S, Q) uint64 hash of each ranked list (S, Q, D) of document ids, rank by rank: two systems with the
    same list for a query score the same there whatever the labels (a 64-bit hash: a collision is vanishingly rare)."""
    docs = np.asarray(doc_ids, dtype=np.int64)
    ranks = _mix(np.arange(docs.shape[-1], dtype=np.uint64) * _GOLDEN + np.uint64(1))
    hashed = _mix((docs + 1).astype(np.uint64) ^ ranks)
    out: np.ndarray = np.bitwise_xor.reduce(hashed, axis=-1) if docs.shape[-1] else np.zeros(docs.shape[:2], np.uint64)
    return out


def _unit(z: np.ndarray) -> FloatArray:
    """The top 53 bits of uint64 hashes as uniforms in [0, 1)."""
    out: FloatArray = (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
    return out


def _measure(base: str, lab: np.ndarray, qrels: np.ndarray, *, k: int, threshold: int, gain: str) -> FloatArray:
    if base == "P":
        return precision(lab, k=k, threshold=threshold)
    if base == "R":
        return recall(lab, qrels, k=k, threshold=threshold)
    if base == "F1":
        return f1(lab, qrels, k=k, threshold=threshold)
    if base == "Hit":
        return hit(lab, k=k, threshold=threshold)
    if base == "MRR":
        return reciprocal_rank(lab, threshold=threshold)
    if base == "MAP":
        return average_precision(lab, qrels, threshold=threshold)
    if base == "nDCG":
        return ndcg(lab, qrels, k=k, gain=gain)
    if base == "bpref":
        return bpref(lab, qrels, threshold=threshold)
    raise ValueError(f"no measure {base!r}")


def _draw(
    model: LabelModel,
    pool: FinalPool,
    prior: FloatArray,
    got_q: FloatArray,
    exp_q: FloatArray,
    seeds: IntArray,
    qs: IntArray,
    docs: IntArray,
    m: int,
    answers: Answers | None = None,
) -> np.ndarray:
    """(len(docs), m) int8 sampled grades of the unjudged pooled documents ``docs`` of the queries ``qs``; those a
    model judge answered (``answers``) draw from their calibrated distribution."""
    local_q = np.searchsorted(qs, pool.doc_query[docs])
    slot = docs - np.searchsorted(pool.doc_query, pool.doc_query[docs])  # the document's place in its query
    # the query's factor: Gamma(kappa + relevant found, kappa + relevant expected), by inverse CDF
    shape, rate = model.kappa + got_q[qs], model.kappa + exp_q[qs]
    # deterministic draws keyed by (query seed, document's place in its query, draw): the same whoever
    # computes them, so a query patched after a judgment and a campaign computed afresh agree
    draw = np.arange(m, dtype=np.uint64) * _GOLDEN
    u_q = _unit(_mix(_key(seeds[qs], np.array(1))[:, None] ^ draw[None, :]))
    factor = _gamma_quantile(shape[:, None], u_q) / rate[:, None]  # (Qc, m)
    doc_key = _key(seeds[pool.doc_query[docs]], slot, np.array(2))
    z = _mix(doc_key[:, None] ^ draw[None, :])  # (Uc, m): one hash per document and draw
    u_rel = _unit(z)
    relevant = u_rel < np.clip(prior[docs][:, None] * factor[local_q], 0.0, 1.0)
    if model.top_grade < 1:
        return np.zeros(relevant.shape, dtype=np.int8)
    # the grade from the hash's low 32 bits (independent enough of the top 53 for a few grades)
    u_g = (z & np.uint64(0xFFFFFFFF)).astype(np.float64) * (model.grade_cdf[-1] / 4294967296.0)
    grade = np.ones(z.shape, dtype=np.int8)
    for edge in model.grade_cdf[:-1].tolist():  # over grades, a handful
        grade += u_g >= edge
    out: np.ndarray = np.where(relevant, grade, 0).astype(np.int8)
    if answers is not None and answers.keys.size:
        keys = pair_keys(answers.query_ids[pool.doc_query[docs]], pool.doc_id[docs])
        at = np.minimum(np.searchsorted(answers.keys, keys), answers.keys.size - 1)
        hit = answers.keys[at] == keys
        if hit.any():
            u = u_rel[hit]  # (H, m): the same uniforms, now read through the pair's own distribution
            if answers.likelihood is None:
                cdf = np.cumsum(answers.dist[at[hit]], axis=1)[:, None, :]  # (H, 1, G)
            else:
                # the model's answers as evidence on the relevance model's prior of this draw: P(h) is
                # (1 - p) for grade 0 and p times the grade's share among relevant ones, p the document's prior
                # times its query's factor in the draw (so the pairs of a query move together)
                p = np.clip(prior[docs][hit][:, None] * factor[local_q[hit]], 1e-6, 1.0 - 1e-6)  # (H, m)
                shares = np.diff(model.grade_cdf, prepend=0.0) / max(float(model.grade_cdf[-1]), 1e-12)
                before = np.concatenate([(1.0 - p)[..., None], p[..., None] * shares[None, None, :]], axis=2)
                cdf = np.cumsum(before * answers.likelihood[at[hit]][:, None, :], axis=2)  # (H, m, G)
            cdf /= np.where(cdf[..., -1:] > 0, cdf[..., -1:], 1.0)
            drawn = np.zeros(u.shape, dtype=np.int8)
            for edge in range(cdf.shape[2] - 1):  # over grades, a handful
                drawn += (u >= cdf[..., edge]).astype(np.int8)
            out[hit] = drawn
    return out


def _sparse(data: FloatArray, row: IntArray, col: IntArray, shape: tuple[int, int]) -> sparse.csr_matrix:
    """A (rows, documents) CSR matrix of float64 weights."""
    return sparse.csr_matrix((data.astype(np.float64), (row, col)), shape=shape, dtype=np.float64)


ADDITIVE = ("P", "R", "F1", "Hit", "nDCG")  # scored from the draws by a sparse product
RANKED = ("MAP", "MRR")  # scored from the sampled rankings directly; bpref through metrics.bpref


def _additive_values(
    base: str,
    lab: np.ndarray,
    idx: IntArray,
    qrels: np.ndarray,
    sampled: np.ndarray,
    doc_local_q: IntArray,
    *,
    k: int,
    threshold: int,
    gain: str,
    top_grade: int,
) -> FloatArray:
    """(S, Qc, m) sampled final scores of a measure that sums over ranks within k (P, R, F1, Hit, nDCG):
    the judged entries' part once, the unjudged pooled entries' by one sparse product with the draws."""
    n_s, n_qc, depth = lab.shape
    m = sampled.shape[1]
    n_u = sampled.shape[0]
    si, qi, ri = np.nonzero(idx >= 0)
    row = si * n_qc + qi
    col = idx[si, qi, ri]
    if base == "nDCG":
        disc = rank_discounts(depth)
        judged = ((gain_values(lab, gain) * (lab >= 0)) * disc).sum(axis=-1)
        weights = _sparse(disc[ri], row, col, (n_s * n_qc, n_u))
        dcg = judged.reshape(-1, 1) + weights @ gain_values(sampled, gain)
        g = top_grade + 1
        counts = np.broadcast_to(grade_counts(qrels, g)[:, None, :], (n_qc, m, g)).copy()
        cell = (doc_local_q[:, None] * m + np.arange(m)[None, :]) * g + sampled.astype(np.int64)
        counts += np.bincount(cell.reshape(-1), minlength=n_qc * m * g).reshape(n_qc, m, g)
        idcg = idcg_from_counts(counts, k, gain)  # (Qc, m)
        out: FloatArray = safe_divide(dcg.reshape(n_s, n_qc, m), idcg[None])
        return out
    ones = _sparse(np.ones(row.size), row, col, (n_s * n_qc, n_u))
    sampled_rel = (sampled >= threshold).astype(np.float64)
    rel = (np.count_nonzero(lab >= threshold, axis=-1).reshape(-1, 1) + ones @ sampled_rel).reshape(n_s, n_qc, m)
    if base == "P":
        p_at_k: FloatArray = rel / k
        return p_at_k
    if base == "Hit":
        hit_: FloatArray = (rel > 0).astype(np.float64)
        return hit_
    num_rel = np.count_nonzero(qrels >= threshold, axis=-1)[:, None] + np.bincount(
        np.repeat(doc_local_q, m) * m + np.tile(np.arange(m), n_u), weights=sampled_rel.reshape(-1), minlength=n_qc * m
    ).reshape(n_qc, m)
    if base == "R":
        return safe_divide(rel, num_rel[None])
    return safe_divide(2.0 * rel, np.where(num_rel > 0, k + num_rel, 0)[None])


def _ranked_values(
    base: str, filled: np.ndarray, qrels: np.ndarray, sampled: np.ndarray, doc_local_q: IntArray, *, threshold: int
) -> FloatArray:
    """(S, Qc, m) AP or RR of the sampled rankings ``filled`` (S, Qc, m, D), as metrics.average_precision and
    metrics.reciprocal_rank compute them (num_rel from the judged row and the query's sampled documents)."""
    n_s, n_qc, m, depth = filled.shape
    rel = filled >= threshold
    if base == "MRR":
        first = np.argmax(rel, axis=-1)
        rr: FloatArray = np.where(rel.any(axis=-1), 1.0 / (first + 1.0), 0.0)
        return rr
    found = np.cumsum(rel, axis=-1, dtype=np.int32)
    precision_sum = np.einsum("sqmd,d->sqm", found * rel, 1.0 / np.arange(1, depth + 1))
    sampled_rel = (sampled >= threshold).astype(np.float64)
    num_rel = np.count_nonzero(qrels >= threshold, axis=-1)[:, None] + np.bincount(
        np.repeat(doc_local_q, m) * m + np.tile(np.arange(m), sampled.shape[0]),
        weights=sampled_rel.reshape(-1),
        minlength=n_qc * m,
    ).reshape(n_qc, m)
    return safe_divide(precision_sum, num_rel[None])


def sample_scores(
    base: str,
    pool: FinalPool,
    qrels: npt.ArrayLike,
    model: LabelModel,
    *,
    k: int,
    threshold: int,
    gain: str,
    seeds: npt.ArrayLike,
    samples: int | None = None,
    answers: Answers | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Per query, each system's expected final score (S, Q) and the covariance of the systems' final scores
    (Q, S, S), from Monte Carlo samples of the pooled unjudged labels under ``model`` (and, for the pairs a model
    judge answered, under their calibrated distributions ``answers``: hybrid judging).

    ``seeds`` (Q,) int: one per query (its id and labels version), so a query's samples are the same whatever
    else changed. Queries without a pooled unjudged document are exact (their covariance is 0). P, R, F1,
    Hit and nDCG add up over ranks: their draws enter through one sparse product per chunk of queries; MRR,
    MAP and bpref are scored per draw.
    """
    q = np.asarray(qrels)
    lab_all = pool.labels if base in WHOLE_RUN_BASES else pool.labels[..., :k]
    idx_all = pool.doc_index if base in WHOLE_RUN_BASES else pool.doc_index[..., :k]
    n_s, n_q, depth = lab_all.shape
    seeds = np.asarray(seeds, dtype=np.int64)
    mean = np.zeros((n_s, n_q))
    cov = np.zeros((n_q, n_s, n_s))
    open_q = np.flatnonzero(pool.distinct > 0)
    shut = np.flatnonzero(pool.distinct == 0)
    if shut.size:
        mean[:, shut] = _measure(base, lab_all[:, shut], q[shut], k=k, threshold=threshold, gain=gain)
    if not open_q.size:
        return mean, cov
    if samples is None:
        per_query = n_s * max(depth, 1)
        samples = int(np.clip(SAMPLE_BUDGET // max(per_query * open_q.size, 1), SAMPLES_MIN, SAMPLES_MAX))
    m = samples
    prior_all = doc_prior(pool, model)
    got_q, exp_q = _query_evidence(pool, prior_all, n_q)
    prior = prior_all[pool.unjudged_at]  # (U,) the unjudged pooled documents'
    additive = base in ADDITIVE
    per_entry = max(int(pool.distinct[open_q].mean()), 1) if additive else n_s * max(depth, 1)
    chunk = max(1, SAMPLE_BUDGET // max(per_entry * m, 1))
    starts = np.searchsorted(pool.doc_query, open_q)
    ends = np.searchsorted(pool.doc_query, open_q, side="right")
    for c0 in range(0, open_q.size, chunk):  # chunks of queries, each vectorized
        qs = open_q[c0 : c0 + chunk]
        lo, hi = int(starts[c0]), int(ends[c0 + qs.size - 1])
        docs = np.arange(lo, hi)
        sampled = _draw(model, pool, prior, got_q, exp_q, seeds, qs, docs, m, answers)  # (Uc, m)
        local_q = np.searchsorted(qs, pool.doc_query[docs])
        lab = lab_all[:, qs]  # (S, Qc, D)
        idx = np.where(idx_all[:, qs] >= 0, idx_all[:, qs] - lo, -1)
        if additive:
            values = _additive_values(
                base, lab, idx, q[qs], sampled, local_q, k=k, threshold=threshold, gain=gain, top_grade=model.top_grade
            )
        else:
            filled = np.repeat(lab[:, :, None, :], m, axis=2)  # (S, Qc, m, D)
            si, qi, di = np.nonzero(idx >= 0)
            filled[si, qi, :, di] = sampled[idx[si, qi, di]]
            if base in RANKED:
                values = _ranked_values(base, filled, q[qs], sampled, local_q, threshold=threshold)
            else:
                # bpref: the judged row and the query's sampled documents as qrels
                width = int(np.max(pool.distinct[qs]))
                extra = np.full((qs.size, m, width), UNJUDGED, dtype=np.int8)
                slot = docs - np.searchsorted(pool.doc_query, pool.doc_query[docs])
                extra[local_q, :, slot] = sampled
                rows = np.concatenate([np.repeat(q[qs][:, None, :], m, axis=1), extra], axis=2)
                values = _measure(
                    base,
                    filled.reshape(n_s, qs.size * m, depth),
                    rows.reshape(qs.size * m, -1),
                    k=k,
                    threshold=threshold,
                    gain=gain,
                ).reshape(n_s, qs.size, m)
        mu = values.mean(axis=2)
        centred = values - mu[..., None]
        mean[:, qs] = mu
        cov[qs] = np.einsum("aqm,bqm->qab", centred, centred) / max(m - 1, 1)
    return mean, cov
