"""Queue mode "mtc": Minimal Test Collections (Carterette, Allan & Sitaraman, SIGIR 2006).

The next pair is the unjudged document whose label moves most the differences between systems adjacent on
the leaderboard (nDCG@10) whose order is still uncertain (judging.scoring.selection.mtc_pairs,
metrics.selection.mtc_order). It interleaves queries: the list runs across the whole campaign. Blind: the
order depends on the runs, but an annotator only ever receives the pair.
"""

from __future__ import annotations

import numpy as np

from judging.models import Campaign
from judging.scoring.selection import mtc_pairs


def priority(campaign: Campaign, annotator_id: int) -> np.ndarray:
    """The MTC order of the campaign's unjudged pooled pairs (the same for every annotator)."""
    return mtc_pairs(campaign)
