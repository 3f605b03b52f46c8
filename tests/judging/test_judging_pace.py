"""Record + next at the database's pace: what PostgreSQL reads and plans for one judgment, and the figures the
judging page keeps in the process to spare it (judging.compiled, judging.selectors.queue)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from judging import selectors
from judging.models import Campaign, Judgment, Pair, Query
from judging.scoring.cache import labels_versions
from judging.scoring.cube import run_cube
from judging.selectors import progress
from judging.services import (
    campaign_create,
    documents_import,
    judgment_record,
    membership_add,
    qrels_import,
    queries_import,
    run_import,
)

HTMX = {"HTTP_HX_REQUEST": "true"}
PAIR_ID = re.compile(r'data-pair-id="(\d+)"')
# Tables whose rows record + next reads by key; a campaign-wide scan of any of them shows in its count.
KEYED = ("judging_pair", "judging_judgment", "judging_assignment", "judging_query", "judging_document")


@pytest.fixture
def postgres(db):
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements and PostgreSQL's statistics are PostgreSQL's (CI runs the suite there too)")


def _campaign(slug: str, *, queries: int, depth: int, annotators: list, redundancy: int = 1) -> Campaign:
    # the query-by-query queue: the modes with a priority list (mtc, the default) recompute their list from the
    # whole pool as it changes, by design (judging.scoring.selection)
    campaign = campaign_create(
        slug=slug, name=slug, pool_depth=depth, redundancy=redundancy, queue_mode=Campaign.QueueMode.SHUFFLED
    )
    for user in annotators:
        membership_add(campaign=campaign, user=user, role="annotator")
    topics = "".join(f"q{q}\tquery {q}\n" for q in range(queries))
    docs = "".join(f'{{"docid": "d{q}-{i}", "text": "text {q} {i}"}}\n' for q in range(queries) for i in range(depth))
    run = "".join(f"q{q} Q0 d{q}-{i} {i + 1} {depth - i} sys\n" for q in range(queries) for i in range(depth))
    queries_import(campaign=campaign, data=topics.encode(), filename="t.tsv")
    documents_import(campaign=campaign, data=docs.encode(), filename="d.jsonl")
    run_import(campaign=campaign, data=run.encode(), filename="s.run")
    return campaign


def _rows_read() -> dict[str, int]:
    """Rows this transaction has read so far, per table (sequential scans' rows and rows fetched by index)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables"
        )
        return dict(cursor.fetchall())


def _judge(client: Client, campaign: Campaign, pair_id: int, grade: int = 1) -> int:
    url = reverse("judging:judge_record", args=[campaign.slug, pair_id])
    response = client.post(url, {"grade": grade, "seconds": "3", "version": ""}, **HTMX)
    assert response.status_code == 200
    return int(PAIR_ID.search(response.content.decode()).group(1))


def _judging(people: list, campaign: Campaign) -> list[list]:
    """A logged-in client per person, each with the pair the judging page showed them."""
    clients = []
    for person in people:
        client = Client()
        client.force_login(person)
        page = client.get(reverse("judging:judge", args=[campaign.slug]))
        clients.append([client, int(PAIR_ID.search(page.content.decode()).group(1))])
    return clients


def test_record_and_next_never_walks_the_campaign(postgres, make_user):
    """Three annotators judge 15 pairs each of a 4,000-pair campaign (50 per query, so each stays on a query):
    per judgment PostgreSQL reads the pairs of one query a few times over, never a share of the campaign's
    (a hash join over the campaign's pairs, or a count of its complete pairs, read thousands), and the holds
    once per statement, not once per candidate pair."""
    people = [make_user(f"a{i}") for i in range(3)]
    campaign = _campaign("pace", queries=80, depth=50, annotators=people)
    # Half the campaign is complete already: someone else's labels on the pairs of 40 queries.
    other = make_user("other")
    membership_add(campaign=campaign, user=other, role="annotator")
    qrels = "".join(f"q{q} 0 d{q}-{i} 1\n" for q in range(40, 80) for i in range(50))
    qrels_import(campaign=campaign, data=qrels.encode(), filename="other.qrels", annotator=other)
    clients = _judging(people, campaign)
    before = _rows_read()
    for _ in range(15):
        for entry in clients:
            entry[1] = _judge(entry[0], campaign, entry[1])
    after = _rows_read()
    per_judgment = {t: (after.get(t, 0) - before.get(t, 0)) / 45 for t in KEYED}
    assert per_judgment["judging_pair"] < 400, per_judgment  # a tenth of the pool: a few passes over 50 pairs
    assert per_judgment["judging_assignment"] < 30, per_judgment
    assert Pair.objects.filter(campaign=campaign, judgment_count=1).count() == 2000 + 45


def test_an_annotators_long_history_is_not_read_at_each_judgment(postgres, make_user):
    """An annotator who has judged 2,000 pairs before (and a model judge's 2,000 answers beside them) judges on:
    per judgment PostgreSQL probes the judgments of the pairs it looks at by their key (pair, annotator), never
    reads the annotator's history or the table. The judging page's progress of its query, written with EXISTS, was
    planned (a prepared statement's generic plan, once the tables had statistics) as a hashed subplan over the
    annotator's every judgment: 4,930 judgment rows a judgment on the load bench in hybrid."""
    person, model = make_user("long"), make_user("model")
    campaign = _campaign("history", queries=80, depth=50, annotators=[person], redundancy=2)
    Campaign.objects.filter(pk=campaign.pk).update(queue_mode=Campaign.QueueMode.MTC)
    membership_add(campaign=campaign, user=model, role="annotator")
    past = "".join(f"q{q} 0 d{q}-{i} {i % 2}\n" for q in range(40, 80) for i in range(50))
    qrels_import(campaign=campaign, data=past.encode(), filename="past.qrels", annotator=person)
    every = "".join(f"q{q} 0 d{q}-{i} {i % 2}\n" for q in range(80) for i in range(50))
    qrels_import(campaign=campaign, data=every.encode(), filename="model.qrels", annotator=model)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE judging_judgment; ANALYZE judging_pair")
    [[client, pair_id]] = _judging([person], campaign)
    for _ in range(8):  # past the prepared statements' first plans, made with their values
        pair_id = _judge(client, campaign, pair_id)
    before = _rows_read()
    for _ in range(20):
        pair_id = _judge(client, campaign, pair_id)
    after = _rows_read()
    per_judgment = {t: (after.get(t, 0) - before.get(t, 0)) / 20 for t in ("judging_judgment", "judging_campaign")}
    assert per_judgment["judging_judgment"] < 100, per_judgment  # the current query's 50 pairs probed
    # the probe has no ordering: the judgments' default one joined each probed pair's campaign
    assert per_judgment["judging_campaign"] < 20, per_judgment


def _index_entries_read(index: str) -> int:
    """Entries of ``index`` this transaction has read so far (bitmap scans' included: PostgreSQL keeps no per-index
    view of a transaction's statistics, its function does)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_get_xact_tuples_returned(%s::regclass)", [index])
        return int(cursor.fetchone()[0])


def test_the_next_pair_of_a_query_reads_that_query_alone(postgres, make_user):
    """Twelve annotators judge on, each on a query of their own, beside another campaign of the same size (tables
    analyzed, the statements past their first plans): the statement that picks the next pair of the current query,
    planned once without values, reads that query's pairs, never the pool index of every campaign (its
    ``judgment_count`` condition, ANDed into the scan: 24,000 entries a judgment at two 12,000-pair campaigns) nor
    the queries table once per candidate pair (the query's row joined to each: 40 x 200 rows a judgment)."""
    people = [make_user(f"a{i}") for i in range(12)]
    others = [make_user(f"o{i}") for i in range(4)]
    before_us = _campaign("before", queries=100, depth=60, annotators=others)
    for i, other in enumerate(others):
        qrels = "".join(f"q{q} 0 d{q}-{d} 1\n" for q in range(100) for d in range(60) if (q + d) % 4 != i)
        qrels_import(campaign=before_us, data=qrels.encode(), filename="o.qrels", annotator=other)
    campaign = _campaign("ours", queries=100, depth=60, annotators=people)
    clients = _judging(people, campaign)
    for _ in range(10):
        for entry in clients:
            entry[1] = _judge(entry[0], campaign, entry[1])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    for _ in range(8):  # past the prepared statements' first plans, made with their values
        for entry in clients:
            entry[1] = _judge(entry[0], campaign, entry[1])
    rows, entries = _rows_read(), _index_entries_read("pair_queue_idx")
    for _ in range(5):
        for entry in clients:
            entry[1] = _judge(entry[0], campaign, entry[1])
    rows_after, entries_after = _rows_read(), _index_entries_read("pair_queue_idx")
    pool_index = (entries_after - entries) / 60
    queries = (rows_after.get("judging_query", 0) - rows.get("judging_query", 0)) / 60
    assert pool_index < 100, pool_index
    assert queries < 100, queries


def _pair_index_entries_read() -> int:
    """Entries of the pairs table's indexes this transaction has read so far."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT SUM(pg_stat_get_xact_tuples_returned(indexrelid)) FROM pg_index "
            "WHERE indrelid = 'judging_pair'::regclass"
        )
        return int(cursor.fetchone()[0] or 0)


def test_the_next_query_is_found_without_reading_the_done_queries_pairs(postgres, make_user):
    """Where the annotator's query has no open pair left, the queue looks for the first query of the annotator's
    order with an open pair at the lowest judgment level: each query is probed for its pairs at that level
    (pair_query_level: none in a query another annotator has done), not through the pool index of every campaign,
    which each query's probe read to its end (300,000 entries for one next query at 100 queries of 30 pairs: 27-88
    ms of PostgreSQL's CPU a probe on the load bench at 200 queries of 60 pairs)."""
    person, other = make_user("p"), make_user("other")
    campaign = _campaign("levels", queries=100, depth=30, annotators=[person, other])
    done = "".join(f"q{q} 0 d{q}-{d} 1\n" for q in range(60) for d in range(30))
    qrels_import(campaign=campaign, data=done.encode(), filename="done.qrels", annotator=other)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE judging_pair; ANALYZE judging_judgment")
    before, entries = _rows_read(), _pair_index_entries_read()
    found = selectors.pair_next(campaign=campaign, annotator=person)
    read = _rows_read().get("judging_pair", 0) - before.get("judging_pair", 0)
    entries = _pair_index_entries_read() - entries
    assert found.pair is not None and found.pair.judgment_count == 0
    assert read < 300, read
    assert entries < 5_000, entries


def test_resuming_and_back_walk_the_annotators_history_from_its_end(postgres, make_user):
    """Where the queue resumes (the query of the annotator's latest judgment in the campaign) and Back from a pair
    not judged yet (the latest judgment) read a few judgments, whatever the annotator judged before, here or in
    another campaign: by the annotator's index alone PostgreSQL read every judgment of theirs and sorted them
    (970 rows a Back on the load bench), or walked the table's ids back past everyone else's."""
    from django.contrib.auth import get_user_model

    from judging.selectors.judgments import judgment_neighbours
    from judging.selectors.queue import latest_query_id

    person = make_user("resumer")
    before_campaign = _campaign("earlier", queries=40, depth=50, annotators=[person])
    campaign = _campaign("now", queries=40, depth=50, annotators=[person])
    past = "".join(f"q{q} 0 d{q}-{i} {i % 2}\n" for q in range(40) for i in range(5))
    qrels_import(campaign=before_campaign, data=past.encode(), filename="past.qrels", annotator=person)
    mine = "".join(f"q{q} 0 d{q}-{i} 1\n" for q in range(3) for i in range(5))
    qrels_import(campaign=campaign, data=mine.encode(), filename="mine.qrels", annotator=person)
    # 80 others' 8,000 judgments after the annotator's (a walk back through the ids meets them first): the annotator
    # is one of many, as on a team's campaign, 215 of the table's 8,215 judgments
    others = get_user_model().objects.bulk_create([get_user_model()(username=f"busy{i}") for i in range(80)])
    pairs = list(Pair.objects.filter(campaign=campaign, pooled=True).order_by("id").values_list("id", flat=True))
    grade = campaign.grades.get(value=0)
    Judgment.objects.bulk_create(
        Judgment(pair_id=pairs[(25 * n + i) % len(pairs)], annotator=someone, grade=grade)
        for n, someone in enumerate(others)
        for i in range(100)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE judging_judgment; ANALYZE judging_pair")
    latest = Judgment.objects.filter(annotator=person, pair__campaign=campaign).order_by("-id").first().pair
    before = _rows_read()
    for _ in range(10):
        assert latest_query_id(campaign=campaign, annotator=person) == latest.query_id
        assert judgment_neighbours(campaign=campaign, annotator=person, judgment=None)[0] == latest.public_id
    after = _rows_read()
    per_call = (after.get("judging_judgment", 0) - before.get("judging_judgment", 0)) / 20
    assert per_call < 10, per_call


def test_a_long_labels_log_is_read_from_the_kept_counters_on(postgres, make_user):
    """After 400 judgments the campaign's labels log holds 400 lines; a process whose versions are at the
    counters before the last judgment reads that one line (each shard's range of the log's index), not the log
    (the shards' ranges written as one OR were read as a filter over the campaign's whole log)."""
    annotator = make_user("a")
    campaign = _campaign("log", queries=40, depth=12, annotators=[annotator])
    pairs = list(Pair.objects.filter(campaign=campaign, pooled=True).order_by("id"))
    for pair in pairs[:400]:
        judgment_record(pair=pair, annotator=annotator, grade=1)
    cube = run_cube(campaign)
    labels_versions(campaign, cube)  # kept at the counters of now
    judgment_record(pair=pairs[400], annotator=annotator, grade=2)
    before = _rows_read()
    versions = labels_versions(campaign, cube)
    read = _rows_read().get("judging_labelschange", 0) - before.get("judging_labelschange", 0)
    assert read <= 2, read
    moved = int(np.flatnonzero(cube.query_ids == pairs[400].query_id)[0])
    assert versions[moved] == Query.objects.get(id=pairs[400].query_id).labels_version


def test_the_labels_state_never_reads_the_queries_table_whole(postgres, make_user):
    """The labels state (the counters and the log's lines since a process's, each with its query's version) reads
    each line's query by key whatever plan PostgreSQL keeps for the prepared statement: with the plan made without
    values forced, a read of 3 lines past the kept counters reads at most those queries' rows, not the queries table
    in each shard's branch (written as a join, 16 x 900 rows here)."""
    annotator = make_user("a")
    campaign = _campaign("state", queries=900, depth=1, annotators=[annotator])
    pairs = list(Pair.objects.filter(campaign=campaign, pooled=True).order_by("id"))
    for pair in pairs[:300]:
        judgment_record(pair=pair, annotator=annotator, grade=1)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE judging_labelschange, judging_query")
        cursor.execute("SET plan_cache_mode = force_generic_plan")
    try:
        cube = run_cube(campaign)
        labels_versions(campaign, cube)
        for pair in pairs[300:303]:
            judgment_record(pair=pair, annotator=annotator, grade=2)
        before = _rows_read()
        versions = labels_versions(campaign, cube)
        read = _rows_read().get("judging_query", 0) - before.get("judging_query", 0)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET plan_cache_mode")
    assert read <= 3, read
    for pair in pairs[300:303]:
        moved = int(np.flatnonzero(cube.query_ids == pair.query_id)[0])
        assert versions[moved] == Query.objects.get(id=pair.query_id).labels_version


def test_compiled_statements_are_prepared_and_planned_once(postgres, make_user):
    """The hottest reads run as prepared statements on PostgreSQL: after a few judgments PostgreSQL runs them
    with a plan it keeps instead of planning each run."""
    annotator = make_user("a")
    campaign = _campaign("prep", queries=2, depth=20, annotators=[annotator])
    [(client, pair_id)] = _judging([annotator], campaign)
    for _ in range(8):
        pair_id = _judge(client, campaign, pair_id)
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
        prepared = cursor.fetchall()
    reads = [p for p in prepared if "judging_pair" in p[0]]
    # the member's pair, the locked pair's state, the next pair of the current query, the re-check
    assert len(reads) >= 4, [p[0][:120] for p in prepared]
    assert any(generic >= 3 for _sql, generic, _custom in reads), [p[1:] for p in reads]


def test_compiled_queries_are_logged_with_their_values(pooled, annotator):
    """Django's query log (DEBUG, the tests' query counts) shows a compiled query with its values, as any other."""
    with CaptureQueriesContext(connection) as captured:
        selectors.pair_next(campaign=pooled, annotator=annotator)
    sql = [q["sql"] for q in captured.captured_queries]
    assert sql and all(isinstance(s, str) and "%s" not in s for s in sql)
    assert any(f"= ({annotator.id})" in s or f"= {annotator.id}" in s for s in sql)


def test_campaign_done_is_exact_for_a_small_pool(pooled, annotator):
    pairs = list(Pair.objects.filter(campaign=pooled, pooled=True).order_by("id"))
    assert progress.campaign_done(campaign=pooled) == 0
    judgment_record(pair=pairs[0], annotator=annotator, grade=2)
    assert progress.campaign_done(campaign=pooled) == 1  # 5 pairs: one is 20 %, counted at once


def test_campaign_done_of_a_large_pool_is_kept_for_a_few_seconds(pooled, annotator, monkeypatch):
    """Above DONE_EXACT_UP_TO pooled pairs the count is kept for DONE_TTL seconds in the process, then read
    again."""
    monkeypatch.setattr(progress, "DONE_EXACT_UP_TO", 2)
    clock = [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    progress._done_counts.clear()
    pairs = list(Pair.objects.filter(campaign=pooled, pooled=True).order_by("id"))
    assert progress.campaign_done(campaign=pooled) == 0
    judgment_record(pair=pairs[0], annotator=annotator, grade=2)
    clock[0] += progress.DONE_TTL - 1
    assert progress.campaign_done(campaign=pooled) == 0  # kept
    clock[0] += 2
    assert progress.campaign_done(campaign=pooled) == 1  # read again once its time is up


def test_the_panel_after_record_and_next_shows_the_campaign_complete(pooled, annotator, make_user):
    """The progress figures record + next hands the panel: the query's (exact) and the campaign's."""
    other = make_user("other")
    membership_add(campaign=pooled, user=other, role="annotator")
    client = Client()
    client.force_login(annotator)
    page = client.get(reverse("judging:judge", args=[pooled.slug]))
    first = int(PAIR_ID.search(page.content.decode()).group(1))
    judgment_record(
        pair=Pair.objects.exclude(public_id=first).filter(campaign=pooled).first(), annotator=other, grade=1
    )
    url = reverse("judging:judge_record", args=[pooled.slug, first])
    html = client.post(url, {"grade": 2, "seconds": "3", "version": ""}, **HTMX).content.decode()
    assert "40% complete" in html  # two of the five pooled pairs have their one judgment


def test_a_large_pools_list_asks_whether_the_labels_moved_at_most_every_few_seconds(pooled, annotator, monkeypatch):
    """On a pool above INLINE_POOL the mtc list's stamp (a sum over every query of the campaign) is read at most
    every STAMP_EVERY seconds per process: a judgment in between serves the kept list without reading it, and the
    first request after that time reads it and has the list computed again (in a thread, stubbed here)."""
    from judging.scoring import selection

    monkeypatch.setattr(selection, "INLINE_POOL", 0)
    # the interval is STAMP_EVERY, or longer for a list that took long to compute (LIST_CPU_SHARE of a core): on a
    # loaded machine (CI, two test processes) the first list took over 75 ms and the stamp was not read yet
    monkeypatch.setattr(selection, "LIST_CPU_SHARE", float("inf"))
    clock = [1000.0]
    monkeypatch.setattr(selection.time, "monotonic", lambda: clock[0])
    refreshed = []
    monkeypatch.setattr(selection, "_refresh_later", lambda campaign, mode, order: refreshed.append(mode))
    selection._KEPT.clear()
    first = selection.mtc_pairs(pooled)  # no list yet: computed in the request
    judgment_record(pair=Pair.objects.get(id=int(first[0])), annotator=annotator, grade=2)

    def stamp_reads() -> int:
        with CaptureQueriesContext(connection) as captured:
            kept = selection.mtc_pairs(pooled)
        assert list(kept) == list(first)  # the kept list, until the thread has computed the new one
        return sum("judging_labelscounter" in q["sql"] for q in captured.captured_queries)

    clock[0] += selection.STAMP_EVERY / 2
    assert stamp_reads() == 0 and refreshed == []
    clock[0] += selection.STAMP_EVERY
    assert stamp_reads() == 1 and refreshed == ["mtc"]
    clock[0] += selection.STAMP_EVERY / 2
    assert stamp_reads() == 0 and refreshed == ["mtc"]


def _list_with_a_judged_head(campaign: Campaign, judge) -> np.ndarray:
    """A priority list of the campaign's pooled pairs whose first 1,000 (20 queries of 50) ``judge`` has judged."""
    qrels = "".join(f"q{q} 0 d{q}-{i} 1\n" for q in range(20) for i in range(50))
    qrels_import(campaign=campaign, data=qrels.encode(), filename="head.qrels", annotator=judge)
    ids = np.array(
        Pair.objects.filter(campaign=campaign, pooled=True)
        .order_by("query__qid", "document__docid", "id")
        .values_list("id", flat=True)
    )
    return ids[np.argsort([Pair.objects.get(id=i).judgment_count == 0 for i in ids], kind="stable")]


def test_a_priority_lists_complete_head_is_passed_over_and_read_once(db, make_user, monkeypatch):
    """Every annotator is served from the head of a priority queue mode's list, which trails the judgments: its
    pairs judged since stay at its head. The queue still serves the first pair of the list open to each
    annotator; the complete ones at the head are read once per list in the process, not by every request (on
    PostgreSQL: a few pair rows per request instead of the head's 1,000), and they come back as soon as a lead
    asks for more judgments per pair."""
    from judging.selectors import priority, queue

    people = [make_user(f"a{i}") for i in range(3)]
    campaign = _campaign("head", queries=40, depth=50, annotators=people)
    other = make_user("other")
    membership_add(campaign=campaign, user=other, role="annotator")
    ids = _list_with_a_judged_head(campaign, other)
    monkeypatch.setattr(queue, "priority_for", lambda mode: lambda campaign, annotator_id: ids)
    priority._PREFIXES.clear()
    first_open = int(ids[1000])

    def served(person, campaign) -> tuple[int, dict[str, int]]:
        before = _rows_read() if connection.vendor == "postgresql" else {}
        found = selectors.pair_next(campaign=campaign, annotator=person).pair
        after = _rows_read() if connection.vendor == "postgresql" else {}
        return found.id, {t: after.get(t, 0) - before.get(t, 0) for t in after}

    pair, _reads = served(people[0], campaign)
    assert pair == first_open
    for person in people[1:]:
        pair, reads = served(person, campaign)
        assert pair == first_open
        if connection.vendor == "postgresql":
            assert reads.get("judging_pair", 0) < 20, reads
    # More judgments per pair: the head is open again, at once.
    campaign.redundancy = 2
    campaign.save(update_fields=["redundancy"])
    campaign = Campaign.objects.get(pk=campaign.pk)
    assert served(people[1], campaign)[0] == int(ids[0])
    # A new list (the mode computed it again) is read afresh.
    campaign.redundancy = 1
    campaign.save(update_fields=["redundancy"])
    campaign = Campaign.objects.get(pk=campaign.pk)
    ids = ids[::-1].copy()
    assert served(people[2], campaign)[0] == int(ids[0])


def test_the_pairs_an_annotator_judged_at_a_lists_head_are_passed_over_and_read_once(db, make_user, monkeypatch):
    """With two judgments per pair, the head of a priority list keeps the pairs an annotator has judged until
    someone else judges them too: the queue still serves that annotator the first pair of the list open to them,
    and another annotator the head, but the annotator's own judged pairs are read once per list in the process,
    not at each of their requests (on PostgreSQL: a few rows per request instead of the head's 1,000 pairs and
    judgments)."""
    from judging.selectors import priority, queue

    people = [make_user(f"a{i}") for i in range(2)]
    campaign = _campaign("own", queries=40, depth=50, annotators=people, redundancy=2)
    ids = _list_with_a_judged_head(campaign, people[0])
    monkeypatch.setattr(queue, "priority_for", lambda mode: lambda campaign, annotator_id: ids)
    priority._PREFIXES.clear()
    priority._OWN_PREFIXES.clear()

    def served(person) -> tuple[int, int]:
        before = _rows_read() if connection.vendor == "postgresql" else {}
        found = selectors.pair_next(campaign=campaign, annotator=person).pair
        after = _rows_read() if connection.vendor == "postgresql" else {}
        keyed = sum(after.get(t, 0) - before.get(t, 0) for t in ("judging_pair", "judging_judgment"))
        return found.id, keyed

    assert served(people[0])[0] == int(ids[1000])  # the first pair a0 has not judged
    assert served(people[1])[0] == int(ids[0])  # open to a1: one judgment of two
    pair, keyed = served(people[0])
    assert pair == int(ids[1000])
    if connection.vendor == "postgresql":
        assert keyed < 40, keyed
    # a0 judges the pair served: the next request goes on past it
    judgment_record(pair=Pair.objects.get(id=pair), annotator=people[0], grade=1)
    assert served(people[0])[0] == int(ids[1001])
    # A new list (the mode computed it again) is read afresh.
    ids = np.concatenate([ids[1001:], ids[:1001]])
    assert served(people[0])[0] == int(ids[0])
    ids = ids[::-1].copy()  # its head now a pair a0 judged
    assert served(people[0])[0] == int(ids[1001])


def test_at_one_judgment_a_pair_the_own_prefix_is_the_complete_one(db, make_user, monkeypatch):
    """With one judgment a pair, the pairs an annotator judged are complete: the queue serves the first pair of the
    list nobody judged (past those the annotator judged at its head and a pair someone else judged) without the
    statement that reads how far the list is closed to the annotator alone."""
    from django.test.utils import CaptureQueriesContext

    from judging.selectors import priority, queue

    people = [make_user(f"a{i}") for i in range(2)]
    campaign = _campaign("one", queries=4, depth=10, annotators=people)
    ids = np.array(Pair.objects.filter(campaign=campaign, pooled=True).order_by("id").values_list("id", flat=True))
    monkeypatch.setattr(queue, "priority_for", lambda mode: lambda campaign, annotator_id: ids)
    priority._PREFIXES.clear()
    priority._OWN_PREFIXES.clear()
    for at, person in ((0, people[0]), (1, people[1]), (2, people[0])):
        judgment_record(pair=Pair.objects.get(id=int(ids[at])), annotator=person, grade=1)
    with CaptureQueriesContext(connection) as ctx:
        found = selectors.pair_next(campaign=campaign, annotator=people[0]).pair
    assert found is not None and found.id == int(ids[3])
    own = [q["sql"] for q in ctx.captured_queries if "ORDINALITY" in q["sql"].upper() or "c.key" in q["sql"]]
    assert len(own) == 1 and "annotator_id" not in own[0], own  # the complete prefix's statement alone
    assert not priority._OWN_PREFIXES


def _scans(table: str) -> int:
    """Scans of ``table`` in this transaction so far, by index or whole (probes that found nothing count too)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(SUM(idx_scan), 0) + COALESCE(SUM(seq_scan), 0) FROM pg_stat_xact_user_tables"
            " WHERE relname = %s",
            [table],
        )
        return int(cursor.fetchone()[0])


def test_the_pairs_others_hold_or_judged_at_a_lists_head_cost_no_probe_of_judgments(postgres, make_user, monkeypatch):
    """In a busy campaign the head of a priority list is the pairs the other annotators hold (50 annotators: 50
    pairs) and those judged complete since the list was computed: the next annotator is served the first pair past
    them, and PostgreSQL tells those by the pair's own row, without probing the annotator's judgment of each (the
    old check probed every one: 60 probes here)."""
    from datetime import timedelta

    from django.utils import timezone

    from judging.models import Assignment
    from judging.selectors import priority, queue

    holders = [make_user(f"h{i}") for i in range(40)]
    person = make_user("next")
    campaign = _campaign("busy", queries=20, depth=50, annotators=[*holders, person])
    ids = np.array(Pair.objects.filter(campaign=campaign, pooled=True).order_by("id").values_list("id", flat=True))
    later = timezone.now() + timedelta(minutes=5)
    # the list's head: a pair someone judged, then 40 held pairs among 20 more judged ones
    head = ids[1:61]
    held, judged = head[::3].tolist() + head[1::3].tolist()[:20], head[2::3].tolist()
    Assignment.objects.bulk_create(
        Assignment(campaign=campaign, annotator=h, pair_id=int(i), expires_at=later)
        for h, i in zip(holders, held, strict=True)
    )
    for i in [ids[0], *judged]:
        judgment_record(pair=Pair.objects.get(id=int(i)), annotator=holders[0], grade=1)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE judging_pair, judging_assignment, judging_judgment")
    monkeypatch.setattr(queue, "priority_for", lambda mode: lambda campaign, annotator_id: ids)
    priority._PREFIXES.clear()
    priority._OWN_PREFIXES.clear()
    selectors.pair_next(campaign=campaign, annotator=person)  # the list's complete head read once
    before = _scans("judging_judgment")
    found = selectors.pair_next(campaign=campaign, annotator=person).pair
    probes = _scans("judging_judgment") - before
    assert found is not None and found.id == int(ids[61])
    assert probes < 10, probes


def test_pair_lock_needs_a_transaction_and_an_existing_pair(transactional_db, pooled):
    from django.db import transaction

    from judging.services.judgments import pair_lock

    pair = Pair.objects.filter(campaign=pooled).first()
    with pytest.raises(transaction.TransactionManagementError):
        pair_lock(pair_id=pair.id)
    with transaction.atomic():
        pair_lock(pair_id=pair.id)
        with pytest.raises(Pair.DoesNotExist):
            pair_lock(pair_id=pair.id + 10_000)
