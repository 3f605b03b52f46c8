"""Pool bias: each system's scores without the pool pairs that only it contributed (leave one run out)."""

import numbers
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from metrics._types import BoolArray, FloatArray, IntArray
from metrics.bounds import check_doc_ids, grade_counts, group_entries, idcg_from_counts
from metrics.measures import measure_names
from metrics.ranking import (
    UNJUDGED,
    check_gain,
    check_k,
    check_labels,
    check_qrels,
    check_threshold,
    condense_ranks,
    int_array,
    judged_share,
    measure_set,
)

__all__ = ["PoolBias", "pool_bias", "unique_contributions"]


class PoolBias(NamedTuple):
    """Scores without each system's unique pool pairs, and how many such pairs it has."""

    #: Measure name -> (S, Q) per-query scores, the keys and order of :func:`metrics.evaluate`.
    measures: dict[str, FloatArray]
    #: (S, Q) int: documents in the system's top k that only it contributed to the pool.
    unique_at_k: IntArray
    #: (S, Q) int: documents in the system's top pool_depth that only it contributed (judged or not).
    unique: IntArray


def unique_contributions(doc_ids: npt.ArrayLike, pool_depth: int) -> BoolArray:
    """Which ranked documents only their own system contributed to the pool.

    A system contributes its top ``pool_depth`` documents of every query (the campaign's pool depth);
    a (query, document) pair is unique to a system when no other system has it in its top
    ``pool_depth``, however deep it may rank it further down.

    Parameters
    ----------
    doc_ids : int array, shape (S, Q, D)
        Document id at each rank, -1 after the end of a run (see :func:`metrics.open_pairs`).
    pool_depth : int
        >= 1.

    Returns
    -------
    ndarray of bool, shape (S, Q, D)
        True at the ranks (all < pool_depth) that hold a pair only that system contributed.
    """
    doc_ids = int_array(doc_ids, "doc_ids (systems, queries, depth)", 3, -1).astype(np.int64, copy=False)
    return _unique(doc_ids, _check_pool_depth(pool_depth))


def _check_pool_depth(pool_depth: object) -> int:
    if isinstance(pool_depth, bool) or not isinstance(pool_depth, numbers.Integral) or pool_depth < 1:
        raise ValueError(f"pool_depth must be an integer >= 1, got {pool_depth!r}")
    return int(pool_depth)


def _unique(doc_ids: IntArray, pool_depth: int) -> BoolArray:
    pooled = _unique_pooled(doc_ids, pool_depth)
    unique = np.zeros(doc_ids.shape, dtype=bool)
    unique[..., : pooled.shape[2]] = pooled
    return unique


def _unique_pooled(doc_ids: IntArray, pool_depth: int) -> BoolArray:
    """:func:`unique_contributions` over the pooled ranks only: shape (S, Q, min(pool_depth, D))."""
    depth = min(pool_depth, doc_ids.shape[2])
    pooled = doc_ids[..., :depth]
    system, query, rank, _, opens = group_entries(pooled >= 0, pooled)
    # An entry alone in its (query, document) group: it opens its group and the next entry opens another.
    alone = opens & np.append(opens[1:], True)
    unique = np.zeros(pooled.shape, dtype=bool)
    unique[system[alone], query[alone], rank[alone]] = True
    return unique


def pool_bias(
    labels: npt.ArrayLike,
    qrels: npt.ArrayLike,
    doc_ids: npt.ArrayLike,
    *,
    pool_depth: int,
    k: int = 10,
    threshold: float = 1,
    gain: str = "linear",
    judged_only: bool = False,
) -> PoolBias:
    """Each system scored as if the pairs only it contributed to the pool had never been judged.

    For system s: every pair that s alone contributed (:func:`unique_contributions`) leaves the
    qrels, so it becomes unjudged in s's ranking and no longer counts in num_rel, in N (bpref) or in the
    ideal ranking (nDCG); s is then scored as :func:`metrics.evaluate` would score it. Pairs that other
    systems contributed, and labels of documents outside the pool (imported qrels), stay. The query set
    is unchanged: a query that loses all its labels scores 0, and keeps its weight in the mean. A
    system that scores much lower this way owes its score to documents no other system found, the
    bias a new system faces against a pool it did not contribute to (Zobel 1998).

    Parameters
    ----------
    labels : int array, shape (S, Q, D)
        Ranked labels, see :func:`metrics.precision`.
    qrels : int array, shape (Q, M)
        Labels of every labelled document of each query, see :func:`metrics.recall`.
    doc_ids : int array, shape (S, Q, D)
        Document id at each rank, -1 exactly where labels is ``PAD``.
    pool_depth : int
        The depth each run contributed to the pool.
    k, threshold, gain, judged_only
        As for :func:`metrics.evaluate`.

    Returns
    -------
    PoolBias

    References
    ----------
    Zobel, J. (1998). How reliable are the results of large-scale information retrieval experiments?
    SIGIR. Büttcher, S. et al. (2007). Reliable information retrieval evaluation with incomplete and
    biased judgements. SIGIR (leave-one-run-out).
    """
    labels = check_labels(labels)
    qrels = check_qrels(qrels, labels)
    doc_ids = check_doc_ids(doc_ids, labels)
    pool_depth = _check_pool_depth(pool_depth)
    k = check_k(k)
    threshold = check_threshold(threshold)
    gain = check_gain(gain)

    # Only the pooled ranks can hold a unique pair: everything below works on that slice of the ranking.
    unique = _unique_pooled(doc_ids, pool_depth)
    depth = unique.shape[2]
    removed = unique & (labels[..., :depth] >= 0)
    n_grades = int(max(qrels.max(initial=0), labels.max(initial=0))) + 1
    n_systems, n_queries = labels.shape[:2]
    s, q, rank = np.nonzero(removed)
    grade = labels[s, q, rank].astype(np.int64)
    lost = np.bincount((s * n_queries + q) * n_grades + grade, minlength=n_systems * n_queries * n_grades)
    counts = grade_counts(qrels, n_grades) - lost.reshape(n_systems, n_queries, n_grades)
    relevant_grades = np.arange(n_grades) >= threshold
    num_rel = counts[..., relevant_grades].sum(axis=-1)
    num_nonrel = counts[..., ~relevant_grades].sum(axis=-1)

    ablated = labels.copy()
    ablated[..., :depth][removed] = UNJUDGED
    judged_at_k = judged_share(ablated, k)
    scored = condense_ranks(ablated) if judged_only else ablated
    scores = measure_set(
        scored,
        k=k,
        threshold=threshold,
        gain=gain,
        num_rel_k=num_rel,
        num_rel=num_rel,
        num_nonrel=num_nonrel,
        idcg=idcg_from_counts(counts, k, gain),
        dense=True,
    )
    scores[f"Judged@{k}"] = judged_at_k
    scores = {name: scores[name] for name in measure_names(k)}  # evaluate's order, the registry's
    return PoolBias(
        scores,
        np.count_nonzero(unique[..., :k], axis=-1),
        np.count_nonzero(unique, axis=-1),
    )
