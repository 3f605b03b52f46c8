"""Everything that reads for a page, an export or the scorer."""
from __future__ import annotations

from collections.abc import Iterator

from judging.models import Campaign, Pair


def qrels_rows(*, campaign: Campaign) -> Iterator[tuple[str, str, int]]:
    """(qid, docid, label) of every labelled pair — exactly what the leaderboard scores — streamed."""
    return (
        Pair.objects.filter(campaign=campaign, label__isnull=False)
        .order_by("query__qid", "document__docid")
        .values_list("query__qid", "document__docid", "label")
        .iterator(chunk_size=5000)
    )
