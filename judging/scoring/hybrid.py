"""Hybrid labels, ``labels=hybrid:NAME``: a person's label where there is one, elsewhere model judge NAME's
calibrated reading of the pair (metrics.hybrid), scored in expectation.

A model's grade is evidence, not a label. The campaign's pairs that both a person and the model graded give
P(human grade | model grade, rank bucket) (:func:`hybrid_fit`); every pair the model answered and no person judged
gets that distribution (the mixture over its repeated answers, where it was asked several times); each system's
per-query score is its expected value over completions drawn from them (:func:`hybrid_scores`), the human labels
fixed. The bounds and ``settled`` stay the people's (the model's answers settle nothing for certain); ``p_holds``,
``likely`` and the stop signal draw the model-answered pairs from the same distributions (judging.scoring.trust.
final), so that ``likely`` keeps its promise (tests/metrics/test_hybrid_calibration.py).

The fit is made again once the labels moved by REFIT_SHARE of the pairs both graded (or REFIT_MIN, or
REFIT_POOL_SHARE of the pairs the model answered) since it was made, reading the model's answers afresh (a new run's
too): between refits, a judgment rescores its own query only; a refit rescores every query (its seed, a digest of
the fit, names the score table).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from django.db.models import Count, Max, Q, QuerySet

from judging import runtime
from judging.compiled import Slots, compiled_select
from judging.errors import RequestError
from judging.judge_models import ModelConsistency
from judging.models import AnnotatorProfile, Campaign, Grade, Judgment, Membership, Pair
from judging.scoring.cube import RunCube, cursor_rows, label_arrays, labels_for
from metrics.hybrid import (
    RANK_BUCKETS,
    Calibration,
    answer_likelihood,
    calibrate,
    expected_scores,
    pair_distributions,
    rank_bucket,
    sample_grades,
)
from metrics.keys import pair_key_query, pair_keys
from metrics.ranking import UNJUDGED
from metrics.relevance_model import Answers, answered_relevance, label_model, pair_prior
from metrics.verdicts import final_pool

REFIT_SHARE = 0.05  # refit once the pairs both graded grew by this share ...
REFIT_MIN = 20  # ... or by this many
# ... or, on a large pool, by this share of the pairs the model answered: a refit rescores every query, and with
# 50 annotators on 12,000 answered pairs a refit every 20 judgments kept both workers busy refitting (record + next
# p95 19 s, bench/load_bench.py); a hundredth of the pool more changes the calibration table little.
REFIT_POOL_SHARE = 0.01
DRAW_ENTRIES = 8_000_000  # ranked entries x draws of one scoring at most (chooses the draws per query)
DRAWS_MIN, DRAWS_MAX = 16, 64

# The fitted calibration of each (campaign, judge, runs): what a worker keeps between requests (a few kB a judge).
_LOCK = threading.Lock()
_KEEP_FITS = 16
# with the labels versions checked at
_FITS: dict[tuple[int, str, str], tuple[np.ndarray, HybridFit]] = runtime.keep(
    "scoring.hybrid_fits",
    {},
    bound=_KEEP_FITS,
    invalidated_by="labels versions moving (fitted again)",
    lock=_LOCK,
)


@dataclass(frozen=True)
class HybridFit:
    """One calibration of a model judge on a campaign, and the distributions of the pairs it answered."""

    judge_id: int
    calibration: Calibration
    keys: np.ndarray  # (A,) sorted pair keys (metrics.pair_keys) the model answered confidently
    dist: np.ndarray  # (A, G) each pair's distribution over the human grades (its own label where people judged)
    human: np.ndarray  # (A,) bool: a person's label exists for the pair (its draws are never used)
    both: int  # pairs both graded when fitted
    answered: int  # the model's confident judgments when fitted
    seed: int  # a digest of the fit: the draws' seed, and the score table's name
    #: (A, G) P(the model's answers | human grade) of each pair (metrics.hybrid.answer_likelihood): the verdicts
    #: weigh it against the relevance model's prior of the pair (its systems and ranks, its query)
    likelihood: np.ndarray

    @property
    def helpful(self) -> bool | None:
        """Whether the model's grades carry information about people's (weighted kappa above 0); None with too few
        pairs both graded to tell (fewer than REFIT_MIN)."""
        if self.both < REFIT_MIN or not np.isfinite(self.calibration.kappa):
            return None
        return bool(self.calibration.kappa > 0)


def hybrid_judge(labels: str | None) -> str | None:
    """The model judge's name of a ``hybrid:NAME`` label source, None for any other source."""
    kind, _, name = (labels or "").partition(":")
    return name.strip() if kind == "hybrid" and name.strip() else None


def _judge_id(name: str) -> int:
    judge = (
        AnnotatorProfile.objects.filter(kind=AnnotatorProfile.Kind.MODEL, user__username=name)
        .values_list("user_id", flat=True)
        .first()
    )
    if judge is None:
        raise RequestError("labels", f"no model judge named {name!r}")
    return int(judge)


def _top_grade(campaign: Campaign) -> int:
    top = Grade.objects.filter(campaign=campaign).aggregate(top=Max("value"))["top"]
    return max(int(top or 0), 1)


def _answers(campaign: Campaign, judge_id: int, n_grades: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The model's confident answers: (A,) sorted pair keys, (A, G) answer counts (its grade once, or its repeated
    answers' histogram where it was asked several times) and (A,) the pair's human label (-1 without one)."""
    rows = np.array(
        cursor_rows(
            Judgment.objects.filter(annotator_id=judge_id, unsure=False, pair__campaign=campaign)
            .order_by()
            .values_list("pair_id", "pair__query_id", "pair__document_id", "grade__value", "pair__label")
        ),
        dtype=object,
    ).reshape(-1, 5)
    pair_ids = rows[:, 0].astype(np.int64)
    keys = pair_keys(rows[:, 1].astype(np.int64), rows[:, 2].astype(np.int64))
    grades = np.clip(rows[:, 3].astype(np.int64), 0, n_grades - 1)
    human = np.array([-1 if v is None else int(v) for v in rows[:, 4]], dtype=np.int64)
    hist = np.zeros((keys.size, n_grades), dtype=np.float64)
    hist[np.arange(keys.size), grades] = 1.0
    if keys.size:
        repeated = dict(
            cursor_rows(
                ModelConsistency.objects.filter(judge_id=judge_id, pair__campaign=campaign)
                .order_by()
                .values_list("pair_id", "answers")
            )
        )
        if repeated:
            at = {int(p): i for i, p in enumerate(pair_ids.tolist())}
            for pair, answers in repeated.items():  # over the pairs asked several times: a run's few thousand
                i = at.get(int(pair))
                given = [int(a) for a in answers or [] if a is not None and 0 <= int(a) < n_grades]
                if i is not None and given:
                    hist[i] = np.bincount(given, minlength=n_grades)
    order = np.argsort(keys, kind="stable")
    return keys[order], hist[order], human[order]


def _best_ranks(cube: RunCube, keys: np.ndarray) -> np.ndarray:
    """(A,) each pair's best 1-based rank over the systems (0 where none ranks it), from the cube's first ranks."""
    depth = min(cube.doc_ids.shape[2], 16)  # the last rank bucket starts at 16
    best = np.zeros(keys.size, dtype=np.int64)
    if not keys.size or not depth:
        return best
    best[:] = depth + 1
    docs = np.asarray(cube.doc_ids[:, :, :depth])
    entry = pair_keys(cube.query_ids[None, :, None], np.maximum(docs, 0))
    ranks = np.broadcast_to(np.arange(1, depth + 1)[None, None, :], docs.shape)
    listed = docs >= 0
    at = np.searchsorted(keys, entry[listed])
    found = (at < keys.size) & (keys[np.minimum(at, keys.size - 1)] == entry[listed])
    np.minimum.at(best, at[found], ranks[listed][found])
    best[best > depth] = 0
    return best


def hybrid_fit(campaign: Campaign, cube: RunCube, name: str, versions: np.ndarray) -> HybridFit:
    """The calibration of model judge ``name`` on ``campaign`` (see the module): the process's fit until the
    queries' labels versions (``versions``) moved by _refit_step in all since it was made, then made again. Every
    judgment moves its query's version by one at least, so the pairs both graded cannot have grown by more in
    between; a change of the model's answers (a new run) is read with the refit. At the versions the fit was made
    at nothing is read (a poll with no new label); RequestError naming ``labels`` for a judge nobody has."""
    key = (campaign.pk, name, str(cube.key))
    with _LOCK:
        kept = _FITS.get(key)
    if kept is not None and np.array_equal(kept[0], versions):
        return kept[1]
    if kept is not None and kept[0].shape == versions.shape:
        moved = int(np.maximum(versions - kept[0], 0).sum())
        if moved < _refit_step(kept[1]):
            return kept[1]
    # Made again without counting first: the count read every answer of the model and its pair (two rows an
    # answer: 24,000 rows for 12,000 answers, once a process per step, 146 rows a judgment on the load bench in
    # hybrid) only to find, where the model answered the pool, that the pairs both graded had grown by the step.
    judge_id = kept[1].judge_id if kept is not None else _judge_id(name)
    fit = _fit(campaign, cube, judge_id, _top_grade(campaign))
    with _LOCK:
        _FITS.pop(key, None)
        _FITS[key] = (versions.copy(), fit)
        while len(_FITS) > _KEEP_FITS:
            _FITS.pop(next(iter(_FITS)))
    return fit


def _refit_step(fit: HybridFit) -> float:
    """How much the pairs both graded grow before ``fit`` is made again: REFIT_MIN, REFIT_SHARE of them, or
    REFIT_POOL_SHARE of the pairs the model answered, whichever is most."""
    return max(REFIT_MIN, REFIT_SHARE * fit.both, REFIT_POOL_SHARE * fit.answered)


def _fit(campaign: Campaign, cube: RunCube, judge_id: int, top_grade: int) -> HybridFit:
    n_grades = top_grade + 1
    keys, hist, human = _answers(campaign, judge_id, n_grades)
    answered = int(keys.size)
    bucket = rank_bucket(_best_ranks(cube, keys))
    labelled = human >= 0
    human_all = np.array(
        [  # no ordering: the pairs' own joined the campaign, query and document and sorted every label
            v
            for (v,) in cursor_rows(
                Pair.objects.filter(campaign=campaign, label__isnull=False).order_by().values_list("label")
            )
        ],
        dtype=np.int64,
    )
    calibration = calibrate(
        np.clip(human[labelled], 0, top_grade),
        hist[labelled].argmax(axis=1),
        bucket[labelled],
        human_all=np.clip(human_all, 0, top_grade),
        top_grade=top_grade,
    )
    dist = pair_distributions(hist, bucket, calibration)
    answered_by_bucket = np.zeros((RANK_BUCKETS, n_grades))
    np.add.at(answered_by_bucket, bucket, hist / np.maximum(hist.sum(axis=1, keepdims=True), 1.0))
    likelihood = answer_likelihood(hist, bucket, calibration, answered_by_bucket)
    dist = _with_pair_prior(campaign, cube, keys, dist, likelihood, labelled, top_grade)
    digest = hashlib.sha256(calibration.counts.tobytes() + keys.tobytes() + hist.tobytes() + dist.tobytes()).digest()
    return HybridFit(
        judge_id,
        calibration,
        keys,
        dist,
        labelled,
        int(labelled.sum()),
        answered,
        int.from_bytes(digest[:4], "big"),
        likelihood,
    )


def _with_pair_prior(
    campaign: Campaign,
    cube: RunCube,
    keys: np.ndarray,
    dist: np.ndarray,
    likelihood: np.ndarray,
    labelled: np.ndarray,
    top_grade: int,
) -> np.ndarray:
    """``dist`` with each pooled pair nobody judged read as the relevance model's prior for it (its systems and
    ranks, its query: metrics.relevance_model.pair_prior, learned from people's labels and the model's calibrated
    answers) times the likelihood of the model's answers, renormalised: the same reading the verdicts draw from
    (judging.scoring.trust.final), in expectation over the query's factor. A pair outside the pool keeps its
    calibrated row. One read of the campaign's labels and the cube's pool-depth head, once per fit."""
    open_ = ~labelled
    if not open_.any() or not cube.query_ids.size or not cube.system_ids.size:
        return dist
    depth = max(1, min(int(campaign.pool_depth), cube.doc_ids.shape[2]))
    head = replace(cube, doc_ids=cube.doc_ids[..., :depth], guard=None)
    labels = labels_for(campaign, cube.query_ids, None, total=int(cube.query_ids.size))
    grid, _, _, _ = label_arrays(head, np.arange(cube.query_ids.size), labels)
    pool = final_pool(grid, head.doc_ids, pool_depth=depth)
    if not pool.doc_id.size:
        return dist
    answers = Answers(cube.query_ids, keys[open_], dist[open_], likelihood[open_])
    model = label_model(
        pool, top_grade=top_grade, n_systems=len(cube.system_ids), soft=answered_relevance(pool, answers)
    )
    wanted = pair_keys(cube.query_ids[pool.doc_query], pool.doc_id)
    at = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
    hit = (keys[at] == wanted) & open_[at]
    post = pair_prior(pool, model)[hit] * likelihood[at[hit]]
    total = post.sum(axis=1, keepdims=True)
    out = dist.copy()
    out[at[hit]] = np.where(total > 0, post / np.where(total > 0, total, 1.0), dist[at[hit]])
    return out


def fits_clear() -> None:
    """Forget this process's fits (tests, benchmarks)."""
    with _LOCK:
        _FITS.clear()


def draws_for(entries: int) -> int:
    """Completions drawn per query for a scoring of ``entries`` ranked entries: DRAW_ENTRIES at most in all."""
    return int(np.clip(DRAW_ENTRIES // max(entries, 1), DRAWS_MIN, DRAWS_MAX))


def hybrid_scores(
    fit: HybridFit,
    query_ids: np.ndarray,
    doc_ids: np.ndarray,
    grid: np.ndarray,
    qrels: np.ndarray,
    counts: np.ndarray,
    *,
    measures: list[str],
    k: int,
    threshold: int,
    gain: str,
    judged_only: bool,
    draws: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(M, S, Q) expected scores of ``measures`` and (Q,) the queries in the means, for the queries ``query_ids``
    whose human-labelled arrays are ``grid`` (S, Q, D), ``qrels`` (Q, M) and ``counts`` (Q,) (cube.label_arrays),
    their documents ``doc_ids`` (S, Q, D). A query counts in the means when it has a human label or a pair the
    model answered."""
    n_s, n_q, depth = grid.shape
    entry = pair_keys(query_ids[None, :, None], np.maximum(doc_ids, 0))
    open_entry = (grid == UNJUDGED) & (doc_ids >= 0)
    at = np.searchsorted(fit.keys, entry)
    found = open_entry & (at < fit.keys.size)
    found[found] = fit.keys[at[found]] == entry[found]
    found[found] = ~fit.human[at[found]]  # a person's label wins
    # the model-answered pairs of these queries without a human label join each query's qrels in a completion: a
    # label given since the fit (its human mask is as old as it) is in ``qrels`` already, and counts once
    pair_query = pair_key_query(fit.keys)
    judged_now = np.unique(entry[(grid >= 0) & (doc_ids >= 0)])
    members = np.flatnonzero(np.isin(pair_query, query_ids) & ~fit.human & ~np.isin(fit.keys, judged_now))
    used = np.unique(np.concatenate([members, at[found]]))
    rows = np.full(grid.shape, -1, dtype=np.int64)
    rows[found] = np.searchsorted(used, at[found])
    q_of = np.searchsorted(query_ids, pair_query[members])  # query_ids ascending, as the cube's are
    per_query = np.bincount(q_of, minlength=n_q)
    place = np.arange(members.size) - np.repeat(np.cumsum(per_query) - per_query, per_query)
    qrels_rows = np.full((n_q, max(int(per_query.max(initial=0)), 1)), -1, dtype=np.int64)
    qrels_rows[q_of, place] = np.searchsorted(used, members)
    sampled = sample_grades(fit.dist[used], fit.keys[used], draws, seed=fit.seed)
    means, _ = expected_scores(
        grid, rows, qrels, qrels_rows, sampled, k=k, threshold=threshold, gain=gain, judged_only=judged_only
    )
    scores = np.stack([means[name] for name in measures]) if measures else np.zeros((0, n_s, n_q))
    labelled = (counts > 0) | (qrels_rows >= 0).any(axis=1)
    return scores, labelled


def campaign_judge(campaign: Campaign) -> str | None:
    """The model judge that hybrid judging on ``campaign`` reads (queue mode ``hybrid``, the leaderboard page's
    first label source): the campaign's model judge, or of several the one with the most confident judgments on it
    (ties by name); None when it has none. One small read of the members; the judgments are counted only when
    there are several."""
    # The queue in mode hybrid asks at each next pair: a prepared statement (judging.compiled), without the
    # memberships' default order, which joined the campaign to sort by it (0.67 ms of PostgreSQL's CPU a judgment
    # on the load bench, planned at each call).
    names = sorted(
        str(row[0]) for row in compiled_select(("model_judges",), _model_judges_of).rows({"campaign_id": campaign.pk})
    )
    if len(names) <= 1:
        return names[0] if names else None
    row = (
        Judgment.objects.filter(pair__campaign=campaign, unsure=False, annotator__username__in=names)
        .values("annotator__username")
        .annotate(n=Count("id"))
        .order_by("-n", "annotator__username")
        .first()
    )
    return str(row["annotator__username"]) if row is not None else names[0]


def _model_judges_of() -> QuerySet[Membership, Any]:
    return (
        Membership.objects.filter(
            campaign_id=Slots()["campaign_id"], user__annotator_profile__kind=AnnotatorProfile.Kind.MODEL
        )
        .order_by()
        .values_list("user__username")
    )


def hybrid_summary(campaign: Campaign, fit: HybridFit, judge: str) -> dict[str, object]:
    """What the campaign and leaderboard pages say of hybrid judging: how many pooled pairs people labelled, how many
    more the model judge answered, how many have neither (the hybrid queue serves those to people first), and how
    the model fares on the pairs both graded (weighted kappa; whether it helps)."""
    row = Pair.objects.filter(campaign=campaign, pooled=True).aggregate(
        pool=Count("id"), people=Count("id", filter=Q(label__isnull=False))
    )
    pool, people = int(row["pool"] or 0), int(row["people"] or 0)
    model = int((~fit.human).sum())
    kappa = fit.calibration.kappa
    return {
        "judge": judge,
        "pool": pool,
        "people": people,
        "model": model,
        "neither": max(pool - people - model, 0),
        "people_share": people / pool if pool else 0.0,
        "model_share": model / pool if pool else 0.0,
        "both": fit.both,
        "kappa": float(kappa) if np.isfinite(kappa) else None,
        "helpful": fit.helpful,
    }
