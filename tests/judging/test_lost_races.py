"""A lost race for a pair moves the annotator on to the next candidate, never to "nothing left" (issue 45).

Between the queue's choice and the hold (taken under the pair's lock) another annotator can take the pair; with
many annotators on the head of one priority list a request can lose many such races in a row. Here each of the
annotator's first 15 choices is taken by a rival just before the annotator's hold, for real (the rival's own
hold), and the annotator must still be handed an open pair."""

from __future__ import annotations

import pytest

from judging.models import Assignment, Campaign
from judging.services import campaign_create, campaign_settings_update, membership_add, pair_assign, run_import
from judging.services import queue as queue_service


@pytest.mark.parametrize("mode", ["shuffled", "mtc", "matter", "bandit"])
def test_fifteen_lost_races_in_a_row_still_serve_a_pair(db, make_user, monkeypatch, mode):
    campaign = campaign_create(slug=f"lost-{mode}", pool_depth=5)
    run = "".join(
        f"q{q} Q0 d{q}_{(d + s) % 7} {d + 1} {10 - d} s{s}\n" for s in range(3) for q in range(8) for d in range(5)
    )
    run_import(campaign=campaign, data=run.encode(), filename="r.run")
    campaign_settings_update(campaign=campaign, queue_mode=mode)
    annotator = make_user("slow")
    rivals = [make_user(f"rival{i}") for i in range(15)]
    for user in [annotator, *rivals]:
        membership_add(campaign=campaign, user=user, role="annotator")
    campaign = Campaign.objects.get(pk=campaign.pk)
    hold = queue_service._hold
    taken: list[int] = []

    def raced(*, campaign, annotator, pair_id, wait=True):
        if annotator.username == "slow" and len(taken) < len(rivals):
            assert hold(campaign=campaign, annotator=rivals[len(taken)], pair_id=pair_id)  # the rival is first
            taken.append(pair_id)
        return hold(campaign=campaign, annotator=annotator, pair_id=pair_id, wait=wait)

    monkeypatch.setattr(queue_service, "_hold", raced)
    found = pair_assign(campaign=campaign, annotator=annotator)
    assert len(taken) == 15
    assert found.pair is not None, "told nothing is left after losing races while pairs were open"
    assert found.pair.id not in taken
    assert Assignment.objects.get(campaign=campaign, annotator=annotator).pair_id == found.pair.id
    assert set(Assignment.objects.filter(annotator__in=rivals).values_list("pair_id", flat=True)) == set(taken)
