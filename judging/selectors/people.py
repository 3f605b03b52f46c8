"""The people's work on a campaign's pool, apart from the labels imported from files (qrels).

A qrels file imported under a source account (``LabelSource``, e.g. ``nist``) gives pairs labels, and the
queue counts each imported label as one judgment of its pair (a pair with one needs one person fewer). The
campaign page's checklist and completion, and the Progress page, say what people did and what came from
files, apart: an import alone never makes a campaign look judged. Model judges count as neither.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count, Q

from judging.figures import percent_complete
from judging.models import AnnotatorProfile, Campaign, Judgment, LabelSource
from judging.selectors.progress import pairs_unlabelled


@dataclass(frozen=True)
class PeopleProgress:
    pooled: int  # pairs in the pool
    redundancy: int  # judgments a pair needs
    judged: int  # pooled pairs with at least one judgment by a person
    complete: int  # pooled pairs with ``redundancy`` judgments by people
    judgments: int  # people's judgments of pooled pairs
    imported_pairs: int  # pooled pairs with an imported label
    imported_judgments: int  # imported labels of pooled pairs
    unlabelled: int = 0  # pooled pairs without a label, counted only once people have completed every pair

    @property
    def percent(self) -> float:
        """Share of the pool people have completed, rounded down to a tenth (percent_complete: never 100 while a
        pair has no label; 0 for an empty pool)."""
        return percent_complete(self.complete, self.pooled, unlabelled=self.unlabelled, digits=1)

    @property
    def percent_whole(self) -> float:
        """percent rounded down to a whole percent (a tenth rounded by the template would read 99.9 as 100)."""
        return percent_complete(self.complete, self.pooled, unlabelled=self.unlabelled)

    @property
    def needed(self) -> int:
        return self.pooled * self.redundancy


def people_progress(*, campaign: Campaign, pooled: int) -> PeopleProgress:
    """The people's and the imports' figures of the campaign's pool (``pooled`` pairs, as the caller has
    counted them): two aggregate queries, whatever the pool's size."""
    sources = list(LabelSource.objects.values_list("user_id", flat=True))  # a handful of accounts
    models_ = AnnotatorProfile.model_user_ids()
    of_pool = Judgment.objects.filter(pair__campaign_id=campaign.id, pair__pooled=True)
    people = of_pool.exclude(annotator_id__in=sources + models_)
    row = of_pool.aggregate(
        judged=Count("pair_id", distinct=True, filter=~Q(annotator_id__in=sources + models_)),
        judgments=Count("id", filter=~Q(annotator_id__in=sources + models_)),
        imported_pairs=Count("pair_id", distinct=True, filter=Q(annotator_id__in=sources)),
        imported_judgments=Count("id", filter=Q(annotator_id__in=sources)),
    )
    complete = (
        people.order_by().values("pair_id").annotate(n=Count("id")).filter(n__gte=campaign.redundancy).count()
        if row["judged"]
        else 0
    )
    return PeopleProgress(
        pooled=pooled,
        redundancy=campaign.redundancy,
        judged=row["judged"],
        complete=complete,
        judgments=row["judgments"],
        imported_pairs=row["imported_pairs"],
        imported_judgments=row["imported_judgments"],
        unlabelled=pairs_unlabelled(campaign=campaign) if pooled and complete >= pooled else 0,
    )


def label_source_ids(*, user_ids: Iterable[int]) -> set[int]:
    """Which of these users are sources of imported labels (not people, never members)."""
    return set(LabelSource.objects.filter(user_id__in=list(user_ids)).values_list("user_id", flat=True))
