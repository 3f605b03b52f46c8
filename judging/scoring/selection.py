"""The order in which the queue modes "mtc" and "bandit" serve pairs (metrics.selection), per labels state.

Both read the ranked labels and document ids of every query of the campaign (``trust.campaign_arrays``, kept
per labels state and patched after a judgment), order the unjudged (query, document) pairs with a pure numpy
function, and map them to pooled pair ids with a sorted search in a per-process map of the pool. The list is
kept per campaign and mode and computed again once the labels moved: in the request on pools up to
``INLINE_POOL`` pairs, in a thread on larger ones (the request serves the previous list meanwhile, so the next
pair never waits for a recomputation; the order then trails the labels by the time one takes, and every served
pair is re-checked against the live queue rules, redundancy and holds, anyway).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from django.core.cache import cache

from judging import runtime
from judging.models import Campaign, Pair
from judging.reads import pool_size
from judging.scoring.cache import Leaderboard, labels_counter, leaderboard, shared_write
from judging.scoring.cube import cursor_rows
from judging.scoring.hybrid import campaign_judge, hybrid_fit
from judging.scoring.trust.arrays import campaign_arrays, top_grade
from judging.scoring.trust.priority import PRIORITY_MAX_AGE, QUEUE_PARAMS
from judging.scoring.trust.store import LOCK
from metrics.hybrid import hybrid_order
from metrics.keys import pair_keys
from metrics.selection import Selection, bandit_order, mtc_order

logger = logging.getLogger(__name__)

# The measure MTC weighs documents for: the leaderboard's default ranking, nDCG at the queue's k
# (metrics.selection.MTC_MEASURES lists the others it supports: P@k and MAP).
MTC_MEASURE = "nDCG"
# MM-NS's fading of older evidence per later judged document of the same arm (metrics.selection.bandit_rates).
BANDIT_DECAY = 0.9
# Pools up to this many pairs have their list computed again in the request after each judgment, while the campaign
# is not busy (see busy); larger ones, and every list of a busy campaign, in a thread while the previous list serves
# (see _kept_order). Computed in each judgment's request, the list of a 12,000-pair pool cost a busy team 20-25 ms of
# every judgment (the load bench's app CPU per judgment in mtc: 41.7 ms against shuffled's 17.1), and a hybrid
# list's refit seconds at times (its p95); a team of a few keeps the exact order, computed after each judgment.
INLINE_POOL = 20_000
# In the thread, the labels' stamp (the campaign's labels counters, a few rows) is read at most this often per
# process and list, not at every request, and the list computed again at most as often, nor more often than
# keeps its computation under LIST_CPU_SHARE of a core. The served list trails the labels by up to this much more,
# which the queue absorbs: the candidates judged meanwhile are passed over, each for one index lookup
# (selectors.queue_lists.pair_of_priority). Half a second is a dozen judgments of a busy team: a list of thousands of
# pairs hardly moves in that many.
STAMP_EVERY = 0.5
LIST_CPU_SHARE = 0.1
# A campaign is busy in a process when at least BUSY_FROM annotators asked it for a pair within BUSY_WINDOW seconds.
BUSY_FROM = 8
BUSY_WINDOW = 10.0


@dataclass
class _Kept:
    stamp: tuple[int, int]  # _labels_stamp when it was computed
    computed: float  # time.monotonic()
    seconds: float  # what computing it cost
    pair_ids: np.ndarray
    checked: float = 0.0  # time.monotonic() when the stamp was last read against it (a large pool's)


_ASKING_LOCK = threading.Lock()
_ASKING: dict[int, dict[int, float]] = runtime.keep(
    "queue.active_annotators",
    {},
    bound=None,
    grows_with="campaign, and annotator asking for a pair within BUSY_WINDOW seconds (older ones are dropped)",
    invalidated_by="time: an annotator not seen for BUSY_WINDOW seconds is dropped at the campaign's next request",
    lock=_ASKING_LOCK,
)


def note_asking(campaign_id: int, annotator_id: int) -> bool:
    """Note that ``annotator_id`` asked the campaign for a pair now; whether the campaign is busy (see busy)."""
    now = time.monotonic()
    with _ASKING_LOCK:
        seen = _ASKING.setdefault(campaign_id, {})
        seen[annotator_id] = now
        if len(seen) >= BUSY_FROM:
            for other in [a for a, at in seen.items() if now - at > BUSY_WINDOW]:
                del seen[other]
        return len(seen) >= BUSY_FROM


def busy(campaign_id: int) -> bool:
    """Whether at least BUSY_FROM annotators asked this process for a pair of the campaign within BUSY_WINDOW s."""
    now = time.monotonic()
    with _ASKING_LOCK:
        seen = _ASKING.get(campaign_id, {})
        return sum(now - at <= BUSY_WINDOW for at in seen.values()) >= BUSY_FROM


@dataclass
class _PoolMap:
    key: tuple[object, ...]
    keys: np.ndarray  # sorted pair keys (metrics.pair_keys) of the pooled pairs
    ids: np.ndarray  # their pair ids


_KEPT: dict[tuple[int, str], _Kept] = runtime.keep(
    "queue.mode_lists",
    {},
    bound=None,
    grows_with="campaign and queue mode",
    invalidated_by="the labels stamp moving, or PRIORITY_MAX_AGE (computed again)",
    lock=LOCK,
    group="trust",
)
_POOLS: dict[int, _PoolMap] = runtime.keep(
    "queue.pool_keys",
    {},
    bound=None,
    grows_with="campaign",
    invalidated_by="the pool's state (runs or depth): read again",
    lock=LOCK,
    group="trust",
)
_REFRESHING: set[tuple[int, str]] = runtime.hold(
    "queue.mode_lists_refreshing",
    set(),
    grows_with="campaign and queue mode being computed",
    why="lists a background thread is computing (removed when it ends)",
)
# One lock per campaign and mode for a list computed while none is kept (a worker's first requests): the other
# threads wait for it instead of each reading the whole campaign's labels and pool at once.
_FIRST: dict[tuple[int, str], threading.Lock] = runtime.keep(
    "queue.first_list_locks",
    {},
    bound=None,
    grows_with="campaign and queue mode",
    invalidated_by="nothing: a lock per list, made once",
    lock=LOCK,
)


def _pool_map(campaign: Campaign, lb: Leaderboard) -> _PoolMap:
    """The campaign's pooled pairs as sorted keys, read once per runs and pool size (the pool only changes on
    imports and settings, both of which change one or the other). The first process of the deployment to need
    them reads the pool (100,000 rows at 100,000 pairs) and shares the map in Django's cache, where every other
    process (another worker, a restarted one) reads it as one entry."""
    key = (lb.cube.key, pool_size(campaign=campaign), campaign.pool_depth)
    with LOCK:
        got = _POOLS.get(campaign.pk)
    if got is not None and got.key == key:
        return got
    shared_key = f"reljudge:poolmap:{campaign.pk}:{hashlib.sha256(repr(key).encode()).hexdigest()[:24]}"
    shared = cache.get(shared_key)
    if isinstance(shared, tuple) and len(shared) == 2 and shared[0].ndim == 1 and shared[0].shape == shared[1].shape:
        got = _PoolMap(key, shared[0], shared[1])
    else:
        rows = np.array(
            cursor_rows(
                Pair.objects.filter(campaign=campaign, pooled=True)
                .order_by()
                .values_list("query_id", "document_id", "id")
            ),
            dtype=np.int64,
        ).reshape(-1, 3)
        keys = pair_keys(rows[:, 0], rows[:, 1])
        order = np.argsort(keys)
        got = _PoolMap(key, keys[order], rows[order, 2])
        shared_write({shared_key: (got.keys, got.ids)})
    with LOCK:
        _POOLS[campaign.pk] = got
    return got


def _pair_ids(campaign: Campaign, lb: Leaderboard, chosen: Selection) -> np.ndarray:
    pool = _pool_map(campaign, lb)
    if not pool.keys.size or not chosen.query.size:
        return np.zeros(0, dtype=np.int64)
    wanted = pair_keys(lb.cube.query_ids[chosen.query], chosen.doc)
    at = np.minimum(np.searchsorted(pool.keys, wanted), pool.keys.size - 1)
    found = pool.keys[at] == wanted
    ids: np.ndarray = pool.ids[at[found]]
    return ids


def _labels_stamp(campaign: Campaign) -> tuple[int, int]:
    """What moves whenever a label or the pool of the campaign does: the sum of its labels counters (every
    transaction that may move a label adds one to a counter of the campaign, services.labels_bump) and its pool
    size (its PoolCount row): one read of LABELS_SHARDS rows at most, where a sum of every query's
    labels_version read thousands. A query without pooled pairs moves neither, nor the list (it has nothing to
    serve in it)."""
    return (labels_counter(campaign), pool_size(campaign=campaign))


def _compute(
    campaign: Campaign, mode: str, order: Callable[[Leaderboard], Selection], stamp: tuple[int, int] | None = None
) -> _Kept:
    if stamp is None:
        stamp = _labels_stamp(campaign)  # read first: the list is at least as new as its stamp
    started = time.perf_counter()
    lb = leaderboard(campaign, QUEUE_PARAMS)
    ids = _pair_ids(campaign, lb, order(lb))
    kept = _Kept(stamp, time.monotonic(), time.perf_counter() - started, ids)
    with LOCK:
        _KEPT[(campaign.pk, mode)] = kept
    logger.debug("queue order %s of %s: %d pairs in %.1f ms", mode, campaign.slug, ids.size, kept.seconds * 1000)
    return kept


def _refresh_later(campaign: Campaign, mode: str, order: Callable[[Leaderboard], Selection]) -> None:
    """Compute the list again in a thread of its own (one at a time per campaign and mode)."""
    key = (campaign.pk, mode)
    with LOCK:
        if key in _REFRESHING:
            return
        _REFRESHING.add(key)

    def run() -> None:
        try:
            _compute(campaign, mode, order)
        except Exception:
            logger.exception("queue order %s of %s could not be refreshed", mode, campaign.slug)
        finally:
            with LOCK:
                _REFRESHING.discard(key)

    runtime.later(run, name=f"queue-order-{mode}-{campaign.pk}")


def _kept_order(campaign: Campaign, mode: str, order: Callable[[Leaderboard], Selection]) -> np.ndarray:
    """The mode's list for the campaign's current labels. On a pool of up to INLINE_POOL pairs of a campaign that is
    not busy it is computed again in the request once the labels moved (a few milliseconds); otherwise the request
    serves the previous list and a thread computes the new one, so the next pair never waits for it, and whether
    the labels moved is asked at most every STAMP_EVERY seconds (or as rarely as LIST_CPU_SHARE asks)."""
    key = (campaign.pk, mode)
    with LOCK:
        got = _KEPT.get(key)
    if got is None:
        with LOCK:
            first = _FIRST.setdefault(key, threading.Lock())
        with first:
            with LOCK:
                got = _KEPT.get(key)
            if got is None:
                return _compute(campaign, mode, order).pair_ids
    large = pool_size(campaign=campaign) > INLINE_POOL or busy(campaign.pk)
    now = time.monotonic()
    if large and now - max(got.checked, got.computed) < max(STAMP_EVERY, got.seconds / LIST_CPU_SHARE):
        return got.pair_ids
    stamp = _labels_stamp(campaign)
    got.checked = now
    if got.stamp == stamp and now - got.computed < PRIORITY_MAX_AGE:
        return got.pair_ids
    if large:
        _refresh_later(campaign, mode, order)
        return got.pair_ids
    return _compute(campaign, mode, order, stamp).pair_ids


def mtc_pairs(campaign: Campaign) -> np.ndarray:
    """Pooled unjudged pair ids in the order Minimal Test Collections judges them (metrics.selection.mtc_order
    for nDCG at the queue's k, every query counted, labelled or not), most urgent first."""

    def order(lb: Leaderboard) -> Selection:
        arrays = campaign_arrays(lb)
        p = lb.params
        return mtc_order(
            arrays.labels,
            arrays.qrels,
            arrays.doc_ids,
            measure=MTC_MEASURE,
            k=p.k,
            top_grade=max(top_grade(campaign, arrays.qrels), 1),
            gain=p.gain,
            threshold=p.threshold,
        )

    return _kept_order(campaign, "mtc", order)


def bandit_pairs(campaign: Campaign) -> np.ndarray:
    """Pooled unjudged pair ids in the order the MM-NS bandit pulls them (metrics.selection.bandit_order:
    arms are each system's ranking of each query down to the pool depth, one bandit across queries)."""

    def order(lb: Leaderboard) -> Selection:
        arrays = campaign_arrays(lb)
        return bandit_order(
            arrays.labels,
            arrays.doc_ids,
            depth=campaign.pool_depth,
            threshold=lb.params.threshold,
            decay=BANDIT_DECAY,
        )

    return _kept_order(campaign, "bandit", order)


def hybrid_pairs(campaign: Campaign) -> np.ndarray:
    """Pooled unjudged pair ids in the order hybrid judging serves them to people (metrics.hybrid.hybrid_order):
    the pairs the campaign's model judge did not answer first, then those whose human label would move the
    hybrid ranking (nDCG at the queue's k) most given the model's calibrated reading; empty without a model
    judge (the queue then serves query by query). The model judge is read when the list is computed, not at each
    next pair (one statement a judgment): a judge that leaves the campaign is seen at the next computation, when the
    labels move or the list is PRIORITY_MAX_AGE old."""

    def order(lb: Leaderboard) -> Selection:
        judge = campaign_judge(campaign)
        if judge is None:
            none = np.zeros(0, dtype=np.int64)
            return Selection(none, none, np.zeros(0))
        p = lb.params
        hybrid = leaderboard(campaign, replace(p, labels=f"hybrid:{judge}"))
        fit = hybrid_fit(campaign, hybrid.cube, judge, hybrid.table.versions)
        arrays = campaign_arrays(hybrid)
        pd = min(int(campaign.pool_depth), arrays.labels.shape[2])
        open_ = ~fit.human
        chosen = hybrid_order(
            arrays.labels[..., :pd],
            arrays.qrels,
            arrays.doc_ids[..., :pd],
            fit.keys[open_],
            fit.dist[open_],
            fit.calibration.prior,
            hybrid.means()[hybrid.measure_index(f"nDCG@{p.k}")],
            query_ids=hybrid.cube.query_ids[arrays.positions],
            k=p.k,
            gain=p.gain,
        )
        return chosen._replace(query=arrays.positions[chosen.query])

    return _kept_order(campaign, "hybrid", order)


__all__ = ["BANDIT_DECAY", "MTC_MEASURE", "bandit_pairs", "hybrid_pairs", "mtc_pairs"]
