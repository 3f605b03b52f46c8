"""The reads behind the judging pages: the queue, progress figures and an annotator's own judgments."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from judging import selectors
from judging.models import Campaign, Pair, Query
from judging.services import (
    campaign_create,
    judgment_record,
    membership_add,
    queries_import,
    query_tags_set,
    run_import,
)
from tests.data import RUN_BM25, TOPICS


@pytest.fixture
def ann2(pooled, make_user):
    user = make_user("ann2")
    membership_add(campaign=pooled, user=user, role="annotator")
    return user


def set_redundancy(campaign: Campaign, n: int) -> None:
    Campaign.objects.filter(id=campaign.id).update(redundancy=n)
    campaign.refresh_from_db()


def drain(campaign, annotator, *, grade=1) -> list[int]:
    """Judge the queue to its end through pair_next; the pair ids in the order offered."""
    order, query_id = [], None
    while pair := selectors.pair_next(campaign=campaign, annotator=annotator, current_query_id=query_id).pair:
        assert pair.id not in order, "a pair offered twice to one annotator"
        order.append(pair.id)
        query_id = pair.query_id
        judgment_record(pair=pair, annotator=annotator, grade=grade)
    return order


def test_pair_next_offers_every_pooled_pair_once(pooled, annotator):
    order = drain(pooled, annotator)
    assert sorted(order) == sorted(Pair.objects.filter(campaign=pooled, pooled=True).values_list("id", flat=True))
    assert selectors.pair_next(campaign=pooled, annotator=annotator).pair is None


def test_pair_next_skips_pairs_outside_the_pool(pooled, annotator):
    outside = Pair.objects.filter(campaign=pooled).first()
    Pair.objects.filter(id=outside.id).update(pooled=False)
    assert outside.id not in drain(pooled, annotator)


def test_pair_next_counts_unsure_judgments_against_redundancy(pooled, annotator, ann2):
    pair = Pair.objects.filter(campaign=pooled).first()
    judgment_record(pair=pair, annotator=ann2, unsure=True, note="no idea")
    assert pair.id not in drain(pooled, annotator)


def test_pair_next_with_redundancy_gives_judged_pairs_to_others_but_never_twice(pooled, annotator, ann2):
    set_redundancy(pooled, 2)
    first = drain(pooled, annotator)
    second = drain(pooled, ann2)
    assert sorted(first) == sorted(second)
    assert set(Pair.objects.filter(campaign=pooled).values_list("judgment_count", flat=True)) == {2}


def test_pair_next_stays_on_the_current_query(pooled, annotator):
    q1 = Query.objects.get(campaign=pooled, qid="q1")
    for _ in range(3):
        nxt = selectors.pair_next(campaign=pooled, annotator=annotator, current_query_id=q1.id)
        assert nxt.pair.query_id == q1.id
        judgment_record(pair=nxt.pair, annotator=annotator, grade=0)
    nxt = selectors.pair_next(campaign=pooled, annotator=annotator, current_query_id=q1.id)
    assert nxt.pair.query.qid == "q2"  # q1 is done: on to the next query


def test_pair_next_ignores_a_query_of_another_campaign(pooled, annotator):
    other = campaign_create(slug="other")
    queries_import(campaign=other, data=TOPICS.encode(), filename="t.tsv")
    run_import(campaign=other, data=RUN_BM25.encode(), filename="r.run")
    foreign = Query.objects.get(campaign=other, qid="q1")
    nxt = selectors.pair_next(campaign=pooled, annotator=annotator, current_query_id=foreign.id)
    assert nxt.pair.campaign_id == pooled.id


def test_pair_next_brings_skipped_pairs_back_last(pooled, annotator):
    skipped = selectors.pair_next(campaign=pooled, annotator=annotator).pair
    nxt = selectors.pair_next(campaign=pooled, annotator=annotator, exclude=[skipped.id])
    assert nxt.pair.id != skipped.id and not nxt.was_skipped
    for pair in Pair.objects.filter(campaign=pooled).exclude(id=skipped.id):
        judgment_record(pair=pair, annotator=annotator, grade=1)
    last = selectors.pair_next(campaign=pooled, annotator=annotator, exclude=[skipped.id])
    assert (last.pair.id, last.was_skipped) == (skipped.id, True)


@pytest.mark.parametrize("queries", [2, 40])
def test_pair_next_query_count_does_not_grow_with_the_pool(db, make_user, django_assert_max_num_queries, queries):
    c = campaign_create(slug="big", pool_depth=5, redundancy=2, queue_mode="shuffled")
    queries_import(campaign=c, data="".join(f"q{i}\tquery {i}\n" for i in range(queries)).encode(), filename="t")
    run = "".join(f"q{i} Q0 d{i}-{j} {j + 1} {9 - j} s\n" for i in range(queries) for j in range(5))
    run_import(campaign=c, data=run.encode(), filename="r")
    user = make_user("u")
    membership_add(campaign=c, user=user, role="annotator")
    # a probe of the annotator's own queries (none: the statements leave them out), the next query, its first open
    # pair, and that pair's query and document by key
    with django_assert_max_num_queries(4):
        first = selectors.pair_next(campaign=c, annotator=user)
    judgment_record(pair=first.pair, annotator=user, grade=1)
    with django_assert_max_num_queries(3):  # staying on the query: the probe, the pair, its query and document
        selectors.pair_next(campaign=c, annotator=user, current_query_id=first.pair.query_id)


@pytest.mark.parametrize("mode", ["shuffled", "mtc"])
def test_pair_next_asks_once_whether_the_annotator_has_queries_of_their_own(pooled, annotator, mode):
    """The probe of the annotator's assignments is asked once a call and its answer given to every statement after
    it: the skipped pairs' second pass of the query-by-query order, and in a mode with a list its assigned step."""
    Campaign.objects.filter(pk=pooled.pk).update(queue_mode=mode)
    pooled.refresh_from_db()
    every = list(Pair.objects.filter(campaign=pooled, pooled=True).values_list("id", flat=True))
    with CaptureQueriesContext(connection) as statements:
        found = selectors.pair_next(campaign=pooled, annotator=annotator, exclude=every)
    assert found.pair is not None and found.was_skipped  # the skipped pairs come back at the end
    probes = [
        q["sql"] for q in statements.captured_queries if q["sql"].startswith('SELECT "judging_queryassignment"."id"')
    ]
    assert len(probes) == 1, probes


def queue_order(campaign, annotator) -> list[Pair]:
    """The pairs in the order pair_next hands them out when the annotator skips each in turn."""
    seen: list[Pair] = []
    while True:
        nxt = selectors.pair_next(
            campaign=campaign,
            annotator=annotator,
            current_query_id=seen[-1].query_id if seen else None,
            exclude=[p.id for p in seen],
        )
        if nxt.pair is None or nxt.was_skipped:
            return seen
        seen.append(nxt.pair)


def test_orders_are_per_annotator_and_deterministic(db, make_user):
    c = campaign_create(slug="orders", pool_depth=10, queue_mode="shuffled")
    queries_import(campaign=c, data="".join(f"q{i}\tquery {i}\n" for i in range(10)).encode(), filename="t")
    run = "".join(f"q{i} Q0 d{j:02d} {j + 1} {30 - j} s\n" for i in range(10) for j in range(10))
    run_import(campaign=c, data=run.encode(), filename="r")
    users = [make_user(f"u{i}") for i in range(3)]
    query = Query.objects.get(campaign=c, qid="q0")
    rank_order = list(Pair.objects.filter(query=query).order_by("document__docid").values_list("id", flat=True))
    walks = [queue_order(c, u) for u in users]
    assert [p.id for p in queue_order(c, users[0])] == [p.id for p in walks[0]]  # computed the same again
    doc_orders = [[p.id for p in w if p.query_id == query.id] for w in walks]
    query_orders = [list(dict.fromkeys(p.query_id for p in w)) for w in walks]  # queries stay grouped
    assert all(len(o) == 10 for o in query_orders)
    assert len({tuple(o) for o in doc_orders}) == 3 and len({tuple(o) for o in query_orders}) == 3
    assert all(sorted(o) == sorted(rank_order) and o != rank_order for o in doc_orders)


def test_judge_progress(pooled, annotator, ann2):
    q1 = Query.objects.get(campaign=pooled, qid="q1")
    pairs = list(Pair.objects.filter(query=q1))
    judgment_record(pair=pairs[0], annotator=annotator, grade=2)
    judgment_record(pair=pairs[1], annotator=ann2, grade=0)
    p = selectors.judge_progress(campaign=pooled, annotator=annotator, query_id=q1.id)
    assert (p.query_done, p.query_total, p.campaign_done, p.campaign_total) == (1, 3, 2, 5)
    assert p.campaign_percent == pytest.approx(40.0)
    assert selectors.judge_progress(campaign=pooled, annotator=annotator, query_id=None).campaign_done == 2


def test_pool_size_is_cached_until_forgotten(pooled):
    assert selectors.pool_size(campaign=pooled) == 5
    run_import(campaign=pooled, data=b"q9 Q0 d9 1 1 extra\n", filename="extra.run")
    assert selectors.pool_size(campaign=pooled) == 5  # cached
    selectors.pool_size_forget(campaign=pooled)
    assert selectors.pool_size(campaign=pooled) == 6


def test_judgment_neighbours_walk_the_history(pooled, annotator):
    public = dict(Pair.objects.values_list("id", "public_id"))  # the history names pairs by public id
    order = [public[p] for p in drain(pooled, annotator)]
    judgments = {j.pair.public_id: j for j in annotator.judgments.all()}
    assert selectors.judgment_neighbours(campaign=pooled, annotator=annotator, judgment=None) == (order[-1], None)
    middle = judgments[order[2]]
    assert selectors.judgment_neighbours(campaign=pooled, annotator=annotator, judgment=middle) == (order[1], order[3])
    assert selectors.judgment_following(campaign=pooled, annotator=annotator, judgment=middle) == order[3]
    # Changing a judgment does not move it in the history.
    judgment_record(pair=middle.pair, annotator=annotator, grade=2)
    assert selectors.judgment_neighbours(campaign=pooled, annotator=annotator, judgment=middle) == (order[1], order[3])


def test_judgment_list_is_only_the_annotators_own(pooled, annotator, ann2):
    pairs = list(Pair.objects.filter(campaign=pooled).order_by("id"))
    judgment_record(pair=pairs[0], annotator=annotator, grade=2, note="mine")
    judgment_record(pair=pairs[0], annotator=ann2, grade=0, note="theirs")
    judgment_record(pair=pairs[1], annotator=ann2, grade=0)
    mine = selectors.judgment_list(campaign=pooled, annotator=annotator)
    assert [(j.pair_id, j.note) for j in mine] == [(pairs[0].id, "mine")]
    assert not selectors.judgment_list(campaign=pooled, annotator=annotator, text="theirs").exists()


def test_campaign_and_annotator_progress(pooled, annotator, ann2, lead):
    pairs = list(Pair.objects.filter(campaign=pooled).order_by("id"))
    judgment_record(pair=pairs[0], annotator=annotator, grade=2, seconds_spent=10)
    judgment_record(pair=pairs[1], annotator=annotator, unsure=True, note="hmm", seconds_spent=20)
    stats = selectors.campaign_progress(campaign=pooled)
    assert (stats["pooled"], stats["touched"], stats["complete"], stats["labelled"], stats["unsure_open"]) == (
        5,
        2,
        2,
        1,
        1,
    )
    rows = {r["user"].username: r for r in selectors.annotators_progress(campaign=pooled)}
    assert set(rows) == {"ann", "ann2", "lead"}
    assert (rows["ann"]["judgments"], rows["ann"]["unsure"], rows["ann"]["notes"]) == (2, 1, 1)
    assert rows["ann"]["mean_seconds"] == pytest.approx(15.0)
    assert rows["ann2"]["judgments"] == 0 and rows["ann2"]["mean_seconds"] is None


def test_query_list_finds_queries_by_qid_or_tag_once_each(tiny):
    query_tags_set(campaign=tiny, qid="q1", tags=["q2", "head"])  # q1 carries the tag "q2"
    query_tags_set(campaign=tiny, qid="q3", tags=["head"])

    def qids(search):
        return [q.qid for q in selectors.query_list(campaign=tiny, search=search)]

    assert qids("") == ["q1", "q2", "q3", "q4"]
    assert qids("q2") == ["q1", "q2"]  # by tag and by qid, each once
    assert qids("head") == ["q1", "q3"]
    assert selectors.query_tag_exists(campaign=tiny, tag="head")
    assert not selectors.query_tag_exists(campaign=tiny, tag="tail")


def test_campaign_setup_counts_systems_documents_and_annotators(tiny):
    setup = selectors.campaign_setup(campaign=tiny)
    assert [s["name"] for s in setup["systems"]] == ["<em>gamma</em>", "alpha", "beta"]
    assert (setup["documents"], setup["annotators"]) == (10, 2)  # the annotator and the assessor
