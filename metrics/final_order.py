"""The final order of systems: per-query parts of every comparison, and the verdicts they give.

:func:`query_parts` gathers, per query, what metrics.verdicts says of one measure: sound score and
numerator/denominator bounds, and the sampled mean and covariance of the systems' final scores.
:func:`order_verdicts` sums them over the queries the final means will hold and names each comparison
``settled`` (no grading flips it), ``tied`` (no grading parts the two), ``likely`` (``p_holds`` at least the
confidence) or ``open``.

References
----------
Carterette, B., Allan, J. & Sitaraman, R. (2006). Minimal test collections for retrieval evaluation. SIGIR.
Aslam, J. A., Pavlu, V. & Yilmaz, E. (2006). A statistical method for system evaluation using incomplete
judgments. SIGIR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import ndtr  # the normal CDF (scipy.stats costs half a second to import)

from metrics._types import FloatArray
from metrics.relevance_model import Answers, LabelModel, list_signature, sample_scores
from metrics.verdicts import FinalPool, verdict_parts

__all__ = [
    "CONFIDENCE",
    "OrderVerdicts",
    "QueryParts",
    "QueryStack",
    "judgments_to_stop",
    "order_verdicts",
    "query_parts",
]

CONFIDENCE = 0.95  # p_holds from which an order is "likely"
EPS = 1e-9  # summed differences this close to 0 are 0 (float noise of per-query scores)


class QueryStack:
    """A (Q, S, S) array kept as blocks of ``BLOCK`` queries, read through :meth:`gather`.

    After a judgment one query's part changes: :meth:`patched` copies the blocks of the changed queries only,
    not the whole array (at 5,000 queries and 20 systems a covariance array is 8 MB; copying it and the
    overlap array was most of the leaderboard's work after a judgment). The blocks are never written once
    made, so a value other threads read stays as it was.
    """

    BLOCK = 256

    def __init__(self, blocks: list[np.ndarray], n: int) -> None:
        self.blocks = blocks
        self.n = n

    @classmethod
    def of(cls, array: npt.ArrayLike) -> QueryStack:
        a = np.asarray(array)
        return cls([a[i : i + cls.BLOCK] for i in range(0, a.shape[0], cls.BLOCK)] or [a], a.shape[0])

    def gather(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """(Q, C): ``array[:, a, b]``, block by block, each read as (queries, S * S) at the flat positions
        ``a * S + b`` (one index where ``block[:, a, b]`` took two: a third of the time)."""
        blocks = self.blocks
        flat = np.asarray(a, dtype=np.intp) * blocks[0].shape[2] + np.asarray(b, dtype=np.intp)
        n = blocks[0].shape[1] * blocks[0].shape[2]
        got: list[np.ndarray] = [np.take(block.reshape(block.shape[0], n), flat, axis=1) for block in blocks]
        return got[0] if len(got) == 1 else np.concatenate(got)

    def __array__(self, dtype: npt.DTypeLike = None, copy: bool | None = None) -> np.ndarray:
        whole = np.concatenate(self.blocks) if len(self.blocks) > 1 else self.blocks[0]
        return whole if dtype is None else whole.astype(dtype)

    def patched(self, new: npt.ArrayLike, dirty: np.ndarray) -> QueryStack:
        """A stack with the queries ``dirty`` (ascending positions) replaced by the rows of ``new``."""
        rows = np.asarray(new)
        blocks = list(self.blocks)
        which = np.asarray(dirty) // self.BLOCK
        for block in np.unique(which).tolist():  # over the changed queries' blocks (one after a judgment)
            inside = which == block
            fresh = blocks[block].copy()
            fresh[np.asarray(dirty)[inside] - block * self.BLOCK] = rows[inside]
            blocks[block] = fresh
        return QueryStack(blocks, self.n)


@dataclass(frozen=True)
class QueryParts:
    """Per query (Q), for one measure: bounds and sampled moments of the systems' final scores."""

    low: np.ndarray  # (S, Q) sound score bounds
    high: np.ndarray
    num_low: np.ndarray | None  # (S, Q) numerator bounds over a denominator shared by the query's systems
    num_high: np.ndarray | None
    den_low: np.ndarray | None  # (Q,)
    den_pos: np.ndarray | None
    den_high: np.ndarray | None
    mean: np.ndarray  # (S, Q) expected final score
    cov: QueryStack  # (Q, S, S) float32 covariance of the final scores
    pending: np.ndarray  # (Q,) distinct pooled unjudged documents
    same: np.ndarray | None = None  # (S, Q) uint64 metrics.verdicts.list_signature of the lists the measure reads
    overlap: QueryStack | None = None  # (Q, S, S) float32: the shared unjudged documents' tightening (metrics.verdicts)

    @classmethod
    def joined(cls, chunks: list[QueryParts]) -> QueryParts:
        """The parts of consecutive chunks of queries as one (every chunk but the last a multiple of
        QueryStack.BLOCK queries, so that the stacks' blocks stay whole)."""
        if len(chunks) == 1:
            return chunks[0]

        def cat(name: str) -> np.ndarray | None:
            got = [getattr(c, name) for c in chunks]
            return None if any(g is None for g in got) else np.concatenate(got, axis=-1)

        def stack(name: str) -> QueryStack | None:
            got = [getattr(c, name) for c in chunks]
            if any(g is None for g in got):
                return None
            assert all(g.n % QueryStack.BLOCK == 0 for g in got[:-1])
            return QueryStack([b for g in got for b in g.blocks], sum(g.n for g in got))

        def must(a: np.ndarray | QueryStack | None) -> Any:
            assert a is not None
            return a

        return cls(
            must(cat("low")),
            must(cat("high")),
            cat("num_low"),
            cat("num_high"),
            cat("den_low"),
            cat("den_pos"),
            cat("den_high"),
            must(cat("mean")),
            must(stack("cov")),
            must(cat("pending")),
            cat("same"),
            stack("overlap"),
        )

    def patched(self, new: QueryParts, dirty: np.ndarray) -> QueryParts:
        """A copy with the queries ``dirty`` taken from ``new`` (computed for those queries only)."""

        def cols(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
            if a is None or b is None:
                return None
            out = a.copy()
            out[..., dirty] = b
            return out

        def must(a: np.ndarray | None) -> np.ndarray:
            assert a is not None
            return a

        cov = self.cov.patched(np.asarray(new.cov), dirty)
        overlap = None
        if self.overlap is not None and new.overlap is not None:
            overlap = self.overlap.patched(np.asarray(new.overlap), dirty)
        return QueryParts(
            must(cols(self.low, new.low)),
            must(cols(self.high, new.high)),
            cols(self.num_low, new.num_low),
            cols(self.num_high, new.num_high),
            cols(self.den_low, new.den_low),
            cols(self.den_pos, new.den_pos),
            cols(self.den_high, new.den_high),
            must(cols(self.mean, new.mean)),
            cov,
            must(cols(self.pending, new.pending)),
            cols(self.same, new.same),
            overlap,
        )


def query_parts(
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
    doc_ids: npt.ArrayLike | None = None,
    answers: Answers | None = None,
) -> QueryParts:
    """:class:`QueryParts` of the queries of ``pool`` (metrics.verdicts' bounds and samples). ``doc_ids``
    (S, Q, D): the document ids of the ranked lists as far as the measure reads them (k for the @k measures
    scored as retrieved, the whole run otherwise); two systems with the same list for a query differ by exactly
    0 there, which makes identical systems tied."""
    q = np.asarray(qrels)
    parts = verdict_parts(base, pool, q, k=k, threshold=threshold, gain=gain, top_grade=model.top_grade)
    mean, cov = sample_scores(
        base, pool, q, model, k=k, threshold=threshold, gain=gain, seeds=seeds, samples=samples, answers=answers
    )
    return QueryParts(
        parts.low,
        parts.high,
        parts.num_low,
        parts.num_high,
        parts.den_low,
        parts.den_pos,
        parts.den_high,
        mean,
        QueryStack.of(cov.astype(np.float32)),
        pool.distinct,
        None if doc_ids is None else list_signature(doc_ids),
        None if parts.overlap is None else QueryStack.of(parts.overlap.astype(np.float32)),
    )


@dataclass
class OrderVerdicts:
    """Per comparison (a above b): bounds of the sum over the final queries of the difference a - b,
    p_holds and the verdict word."""

    low: FloatArray  # (C,)
    high: FloatArray
    p_holds: FloatArray
    verdict: list[str]  # "settled", "tied", "likely" or "open"


def order_verdicts(
    parts: QueryParts,
    final: npt.ArrayLike,
    above: npt.ArrayLike,
    below: npt.ArrayLike,
    *,
    confidence: float = CONFIDENCE,
) -> OrderVerdicts:
    r"""Verdicts on the comparisons (above[i], below[i]) over the queries ``final`` (Q,) bool: those the final
    means will hold (a label now, or pooled pairs left; unscored queries add 0 to every difference).

    ``settled`` when the sum of the per-query lower bounds of a - b (the tighter of the systems' own bounds
    and, where the systems of a query share a denominator, the numerator's range over the denominator's) is
    above 0: no grading flips the order. ``tied`` when both sums are 0: no grading parts the two.
    ``p_holds`` = P(final sum of a - b > 0), the sum over queries (independent under the label model) taken
    as normal with the sampled means and covariances :math:`\Phi(\mu / \sigma)`; 1 when settled or tied,
    0 when no grading puts a ahead. ``likely`` from ``confidence`` on.
    """
    mask = np.asarray(final, dtype=bool)
    every = bool(mask.all())
    cols = np.flatnonzero(mask)
    a = np.asarray(above, dtype=np.int64)
    b = np.asarray(below, dtype=np.int64)

    def take(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """values[rows] over the final queries (no copy of the query axis when every query is final)."""
        got = np.take(values, rows, axis=0)
        return got if every else got[..., cols]

    low = take(parts.low, a) - take(parts.high, b)
    high = take(parts.high, a) - take(parts.low, b)
    if parts.num_low is not None and parts.num_high is not None:
        assert parts.den_low is not None and parts.den_pos is not None and parts.den_high is not None
        n_low = take(parts.num_low, a) - take(parts.num_high, b)
        n_high = take(parts.num_high, a) - take(parts.num_low, b)
        if parts.overlap is not None:
            shared = parts.overlap.gather(a, b).T  # (C, Q): gathered before the final queries are taken
            shared = (shared if every else shared[:, cols]).astype(np.float64)
            n_low, n_high = n_low + shared, n_high - shared
        d_pos, d_high, d_low = (d if every else d[cols] for d in (parts.den_pos, parts.den_high, parts.den_low))
        with np.errstate(divide="ignore", invalid="ignore"):
            j_low = np.where(n_low < 0, n_low / d_pos, np.where(d_high > 0, n_low / d_high, 0.0))
            j_high = np.where(n_high > 0, n_high / d_pos, np.where(d_high > 0, n_high / d_high, 0.0))
        j_low = np.where(d_low <= 0, np.minimum(j_low, 0.0), j_low)
        j_high = np.where(d_low <= 0, np.maximum(j_high, 0.0), j_high)
        low, high = np.maximum(low, j_low), np.minimum(high, j_high)
    if parts.same is not None:
        # the same ranked list: the same score whatever the labels
        same = take(parts.same, a) == take(parts.same, b)
        low, high = np.where(same, 0.0, low), np.where(same, 0.0, high)
    low_sum, high_sum = low.sum(axis=1), high.sum(axis=1)
    mu = (take(parts.mean, a) - take(parts.mean, b)).sum(axis=1)
    # (Q, C) gathers of the covariances first, then the final queries: no copy of the (Q, S, S) array
    weights = mask.astype(np.float64)
    cov = parts.cov
    # the three covariances of each comparison in one pass over the blocks: (Q, 3C) as [a-a, b-b, a-b]
    both = cov.gather(np.concatenate([a, b, a]), np.concatenate([a, b, b]))
    c = a.size
    cov_aa, cov_bb, cov_ab = both[:, :c], both[:, c : 2 * c], both[:, 2 * c :]
    var = weights @ (cov_aa.astype(np.float64) + cov_bb.astype(np.float64) - 2.0 * cov_ab)
    sd = np.sqrt(np.maximum(var, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(sd > EPS, ndtr(mu / np.where(sd > EPS, sd, 1.0)), np.where(mu > EPS, 1.0, 0.0))
    settled = low_sum > EPS
    tied = (np.abs(low_sum) <= EPS) & (np.abs(high_sum) <= EPS)
    p = np.where(settled | tied, 1.0, np.where(high_sum <= EPS, 0.0, p))
    words = np.where(settled, "settled", np.where(tied, "tied", np.where(p >= confidence, "likely", "open")))
    return OrderVerdicts(low_sum, high_sum, p, [str(w) for w in words])


STOP_DRAWS = 256  # predictive draws of the comparisons' paths (a fixed seed: one state of the labels, one answer)
STOP_STEPS = 48  # the pending pairs taken in this many steps


def judgments_to_stop(
    parts: QueryParts,
    final: npt.ArrayLike,
    above: npt.ArrayLike,
    below: npt.ArrayLike,
    *,
    certain: npt.ArrayLike,
    confidence: float = CONFIDENCE,
    queue: npt.ArrayLike | None = None,
    queue_weights: npt.ArrayLike | None = None,
) -> float:
    r"""About how many more pooled pairs people must judge before the stop on the comparisons (above[i],
    below[i]) is reached: the chances that each flips, :math:`\Phi(-\mu_c / \sigma_c)` as in
    :func:`order_verdicts`, summing to at most ``1 - confidence`` (``certain`` (C,) bool: comparisons settled or
    tied already, which add nothing).

    A predictive estimate: the label model's own forecast of the labels still to come (a preposterior analysis of
    the judging to come). The pending pairs of the final queries are judged in STOP_STEPS steps of the same
    count; each step takes its share of every query's part of every comparison's variance :math:`\sigma_c^2` out
    and moves the expected differences :math:`\mu_c` by what its labels turn out to be, drawn as the systems'
    scores move under the label model (normal, with the step's share of the queries' covariances between the
    systems). Each of STOP_DRAWS paths stops at the first count where the flip chances of the order as it then
    stands fall to the budget (part of that step by linear interpolation); the estimate is the median of the
    paths' counts.

    Without ``queue`` the pairs are judged at one even pace across the queries: each step takes 1 / STOP_STEPS of
    every query's variance (a queue that serves the pairs at random, or query by query in an order that does not
    follow the comparisons). ``queue`` (P,): the query (position on the Q axis) of each pending pair in the order
    the campaign's queue will serve them; a step then takes out of each query's variance the share of the query's
    pairs among the step's P / STOP_STEPS, weighed by ``queue_weights`` (P,) where given (a pair's weight in these
    comparisons, e.g. metrics.selection.mtc_schedule's ``|c_d|`` summed over them); a query the queue holds no
    pair or no weight of keeps the even pace. A queue in the order of Minimal Test Collections (Carterette, Allan
    & Sitaraman, SIGIR 2006) serves first the pairs that weigh most in the uncertain comparisons, so their
    uncertainty leaves faster than at an even pace: replayed at 1% steps (tests/metrics/test_stop_estimate.py),
    MTC's schedule with the pairs weighed by ``|c_d|`` put the estimate within 1.5 times of the judgments the stop
    took at 74% of the steps at 24 systems and 72% at 48, against 68% and 64% at the even pace (the pairs counted
    without weights: 68% and 67%); where MTC's stop comes early (at 48 systems, seeds 2, 4 and 6, at 51%, 64% and
    73% of the pool) at 42%, 61% and 71% of the steps against 0%, 6% and 41%.

    The estimate before held :math:`\mu_c` where it stood and took the queries best for these comparisons first
    (MTC's view, Carterette, Allan & Sitaraman, SIGIR 2006): where it named a count, that count was 1.6 times too
    few in the median on MTC's path over the realistic preset at 48 systems (24% of them within a factor of 1.5,
    72% at the even pace), and where an expected difference was near 0 it said every pending pair. Neither the
    queue modes nor the comparisons' own paths follow that view (docs/benchmarks.md, "The stop's estimate");
    tests/metrics/test_stop_estimate.py checks the estimate against the judgments the stop took.

    0 when the stop is reached; every pending pair of the final queries when no grading of them is expected to
    keep the order as asked (an expected difference below 0) or no pending pair carries any of its uncertainty.
    """
    mask = np.asarray(final, dtype=bool)
    cols = np.flatnonzero(mask)
    a = np.asarray(above, dtype=np.int64)
    b = np.asarray(below, dtype=np.int64)
    fixed = np.asarray(certain, dtype=bool)
    budget = 1.0 - confidence
    pending = parts.pending[cols].astype(np.float64)
    if a.size == 0 or fixed.all():
        return 0.0
    a, b = a[~fixed], b[~fixed]
    mu = (np.take(parts.mean, a, axis=0) - np.take(parts.mean, b, axis=0))[:, cols].sum(axis=1)
    c = a.size
    both = parts.cov.gather(np.concatenate([a, b, a]), np.concatenate([a, b, b]))[cols].astype(np.float64)
    var_q = np.maximum(both[:, :c] + both[:, c : 2 * c] - 2.0 * both[:, 2 * c :], 0.0)  # (Qf, C)
    total = var_q.sum(axis=0)
    chance_now = _flip_chances(mu[None, :], total[None, :], signed=True)[0]
    if chance_now <= budget + 1e-12:
        return 0.0
    if (mu < -EPS).any() or not ((pending > 0) & (var_q.sum(axis=1) > 0)).any():
        return float(pending.sum())
    systems, at = np.unique(np.concatenate([a, b]), return_inverse=True)
    u = systems.size
    # the systems' summed covariance over the final queries: how their scores move while the pending pairs are judged
    per_query = parts.cov.gather(np.repeat(systems, u), np.tile(systems, u))[cols].astype(np.float64)  # (Qf, U*U)
    cov_u = per_query.sum(axis=0)
    noise = np.random.default_rng(0).standard_normal((STOP_DRAWS, STOP_STEPS, u))
    if queue is None:
        root = _psd_root(cov_u.reshape(u, u) / STOP_STEPS)
        moves = noise @ root.T  # (D, T, U): each step's move of each system's summed score
        left = total * (1.0 - np.arange(1, STOP_STEPS + 1) / STOP_STEPS)[:, None]  # (T, C)
    else:
        served = _served(queue, queue_weights, cols, parts.pending.size)  # (T, Qf)
        # each step's share of each query's uncertainty: its covariances move the scores in that step
        roots = _psd_root((np.diff(served, axis=0, prepend=0.0) @ per_query).reshape(STOP_STEPS, u, u))
        moves = np.einsum("dtv,tuv->dtu", noise, roots)  # (D, T, U)
        left = np.maximum(total - served @ var_q, 0.0)  # (T, C)
    path = mu + np.cumsum(moves[..., at[:c]] - moves[..., at[c:]], axis=1)  # (D, T, C)
    chance = _flip_chances(path, np.broadcast_to(left, path.shape), signed=False)  # (D, T)
    done = chance <= budget + 1e-12
    done[:, -1] = True  # every pending pair judged: the order is known
    first = done.argmax(axis=1)
    rows = np.arange(first.size)
    before = np.where(first > 0, chance[rows, np.maximum(first - 1, 0)], chance_now)
    share = np.clip((before - budget) / np.maximum(before - chance[rows, first], 1e-300), 0.0, 1.0)
    taken = (first + share) * (pending.sum() / STOP_STEPS)
    return float(np.median(taken))


def _served(queue: npt.ArrayLike, weights: npt.ArrayLike | None, cols: np.ndarray, n_queries: int) -> np.ndarray:
    """(T, Qf): the share of each final query's uncertainty taken out by the end of step t = 1..T when the pairs of
    ``queue`` (P,) (their queries, in the order served) are judged in that order, ``pairs / T`` a step: the sum of
    ``weights`` (P,), or the count, of the query's pairs served by then over the query's whole. t / T (the even
    pace) for a query the queue holds no pair (or no weight) of; pairs of other queries are left out."""
    q = np.asarray(queue, dtype=np.int64).reshape(-1)
    w = np.ones(q.size) if weights is None else np.asarray(weights, dtype=np.float64).reshape(-1)
    w = np.where(np.isfinite(w), np.maximum(w, 0.0), 0.0)
    column = np.full(n_queries, -1, dtype=np.int64)
    column[cols] = np.arange(cols.size)
    at = np.where((q >= 0) & (q < n_queries), column[np.clip(q, 0, max(n_queries - 1, 0))], -1)
    w, at = w[at >= 0], at[at >= 0]
    even = np.broadcast_to((np.arange(1, STOP_STEPS + 1) / STOP_STEPS)[:, None], (STOP_STEPS, cols.size))
    if at.size == 0:
        return np.array(even)
    step = np.arange(at.size) * STOP_STEPS // at.size
    cells = np.bincount(at * STOP_STEPS + step, w, minlength=cols.size * STOP_STEPS)
    cum = np.cumsum(cells.reshape(cols.size, STOP_STEPS), axis=1).T  # (T, Qf)
    whole = cum[-1]
    out: np.ndarray = np.where(whole > 0, cum / np.where(whole > 0, whole, 1.0), even)
    return out


def _flip_chances(mu: np.ndarray, variance: np.ndarray, *, signed: bool) -> np.ndarray:
    r"""The sum over the last axis of the comparisons' flip chances: :math:`\Phi(-\mu / \sigma)` for the order as
    asked (``signed``: 1 where mu is below 0 with no uncertainty left, 0 above), :math:`\Phi(-|\mu| / \sigma)`
    for the order as it stands (0 where no uncertainty is left)."""
    sd = np.sqrt(np.maximum(variance, 0.0))
    lead = mu if signed else np.abs(mu)
    with np.errstate(divide="ignore", invalid="ignore"):
        flip = np.where(sd > EPS, ndtr(-lead / np.where(sd > EPS, sd, 1.0)), np.where(lead > EPS, 0.0, 1.0 * signed))
    out: np.ndarray = flip.sum(axis=-1)
    return out


def _psd_root(cov: np.ndarray) -> np.ndarray:
    """A square root R of each (positive semi-definite) matrix of ``cov`` (..., U, U): R @ R.T == cov (an
    eigen-decomposition, negative eigenvalues of float noise taken as 0)."""
    values, vectors = np.linalg.eigh((cov + np.swapaxes(cov, -1, -2)) / 2.0)
    out: np.ndarray = vectors * np.sqrt(np.maximum(values, 0.0))[..., None, :]
    return out
