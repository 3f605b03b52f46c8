"""Queue mode "bandit": MM-NS document adjudication (Losada, Parapar & Barreiro, SAC 2016; Information
Processing & Management 53(5), 2017).

Each system's ranking of each query is an arm with a Beta posterior over its relevance rate, learned from the
judged documents it ranks (older evidence fading: the non-stationary variant); the next pair is the top
unjudged document of the arm with the highest expected rate (judging.scoring.selection.bandit_pairs,
metrics.selection.bandit_order). One bandit runs across queries, so queries are interleaved. Blind: the
arms are systems, but an annotator only ever receives the pair.
"""

from __future__ import annotations

import numpy as np

from judging.models import Campaign
from judging.scoring.selection import bandit_pairs


def priority(campaign: Campaign, annotator_id: int) -> np.ndarray:
    """The MM-NS order of the campaign's unjudged pooled pairs (the same for every annotator)."""
    return bandit_pairs(campaign)
