"""Queue modes that serve pairs from a priority list, one module per mode.

A mode here maps (campaign, annotator id) to the ids of pooled pairs in the order it wants them judged, most
urgent first (a numpy array of int64). ``selectors.queue.pair_next`` serves the first of them still open to the
annotator (redundancy, holds, their own judgments and skips filter the list), and falls back to the query-by-query
order (mode "shuffled") when none is. A mode must stay blind: its order may depend on the systems' runs, but
nothing it returns reaches an annotator except the pair itself.

Add a mode: a module beside this one with a ``priority(campaign, annotator_id)`` function, a line in
``PRIORITY_MODES``, and its choice in ``Campaign.QueueMode``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from django.utils.translation import gettext as _

from judging.models import Campaign
from judging.selectors.strategies import audit, bandit, doubtful, hybrid, matter, mtc

PriorityFn = Callable[[Campaign, int], np.ndarray]

PRIORITY_MODES: dict[str, PriorityFn] = {
    Campaign.QueueMode.MATTER: matter.priority,
    Campaign.QueueMode.AUDIT: audit.priority,
    Campaign.QueueMode.DOUBTFUL: doubtful.priority,
    Campaign.QueueMode.MTC: mtc.priority,
    Campaign.QueueMode.BANDIT: bandit.priority,
    Campaign.QueueMode.HYBRID: hybrid.priority,
}

# Modes that serve their list and nothing else: when it has no pair open to the annotator, the queue is empty
# for them (no fall back to the query-by-query order). The audit judges the drawn queries only.
EXCLUSIVE_MODES: frozenset[str] = frozenset({Campaign.QueueMode.AUDIT})


def priority_for(mode: str) -> PriorityFn | None:
    """The priority function of queue mode ``mode``, or None for the query-by-query order."""
    return PRIORITY_MODES.get(mode)


def unknown_mode_message(value: str) -> str:
    """The error for a queue mode that does not exist, naming the allowed ones; ``value``: what was asked for
    (or the placeholder a form or serializer fills in: "%(value)s", "{input}")."""
    modes = ", ".join(str(mode) for mode in Campaign.QueueMode.values)
    return _("Unknown judging queue %(value)s; the queue modes are: %(modes)s.") % {"value": value, "modes": modes}
