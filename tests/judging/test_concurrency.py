"""Several annotators recording and changing judgments at once on PostgreSQL: nothing lost or duplicated."""

import random

import pytest

from judging.models import Judgment, JudgmentRevision, Pair
from judging.services import campaign_create, judgment_record, membership_add, run_import
from tests.data import run_concurrently

pytestmark = pytest.mark.postgres


def test_concurrent_judgments_none_lost_history_complete(pg_only, make_user):
    campaign = campaign_create(slug="race", pool_depth=5)
    run = "".join(f"q{q} Q0 d{d} {d} {10 - d} sys\n" for q in range(3) for d in range(5))
    run_import(campaign=campaign, data=run.encode(), filename="race.run")
    pairs = list(Pair.objects.filter(campaign=campaign).select_related("campaign"))
    users = [make_user(f"u{i}") for i in range(6)]
    for u in users:
        membership_add(campaign=campaign, user=u, role="annotator")

    plans = {}
    for u in users:
        rng = random.Random(u.username)
        # every user judges every pair several times (overlapping with every other user), in their own order
        plans[u.pk] = [(p, rng.choice([0, 1, 2, None])) for p in rng.sample(pairs, len(pairs)) * 3]

    def work(user):
        for pair, grade in plans[user.pk]:
            if grade is None:
                judgment_record(pair=pair, annotator=user, unsure=True, note=f"{user.username} unsure")
            else:
                judgment_record(pair=pair, annotator=user, grade=grade)

    errors = run_concurrently(work, [(u,) for u in users])
    assert not errors, errors

    # one judgment per (pair, user), holding the user's last decision for that pair
    assert Judgment.objects.filter(pair__campaign=campaign).count() == len(users) * len(pairs)
    for u in users:
        last = {}
        for pair, grade in plans[u.pk]:
            last[pair.pk] = grade
        got = {
            j.pair_id: (None if j.unsure else j.grade.value)
            for j in Judgment.objects.filter(annotator=u).select_related("grade")
        }
        assert got == last
        # the revision history replays to the final state, with no change missing
        for pair_id in last:
            revs = list(
                JudgmentRevision.objects.filter(judgment__pair_id=pair_id, judgment__annotator=u)
                .order_by("id")
                .values_list("old_grade", "new_grade", "old_unsure", "new_unsure")
            )
            expected_changes = []
            prev = "start"
            for pair, grade in plans[u.pk]:
                if pair.pk == pair_id and grade != prev:
                    expected_changes.append(grade)
                    prev = grade
            assert [None if r[3] else r[1] for r in revs] == expected_changes
            for before, after in zip(revs, revs[1:], strict=False):
                assert after[0] == before[1] and after[2] == before[3]
    # labels match the median of confident grades
    for p in Pair.objects.filter(campaign=campaign):
        grades = sorted(Judgment.objects.filter(pair=p, unsure=False).values_list("grade__value", flat=True))
        assert p.label == (grades[(len(grades) - 1) // 2] if grades else None)
        assert p.judgment_count == len(users)


def test_policy_switch_during_judging_leaves_labels_consistent(pg_only, make_user):
    from judging.models import Campaign
    from judging.services import campaign_policy_set

    campaign = campaign_create(slug="switch", pool_depth=5)
    run = "".join(f"q{q} Q0 d{d} {d} {10 - d} sys\n" for q in range(2) for d in range(5))
    run_import(campaign=campaign, data=run.encode(), filename="switch.run")
    pairs = list(Pair.objects.filter(campaign=campaign).select_related("campaign"))
    users = [make_user(f"s{i}") for i in range(4)]
    lead = make_user("switcher")
    for u in users:
        membership_add(campaign=campaign, user=u, role="annotator")
    membership_add(campaign=campaign, user=lead, role="lead")

    def judge(user):
        rng = random.Random(user.username)
        for _ in range(25):
            judgment_record(pair=rng.choice(pairs), annotator=user, grade=rng.choice([0, 1, 2]))

    def switch():
        for policy in ["max", "min", "mean", "majority", "max"]:
            campaign_policy_set(campaign=Campaign.objects.get(pk=campaign.pk), lead=lead, policy=policy)

    def act(who):
        return switch() if who is None else judge(who)

    errors = run_concurrently(act, [(u,) for u in users] + [(None,)])
    assert not errors, errors
    for p in Pair.objects.filter(campaign=campaign):
        grades = list(Judgment.objects.filter(pair=p, unsure=False).values_list("grade__value", flat=True))
        # the switch ends on "max": every label is its pair's highest confident grade
        assert p.label == (max(grades) if grades else None)


def test_matter_queue_under_four_annotators_never_fails_nor_exceeds_redundancy(pg_only, make_user):
    """Four annotators take pairs from the "pairs that matter most" queue at once until it is empty: no call
    fails (it answered 500 on one request in six when a pair was taken between two reads), no pair is held by
    two of them at once, and every pooled pair ends with exactly ``redundancy`` judgments."""
    from judging.models import Assignment, Campaign
    from judging.services import campaign_settings_update, pair_assign

    campaign = campaign_create(slug="matter-race", pool_depth=6)
    run = "".join(
        f"q{q} Q0 {name}{q}_{d} {d + 1} {10 - d} {name}\n" for name in "abc" for q in range(6) for d in range(6)
    )
    run_import(campaign=campaign, data=run.encode(), filename="race.run")
    campaign_settings_update(campaign=campaign, queue_mode=Campaign.QueueMode.MATTER)
    users = [make_user(f"m{i}") for i in range(4)]
    for u in users:
        membership_add(campaign=campaign, user=u, role="annotator")
    campaign = Campaign.objects.get(pk=campaign.pk)
    overlaps: list[int] = []

    def work(user):
        rng = random.Random(user.username)
        for _ in range(500):
            pair = pair_assign(campaign=campaign, annotator=user).pair
            if pair is None:
                return
            holders = Assignment.objects.filter(pair=pair).count()
            if holders > campaign.redundancy:
                overlaps.append(pair.id)
            judgment_record(pair=pair, annotator=user, grade=rng.choice([0, 1, 2]))

    errors = run_concurrently(work, [(u,) for u in users])
    assert not errors, errors
    assert not overlaps
    counts = list(Pair.objects.filter(campaign=campaign, pooled=True).values_list("judgment_count", flat=True))
    assert counts and set(counts) == {campaign.redundancy}
