"""Queue mode "audit": every pooled pair of the queries drawn for the prediction-powered leaderboard's audit."""

from __future__ import annotations

import numpy as np

from judging.models import Campaign, Pair


def priority(campaign: Campaign, annotator_id: int) -> np.ndarray:
    """The drawn queries' pooled pairs (judging.services.audit_draw), query by query in the order they were
    drawn, so that a partly done audit has completed a random prefix of the draw; within a query, the pairs
    without a label first, then by their random public id (never the systems' order). The same for every
    annotator: they work on the same query until it is audited. Pairs of other queries are never served in
    this mode (``EXCLUSIVE_MODES``): the audit must stay a random sample."""
    rows = np.array(
        # pairs with all the judgments the campaign asks for are open to nobody: left out, so the list's
        # open pairs stay within what the queue examines (selectors.queue_lists.PRIORITY_CANDIDATES)
        Pair.objects.filter(query__audit__draw__campaign=campaign, pooled=True, judgment_count__lt=campaign.redundancy)
        .order_by()
        .values_list("id", "query__audit__position", "label", "public_id"),
        dtype=object,
    ).reshape(-1, 4)
    if not rows.size:
        return np.zeros(0, dtype=np.int64)
    ids = rows[:, 0].astype(np.int64)
    position = rows[:, 1].astype(np.int64)
    labelled = np.array([v is not None for v in rows[:, 2]], dtype=bool)
    public = rows[:, 3].astype(np.int64)
    order = np.lexsort((public, labelled, position))
    ordered: np.ndarray = ids[order]
    return ordered
