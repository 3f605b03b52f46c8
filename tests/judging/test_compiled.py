"""The shortcut around the ORM (judging.compiled): each query kept there answers exactly as the ORM query it
came from, and builds the model instances the ORM builds. Run at every Django upgrade."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.db.models import F
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from judging import selectors
from judging.access import campaign_member_pair
from judging.compiled import Slots, Values, compiled_select, compiled_update
from judging.labels import labels_bump_query_of
from judging.models import Assignment, Campaign, Document, Pair, Query
from judging.selectors.queue import pair_next_of
from judging.selectors.queue_rules import (
    QUEUE_FIELDS,
    open_pair_of,
    open_pairs_of,
    pair_from_row,
    queue_values,
)
from judging.services import judgment_record, membership_add
from judging.services.judgments import (
    hold_delete,
    pair_label_of,
    pair_state_of,
    pair_state_rows,
)


def _same_instance(built, orm) -> None:
    """``built`` is what the ORM loads: the same class and field values, and saved state (not an instance
    to insert, from the default database)."""
    assert type(built) is type(orm) and built == orm
    fields = [f.attname for f in type(orm)._meta.concrete_fields]
    assert [getattr(built, f) for f in fields] == [getattr(orm, f) for f in fields]
    assert (built._state.adding, built._state.db) == (orm._state.adding, orm._state.db) == (False, "default")


@pytest.mark.parametrize("lock", [False, True])
@pytest.mark.parametrize("current", [False, True])
@pytest.mark.parametrize("skipped", [False, True])
def test_compiled_pair_next_is_the_orm_query(pooled, annotator, current, skipped, lock):
    """_pair_next's template, run with this call's values, answers the row the same query built by the ORM
    with the values themselves answers; its pair, query and document are the ORM's instances."""
    first = Pair.objects.filter(campaign=pooled).order_by("id").first()
    shape = {"current": current, "levels": pooled.redundancy, "overlap": False, "exclude": skipped, "lock": lock}
    values = queue_values(
        campaign=pooled,
        annotator_id=annotator.id,
        current_query_id=first.query_id if current else None,
        exclude=[first.id] if skipped else [],
        **{f"level{level}": level for level in range(pooled.redundancy)},
    )
    with transaction.atomic():
        template = compiled_select(
            ("test_pair_next", *shape.values()), lambda: pair_next_of(Slots(QUEUE_FIELDS), **shape)
        )
        row = template.first(values)
        orm_row = next(iter(pair_next_of(Values(QUEUE_FIELDS, **values), **shape)))
    assert row == list(orm_row)
    pair, _end = pair_from_row(row)
    loaded = Pair.objects.select_related("query", "document").get(id=pair.id)
    for built, orm in ((pair, loaded), (pair.query, loaded.query), (pair.document, loaded.document)):
        _same_instance(built, orm)
    assert not skipped or pair.id != first.id


def test_compiled_instances_save_as_the_orms(pooled, annotator):
    """A pair built from a compiled row is saved by an UPDATE of its row, as one the ORM loaded."""
    pair = selectors.pair_next(campaign=pooled, annotator=annotator).pair
    pair.gold_label = 1
    pair.save(update_fields=["gold_label"])
    pair.query.text = "changed"
    pair.query.save()
    assert Pair.objects.count() == 5 and Pair.objects.get(id=pair.id).gold_label == 1
    assert Query.objects.get(id=pair.query_id).text == "changed"


def test_compiled_member_pair_is_the_orms(pooled, annotator):
    """access.campaign_member_pair: the pair (query, document, campaign) and the scale the ORM loads."""
    pair = Pair.objects.filter(campaign=pooled, pooled=True).order_by("id").first()
    request = RequestFactory().get("/")
    request.user = annotator
    member, built = campaign_member_pair(request, pooled.slug, pair.public_id, lock=False)
    loaded = Pair.objects.select_related("query", "document", "campaign").get(id=pair.id)
    for b, orm in ((built, loaded), (built.query, loaded.query), (built.document, loaded.document)):
        _same_instance(b, orm)
    _same_instance(member.campaign, Campaign.objects.get(id=pooled.id))
    scale = list(pooled.grades.order_by("value"))
    for b, orm in zip(member.grades, scale, strict=True):
        _same_instance(b, orm)
    assert member.role == "annotator"


def test_compiled_pair_next_loads_the_pair_query_and_document_as_the_orm_does(pooled, annotator):
    Document.objects.filter(campaign=pooled).update(attributes={"lang": "en", "n": [1, 2]})
    pair = selectors.pair_next(campaign=pooled, annotator=annotator).pair
    loaded = Pair.objects.select_related("query", "document").get(id=pair.id)
    for obj, orm in ((pair, loaded), (pair.query, loaded.query), (pair.document, loaded.document)):
        fields = [f.attname for f in type(obj)._meta.concrete_fields]
        assert [getattr(obj, f) for f in fields] == [getattr(orm, f) for f in fields]
    assert pair.document.attributes == {"lang": "en", "n": [1, 2]}  # JSON decoded, not text
    assert pair.created_at.tzinfo is not None  # a datetime, not the database's text


def test_compiled_lock_comes_with_progress_figures(pooled, annotator):
    with transaction.atomic():
        pair = selectors.pair_next(campaign=pooled, annotator=annotator, lock=True).pair
    total = Pair.objects.filter(query_id=pair.query_id, pooled=True).count()
    assert (pair.progress.query_done, pair.progress.query_total) == (0, total)


def _open_ids(campaign, annotator, *, exclude=(), now=None) -> tuple[set, set]:
    """The campaign's pairs open to ``annotator``: by the compiled template, asked pair by pair, and by the
    ORM query built from the same values."""
    values = queue_values(campaign=campaign, annotator_id=annotator.id, exclude=list(exclude), pair_id=0)
    if now is not None:
        values["now"] = now
    ids = Pair.objects.filter(campaign=campaign).values_list("id", flat=True)
    orm = open_pairs_of(Values(QUEUE_FIELDS, **values), overlap=False, exclude=bool(exclude))
    orm = set(orm.filter(campaign=campaign).values_list("id", flat=True))

    def build():
        args = Slots(QUEUE_FIELDS)
        return open_pairs_of(args, overlap=False, exclude=bool(exclude)).filter(id=args["pair_id"]).values("id")

    template = compiled_select(("test_open_pair", bool(exclude)), build)
    compiled = {pid for pid in ids if template.first({**values, "pair_id": pid}) is not None}
    return compiled, orm


def test_compiled_skips_and_holds_match_the_orm(pooled, annotator, make_user):
    pairs = list(Pair.objects.filter(campaign=pooled).order_by("id"))
    other = make_user("other")
    # Someone else holds one pair (redundancy 1: it is not open to anyone else while held).
    Assignment.objects.create(campaign=pooled, annotator=other, pair=pairs[0], expires_at=timezone.now() + timedelta(1))
    compiled, orm = _open_ids(pooled, annotator)
    assert compiled == orm == {p.id for p in pairs[1:]}
    # Skipped pairs (one parameter, whatever their number) are left out alike.
    skipped = [pairs[1].id, *range(10**6, 10**6 + 300)]
    compiled, orm = _open_ids(pooled, annotator, exclude=skipped)
    assert compiled == orm == {p.id for p in pairs[2:]}
    # Two days later the hold has lapsed: the time is a parameter, compared as the ORM compares it.
    compiled, orm = _open_ids(pooled, annotator, now=timezone.now() + timedelta(days=2))
    assert compiled == orm == {p.id for p in pairs}


def test_compiled_pair_state_is_the_orm_query(pooled, annotator, make_user):
    """services.judgments.pair_state_rows: the rows the ORM query answers, converted alike (a datetime, a bool),
    with a judgment of the annotator's, another's, and none."""
    pair = Pair.objects.filter(campaign=pooled, pooled=True).order_by("id").first()
    other = make_user("other")
    membership_add(campaign=pooled, user=other, role="annotator")
    for who in ([], [annotator], [annotator, other]):
        for user in who:
            judgment_record(pair=pair, annotator=user, grade=1, note="seen")
        built = pair_state_rows(pair_id=pair.id, annotator_id=annotator.id)
        orm = [list(row) for row in pair_state_of(Values(pair_id=pair.id, annotator_id=annotator.id))]
        assert sorted(built, key=str) == sorted(orm, key=str) and len(built) == max(1, len(who))


@pytest.mark.parametrize("open_", [True, False])
def test_compiled_pair_is_open_is_the_orm_query(pooled, annotator, open_):
    pair = Pair.objects.filter(campaign=pooled, pooled=True).order_by("id").first()
    if not open_:
        judgment_record(pair=pair, annotator=annotator, grade=1)
    values = queue_values(campaign=pooled, annotator_id=annotator.id, pair_id=pair.id)
    orm = open_pair_of(Values(QUEUE_FIELDS, **values), overlap=False).exists()
    assert selectors.pair_is_open(campaign=pooled, annotator_id=annotator.id, pair_id=pair.id) is orm is open_


@pytest.mark.parametrize("hold", ["none", "live", "lapsed", "mine"])
def test_pair_is_open_counts_the_pairs_own_holds(pooled, annotator, make_user, hold):
    """pair_is_open (checked under the pair's lock before a hold is taken or moved) counts the live holds of
    others on that pair only: at redundancy 1 another annotator's live hold closes it, a lapsed one or the
    annotator's own does not, a hold on another pair neither; its statement reads the pair's own holds, not
    the campaign's (no array of every hold)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    pair, elsewhere = Pair.objects.filter(campaign=pooled, pooled=True).order_by("id")[:2]
    other = make_user("other")
    membership_add(campaign=pooled, user=other, role="annotator")
    expires = timezone.now() + timedelta(minutes=-1 if hold == "lapsed" else 15)
    Assignment.objects.create(campaign=pooled, annotator=make_user("third"), pair=elsewhere, expires_at=expires)
    if hold != "none":
        holder = annotator if hold == "mine" else other
        Assignment.objects.create(campaign=pooled, annotator=holder, pair=pair, expires_at=expires)
    with CaptureQueriesContext(connection) as ctx:
        is_open = selectors.pair_is_open(campaign=pooled, annotator_id=annotator.id, pair_id=pair.id)
    assert is_open is (hold != "live")
    assert len(ctx.captured_queries) == 1 and "array_positions" not in ctx.captured_queries[0]["sql"]


def test_compiled_is_used_only_where_its_docstring_says():
    """A new shortcut around the ORM is a decision to measure and list in judging/compiled.py, not a habit."""
    import judging.compiled

    root = Path(judging.compiled.__file__).parent
    users = {
        str(path.relative_to(root.parent))
        for path in root.rglob("*.py")
        if path.name != "compiled.py" and re.search(r"^from judging\.compiled import", path.read_text(), re.M)
    }
    assert users == {
        "judging/selectors/queue.py",
        "judging/selectors/queue_rules.py",
        "judging/selectors/queue_lists.py",
        "judging/selectors/priority.py",
        "judging/selectors/progress.py",
        "judging/services/judgments.py",
        "judging/labels.py",
        "judging/access.py",
        "judging/scoring/cache.py",
        "judging/scoring/cube.py",
        "judging/scoring/hybrid.py",
    }
    for user in (
        "selectors.queue._pair_next",
        "selectors.queue_rules.pair_is_open",
        "selectors.queue_lists.pair_of_priority",
        "selectors.progress.with_progress",
        "services.judgments.pair_state_rows",
        "services.judgments.hold_delete",
        "selectors.priority.complete_prefix",
        "selectors.priority.own_prefix",
        "labels.labels_bump",
        "scoring.cache._labels_state",
        "scoring.cube.systems_key",
        "scoring.hybrid.campaign_judge",
        "selectors.queue.pair_related",
        "access.token_owner",
    ):
        assert f"``{user}``" in judging.compiled.__doc__


def test_compiled_writes_run_the_orms_statements(pooled, annotator):
    """compiled_update and compiled_delete run the very statement the ORM runs for the same update or delete
    (the query log shows each with its values), and change the same rows."""
    pair = Pair.objects.filter(campaign=pooled, pooled=True).first()
    query = Query.objects.get(id=pair.query_id)

    def sql_of(run) -> list[str]:
        with CaptureQueriesContext(connection) as ctx:
            changed = run()
        # a placeholder in a filter compiles in brackets: "id" = (2) is the ORM's "id" = 2
        return [re.sub(r"= \(([^()]+)\)", r"= \1", q["sql"]) for q in ctx.captured_queries], changed

    orm = sql_of(lambda: Pair.objects.filter(id=pair.id).update(label=2, judgment_count=3, adjudicated=True))
    values = {"pair_id": pair.id, "label": 2, "judgment_count": 3, "adjudicated": True}
    compiled = sql_of(lambda: compiled_update(("pair_label",), pair_label_of).run(values))
    assert compiled == orm and orm[1] == 1
    assert Pair.objects.filter(id=pair.id, label=2, judgment_count=3, adjudicated=True).exists()
    none = sql_of(lambda: compiled_update(("pair_label",), pair_label_of).run({**values, "pair_id": 2**63}))
    assert none == ([], 0)  # an id no column holds matches nothing, as the ORM's would

    version = query.labels_version
    orm = sql_of(lambda: Query.objects.filter(id=query.id).update(labels_version=F("labels_version") + 1))
    compiled = sql_of(lambda: compiled_update(("labels_bump_query",), labels_bump_query_of).run({"query_id": query.id}))
    assert compiled == orm and Query.objects.get(id=query.id).labels_version == version + 2

    def hold() -> None:
        Assignment.objects.create(
            campaign=pooled, annotator=annotator, pair=pair, expires_at=timezone.now() + timedelta(minutes=5)
        )

    hold()
    orm = sql_of(lambda: Assignment.objects.filter(annotator_id=annotator.id, pair_id=pair.id).delete()[0])
    hold()
    compiled = sql_of(lambda: hold_delete(annotator_id=annotator.id, pair_id=pair.id))
    assert compiled[0] == orm[0] and orm[1] == 1 and not Assignment.objects.exists()


@pytest.mark.parametrize("skips", [False, True])
def test_priority_first_open_is_the_first_open_pair_the_orm_finds(pooled, annotator, make_user, skips):
    """The compiled read of a priority list (compiled_first_of) gives the first pair of the list, in the list's
    order, that the ORM finds open: not the annotator's judged one, not one another annotator holds, not a
    skipped one; and none when no candidate is open."""
    from judging.compiled import compiled_first_of
    from judging.selectors.queue_lists import priority_open_of

    pairs = list(Pair.objects.filter(campaign=pooled, pooled=True).order_by("id"))
    judgment_record(pair=pairs[0], annotator=annotator, grade=1)
    other = make_user("holder")
    membership_add(campaign=pooled, user=other, role="annotator")
    Assignment.objects.create(
        campaign=pooled, annotator=other, pair=pairs[1], expires_at=timezone.now() + timedelta(minutes=5)
    )
    exclude = [pairs[2].id] if skips else []
    compiled = compiled_first_of(
        ("priority_open", False, skips),
        lambda: priority_open_of(Slots(QUEUE_FIELDS), overlap=False, exclude=skips),
        candidate="candidate",
    )
    closed = {pairs[0].id, pairs[1].id, *exclude}
    open_ids = [p.id for p in pairs if p.id not in closed]
    assert len(open_ids) >= 2
    # the closed pairs first, then two open ones in both orders: the first open one of each list comes back
    for tail in (open_ids, open_ids[::-1]):
        candidates = [pairs[0].id, pairs[1].id, *exclude, *tail]
        values = queue_values(campaign=pooled, annotator_id=annotator.id, exclude=exclude, candidates=candidates)
        orm = [
            c
            for c in candidates
            if priority_open_of(Values(QUEUE_FIELDS, **values, candidate=c), overlap=False, exclude=skips).exists()
        ]
        assert compiled.first(values) == [orm[0]] and orm[0] == tail[0]
    values = queue_values(campaign=pooled, annotator_id=annotator.id, exclude=exclude, candidates=sorted(closed))
    assert compiled.first(values) is None


@pytest.mark.parametrize("redundancy", [1, 2])
def test_priority_check_tells_held_and_complete_pairs_first_and_answers_as_the_open_pair_rule(
    pooled, annotator, make_user, redundancy
):
    """The priority check states the open-pair rule so that a pair's own row closes the candidates others hold or
    judged complete before the probe of the annotator's judgment (open_pairs_of's ``taken_first``): its answers are
    the rule's, for a pair held once (closed at one judgment a pair, open at two), held twice (closed at both),
    judged by someone else whose hold expired, judged by the annotator, and held by the annotator."""
    from judging.compiled import compiled_first_of
    from judging.selectors.queue_lists import priority_open_of

    pooled.redundancy = redundancy
    pooled.save(update_fields=["redundancy"])
    pairs = list(Pair.objects.filter(campaign=pooled, pooled=True).order_by("id"))
    assert len(pairs) >= 5
    judgment_record(pair=pairs[0], annotator=annotator, grade=1)
    people = [make_user(f"holder{i}") for i in range(4)]
    later = timezone.now() + timedelta(minutes=5)
    for person in people:
        membership_add(campaign=pooled, user=person, role="annotator")
    Assignment.objects.create(campaign=pooled, annotator=people[0], pair=pairs[1], expires_at=later)  # held once
    for person in people[1:3]:  # held twice
        Assignment.objects.create(campaign=pooled, annotator=person, pair=pairs[2], expires_at=later)
    Assignment.objects.create(
        campaign=pooled, annotator=people[3], pair=pairs[3], expires_at=timezone.now() - timedelta(minutes=1)
    )
    Assignment.objects.create(campaign=pooled, annotator=annotator, pair=pairs[4], expires_at=later)
    judgment_record(pair=pairs[3], annotator=people[3], grade=0)  # judged by someone else (their hold expired)
    compiled = compiled_first_of(
        ("test_priority_open",),
        lambda: priority_open_of(Slots(QUEUE_FIELDS), overlap=False, exclude=False),
        candidate="candidate",
        count=len(pairs),
    )
    values = queue_values(campaign=pooled, annotator_id=annotator.id, exclude=[], candidates=[p.id for p in pairs])
    rule = [
        p.id
        for p in pairs
        if open_pairs_of(Values(QUEUE_FIELDS, **values), overlap=False, exclude=False).filter(id=p.id).exists()
    ]
    assert [r[0] for r in compiled.rows(values)] == rule
    expected = {pairs[4].id} | ({pairs[1].id, pairs[3].id} if redundancy == 2 else set())
    assert set(rule) == expected


def test_pair_member_answers_as_the_pair_and_the_callers_roles_did(pooled, lead, annotator, make_user):
    """The API's pair of a judgment (judging.access.pair_member, one compiled query) is the pair, campaign and
    scale the ORM loads, with the caller's role; a pair outside the pool only for a lead, and nothing for an
    outsider or an unknown id."""
    from django.contrib.auth.models import AnonymousUser

    from judging.access import pair_member

    pair = Pair.objects.filter(campaign=pooled, pooled=True).order_by("id").first()
    unpooled = Pair.objects.filter(campaign=pooled, pooled=True).order_by("id").last()
    Pair.objects.filter(id=unpooled.id).update(pooled=False)
    unpooled.refresh_from_db()
    boss = make_user("boss", is_superuser=True)
    outsider = make_user("outsider")
    orm_pair, orm_scale = selectors.pair_with_scale(public_id=pair.public_id)
    for user, role in ((annotator, "annotator"), (lead, "lead"), (boss, "lead")):
        member, found = pair_member(user=user, public_id=pair.public_id)
        _same_instance(found, orm_pair)
        _same_instance(found.query, orm_pair.query)
        _same_instance(found.document, orm_pair.document)
        _same_instance(found.campaign, orm_pair.campaign)
        assert member.role == role and member.campaign == pooled
        assert [(g.id, g.value, g.name) for g in member.grades] == [(g.id, g.value, g.name) for g in orm_scale]
    assert pair_member(user=lead, public_id=unpooled.public_id)[1] == unpooled
    assert pair_member(user=annotator, public_id=unpooled.public_id) is None
    assert pair_member(user=outsider, public_id=pair.public_id) is None
    assert pair_member(user=AnonymousUser(), public_id=pair.public_id) is None
    assert pair_member(user=annotator, public_id=2**70) is None


def test_the_run_cubes_key_is_what_the_orm_reads(world):
    """scoring.cube.systems_key reads in one statement what the ORM's two queries read: the systems by name
    (a renamed one, a new one in between), the queries' largest id and count; none of either for a new campaign."""
    from django.db.models import Count, Max

    from judging.models import System
    from judging.scoring.cube import systems_key
    from judging.services import campaign_create

    def orm(campaign):
        systems = tuple(
            System.objects.filter(campaign=campaign).order_by("name").values_list("id", "fingerprint", "name")
        )
        queries = Query.objects.filter(campaign=campaign).aggregate(n=Max("id"), c=Count("id"))
        return (campaign.pk, campaign.created_at.isoformat(), systems, (queries["n"], queries["c"]))

    campaign = world.campaign
    System.objects.filter(campaign=campaign, name="bm25").update(name="zz-bm25")
    System.objects.create(campaign=campaign, name="m-middle", fingerprint="f" * 16)
    key = systems_key(campaign)
    assert key == orm(campaign)
    assert [name for _, _, name in key[2]] == ["dense", "m-middle", "zz-bm25"] and key[3][1] == 2
    empty = campaign_create(slug="empty", name="Empty")
    assert systems_key(empty) == orm(empty) == (empty.pk, empty.created_at.isoformat(), (), (None, 0))
