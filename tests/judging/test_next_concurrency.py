"""GET /api/campaigns/SLUG/next/ under concurrent callers on PostgreSQL: no pair served twice, no error."""

from __future__ import annotations

import contextlib
import threading

import pytest
from django.db import connections
from django.utils import timezone

from judging.models import Assignment, Campaign, Pair
from judging.services import campaign_create, campaign_settings_update, membership_add, qrels_import, run_import
from judging.services.model_judge import model_judge_get_or_create
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


def _contended_campaign(make_user, mode: str, annotators: int) -> tuple[Campaign, list]:
    """Six systems that share most of their top 5 over 24 queries (about 150 pairs), ``annotators`` annotators, and
    in the hybrid mode a model judge that answered a third of the pool (its pairs come after the others there)."""
    campaign = campaign_create(slug=f"crowd-{mode}", pool_depth=5)
    run = "".join(
        f"q{q} Q0 d{q}_{(d + s) % 7} {d + 1} {10 - d} s{s}\n" for s in range(6) for q in range(24) for d in range(5)
    )
    run_import(campaign=campaign, data=run.encode(), filename="crowd.run")
    if mode == "hybrid":
        judge = model_judge_get_or_create(name="bot", campaign=campaign)
        qrels = "".join(f"q{q} 0 d{q}_{d} {(q + d) % 3}\n" for q in range(24) for d in range(0, 7, 3))
        qrels_import(campaign=campaign, data=qrels.encode(), filename="bot.qrels", annotator=judge)
    campaign_settings_update(campaign=campaign, queue_mode=mode)
    users = [make_user(f"c{i}") for i in range(annotators)]
    for u in users:
        membership_add(campaign=campaign, user=u, role="annotator")
    return Campaign.objects.get(pk=campaign.pk), users


@pytest.mark.parametrize("mode", ["shuffled", "mtc", "matter", "bandit", "doubtful", "hybrid"])
def test_fifty_annotators_are_served_until_the_pool_is_empty(pg_only, make_user, mode):
    """50 annotators judge at once through the API (next, then the judgment) until it answers 204. Nobody is sent
    home while a pair is open to them: when one is told nothing is left, no pair is both unjudged and free of
    another annotator's hold (a hold goes only when its pair is judged here, so such a pair was free at the 204
    too). In the end every pooled pair has its one judgment."""
    campaign, users = _contended_campaign(make_user, mode, 50)
    pooled = Pair.objects.filter(campaign=campaign, pooled=True)
    total = pooled.count()
    assert total > 100
    served: list[int] = []
    statuses: list[int] = []
    sent_home_early: list[tuple[str, int]] = []
    lock = threading.Lock()
    # The first rounds in lockstep: all 50 ask for the head of the list at the same moment, as a crowd of
    # annotators on many server processes does.
    rounds = threading.Barrier(len(users))
    clients = {user.pk: client_for(user) for user in users}

    def work(user):
        client = clients[user.pk]
        for i in range(total + 1):
            if i < 3:
                with contextlib.suppress(threading.BrokenBarrierError):
                    rounds.wait(timeout=60)
            got = client.get(f"/api/campaigns/{campaign.slug}/next/")
            with lock:
                statuses.append(got.status_code)
            if got.status_code == 204:
                held = Assignment.objects.filter(campaign=campaign, expires_at__gt=timezone.now()).values("pair_id")
                free = pooled.filter(judgment_count=0).exclude(id__in=held).count()
                if free:
                    with lock:
                        sent_home_early.append((user.username, free))
                return
            # The test client keeps a thread's connection to the end of the thread; a server returns it to the
            # pool after each request (4 in this process), so that every annotator gets one in turn.
            connections.close_all()
            if got.status_code != 200:
                return
            pair = got.json()["pair"]
            with lock:
                served.append(pair)
            posted = client.post("/api/judgments/", {"pair": pair, "grade": (pair + i) % 3}, format="json")
            with lock:
                statuses.append(posted.status_code)
            connections.close_all()

    errors = run_concurrently(work, [(u,) for u in users])
    assert not errors, errors
    assert set(statuses) <= {200, 201, 204}, sorted(set(statuses))
    assert not sent_home_early, f"told nothing is left while pairs were open: {sent_home_early[:5]}"
    assert len(served) == len(set(served)) == total
    assert set(pooled.values_list("judgment_count", flat=True)) == {1}
