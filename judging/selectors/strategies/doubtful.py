"""Queue mode "doubtful": the pairs the campaign's model judges are least sure of, those that weigh most first.

People's labels of these pairs feed ``hybrid:NAME`` (the human label where one exists, the model's elsewhere);
they never enter the prediction-powered leaderboard's correction, which takes the randomly drawn audit queries
only (judging.scoring.ppi).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from judging import runtime
from judging.models import AnnotatorProfile, Campaign, Judgment, Membership, ModelConsistency, Pair
from judging.scoring.cube import run_cube
from metrics.keys import pair_keys

NO_ANSWER = -1  # a grade slot without a readable answer
MAX_AGE = 30.0  # seconds a campaign's list is reused before the model's answers are read again
IMPACT_DEPTH = 10  # ranks at which a document's label weighs on the leaderboard (nDCG@10's discounts)

_LOCK = threading.Lock()


@dataclass
class _Cached:
    computed: float
    pair_ids: np.ndarray


_LISTS: dict[tuple[int, object], _Cached] = runtime.keep(
    "queue.doubtful_lists",
    {},
    bound=None,
    grows_with="campaign and model judge set",
    invalidated_by="MAX_AGE seconds (read again)",
    lock=_LOCK,
)


def lists_clear() -> None:
    """Forget the lists this process keeps (tests and benchmarks)."""
    with _LOCK:
        _LISTS.clear()


def doubt(answers: np.ndarray, confidence: np.ndarray | None = None) -> np.ndarray:
    """How unsure the model is of each pair, from 0 (sure) to 1 (no idea), from what is stored of its answers.

    ``answers``: (P, R) grades, ``NO_ANSWER`` where an answer is missing or could not be read: the answers of
    the campaign's model judges, and repeated answers of one judge where they are kept (self-consistency).
    ``confidence``: (P,) the model's stated confidence in [0, 1], NaN where it stated none.

    A stated confidence c gives 1 - c. Otherwise, with two answers or more, the disagreement among them:
    1 - (share of the commonest grade), the variation ratio (Freeman, 1965) used for self-consistency by
    Wang et al. (2023). A single readable answer tells nothing about doubt: 0. No readable answer at all: 1
    (the model has no label for the pair)."""
    answers = np.asarray(answers, dtype=np.int64)
    if answers.ndim == 1:
        answers = answers[:, None]
    P = answers.shape[0]
    given = answers != NO_ANSWER
    n = given.sum(axis=1)
    if answers.size and given.any():
        top = int(answers[given].max()) + 1
        counts = np.zeros((P, top), dtype=np.int64)
        rows = np.broadcast_to(np.arange(P)[:, None], answers.shape)[given]
        np.add.at(counts, (rows, answers[given]), 1)
        modal = counts.max(axis=1)
    else:
        modal = np.zeros(P, dtype=np.int64)
    out = np.where(n == 0, 1.0, 1.0 - modal / np.maximum(n, 1))
    if confidence is not None:
        c = np.asarray(confidence, dtype=np.float64)
        out = np.where(np.isfinite(c), 1.0 - np.clip(c, 0.0, 1.0), out)
    result: np.ndarray = out
    return result


def model_answers(campaign: Campaign, pair_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(P, J x R) grades of the campaign's J model judges on these pairs (sorted ids), NO_ANSWER where a judge
    has none or its answer could not be read, and their stated confidences (None: not stored). The one place
    that reads what the models said: a judge's repeated answers to a pair (``judge_with_model --repeat N``,
    ModelConsistency) stand for it where they exist, else its one judgment; R is the most answers a judge
    gave one pair."""
    judges = np.array(
        Membership.objects.filter(campaign=campaign, user__annotator_profile__kind=AnnotatorProfile.Kind.MODEL)
        .order_by("user_id")
        .values_list("user_id", flat=True),
        dtype=np.int64,
    )
    if not judges.size or not pair_ids.size:
        return np.full((pair_ids.size, 1), NO_ANSWER, dtype=np.int64), None
    single = np.array(
        Judgment.objects.filter(pair__campaign=campaign, annotator_id__in=judges.tolist(), unsure=False)
        .order_by()
        .values_list("pair_id", "annotator_id", "grade__value"),
        dtype=np.int64,
    ).reshape(-1, 3)
    repeated = list(
        ModelConsistency.objects.filter(pair__campaign=campaign, judge_id__in=judges.tolist())
        .order_by()
        .values_list("pair_id", "judge_id", "answers")
    )
    R = max([len(a) for _p, _j, a in repeated if isinstance(a, list)] + [1])
    answers = np.full((pair_ids.size, judges.size, R), NO_ANSWER, dtype=np.int64)
    _place(answers, pair_ids, judges, single[:, 0], single[:, 1], single[:, 2:3])
    if repeated:
        grades = np.array(
            [
                [NO_ANSWER if g is None else int(g) for g in a] + [NO_ANSWER] * (R - len(a))
                for _p, _j, a in repeated
                if isinstance(a, list)
            ],
            dtype=np.int64,
        ).reshape(-1, R)
        keys = np.array([(p, j) for p, j, a in repeated if isinstance(a, list)], dtype=np.int64).reshape(-1, 2)
        _place(answers, pair_ids, judges, keys[:, 0], keys[:, 1], grades)
    return answers.reshape(pair_ids.size, judges.size * R), None


def _place(
    answers: np.ndarray,
    pair_ids: np.ndarray,
    judges: np.ndarray,
    pairs: np.ndarray,
    who: np.ndarray,
    grades: np.ndarray,
) -> None:
    """Write rows of ``grades`` (n, width) into ``answers`` (P, J, R) at the rows' (pair, judge), replacing
    what was there; rows of pairs not in ``pair_ids`` are left out."""
    at = np.searchsorted(pair_ids, pairs)
    found = (at < pair_ids.size) & (pair_ids[np.minimum(at, pair_ids.size - 1)] == pairs)
    column = np.searchsorted(judges, who)
    width = grades.shape[1]
    answers[at[found], column[found], :] = NO_ANSWER
    answers[at[found], column[found], :width] = grades[found]


def impact(campaign: Campaign, query_ids: np.ndarray, doc_ids: np.ndarray) -> np.ndarray:
    """How much each (query, document)'s label weighs on the ranking: the sum over systems of the nDCG
    discount 1/log2(rank + 1) of the ranks at which they return it within IMPACT_DEPTH (0 beyond)."""
    cube = run_cube(campaign)
    depth = min(IMPACT_DEPTH, cube.doc_ids.shape[2])
    top = cube.doc_ids[:, :, :depth]  # (S, Q, depth)
    weights = 1.0 / np.log2(np.arange(2, depth + 2))
    q_pos = np.broadcast_to(np.arange(top.shape[1])[None, :, None], top.shape)
    keep = top >= 0
    keys = pair_keys(cube.query_ids[q_pos[keep]], top[keep])
    w = np.broadcast_to(weights[None, None, :], top.shape)[keep]
    uniq, inverse = np.unique(keys, return_inverse=True)
    totals = np.bincount(inverse, weights=w, minlength=uniq.size)
    wanted = pair_keys(query_ids, doc_ids)
    at = np.minimum(np.searchsorted(uniq, wanted), max(uniq.size - 1, 0))
    hit = (uniq[at] == wanted) if uniq.size else np.zeros(wanted.size, bool)
    return np.where(hit, totals[at] if uniq.size else 0.0, 0.0)


def priority(campaign: Campaign, annotator_id: int) -> np.ndarray:
    """Pooled pairs without a human label, the most doubtful first (``doubt``), and among equally doubtful
    ones those whose label weighs most on the ranking (``impact``). The same for every annotator; kept
    MAX_AGE seconds per campaign."""
    with _LOCK:
        got = _LISTS.get((campaign.pk, campaign.created_at))
    if got is not None and time.monotonic() - got.computed < MAX_AGE:
        return got.pair_ids
    rows = np.array(
        Pair.objects.filter(campaign=campaign, pooled=True, label__isnull=True)
        .order_by("id")
        .values_list("id", "query_id", "document_id"),
        dtype=np.int64,
    ).reshape(-1, 3)
    ids = rows[:, 0]
    answers, confidence = model_answers(campaign, ids)
    d = doubt(answers, confidence)
    weight = impact(campaign, rows[:, 1], rows[:, 2])
    order = np.lexsort((ids, -weight, -d))
    pair_ids: np.ndarray = ids[order]
    with _LOCK:
        _LISTS[(campaign.pk, campaign.created_at)] = _Cached(time.monotonic(), pair_ids)
    return pair_ids
