"""The order in which the queue modes "mtc" and "bandit" serve pairs (metrics.selection), per labels state.

Both read the ranked labels and document ids of every query of the campaign (``trust.campaign_arrays``, kept
per labels state and patched after a judgment), order the unjudged (query, document) pairs with a pure numpy
function, and map them to pooled pair ids with a sorted search in a per-process map of the pool. The list is
kept per campaign and mode and computed again once the labels moved, unless it is younger than a few times
what computing it cost (at most ``PRIORITY_MAX_AGE``): on a large campaign judged by many people at once the
order then trails the labels by a fraction of a second, and every served pair is re-checked against the live
queue rules (redundancy, holds) anyway.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from judging.models import Campaign, Pair
from judging.scoring.cache import Leaderboard, leaderboard
from judging.scoring.cube import cursor_rows
from judging.scoring.trust.arrays import campaign_arrays, top_grade
from judging.scoring.trust.priority import PRIORITY_MAX_AGE, QUEUE_PARAMS
from judging.scoring.trust.store import LOCK, process_store
from judging.selectors.campaigns import pool_size
from metrics.selection import Selection, bandit_order, mtc_order

logger = logging.getLogger(__name__)

# The measure MTC weighs documents for: the leaderboard's default ranking, nDCG at the queue's k
# (metrics.selection.MTC_MEASURES lists the others it supports: P@k and MAP).
MTC_MEASURE = "nDCG"
# MM-NS's fading of older evidence per later judged document of the same arm (metrics.selection.bandit_rates).
BANDIT_DECAY = 0.9
# A list younger than this many times its computing time is served even though the labels moved.
STALE_FACTOR = 5.0


@dataclass
class _Kept:
    state: str
    computed: float  # time.monotonic()
    seconds: float  # what computing it cost
    pair_ids: np.ndarray


@dataclass
class _PoolMap:
    key: tuple[object, ...]
    keys: np.ndarray  # sorted (query_id << 32 | document_id) of the pooled pairs
    ids: np.ndarray  # their pair ids


_KEPT: dict[tuple[int, str], _Kept] = process_store({})
_POOLS: dict[int, _PoolMap] = process_store({})


def _pool_map(campaign: Campaign, lb: Leaderboard) -> _PoolMap:
    """The campaign's pooled pairs as sorted keys, read once per runs and pool size (the pool only changes on
    imports and settings, both of which change one or the other)."""
    key = (lb.cube.key, pool_size(campaign=campaign), campaign.pool_depth)
    with LOCK:
        got = _POOLS.get(campaign.pk)
    if got is not None and got.key == key:
        return got
    rows = np.array(
        cursor_rows(
            Pair.objects.filter(campaign=campaign, pooled=True).order_by().values_list("query_id", "document_id", "id")
        ),
        dtype=np.int64,
    ).reshape(-1, 3)
    keys = (rows[:, 0] << 32) | rows[:, 1]
    order = np.argsort(keys)
    got = _PoolMap(key, keys[order], rows[order, 2])
    with LOCK:
        _POOLS[campaign.pk] = got
    return got


def _pair_ids(campaign: Campaign, lb: Leaderboard, chosen: Selection) -> np.ndarray:
    pool = _pool_map(campaign, lb)
    if not pool.keys.size or not chosen.query.size:
        return np.zeros(0, dtype=np.int64)
    wanted = (lb.cube.query_ids[chosen.query] << 32) | chosen.doc
    at = np.minimum(np.searchsorted(pool.keys, wanted), pool.keys.size - 1)
    found = pool.keys[at] == wanted
    ids: np.ndarray = pool.ids[at[found]]
    return ids


def _kept_order(campaign: Campaign, mode: str, order: Callable[[Leaderboard], Selection]) -> np.ndarray:
    lb = leaderboard(campaign, QUEUE_PARAMS)
    key = (campaign.pk, mode)
    with LOCK:
        got = _KEPT.get(key)
    now = time.monotonic()
    if got is not None and (
        got.state == lb.state or now - got.computed < min(PRIORITY_MAX_AGE, STALE_FACTOR * got.seconds)
    ):
        return got.pair_ids
    started = time.perf_counter()
    ids = _pair_ids(campaign, lb, order(lb))
    seconds = time.perf_counter() - started
    with LOCK:
        _KEPT[key] = _Kept(lb.state, time.monotonic(), seconds, ids)
    logger.debug("queue order %s of %s: %d pairs in %.1f ms", mode, campaign.slug, ids.size, seconds * 1000)
    return ids


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


__all__ = ["BANDIT_DECAY", "MTC_MEASURE", "bandit_pairs", "mtc_pairs"]
