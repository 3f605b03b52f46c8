"""GET /api/campaigns/SLUG/next/ under concurrent callers on PostgreSQL: no pair served twice, no error."""

from __future__ import annotations

import threading

import pytest

from judging.models import Campaign, Pair
from judging.services import campaign_create, campaign_settings_update, membership_add, run_import
from tests.data import client_for, run_concurrently

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("mode", ["shuffled", "matter", "mtc", "bandit"])
def test_next_never_serves_a_pair_twice_under_concurrent_callers(pg_only, make_user, mode):
    """Four annotators ask for their next pair and post its judgment at once until the API answers 204: every
    pooled pair is served exactly once (redundancy 1), and every answer is 200, 201 or 204."""
    campaign = campaign_create(slug=f"next-{mode}", pool_depth=5)
    run = "".join(
        f"q{q} Q0 {name}{q}_{d} {d + 1} {10 - d} {name}\n" for name in "abc" for q in range(5) for d in range(5)
    )
    run_import(campaign=campaign, data=run.encode(), filename="race.run")
    campaign_settings_update(campaign=campaign, queue_mode=mode)
    users = [make_user(f"n{i}") for i in range(4)]
    for u in users:
        membership_add(campaign=campaign, user=u, role="annotator")
    campaign = Campaign.objects.get(pk=campaign.pk)
    served: list[int] = []
    statuses: list[int] = []
    lock = threading.Lock()

    def work(user):
        client = client_for(user)
        for i in range(200):
            got = client.get(f"/api/campaigns/{campaign.slug}/next/")
            with lock:
                statuses.append(got.status_code)
            if got.status_code != 200:
                return
            pair = got.json()["pair"]
            with lock:
                served.append(pair)
            posted = client.post("/api/judgments/", {"pair": pair, "grade": (pair + i) % 3}, format="json")
            with lock:
                statuses.append(posted.status_code)

    errors = run_concurrently(work, [(u,) for u in users])
    assert not errors, errors
    assert set(statuses) <= {200, 201, 204}, sorted(set(statuses))
    pooled = Pair.objects.filter(campaign=campaign, pooled=True)
    assert len(served) == len(set(served)) == pooled.count() == 75
    assert set(pooled.values_list("judgment_count", flat=True)) == {1}
