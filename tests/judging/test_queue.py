"""Queue assignment: redundancy respected even while pairs sit on annotators' screens; the overlap sample."""

from datetime import timedelta

import pytest
from django.db.models import Count
from django.utils import timezone

from judging.models import Assignment, Judgment, Pair
from judging.selectors.queue_rules import overlap_q, with_overlap_bucket
from judging.services import campaign_create, judgment_record, membership_add, pair_assign, run_import
from tests.data import run_concurrently


def _campaign(make_user, *, slug="queue", redundancy=1, overlap=0, annotators=2, queries=2, docs=4):
    campaign = campaign_create(slug=slug, pool_depth=docs, redundancy=redundancy)
    campaign.overlap_percent = overlap
    campaign.save()
    run = "".join(f"q{q} Q0 d{q}_{d} {d + 1} {10 - d} s\n" for q in range(queries) for d in range(docs))
    run_import(campaign=campaign, data=run.encode(), filename="r")
    users = [make_user(f"{slug}{i}") for i in range(annotators)]
    for u in users:
        membership_add(campaign=campaign, user=u, role="annotator")
    return campaign, users


def test_pair_on_someones_screen_is_not_handed_out_again(make_user):
    campaign, (a, b) = _campaign(make_user, queries=1, docs=1)
    first = pair_assign(campaign=campaign, annotator=a).pair
    assert first is not None
    assert pair_assign(campaign=campaign, annotator=b).pair is None  # the only pair is held by a
    Assignment.objects.filter(annotator=a).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert pair_assign(campaign=campaign, annotator=b).pair == first  # a walked away: the hold lapsed


def test_judging_releases_the_hold_without_counting_twice(make_user):
    campaign, (a, b) = _campaign(make_user, redundancy=2, queries=1, docs=1)
    pair = pair_assign(campaign=campaign, annotator=a).pair
    judgment_record(pair=pair, annotator=a, grade=1)
    assert not Assignment.objects.filter(annotator=a, pair=pair).exists()
    assert pair_assign(campaign=campaign, annotator=b).pair == pair  # 1 judgment < redundancy 2


def test_overlap_sample_is_judged_by_everyone(make_user):
    campaign, users = _campaign(make_user, redundancy=1, overlap=100, annotators=3)
    for u in users:
        while (pair := pair_assign(campaign=campaign, annotator=u).pair) is not None:
            judgment_record(pair=pair, annotator=u, grade=1)
    n_pairs = Pair.objects.filter(campaign=campaign).count()
    assert Judgment.objects.filter(pair__campaign=campaign).count() == 3 * n_pairs


def test_overlap_sample_share_follows_the_setting(make_user):
    campaign, _ = _campaign(make_user, overlap=10, queries=25, docs=40)
    in_sample = with_overlap_bucket(Pair.objects.filter(campaign=campaign)).filter(overlap_q(campaign)).count()
    assert 60 <= in_sample <= 140  # about 10% of 1,000 pairs


@pytest.mark.postgres
def test_concurrent_annotators_never_exceed_redundancy(pg_only, make_user):
    campaign, users = _campaign(make_user, slug="race", redundancy=2, annotators=6, queries=4, docs=6)

    def work(user):
        while (pair := pair_assign(campaign=campaign, annotator=user).pair) is not None:
            judgment_record(pair=pair, annotator=user, grade=1)

    errors = run_concurrently(work, [(u,) for u in users])
    assert not errors, errors
    counts = dict(Pair.objects.filter(campaign=campaign).annotate(n=Count("judgments")).values_list("id", "n"))
    assert set(counts.values()) == {2}  # every pair judged exactly `redundancy` times, none beyond
