"""Fixtures shared by the security tests."""

import pytest

from judging.models import Campaign, Pair
from judging.services import judgment_record, run_import
from tests.data import RUN_BM25, RUN_DENSE


@pytest.fixture
def board(campaign, lead, annotator):
    """Two systems, a few labels, and the leads letting annotators see the leaderboard."""
    for run in (RUN_BM25, RUN_DENSE):
        run_import(campaign=campaign, data=run.encode(), filename="run.txt")
    for docid, grade in (("d1", 2), ("d3", 1), ("d2", 0)):
        pair = Pair.objects.select_related("campaign").get(query__qid="q1", document__docid=docid)
        judgment_record(pair=pair, annotator=annotator, grade=grade)
    Campaign.objects.filter(pk=campaign.pk).update(leaderboard_visible_to_annotators=True)
    return campaign
