"""Pace and what is left: durations from time on pair or capped gaps, medians over the last 50, the team's
finish time, and the progress API's per-annotator figures without a query per annotator."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from judging.models import Judgment
from judging.selectors.pace import GAP_CAP_SECONDS, campaign_pace, durations, finish_times, pace_medians
from judging.services import campaign_create, judgment_record, membership_add, pair_assign, run_import
from judging.services.assignments import assignments_add, queries_of_batch
from tests.data import client_for


def _campaign(make_user, *, annotators=2, queries=4, docs=5, slug="pace"):
    campaign = campaign_create(slug=slug, pool_depth=docs, redundancy=1)
    run = "".join(f"{q} Q0 d{q}_{d} {d + 1} {10 - d} a\n" for q in range(1, queries + 1) for d in range(docs))
    run_import(campaign=campaign, data=run.encode(), filename="a")
    lead = make_user(f"{slug}-lead")
    membership_add(campaign=campaign, user=lead, role="lead")
    users = [make_user(f"{slug}{i}") for i in range(annotators)]
    for u in users:
        membership_add(campaign=campaign, user=u, role="annotator")
    return campaign, lead, users


def _judge(campaign, user, n, *, seconds=0.0):
    for _ in range(n):
        pair = pair_assign(campaign=campaign, annotator=user).pair
        judgment_record(pair=pair, annotator=user, grade=1, seconds_spent=seconds)


def _space(user, campaign, gaps):
    """Set the user's judgments' times (oldest first) so that consecutive ones are ``gaps`` seconds apart."""
    ids = list(
        Judgment.objects.filter(annotator=user, pair__campaign=campaign).order_by("id").values_list("id", flat=True)
    )
    t = timezone.now() - timedelta(seconds=sum(gaps) + 10)
    for i, jid in enumerate(ids):
        Judgment.objects.filter(id=jid).update(created_at=t)
        if i < len(gaps):
            t += timedelta(seconds=gaps[i])


def test_durations_use_time_on_pair_else_capped_gaps():
    annotators = np.array([1, 1, 1, 2, 2])
    times = np.array([1000.0, 990.0, 100.0, 500.0, 480.0])  # newest first per annotator
    seconds = np.array([0.0, 4.0, 0.0, 0.0, 0.0])
    out = durations(annotators, times, seconds, np.array([1, 2, 3, 1, 2]))
    assert out[0] == 10.0  # gap to the previous judgment
    assert out[1] == 4.0  # time on the pair, as the judging page measured it
    assert np.isnan(out[2])  # the oldest read has nothing to measure from
    assert out[3] == 20.0 and np.isnan(out[4])  # gaps never cross annotators


def test_long_gaps_count_as_a_break(make_user):
    campaign, _lead, (a, _b) = _campaign(make_user)
    _judge(campaign, a, 4)
    _space(a, campaign, [30, 3600, 30])
    medians, team = pace_medians(campaign)
    # gaps 30, 600 (3600 capped), 30: median 30
    assert medians[a.pk] == 30.0 and team == 30.0
    assert GAP_CAP_SECONDS == 600.0


def test_median_is_over_the_last_50(make_user):
    campaign, _lead, (a, _b) = _campaign(make_user, queries=14)
    _judge(campaign, a, 10, seconds=100.0)
    _judge(campaign, a, 50, seconds=5.0)
    medians, _team = pace_medians(campaign)
    assert medians[a.pk] == 5.0  # the 10 slow ones are older than the last 50


def test_finish_times_split_the_shared_work():
    assigned = np.array([0.0, 100.0, 1000.0])
    per = np.array([10.0, 5.0, 20.0])
    each, end = finish_times(assigned, per, 50.0)
    # at T: (T - 0)/10 + (T - 100)/5 = 50 (the third is still on their own queries) -> T = 700/3
    assert end == pytest.approx(1000.0)
    assert each[0] == pytest.approx(700 / 3) and each[1] == pytest.approx(700 / 3)
    assert each[2] == 1000.0
    # brute force: shared judgments done by each finish time
    t = each[0]
    assert np.maximum(0, t - assigned).dot(1 / per) == pytest.approx(50.0)


def test_remaining_counts_assigned_and_shared(make_user):
    campaign, lead, (a, b) = _campaign(make_user)
    assignments_add(
        campaign=campaign, by=lead, annotator=a.username, queries=queries_of_batch(campaign=campaign, qids=["1"])
    )
    _judge(campaign, a, 2, seconds=10.0)  # a's own query first
    _judge(campaign, b, 5, seconds=20.0)  # shared queries only
    pace = campaign_pace(campaign=campaign)
    rows = {r["username"]: r for r in pace.rows}
    # 4 queries x 5 pairs; query 1 is a's: 3 left; shared: 15 pairs, 5 judged by b -> 10 open
    assert rows[a.username]["assigned"] == 3 and rows[a.username]["remaining"] == 3 + 10
    assert rows[b.username]["assigned"] == 0 and rows[b.username]["remaining"] == 10
    assert rows[a.username]["judged"] == 2 and rows[a.username]["judged_today"] == 2
    assert rows[a.username]["median_seconds"] == 10.0 and rows[b.username]["median_seconds"] == 20.0
    assert rows[lead.username]["remaining"] is None  # leads are not counted in the team's work
    # a: 3 own pairs (30 s) then shared with b at 10 s and 20 s a judgment: 10 shared judgments
    # (T - 30)/10 + T/20 = 10 -> T = 13 / 0.15
    assert pace.eta_seconds == pytest.approx(13 / 0.15)
    assert rows[a.username]["eta_seconds"] == pytest.approx(pace.eta_seconds)


def test_progress_api_gives_each_annotator_their_figures(make_user):
    campaign, lead, (a, b) = _campaign(make_user)
    _judge(campaign, a, 3, seconds=12.0)
    url = reverse("api:campaign-progress", args=[campaign.slug])
    data = client_for(lead).get(url).json()
    row = next(r for r in data["annotators"] if r["username"] == a.username)
    assert (row["judged"], row["judged_today"], row["remaining"], row["median_seconds"]) == (3, 3, 17, 12.0)
    # 17 shared judgments, a at 12 s and b (no pace yet) at the team's 12 s: 17 / (2 / 12) s
    assert row["eta"] is not None and data["eta_seconds"] == pytest.approx(17 * 6.0)
    mine = client_for(b).get(url).json()
    assert [r["username"] for r in mine["annotators"]] == [b.username]
    assert "eta_seconds" not in mine or mine["eta_seconds"] is None


def test_progress_reads_do_not_grow_with_the_team(make_user, client):
    def count(n):
        campaign, lead, users = _campaign(make_user, annotators=n, slug=f"team{n}")
        for u in users:
            _judge(campaign, u, 2, seconds=5.0)
        client.force_login(lead)
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(reverse("judging:campaign_progress", args=[campaign.slug])).status_code == 200
        return len(ctx.captured_queries)

    assert count(2) == count(6)
