"""Queue mode "hybrid": people judge where their label would move the ranking most; a model judge labels the rest.

The list (judging.scoring.selection.hybrid_pairs, metrics.hybrid.hybrid_order) serves first the pooled pairs the
campaign's model judge did not answer, then those whose human label would move the comparisons of systems still
close on the hybrid leaderboard (``labels=hybrid:NAME``: people's labels, elsewhere the model's calibrated reading
in expectation) the most, given how unsure the calibrated model is of each. It interleaves queries. Blind: the
order depends on the runs and the model's answers, but an annotator only ever receives the pair. A campaign
needs a model judge with labels for this mode (services.campaigns refuses it otherwise); when the model's list
has nothing open, the queue serves query by query.
"""

from __future__ import annotations

import numpy as np

from judging.models import Campaign
from judging.scoring.selection import hybrid_pairs


def priority(campaign: Campaign, annotator_id: int) -> np.ndarray:
    """The hybrid order of the campaign's unjudged pooled pairs (the same for every annotator)."""
    return hybrid_pairs(campaign)
