"""Progress figures as plain values, below the models (``Pair.progress`` is one) and the selectors that read
them: the judging page's ``JudgeProgress`` and the one rounding every "N% complete" goes through."""

from __future__ import annotations

import math
from dataclasses import dataclass


def percent_complete(done: int, total: int, *, unlabelled: int = 0, digits: int = 0) -> float:
    """``done`` of ``total`` pairs in percent, rounded down to ``digits`` decimals, as every "N% complete" shows it.

    100 only when every pair is done and none is ``unlabelled``: an unsure judgment counts toward its pair's
    judgments but leaves it without a label until a lead reviews it, and a campaign with a pair left (999 of 1,000)
    is not complete either, however it rounds. An empty pool is not a finished one: 0."""
    if not total:
        return 0.0
    if done >= total and not unlabelled:
        return 100.0
    scale = 10.0**digits
    return min(math.floor(100 * scale * done / total) / scale, 100.0 - 1.0 / scale)


@dataclass(frozen=True)
class JudgeProgress:
    query_done: int  # pooled pairs of the current query this annotator has judged
    query_total: int  # pooled pairs of the current query
    campaign_done: int  # pooled pairs with `redundancy` judgments
    campaign_total: int  # pooled pairs
    campaign_unlabelled: int = 0  # pooled pairs without a label, counted only once every pair is done

    @property
    def campaign_percent(self) -> float:
        return percent_complete(self.campaign_done, self.campaign_total, unlabelled=self.campaign_unlabelled)
