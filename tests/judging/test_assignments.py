"""Queries given to annotators: their own queries first in every queue mode, others' kept out while their
assignee has work, redundancy and the blind rule, the API (who may, what errors say) and the page."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import translation

from judging.models import Campaign, Judgment, Pair, QueryAssignment
from judging.selectors.queue import assigned_pair_next
from judging.selectors.strategies import EXCLUSIVE_MODES
from judging.services import (
    campaign_create,
    judgment_record,
    membership_add,
    pair_assign,
    query_tags_set,
    run_import,
)
from judging.services.assignments import assignments_add, assignments_remove, queries_of_batch
from tests.data import client_for


def _campaign(make_user, *, slug="assign", redundancy=1, annotators=3, queries=6, docs=3, mode="shuffled"):
    campaign = campaign_create(slug=slug, pool_depth=docs, redundancy=redundancy)
    campaign.queue_mode = mode
    campaign.save()
    run_a = "".join(f"{q} Q0 d{q}_{d} {d + 1} {10 - d} a\n" for q in range(1, queries + 1) for d in range(docs))
    run_b = "".join(f"{q} Q0 d{q}_{d} {docs - d} {d} b\n" for q in range(1, queries + 1) for d in range(docs))
    run_import(campaign=campaign, data=run_a.encode(), filename="a")
    run_import(campaign=campaign, data=run_b.encode(), filename="b")
    lead = make_user(f"{slug}-lead")
    membership_add(campaign=campaign, user=lead, role="lead")
    users = [make_user(f"{slug}{i}") for i in range(annotators)]
    for u in users:
        membership_add(campaign=campaign, user=u, role="annotator")
    return campaign, lead, users


def _give(campaign, lead, user, qids):
    return assignments_add(
        campaign=campaign,
        by=lead,
        annotator=user.username,
        queries=queries_of_batch(campaign=campaign, qids=qids),
    )


def _judge_all(campaign, user) -> list[str]:
    """Judge the user's whole queue; the qids in the order served."""
    served = []
    while (pair := pair_assign(campaign=campaign, annotator=user).pair) is not None:
        served.append(pair.query.qid)
        judgment_record(pair=pair, annotator=user, grade=1)
    return served


@pytest.mark.parametrize("mode", [mode for mode, _ in Campaign.QueueMode.choices])
def test_own_queries_come_first_in_every_mode(make_user, mode):
    campaign, lead, (a, b, _c) = _campaign(make_user, mode=mode)
    _give(campaign, lead, a, ["5", "2"])
    served = _judge_all(campaign, a)
    if mode in EXCLUSIVE_MODES:
        # the audit wins: it serves the drawn queries only (none drawn here), one's own included
        assert served == []
        return
    assert set(served[:6]) == {"5", "2"}  # 2 queries × 3 pairs, before any shared pair
    assert set(served[6:]) == {"1", "3", "4", "6"}


def test_without_assigned_queries_one_probe_of_the_assignments_answers(make_user):
    """A priority mode asks for the annotator's assigned queries at every next pair: for an annotator without any
    (most of them) one probe of their assignments answers, not the whole query over the open pairs (which
    PostgreSQL planned anew at each call); with one, that query gives their pair."""
    campaign, lead, (a, b, _c) = _campaign(make_user, mode="mtc")
    with CaptureQueriesContext(connection) as ctx:
        assert assigned_pair_next(campaign=campaign, annotator=b, current_query_id=None, exclude=()) is None
    assert len(ctx.captured_queries) == 1
    assert "judging_queryassignment" in ctx.captured_queries[0]["sql"]
    assert "judging_pair" not in ctx.captured_queries[0]["sql"]
    _give(campaign, lead, b, ["4"])
    with CaptureQueriesContext(connection) as ctx:
        pair = assigned_pair_next(campaign=campaign, annotator=b, current_query_id=None, exclude=())
    assert pair is not None and pair.query.qid == "4" and len(ctx.captured_queries) == 2


def test_others_assigned_queries_stay_out_while_their_assignee_has_work(make_user):
    campaign, lead, (a, b, _c) = _campaign(make_user)
    _give(campaign, lead, a, ["1", "2"])
    served_b = _judge_all(campaign, b)
    assert set(served_b) == {"3", "4", "5", "6"}  # redundancy 1: a's queries are a's
    assert set(_judge_all(campaign, a)) == {"1", "2"}
    # once a has judged them nothing is left for anyone
    assert pair_assign(campaign=campaign, annotator=b).pair is None


def test_leftover_slots_of_an_assigned_query_are_shared(make_user):
    campaign, lead, (a, b, _c) = _campaign(make_user, redundancy=2, queries=1)
    _give(campaign, lead, a, ["1"])
    # redundancy 2: one slot of each pair is a's, the other is anybody's
    assert len(_judge_all(campaign, b)) == 3
    assert len(_judge_all(campaign, a)) == 3
    assert Judgment.objects.filter(pair__campaign=campaign).count() == 6


def test_a_query_takes_no_more_assignees_than_the_redundancy(make_user):
    campaign, lead, (a, b, c) = _campaign(make_user, redundancy=2)
    _give(campaign, lead, a, ["1"])
    _give(campaign, lead, b, ["1"])
    with pytest.raises(ValidationError) as err:
        _give(campaign, lead, c, ["1", "3"])
    assert "1" in str(err.value.message_dict["qids"]) and "redundancy" in str(err.value.message_dict["qids"])
    assert not QueryAssignment.objects.filter(annotator=c).exists()  # refused whole


def test_leads_and_model_judges_are_not_given_queries(make_user):
    campaign, lead, _ = _campaign(make_user)
    with pytest.raises(ValidationError) as err:
        _give(campaign, lead, lead, ["1"])
    assert "blind" in str(err.value.message_dict["annotator"])
    outsider = make_user("outsider")
    with pytest.raises(ValidationError) as err:
        _give(campaign, lead, outsider, ["1"])
    assert "'outsider' is not a member" in str(err.value.message_dict["annotator"])


def test_batches_by_tag_and_range(make_user):
    campaign, lead, (a, *_rest) = _campaign(make_user, queries=12)
    query_tags_set(campaign=campaign, qid="3", tags=["hard"])
    query_tags_set(campaign=campaign, qid="11", tags=["hard"])
    assert sorted(queries_of_batch(campaign=campaign, tag="hard").values()) == ["11", "3"]
    # numeric qids compare as numbers: 2..10 holds 9 queries, not "2" and "10" as text would
    assert sorted(queries_of_batch(campaign=campaign, qid_from="2", qid_to="10").values(), key=int) == [
        str(q) for q in range(2, 11)
    ]
    with pytest.raises(ValidationError) as err:
        queries_of_batch(campaign=campaign, tag="easy")
    assert "'easy'" in str(err.value.message_dict["tag"])
    with pytest.raises(ValidationError) as err:
        queries_of_batch(campaign=campaign, qids=["1", "nope"])
    assert "nope" in str(err.value.message_dict["qids"])


def test_taking_back_returns_the_query_to_the_shared_queue(make_user):
    campaign, lead, (a, b, _c) = _campaign(make_user, queries=2)
    _give(campaign, lead, a, ["1"])
    assert set(_judge_all(campaign, b)) == {"2"}
    assert assignments_remove(campaign=campaign, annotator=a.username) == 1
    assert set(_judge_all(campaign, b)) == {"1"}


# --------------------------------------------------------------------------- the API


@pytest.fixture
def api_world(make_user):
    campaign, lead, users = _campaign(make_user, slug="api-assign")
    query_tags_set(campaign=campaign, qid="4", tags=["hard"])
    return campaign, lead, users


def test_api_lead_assigns_lists_and_takes_back(api_world):
    campaign, lead, (a, b, _c) = api_world
    url = reverse("api:campaign-assignments", args=[campaign.slug])
    api = client_for(lead)
    r = api.post(url, {"annotator": a.username, "qids": ["1", "2"]}, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["added"] == 2
    r = api.post(url, {"annotator": b.username, "tag": "hard"}, format="json")
    assert r.status_code == 201 and r.json()["added"] == 1
    r = api.post(url, {"annotator": b.username, "from": "5", "to": "6"}, format="json")
    assert r.json()["added"] == 2
    listed = api.get(url).json()
    assert [(x["annotator"], x["qid"]) for x in listed] == [
        (a.username, "1"),
        (a.username, "2"),
        (b.username, "4"),
        (b.username, "5"),
        (b.username, "6"),
    ]
    assert listed[0]["pairs"] == 3 and listed[0]["judged"] == 0
    r = api.delete(url, {"ids": [listed[0]["id"]]}, format="json")
    assert r.status_code == 200 and r.json()["removed"] == 1
    r = api.delete(url, {"annotator": b.username, "qids": ["5"]}, format="json")
    assert r.json()["removed"] == 1
    assert QueryAssignment.objects.filter(campaign=campaign).count() == 3


@pytest.mark.parametrize(
    "body, field, named",
    [
        ({"annotator": "ghost", "qids": ["1"]}, "annotator", "ghost"),
        ({"annotator": "api-assign0", "qids": ["1", "99"]}, "qids", "99"),
        ({"annotator": "api-assign0", "tag": "nope"}, "tag", "nope"),
        ({"annotator": "api-assign0", "from": "1", "to": "77"}, "to", "77"),
        ({"annotator": "api-assign0"}, "non_field_errors", "qids"),
    ],
)
def test_api_errors_name_what_is_wrong(api_world, body, field, named):
    campaign, lead, _ = api_world
    r = client_for(lead).post(reverse("api:campaign-assignments", args=[campaign.slug]), body, format="json")
    assert r.status_code == 400
    assert named in str(r.json()[field])


def test_api_errors_in_korean(api_world):
    campaign, lead, _ = api_world
    r = client_for(lead).post(
        reverse("api:campaign-assignments", args=[campaign.slug]),
        {"annotator": "ghost", "qids": ["1"]},
        format="json",
        HTTP_ACCEPT_LANGUAGE="ko",
    )
    assert r.status_code == 400
    assert "사용자" in str(r.json()["annotator"])


def test_api_annotators_see_only_their_own_and_cannot_assign(api_world):
    campaign, lead, (a, b, _c) = api_world
    url = reverse("api:campaign-assignments", args=[campaign.slug])
    client_for(lead).post(url, {"annotator": a.username, "qids": ["1"]}, format="json")
    client_for(lead).post(url, {"annotator": b.username, "qids": ["2"]}, format="json")
    mine = client_for(a).get(url)
    assert mine.status_code == 200 and [x["qid"] for x in mine.json()] == ["1"]
    assert client_for(a).post(url, {"annotator": a.username, "qids": ["3"]}, format="json").status_code == 403
    assert client_for(a).delete(url, {"annotator": b.username}, format="json").status_code == 403
    assert QueryAssignment.objects.filter(campaign=campaign).count() == 2


def test_the_page_assigns_and_takes_back(api_world, client):
    campaign, lead, (a, _b, _c) = api_world
    client.force_login(lead)
    url = reverse("judging:assignments", args=[campaign.slug])
    r = client.post(url, {"action": "add", "annotator": a.username, "batch": "qids", "qids": "1 3"})
    assert r.status_code == 302
    assert sorted(QueryAssignment.objects.values_list("query__qid", flat=True)) == ["1", "3"]
    page = client.get(url).content.decode()
    assert a.username in page and "0 / 3" in page
    r = client.post(url, {"action": "add", "annotator": a.username, "batch": "qids", "qids": "1 zz"})
    assert r.status_code == 422 and "zz" in r.content.decode()
    with translation.override("ko"):
        r = client.post(
            url,
            {"action": "add", "annotator": "ghost", "batch": "qids", "qids": "1"},
            HTTP_ACCEPT_LANGUAGE="ko",
        )
    assert r.status_code == 422
    ids = list(QueryAssignment.objects.values_list("id", flat=True))
    r = client.post(url, {"action": "remove", "ids": ids[:1]})
    assert r.status_code == 302 and QueryAssignment.objects.count() == 1


def test_annotators_page_shows_their_own_only(api_world, client):
    campaign, lead, (a, b, _c) = api_world
    _give(campaign, lead, a, ["1"])
    _give(campaign, lead, b, ["2"])
    client.force_login(a)
    url = reverse("judging:assignments", args=[campaign.slug])
    page = client.get(url).content.decode()
    assert b.username not in page and ">1<" in page
    assert client.post(url, {"action": "add", "annotator": a.username, "batch": "qids", "qids": "3"}).status_code == 403


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("current", [False, True])
def test_compiled_queue_with_assignments_is_the_orm_query(make_user, shared, current):
    """The queue's compiled template (judging.compiled) answers what the ORM query answers, with the
    annotator's own queries and another annotator's reservations in play."""
    from django.db import transaction

    from judging.compiled import Slots, Values, compiled_select
    from judging.selectors.queue import pair_next_of
    from judging.selectors.queue_rules import QUEUE_FIELDS, queue_values

    campaign, lead, (a, b, _c) = _campaign(make_user, slug=f"compiled-{shared}-{current}")
    _give(campaign, lead, a, ["4", "2"])
    _give(campaign, lead, b, ["1"])
    first = Pair.objects.filter(campaign=campaign, query__qid="3").order_by("id").first()
    shape = {"current": current, "levels": 1 if shared else 0, "overlap": False, "exclude": False, "lock": False}
    values = queue_values(
        campaign=campaign,
        annotator_id=a.id,
        current_query_id=first.query_id if current else None,
        exclude=[],
        level0=0,
    )
    with transaction.atomic():
        template = compiled_select(
            ("test_assigned", shared, *shape.values()),
            lambda: pair_next_of(Slots(QUEUE_FIELDS), shared=shared, **shape),
        )
        row = template.first(values)
        orm_row = next(iter(pair_next_of(Values(QUEUE_FIELDS, **values), shared=shared, **shape)))
    assert row == list(orm_row)
    qid = Pair.objects.filter(id=row[0]).values_list("query__qid", flat=True).get()
    assert qid in {"2", "4"}  # a's own queries, whether or not she is on query 3


@pytest.mark.postgres
def test_concurrent_annotators_keep_to_their_assignments(pg_only, make_user):
    """Six annotators at once, two with queries of their own: no pair beyond the redundancy, and with
    redundancy 1 every pair of an assigned query judged by its assignee."""
    from django.db.models import Count

    from tests.data import run_concurrently

    campaign, lead, users = _campaign(make_user, slug="race-assign", annotators=6, queries=8, docs=5)
    _give(campaign, lead, users[0], ["1", "2"])
    _give(campaign, lead, users[1], ["3"])

    def work(user):
        while (pair := pair_assign(campaign=campaign, annotator=user).pair) is not None:
            judgment_record(pair=pair, annotator=user, grade=1)

    errors = run_concurrently(work, [(u,) for u in users])
    assert not errors, errors
    counts = Pair.objects.filter(campaign=campaign).annotate(n=Count("judgments")).values_list("n", flat=True)
    assert set(counts) == {1}
    by = set(
        Judgment.objects.filter(pair__campaign=campaign, pair__query__qid__in=["1", "2", "3"])
        .values_list("pair__query__qid", "annotator__username")
        .distinct()
    )
    assert by == {("1", users[0].username), ("2", users[0].username), ("3", users[1].username)}


def test_leaving_or_becoming_a_lead_gives_the_queries_back(make_user):
    from judging.services import membership_remove

    campaign, lead, (a, b, c) = _campaign(make_user, queries=2)
    _give(campaign, lead, a, ["1"])
    _give(campaign, lead, b, ["2"])
    membership_remove(campaign=campaign, user=a)
    membership_add(campaign=campaign, user=b, role="lead")
    assert not QueryAssignment.objects.filter(campaign=campaign).exists()
    assert set(_judge_all(campaign, c)) == {"1", "2"}  # nobody keeps a slot for them any more


def test_the_page_confirms_what_was_assigned(api_world, client):
    """After "Assign" the page says which queries went to whom, and which the annotator already had (issue 42),
    in English and Korean."""
    campaign, lead, (a, _b, _c) = api_world
    client.force_login(lead)
    url = reverse("judging:assignments", args=[campaign.slug])
    r = client.post(url, {"action": "add", "annotator": a.username, "batch": "qids", "qids": "1 3"}, follow=True)
    html = r.content.decode()
    assert f"2 queries given to {a.username}: 1, 3." in html, html
    r = client.post(url, {"action": "add", "annotator": a.username, "batch": "qids", "qids": "3 4"}, follow=True)
    html = r.content.decode()
    assert f"1 query given to {a.username}: 4. They already had 1 of them: 3." in html
    r = client.post(url, {"action": "add", "annotator": a.username, "batch": "qids", "qids": "1"}, follow=True)
    assert f"Nothing new given: {a.username} already had this query: 1." in r.content.decode()
    ko = Client(HTTP_ACCEPT_LANGUAGE="ko")
    ko.force_login(lead)
    html = ko.post(url, {"action": "add", "annotator": a.username, "batch": "qids", "qids": "4 5"}, follow=True)
    html = html.content.decode()
    assert f"{a.username}에게 질의 1개를 배정했습니다: 5." in html and "이미 배정된 질의 1개: 4." in html
