"""The order in which the queue mode "pairs that matter most" serves pairs."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from judging import runtime
from judging.models import Campaign, Pair
from judging.scoring.cache import Params, ScoreTable, leaderboard
from judging.scoring.trust.bounds import pair_priority
from judging.scoring.trust.store import LOCK
from metrics import Measure, pair_keys

# The queue mode "pairs that matter most" may serve from a priority list this many seconds older than the
# labels: recomputing it costs about a second on 20 x 5,000 x 100, and every served pair is re-checked
# against the live queue rules (redundancy, holds), so a slightly stale order only changes which open
# pair comes first.
PRIORITY_MAX_AGE = 30.0


@dataclass
class PriorityList:
    state: str
    computed: float  # time.monotonic()
    pair_ids: np.ndarray  # pooled unjudged pairs, most urgent first


_PRIORITY: dict[int, PriorityList] = runtime.keep(
    "trust.priority_lists",
    {},
    bound=None,
    grows_with="campaign",
    invalidated_by="a new labels state, or its age (computed again)",
    lock=LOCK,
    group="trust",
)
QUEUE_PARAMS = Params()  # the queue ranks by the leaderboard's defaults: nDCG@10 under the campaign's policy
QUEUE_MEASURE = str(Measure("nDCG", QUEUE_PARAMS.k))


def priority_pairs(campaign: Campaign) -> np.ndarray:
    """Pair ids in the order "pairs that matter most" serves them (see selectors.queue.pair_next).

    The unjudged pooled pairs that systems with an open comparison (nDCG@10) rank within their top 10,
    best rank first (metrics.pair_priority). Recomputed when the labels state moved and the list is
    older than PRIORITY_MAX_AGE seconds; mapping (query, document) to pair ids is one sorted search.
    """
    lb = leaderboard(campaign, QUEUE_PARAMS)
    with LOCK:
        got = _PRIORITY.get(campaign.pk)
    if got is not None and (got.state == lb.state or time.monotonic() - got.computed < PRIORITY_MAX_AGE):
        return got.pair_ids
    # Every query counts here, labelled or not: before the first label no query is in the leaderboard's
    # means, yet every comparison is open and the queue needs an order.
    every = np.ones(len(lb.cube.query_ids), dtype=bool)
    lb = replace(lb, table=ScoreTable(lb.table.versions, lb.table.scores, every), key=f"{lb.key}:queue", _means=None)
    priority = pair_priority(lb, QUEUE_MEASURE)
    ids = np.zeros(0, dtype=np.int64)
    if priority is not None and priority.query.size:
        rows = np.array(
            list(
                Pair.objects.filter(campaign=campaign, pooled=True, label__isnull=True)
                .order_by()
                .values_list("query_id", "document_id", "id")
            ),
            dtype=np.int64,
        ).reshape(-1, 3)
        keys = pair_keys(rows[:, 0], rows[:, 1])
        order = np.argsort(keys)
        keys, pair_ids = keys[order], rows[order, 2]
        wanted = pair_keys(lb.cube.query_ids[priority.query], priority.doc)
        at = np.minimum(np.searchsorted(keys, wanted), max(keys.size - 1, 0))
        found = keys[at] == wanted if keys.size else np.zeros(wanted.size, bool)
        ids = pair_ids[at[found]] if keys.size else ids
    with LOCK:
        _PRIORITY[campaign.pk] = PriorityList(lb.state, time.monotonic(), ids)
    return ids
