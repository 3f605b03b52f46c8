""" "Judge what is new first": the judging queue serves the unjudged pool pairs a snapshot brought before any other
pair, in every queue mode, for every annotator; then the rest; never a judged pair again; off restores the order.
The page's button and the API's focus resource, for leads only."""

from __future__ import annotations

import numpy as np
import pytest

from judging.access import Member
from judging.engine_models import Engine, EngineSnapshot, EngineSystem, QueueFocus
from judging.models import Campaign, Pair
from judging.selectors import pair_next
from judging.selectors.engines import focus_status, snapshot_new_pairs
from judging.services import campaign_create, campaign_settings_update, judgment_record, membership_add, run_import
from judging.services.engines import focus_start, focus_stop
from judging.services.queue import judgment_record_next, pair_assign
from tests.data import client_for

# Three queries; the first snapshot ranks o1..o4 of each, the second brings n1 and n2 into its top 4 (q1, q2)
# and leaves q3 as it was. The pool (depth 4) holds both snapshots' top 4 and an older run's documents.
QUERIES = ("q1", "q2", "q3")
FIRST = {q: ["o1", "o2", "o3", "o4"] for q in QUERIES}
SECOND = {"q1": ["n1", "o1", "n2", "o2"], "q2": ["o2", "n1", "o1", "o3"], "q3": ["o1", "o2", "o3", "o4"]}
OLDER = {q: ["x1", "x2", "o1"] for q in QUERIES}


def _run(ranked: dict[str, list[str]], name: str) -> bytes:
    lines = [f"{q} Q0 {d} {r} {10 - r} {name}" for q, docs in ranked.items() for r, d in enumerate(docs, start=1)]
    return ("\n".join(lines) + "\n").encode()


def _world(make_user, mode: str, slug: str = "focus") -> tuple[Campaign, EngineSnapshot, EngineSnapshot, list]:
    c = campaign_create(slug=slug, pool_depth=4)
    run_import(campaign=c, data=_run(OLDER, "older"), filename="older.run")
    engine = Engine.objects.get_or_create(name="shop", kind="elasticsearch", base_url="http://127.0.0.1:9")[0]
    system = EngineSystem.objects.create(campaign=c, engine=engine, name="es", template='{"q": "{{query}}"}')
    snapshots = []
    for number, ranked in ((1, FIRST), (2, SECOND)):
        run_import(campaign=c, data=_run(ranked, f"es@{number}"), filename=f"es{number}.run")
        snapshots.append(
            EngineSnapshot.objects.create(
                engine_system=system,
                number=number,
                system=c.systems.get(name=f"es@{number}"),
                template_version=1,
                template=system.template,
                queries_ok=3,
            )
        )
    campaign_settings_update(campaign=c, queue_mode=mode)
    annotators = []
    for i in range(2):
        ann = make_user(f"{slug}-ann{i}")
        membership_add(campaign=c, user=ann, role="annotator")
        annotators.append(ann)
    return Campaign.objects.get(pk=c.pk), snapshots[0], snapshots[1], annotators


def _new_pairs(campaign: Campaign) -> set[int]:
    new = {("q1", "n1"), ("q1", "n2"), ("q2", "n1")}
    pairs = Pair.objects.filter(campaign=campaign).values_list("id", "query__qid", "document__docid")
    return {pk for pk, q, d in pairs if (q, d) in new}


def _fresh(campaign: Campaign) -> Campaign:
    return Campaign.objects.get(pk=campaign.pk)


def test_the_focus_holds_the_unjudged_pool_pairs_the_snapshot_brought_in_serving_order(db, make_user):
    campaign, first, second, (ann, _other) = _world(make_user, "shuffled")
    ids = snapshot_new_pairs(old=first, new=second, k=4)
    assert set(ids.tolist()) == _new_pairs(campaign)
    served = Pair.objects.filter(pk__in=ids.tolist()).values_list("id", "query__qid", "document__docid")
    order = {pk: (q, d) for pk, q, d in served}
    assert [order[i] for i in ids.tolist()] == [("q1", "n1"), ("q1", "n2"), ("q2", "n1")]  # by qid, then rank
    # a pair with a label already is not new work
    judgment_record(pair=Pair.objects.get(pk=ids[0]), annotator=ann, grade=2)
    assert snapshot_new_pairs(old=first, new=second, k=4).tolist() == ids[1:].tolist()
    # the top 1 only: n1 entered q1's (judged now), o2 entered q2's (pooled, unjudged), q3's is the same
    top1 = snapshot_new_pairs(old=first, new=second, k=1).tolist()
    assert top1 == [Pair.objects.get(campaign=campaign, query__qid="q2", document__docid="o2").id]


@pytest.mark.parametrize("mode", ["shuffled", "mtc", "matter", "bandit"])
def test_the_queue_serves_the_focus_first_to_every_annotator_then_the_rest(db, make_user, mode):
    campaign, first, second, annotators = _world(make_user, mode, slug=f"focus-{mode}")
    new = _new_pairs(campaign)
    focus_start(campaign=campaign, snapshot=second, against=first, k=4, user=None)
    campaign = _fresh(campaign)
    ann, other = annotators
    # both annotators are served focus pairs first (redundancy 1: each pair to one of them)
    served: list[int] = []
    for who in (ann, other, ann):
        found = pair_assign(campaign=campaign, annotator=who)
        assert found.pair is not None
        served.append(found.pair.id)
        judgment_record(pair=found.pair, annotator=who, grade=1)
    assert set(served) == new
    # then the rest, never a judged pair again
    rest: list[int] = []
    while (found := pair_assign(campaign=_fresh(campaign), annotator=ann)).pair is not None:
        assert found.pair.id not in new and found.pair.id not in rest
        rest.append(found.pair.id)
        judgment_record(pair=found.pair, annotator=ann, grade=0)
    pooled = set(Pair.objects.filter(campaign=campaign, pooled=True).values_list("id", flat=True))
    assert rest and set(rest) | new == pooled
    assert focus_status(campaign=_fresh(campaign)).left == 0  # type: ignore[union-attr]


def test_record_and_next_of_the_judging_page_serves_the_focus_too(db, make_user):
    """The query-by-query mode's "record + next" chooses inside its transaction; a focus sends it to pair_assign."""
    campaign, first, second, (ann, _other) = _world(make_user, "shuffled")
    new = _new_pairs(campaign)
    start = pair_assign(campaign=campaign, annotator=ann).pair
    assert start is not None
    focus_start(campaign=campaign, snapshot=second, against=first, k=4, user=None)
    member = Member(_fresh(campaign), "annotator")
    pair, seen = start, []
    for _ in range(len(new - {start.id})):
        done = judgment_record_next(
            member=member,
            pair=pair,
            annotator=ann,
            grade=1,
            unsure=False,
            tentative_grade=None,
            note="",
            seconds_spent=3.0,
            version=None,
        )
        assert done.pair is not None
        pair = done.pair
        seen.append(pair.id)
    assert set(seen) == new - {start.id}


@pytest.mark.parametrize("mode", ["shuffled", "mtc"])
def test_turning_the_focus_off_restores_the_modes_order(db, make_user, mode):
    campaign, first, second, (ann, _other) = _world(make_user, mode, slug=f"off-{mode}")
    before = pair_next(campaign=campaign, annotator=ann).pair
    focus_start(campaign=campaign, snapshot=second, against=first, k=4, user=None)
    focused = pair_next(campaign=_fresh(campaign), annotator=ann).pair
    assert focused is not None and focused.id in _new_pairs(campaign)
    assert focus_stop(campaign=campaign) and not QueueFocus.objects.exists()
    after = pair_next(campaign=_fresh(campaign), annotator=ann).pair
    assert before is not None and after is not None and after.id == before.id
    assert focus_stop(campaign=campaign) is False  # already off


def test_a_new_focus_replaces_the_old_one(db, make_user):
    campaign, first, second, _annotators = _world(make_user, "shuffled")
    one = focus_start(campaign=campaign, snapshot=second, against=first, k=4, user=None)
    two = focus_start(campaign=campaign, snapshot=second, against=None, k=4, user=None)
    assert list(QueueFocus.objects.values_list("pk", flat=True)) == [two.pk] and one.pk != two.pk
    assert _fresh(campaign).queue_focus_id == two.pk
    # with nothing to compare with, every unjudged pair of its top 4 is new
    assert two.pairs == len(np.unique(snapshot_new_pairs(old=None, new=second, k=4))) == 12


def test_deleting_the_snapshot_ends_its_focus(db, make_user):
    campaign, first, second, (ann, _other) = _world(make_user, "shuffled")
    focus_start(campaign=campaign, snapshot=second, against=first, k=4, user=None)
    second.delete()
    campaign = _fresh(campaign)
    assert campaign.queue_focus_id is None
    assert pair_next(campaign=campaign, annotator=ann).pair is not None


# --------------------------------------------------------------------------- the page and the API


def test_the_what_changed_page_turns_the_focus_on_and_off(db, make_user, client):
    campaign, _first, _second, (ann, _other) = _world(make_user, "mtc")
    lead = make_user("focus-lead")
    membership_add(campaign=campaign, user=lead, role="lead")
    client.force_login(lead)
    url = f"/campaigns/{campaign.slug}/engines/systems/es/snapshots/2/"
    page = client.get(url + "?k=4").content.decode()
    assert "Judge what is new first" in page and "these 3 new unjudged pairs" in page
    answer = client.post(url + "focus/", {"action": "on", "from": "1", "k": "4"})
    assert answer.status_code == 302 and answer["Location"] == url + "?from=1&k=4"
    page = client.get(answer["Location"]).content.decode()
    assert "3 of 3 left" in page and 'name="action" value="off"' in page
    assert "3 of 3 left" in client.get(f"/campaigns/{campaign.slug}/engines/").content.decode()
    # the campaign's page tells its leads, never its annotators
    assert "Judge what is new first is on" in client.get(f"/campaigns/{campaign.slug}/").content.decode()
    # annotators are served them, never told where they come from, and may not switch the focus
    client.force_login(ann)
    assert client.post(url + "focus/", {"action": "off"}).status_code == 403
    assert "new first" not in client.get(f"/campaigns/{campaign.slug}/").content.decode()
    served = client_for(ann).get(f"/api/campaigns/{campaign.slug}/next/").json()
    assert Pair.objects.get(public_id=served["pair"]).id in _new_pairs(campaign)
    assert "es@" not in str(served) and "focus" not in str(served)
    client.force_login(lead)
    assert client.post(url + "focus/", {"action": "off"}).status_code == 302
    assert _fresh(campaign).queue_focus_id is None
    assert "left" not in client.get(f"/campaigns/{campaign.slug}/engines/").content.decode()
    # a bad k or an unknown snapshot: nothing turned on, said so
    answer = client.post(url + "focus/", {"action": "on", "from": "7", "k": "4"}, follow=True)
    assert "was not turned on" in answer.content.decode() and _fresh(campaign).queue_focus_id is None
    assert client.post(f"/campaigns/{campaign.slug}/engines/systems/es/snapshots/9/focus/").status_code == 404


def test_the_focus_page_speaks_korean(db, make_user, client):
    campaign, _first, _second, _annotators = _world(make_user, "mtc")
    lead = make_user("focus-lead")
    membership_add(campaign=campaign, user=lead, role="lead")
    client.force_login(lead)
    url = f"/campaigns/{campaign.slug}/engines/systems/es/snapshots/2/"
    page = client.get(url + "?k=4", HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    assert "새로운 것부터 판정" in page and "새 쌍 3개를" in page
    client.post(url + "focus/", {"action": "on", "from": "1", "k": "4"}, HTTP_ACCEPT_LANGUAGE="ko")
    page = client.get(f"/campaigns/{campaign.slug}/engines/", HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    assert "쌍 3개를 다른 어떤 쌍보다 먼저" in page  # the message
    assert "3개 중 3개 남음" in page
    page = client.get(f"/campaigns/{campaign.slug}/", HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    assert "검색 엔진 페이지</a>에서" in page


def test_the_focus_api(db, make_user):
    campaign, _first, _second, (ann, _other) = _world(make_user, "shuffled")
    lead = make_user("focus-lead")
    membership_add(campaign=campaign, user=lead, role="lead")
    api = client_for(lead)
    url = f"/api/campaigns/{campaign.slug}/systems/es/snapshots/2/focus/"
    assert api.get(url).json() == {"on": False, "k": None, "against": None, "pairs": 0, "left": 0}
    on = api.post(url, {"k": 4}, format="json")
    assert on.status_code == 200 and on.json() == {"on": True, "k": 4, "against": 1, "pairs": 3, "left": 3}
    assert api.post(url, {"k": 4, "from": None}, format="json").json()["against"] is None
    assert api.post(url, {"k": 0}, format="json").status_code == 400
    assert api.post(url, {"k": 4, "from": 5}, format="json").status_code == 400
    assert api.get(f"/api/campaigns/{campaign.slug}/systems/es/snapshots/3/focus/").status_code == 404
    assert client_for(ann).post(url, {"k": 4}, format="json").status_code == 403
    off = api.delete(url)
    assert off.status_code == 200 and off.json()["on"] is False and _fresh(campaign).queue_focus_id is None


def test_a_campaign_with_a_focus_can_be_deleted(db, make_user):
    campaign, first, second, _annotators = _world(make_user, "shuffled")
    focus_start(campaign=campaign, snapshot=second, against=first, k=4, user=None)
    Campaign.objects.filter(pk=campaign.pk).delete()
    assert not QueueFocus.objects.exists() and not EngineSnapshot.objects.exists()
