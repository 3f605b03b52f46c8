"""The queue modes "mtc" and "bandit" on campaigns small enough to check by hand, the next-pair API, and the
judging-queue setting (unknown modes refused, naming the allowed ones; each mode explained)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from judging.forms import CampaignSettingsForm
from judging.models import Assignment, Campaign, Pair
from judging.selectors import pair_next
from judging.services import (
    campaign_create,
    campaign_settings_update,
    judgment_record,
    membership_add,
    pair_assign,
    run_import,
)
from tests.data import SYSTEM_NAMES, client_for


def _campaign(make_user, mode: str, run: str, *, depth: int = 3, slug: str = "modes"):
    c = campaign_create(slug=slug, pool_depth=depth)
    run_import(campaign=c, data=run.encode(), filename="r")
    campaign_settings_update(campaign=c, queue_mode=mode)
    ann = make_user(f"{slug}-ann")
    membership_add(campaign=c, user=ann, role="annotator")
    return Campaign.objects.get(pk=c.pk), ann


def _judge(campaign, ann, docid: str, grade: int, qid: str = "q1") -> None:
    pair = Pair.objects.get(campaign=campaign, query__qid=qid, document__docid=docid)
    judgment_record(pair=pair, annotator=ann, grade=grade)


def _next(campaign, ann) -> str:
    pair = pair_next(campaign=campaign, annotator=ann).pair
    assert pair is not None
    return pair.document.docid


# a ranks x, s, y; b ranks s, z, w (one query, nDCG@10, scale 0-2: every weight is the rank's discount over
# the top grade's gain 2, divided by an ideal DCG of at least 2)
MTC_RUN = "".join(
    f"q1 Q0 {doc} {rank} {10 - rank} {system}\n"
    for system, docs in (("a", "xsy"), ("b", "szw"))
    for rank, doc in enumerate(docs, start=1)
)


def test_mtc_serves_the_document_that_moves_the_open_difference_most(make_user):
    """a - b = x + 0.63 s + 0.5 y - (s + 0.63 z + 0.5 w): x (weight 1) first, then z (0.63), then y and w
    (0.5), and s last (0.63 - 1: both rank it, it moves the difference least)."""
    campaign, ann = _campaign(make_user, Campaign.QueueMode.MTC, MTC_RUN)
    assert _next(campaign, ann) == "x"
    served = []
    for _ in range(5):
        doc = _next(campaign, ann)
        served.append(doc)
        _judge(campaign, ann, doc, 0)
    # y and w have the same weight: they come in document order (the order their stubs were created)
    assert served[:2] == ["x", "z"] and set(served[2:4]) == {"w", "y"} and served[4] == "s"
    assert pair_next(campaign=campaign, annotator=ann).pair is None


def test_mtc_follows_the_labels(make_user):
    """Once x is judged highly relevant a leads by 1 (ideal DCG 2); b can still overtake it (s, z, w at
    their weights 1, 0.63, 0.5), so the comparison stays open and z (0.63) comes next, then the two 0.5s."""
    campaign, ann = _campaign(make_user, Campaign.QueueMode.MTC, MTC_RUN, slug="mtc-labels")
    _judge(campaign, ann, "x", 2)
    assert _next(campaign, ann) == "z"


# two queries; a ranks a1 a2 a3 and b ranks b1 b2 b3 for each
BANDIT_RUN = "".join(
    f"{q} Q0 {system}{q}_{rank} {rank} {10 - rank} {system}\n"
    for q in ("q1", "q2")
    for system in ("a", "b")
    for rank in (1, 2, 3)
)


def test_bandit_pulls_the_arm_with_the_best_relevance_rate(make_user):
    """On q1, a's first document is relevant (rate 2/3) and b's is not (1/3): a's next document comes first.
    Once that one is not relevant, a's rate is (1 + 0.9) / (2 + 0.9 + 1) < 1/2: the untried arms of q2 (1/2)
    come next, a's before b's (the same rate, the same rank)."""
    campaign, ann = _campaign(make_user, Campaign.QueueMode.BANDIT, BANDIT_RUN, slug="bandit")
    # untried arms take turns: every arm's first document first
    assert _next(campaign, ann) == "aq1_1"
    _judge(campaign, ann, "aq1_1", 2)
    _judge(campaign, ann, "bq1_1", 0)
    assert _next(campaign, ann) == "aq1_2"
    _judge(campaign, ann, "aq1_2", 0)
    assert _next(campaign, ann) == "aq2_1"


def test_modes_with_a_list_respect_holds(make_user):
    campaign, ann = _campaign(make_user, Campaign.QueueMode.MTC, MTC_RUN, slug="mtc-holds")
    other = make_user("other")
    membership_add(campaign=campaign, user=other, role="annotator")
    first = pair_assign(campaign=campaign, annotator=ann).pair
    second = pair_assign(campaign=campaign, annotator=other).pair
    assert (first.document.docid, second.document.docid) == ("x", "z")


def test_a_busy_team_takes_different_pairs_of_the_lists_head_and_one_annotator_its_exact_order(make_user):
    """Annotators asking at the same moment all start from the head of the same list and all but one lose the race
    for its first open pair. Once BUSY_FROM annotators asked lately, each takes the (id mod SPREAD_WIDTH)-th of
    the first open pairs: asked together (nobody holds anything yet) they are given different pairs, all from the
    head of the list; while a few ask, each gets the list's first open pair, in the mode's exact order."""
    from judging.scoring.selection import BUSY_FROM, mtc_pairs
    from judging.selectors import priority

    run = "".join(f"q{q} Q0 d{q}_{r} {r} {30 - r} {system}\n" for q in range(4) for system in "ab" for r in range(1, 9))
    campaign, first = _campaign(make_user, Campaign.QueueMode.MTC, run, depth=8, slug="spread")
    head = mtc_pairs(campaign)
    assert pair_next(campaign=campaign, annotator=first).pair.id == head[0]
    team = [make_user(f"spread-{i}") for i in range(BUSY_FROM + 3)]
    for person in team:
        membership_add(campaign=campaign, user=person, role="annotator")
    served = [pair_next(campaign=campaign, annotator=person).pair.id for person in team]
    # the first few asked while the campaign was not busy yet: the head, as for one annotator
    assert served[: BUSY_FROM - 2] == [head[0]] * (BUSY_FROM - 2)
    again = [pair_next(campaign=campaign, annotator=person).pair.id for person in team]
    expected = [head[person.id % priority.SPREAD_WIDTH] for person in team]
    assert again == expected
    assert len(set(again)) == min(len(team), priority.SPREAD_WIDTH)


def test_a_busy_campaigns_list_is_computed_again_behind_the_requests(make_user):
    """A team of a few gets the mtc list computed again after each judgment, in the request; once the campaign is
    busy (BUSY_FROM annotators asking), the requests serve the kept list and a thread computes the next one, so a
    judgment's request never waits for it: the pair just judged is still listed (the queue passes it over)."""
    from judging.scoring import selection

    campaign, ann = _campaign(make_user, Campaign.QueueMode.MTC, MTC_RUN, slug="mtc-busy")
    head = selection.mtc_pairs(campaign)
    _judge(campaign, ann, Pair.objects.get(id=head[0]).document.docid, 0)
    after = selection.mtc_pairs(campaign)
    assert head[0] not in after and list(after) == list(head[1:])  # computed again at once
    for annotator_id in range(1000, 1000 + selection.BUSY_FROM):
        selection.note_asking(campaign.pk, annotator_id)
    assert selection.busy(campaign.pk)
    _judge(campaign, ann, Pair.objects.get(id=after[0]).document.docid, 0)
    assert list(selection.mtc_pairs(campaign)) == list(after)  # the kept list, within STAMP_EVERY of the last


# --------------------------------------------------------------------------- the setting


def test_unknown_queue_mode_is_refused_naming_the_modes(pooled, lead):
    response = client_for(lead).patch(f"/api/campaigns/{pooled.slug}/", {"queue_mode": "fastest"}, format="json")
    assert response.status_code == 400
    message = response.json()["queue_mode"][0]
    assert "fastest" in message
    for mode in Campaign.QueueMode.values:
        assert mode in message
    ok = client_for(lead).patch(f"/api/campaigns/{pooled.slug}/", {"queue_mode": "bandit"}, format="json")
    assert ok.status_code == 200 and ok.json()["queue_mode"] == "bandit"

    form = CampaignSettingsForm({"queue_mode": "fastest"}, instance=pooled)
    assert not form.is_valid()
    assert "fastest" in form.errors["queue_mode"][0] and "mtc" in form.errors["queue_mode"][0]


def test_settings_page_explains_each_mode(pooled, as_lead):
    html = as_lead.get(reverse("judging:campaign_settings", args=[pooled.slug])).content.decode()
    assert "Minimal test collections" in html and "Carterette" in html
    assert "Losada" in html and "Query by query" in html


# --------------------------------------------------------------------------- GET /api/campaigns/SLUG/next/


def test_next_returns_a_held_pair_without_the_systems(pooled, annotator):
    client = client_for(annotator)
    response = client.get(f"/api/campaigns/{pooled.slug}/next/")
    assert response.status_code == 200
    body = response.json()
    pair = Pair.objects.select_related("query", "document").get(public_id=body["pair"])
    assert body["qid"] == pair.query.qid and body["docid"] == pair.document.docid
    assert body["query"] == {"text": pair.query.text, "description": pair.query.description}
    assert body["document"]["title"] == pair.document.title and body["document"]["text"] == pair.document.text
    assert Assignment.objects.get(annotator=annotator, campaign=pooled).pair_id == pair.id
    text = response.content.decode()
    for name in SYSTEM_NAMES:
        assert name not in text
    assert "rank" not in text
    # asking again before judging: the same pair, still held
    assert client.get(f"/api/campaigns/{pooled.slug}/next/").json()["pair"] == body["pair"]


def test_next_answers_204_when_nothing_is_left(pooled, annotator):
    client = client_for(annotator)
    seen = set()
    while (response := client.get(f"/api/campaigns/{pooled.slug}/next/")).status_code == 200:
        public_id = response.json()["pair"]
        assert public_id not in seen
        seen.add(public_id)
        posted = client.post("/api/judgments/", {"pair": public_id, "grade": 1}, format="json")
        assert posted.status_code == 201
    assert response.status_code == 204 and not response.content
    assert len(seen) == Pair.objects.filter(campaign=pooled, pooled=True).count() == 5
    assert not Assignment.objects.filter(annotator=annotator).exists()


def test_next_holds_the_pair_from_other_annotators(pooled, annotator, make_user):
    other = make_user("other")
    membership_add(campaign=pooled, user=other, role="annotator")
    mine = client_for(annotator).get(f"/api/campaigns/{pooled.slug}/next/").json()["pair"]
    theirs = set()
    while (response := client_for(other).get(f"/api/campaigns/{pooled.slug}/next/")).status_code == 200:
        theirs.add(response.json()["pair"])
        client_for(other).post("/api/judgments/", {"pair": response.json()["pair"], "grade": 0}, format="json")
    assert mine not in theirs and len(theirs) == 4


@pytest.mark.parametrize("who", ["stranger", "anonymous"])
def test_next_refuses_non_members(pooled, make_user, who):
    client = client_for(make_user("stranger")) if who == "stranger" else client_for(None)
    response = client.get(f"/api/campaigns/{pooled.slug}/next/")
    assert response.status_code == (404 if who == "stranger" else 401)
    assert not Assignment.objects.exists()


def test_each_mode_is_explained_in_korean_too():
    from django.utils import translation

    from judging.forms import queue_modes_help
    from judging.selectors.strategies import unknown_mode_message

    with translation.override("ko"):
        text = str(queue_modes_help())
        assert "최소 테스트 컬렉션" in text and "MM-NS 밴딧" in text and "질의별로" in text
        message = unknown_mode_message("x")
        assert "사용할 수 있는 방식:" in message and "mtc" in message and "bandit" in message


@pytest.mark.parametrize("mode", ["mtc", "bandit"])
def test_record_and_next_statements_do_not_grow_with_the_pool(make_user, mode):
    """ "Record + next" in a mode with a priority list: the list is computed again from the moved query's labels
    (the leaderboard's incremental rescoring) and served from memory, so the SQL statements per judgment are
    the same for 2 queries as for 30."""
    from django.core.cache import caches
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.judging.test_views import HTMX, judge_url, login, record_url, shown_pair

    counts = []
    for queries in (2, 30):
        # the database cache counts its table once every few writes (judging.cache_db): each campaign from the same
        # point of that cycle, so that the one count falls in both or neither
        caches["default"].clear()
        run = "".join(
            f"q{q} Q0 {s}{q}_{d} {d + 1} {9 - d} {s}\n" for s in "ab" for q in range(queries) for d in range(3)
        )
        campaign, ann = _campaign(make_user, mode, run, slug=f"grow-{mode}-{queries}")
        client = login(ann)
        page = client.get(judge_url(campaign))
        pair_id, most = shown_pair(page), 0
        for _ in range(3):
            with CaptureQueriesContext(connection) as ctx:
                response = client.post(
                    record_url(campaign, pair_id), {"grade": 1, "seconds": "2", "version": ""}, **HTMX
                )
            assert response.status_code == 200
            most = max(most, len(ctx.captured_queries))
            pair_id = shown_pair(response)
        counts.append(most)
    # about 40: the record, the next pair (the annotator's assigned queries, then the list), the rescored query
    assert counts[0] == counts[1] <= 45, counts


@pytest.mark.parametrize("redundancy", [1, 2])
def test_record_and_next_moves_the_hold_to_the_next_pair_and_none_is_left_at_the_end(make_user, redundancy):
    """On the judging page in a mode with a priority list, each "record + next" leaves the annotator one hold, on
    the pair they are shown (moved in the request's transaction, not deleted and taken again); once the pool is
    done for them they hold nothing, and at two judgments a pair a second annotator is served every pair."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from judging.selectors import judge_progress
    from tests.judging.test_views import HTMX, judge_url, login, record_url, shown_pair

    campaign, ann = _campaign(make_user, Campaign.QueueMode.MTC, MTC_RUN, slug=f"hold-{redundancy}")
    campaign.redundancy = redundancy
    campaign.save(update_fields=["redundancy"])
    pool = Pair.objects.filter(campaign=campaign, pooled=True).count()
    other = make_user(f"hold-{redundancy}-other")
    membership_add(campaign=campaign, user=other, role="annotator")
    for person in (ann, other) if redundancy == 2 else (ann,):
        client = login(person)
        pair_id, served = shown_pair(client.get(judge_url(campaign))), []
        while pair_id is not None:
            served.append(pair_id)
            with CaptureQueriesContext(connection) as ctx:
                response = client.post(
                    record_url(campaign, pair_id), {"grade": 1, "seconds": "2", "version": ""}, **HTMX
                )
            assert response.status_code == 200
            pair_id = shown_pair(response) if 'data-pair-id="' in response.content.decode() else None
            held = list(Assignment.objects.filter(annotator=person).values_list("pair__public_id", flat=True))
            assert held == ([] if pair_id is None else [pair_id])
            deletes = [
                q["sql"] for q in ctx.captured_queries if q["sql"].startswith('DELETE FROM "judging_assignment"')
            ]
            assert len(deletes) == (pair_id is None), deletes  # the hold is deleted only when nothing is left
            if pair_id is not None:
                # the query's figures came with the pair, as a separate read of them gives them
                shown = Pair.objects.get(public_id=pair_id)
                fresh = judge_progress(campaign=campaign, annotator=person, query_id=shown.query_id)
                html = response.content.decode()
                assert f'<progress max="{fresh.query_total}" value="{fresh.query_done}">' in html
                alone = [q for q in ctx.captured_queries if q["sql"].startswith('SELECT COUNT("judging_pair"."id")')]
                # the first person's first next pair comes from the list (the second person's, at two judgments a
                # pair, from the query-by-query order: the list holds the pairs without a label)
                assert person is not ann or len(served) > 1 or not alone, alone
        assert len(served) == len(set(served)) == pool
