"""Queue mode "pairs that matter most": unjudged pairs that can still change an open comparison."""

from __future__ import annotations

import numpy as np

from judging.models import Campaign
from judging.scoring.trust import priority_pairs


def priority(campaign: Campaign, annotator_id: int) -> np.ndarray:
    """``judging.scoring.trust.priority_pairs`` order: the best rank a system with an open comparison gives the
    document (the same for every annotator)."""
    return priority_pairs(campaign)
