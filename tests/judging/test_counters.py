"""The campaign's counters that spare the queue a read of every query or pair: the labels counter (LabelsCounter,
bumped by services.labels_bump) and the pool count (PoolCount, kept by the pool's writer)."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from judging import reads
from judging.models import Campaign, LabelsCounter, Pair, PoolCount, Query
from judging.scoring import selection
from judging.selectors import pool_size
from judging.services import (
    adjudication_remove,
    adjudication_set,
    campaign_settings_update,
    documents_import,
    judgment_record,
    membership_add,
    qrels_import,
    queries_import,
    run_import,
)

HTMX = {"HTTP_HX_REQUEST": "true"}


def _counter(campaign: Campaign) -> int:
    return sum(LabelsCounter.objects.filter(campaign=campaign).values_list("version", flat=True))


def _versions(campaign: Campaign) -> dict[str, int]:
    return dict(Query.objects.filter(campaign=campaign).values_list("qid", "labels_version"))


def _moves(campaign: Campaign, write) -> tuple[int, set[str]]:
    """How much ``write()`` moved the campaign's labels counter, and which queries' labels_version it moved."""
    counter, versions = _counter(campaign), _versions(campaign)
    write()
    after = _versions(campaign)
    return _counter(campaign) - counter, {q for q, v in after.items() if v != versions.get(q)}


def test_every_writer_of_a_label_moves_the_labels_counter(pooled, annotator, lead, make_user):
    """A judgment, its change, the browser's record + next, the API, an adjudication and its removal, a qrels
    import and a new aggregation policy each move the campaign's labels counter with the labels_version of the
    queries they touched; recording the same grade again moves nothing (nothing changed)."""
    pair = Pair.objects.get(campaign=pooled, query__qid="q1", document__docid="d1")
    assert _moves(pooled, lambda: judgment_record(pair=pair, annotator=annotator, grade=2)) == (1, {"q1"})
    assert _moves(pooled, lambda: judgment_record(pair=pair, annotator=annotator, grade=2)) == (0, set())
    assert _moves(pooled, lambda: judgment_record(pair=pair, annotator=annotator, grade=1)) == (1, {"q1"})  # an edit
    assert _moves(pooled, lambda: adjudication_set(pair=pair, lead=lead, grade=0)) == (1, {"q1"})
    assert _moves(pooled, lambda: adjudication_remove(pair=pair, lead=lead)) == (1, {"q1"})  # a delete

    # the judging page's record + next
    client = Client()
    client.force_login(annotator)
    page = client.get(reverse("judging:judge", args=[pooled.slug])).content.decode()
    shown = int(re.search(r'data-pair-id="(\d+)"', page).group(1))
    qid = Pair.objects.get(public_id=shown).query.qid
    url = reverse("judging:judge_record", args=[pooled.slug, shown])
    posted = lambda: client.post(url, {"grade": 2, "seconds": "3", "version": ""}, **HTMX)  # noqa: E731
    assert _moves(pooled, posted) == (1, {qid})

    # the API
    api = Client()
    api.force_login(lead)
    other = Pair.objects.get(campaign=pooled, query__qid="q2", document__docid="d4")
    body = {"pair": other.public_id, "grade": 1}
    sent = lambda: api.post("/api/judgments/", body, content_type="application/json")  # noqa: E731
    assert _moves(pooled, sent) == (1, {"q2"})

    # a bulk import of labels touching both queries: one statement bumps both shards' counters
    moved, queries = _moves(
        pooled,
        lambda: qrels_import(campaign=pooled, data=b"q1 0 d3 2\nq2 0 d2 1\n", filename="q.qrels", annotator="trec"),
    )
    assert moved >= 1 and queries == {"q1", "q2"}
    assert moved == len({q.id % 16 for q in Query.objects.filter(campaign=pooled)})

    # a new policy recomputes every label
    moved, queries = _moves(pooled, lambda: campaign_settings_update(campaign=pooled, aggregation="max"))
    assert moved >= 1 and queries == {"q1", "q2"}


def test_the_queue_sees_a_judgment_through_the_counter(pooled, annotator):
    """The mtc list is kept until the labels counter moves: after a judgment the next request computes it again
    and no longer offers the judged pair (were the counter not bumped, the kept list would still start with it)."""
    selection._KEPT.clear()
    first = selection.mtc_pairs(pooled)
    assert selection.mtc_pairs(pooled) is first  # nothing moved: the kept list
    judged = Pair.objects.get(id=int(first[0]))
    judgment_record(pair=judged, annotator=annotator, grade=2)
    after = selection.mtc_pairs(pooled)
    assert after is not first and judged.id not in after.tolist()


@pytest.fixture
def fresh_pool_size():
    reads._pool_sizes.clear()
    yield lambda campaign: (reads._pool_sizes.clear(), pool_size(campaign=campaign))[1]
    reads._pool_sizes.clear()


def test_pool_count_follows_every_pool_change(campaign, annotator, fresh_pool_size):
    """Runs, a deeper pool and a run that pools pairs a qrels import made unpooled all keep the PoolCount row
    equal to the pooled pairs; a qrels import's pairs outside the pool do not count."""

    def pooled_pairs() -> int:
        return Pair.objects.filter(campaign=campaign, pooled=True).count()

    assert fresh_pool_size(campaign) == 0  # no row yet
    run_import(campaign=campaign, data=b"q1 Q0 d1 1 3 a\nq1 Q0 d2 2 2 a\nq1 Q0 d3 3 1 a\n", filename="a.run")
    assert fresh_pool_size(campaign) == pooled_pairs() == 2  # pool depth 2
    qrels_import(campaign=campaign, data=b"q1 0 d9 2\nq2 0 d8 1\n", filename="q.qrels", annotator=annotator)
    assert fresh_pool_size(campaign) == pooled_pairs() == 2  # labelled outside the pool
    run_import(campaign=campaign, data=b"q1 Q0 d9 1 3 b\nq2 Q0 d7 1 3 b\n", filename="b.run")  # d9 joins the pool
    assert fresh_pool_size(campaign) == pooled_pairs() == 4
    campaign_settings_update(campaign=campaign, pool_depth=5)  # run a's d3 joins
    assert fresh_pool_size(campaign) == pooled_pairs() == 5
    assert PoolCount.objects.get(campaign=campaign).pairs == 5


def test_a_new_campaign_has_an_empty_pool(db, lead):
    from judging.services import campaign_create

    campaign = campaign_create(slug="empty", name="empty")
    membership_add(campaign=campaign, user=lead, role="lead")
    reads._pool_sizes.clear()
    assert pool_size(campaign=campaign) == 0
    assert selection._labels_stamp(campaign) == (0, 0)


def test_a_second_process_reads_the_pool_map_from_the_shared_cache(pooled, annotator, fresh_pool_size):
    """The mtc list maps its (query, document) pairs to pair ids through a map of the pool: the first process
    reads the pool and shares the map; another process (here: this one with its own copies forgotten) reads
    the shared entry instead of the pool and serves the same list; a pool that grew is read afresh."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def pool_reads() -> tuple[list[int], int]:
        selection._KEPT.clear()
        selection._POOLS.clear()
        with CaptureQueriesContext(connection) as captured:
            ids = selection.mtc_pairs(pooled).tolist()
        reads = [q["sql"] for q in captured.captured_queries if 'FROM "judging_pair"' in q["sql"]]
        return ids, sum('"judging_pair"."pooled"' in sql and "document_id" in sql for sql in reads)

    first, reads = pool_reads()
    assert reads == 1 and len(first) == 5
    again, reads = pool_reads()
    assert (again, reads) == (first, 0)  # from the shared cache
    run_import(campaign=pooled, data=b"q2 Q0 d1 1 3 third\n", filename="third.run")
    fresh_pool_size(pooled)
    grown, reads = pool_reads()
    assert reads == 1 and len(grown) == 6


def test_the_leaderboard_reads_every_querys_version_only_when_the_counter_moved(world):
    """A leaderboard request whose labels counter has not moved since the last one (a lead polling, the
    queue's list) reads the counter, not every query's labels_version; after a judgment it reads them again,
    and scores the new label."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from judging.scoring import leaderboard_data
    from judging.scoring.cache import scores_clear

    campaign = world.campaign
    scores_clear()

    def board():
        with CaptureQueriesContext(connection) as queries:
            data = leaderboard_data(campaign=campaign, k=2, bounds=False)
        sql = [q["sql"] for q in queries.captured_queries]
        every = [q for q in sql if '"labels_version"' in q and "SELECT" in q]  # every query's version
        log = [q for q in sql if "judging_labelschange" in q]  # the counters, and the log's lines since
        return data, every, log

    first, every, log = board()
    assert len(every) == 1 and len(log) == 1  # the first request reads them, after the counters
    again, every, log = board()
    assert every == [] and len(log) == 1 and again == first  # nothing moved: the counters' statement alone
    pair = Pair.objects.get(campaign=campaign, query__qid="q2", document__docid="d4")
    judgment_record(pair=pair, annotator=world.annotator, grade=0)  # q2's d4: 2 and 1 -> 2, 0, 1
    judgment_record(pair=pair, annotator=world.annotator2, grade=0)
    after, every, log = board()
    # the labels log's lines since the kept counters (with their queries' versions), not every query's version
    assert every == [] and len(log) == 1 and after != first
    scores_clear()
    assert board()[0] == after  # what a fresh process computes


def _many_queries(campaign: Campaign, n: int = 40) -> None:
    """``n`` queries (more than LABELS_SHARDS, so that several share a shard), 6 documents, one run at depth 4."""
    topics = "".join(f"t{q}\ttopic {q}\n" for q in range(n))
    docs = "".join(f'{{"docid": "x{d}", "title": "doc {d}", "text": "text {d}"}}\n' for d in range(6))
    run = "".join(f"t{q} Q0 x{(q + r) % 6} {r + 1} {9 - r} sys\n" for q in range(n) for r in range(4))
    queries_import(campaign=campaign, data=topics.encode(), filename="t.tsv")
    documents_import(campaign=campaign, data=docs.encode(), filename="d.jsonl")
    run_import(campaign=campaign, data=run.encode(), filename="sys.run")


def _every_version(campaign: Campaign) -> list[int]:
    return list(Query.objects.filter(campaign=campaign).order_by("id").values_list("labels_version", flat=True))


def _versions_read(campaign: Campaign) -> tuple[list[int], list[str]]:
    """labels_versions as this process keeps them, and the statements it ran that read labels versions."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from judging.scoring.cache import labels_versions
    from judging.scoring.cube import run_cube

    cube = run_cube(campaign)
    with CaptureQueriesContext(connection) as queries:
        versions = labels_versions(campaign, cube).tolist()
    # the statements that read every query's version (the counters' and the log's is the other one)
    return versions, [q["sql"] for q in queries.captured_queries if '"labels_version"' in q["sql"]]


def test_kept_versions_follow_every_writer_through_the_labels_log(campaign, annotator, lead, make_user):
    """Random judgments, changes, adjudications, qrels imports and a policy change over 40 queries, a process
    asking for the versions now and then: what it keeps always equals every query's labels_version in the
    database, and it reads them all only the first time (after that, the labels log's lines since)."""
    import numpy as np

    from judging import runtime

    _VERSIONS = runtime.kept("scoring.labels_versions").store
    _many_queries(campaign)
    other = make_user("other")
    membership_add(campaign=campaign, user=other, role="annotator")
    pairs = list(Pair.objects.filter(campaign=campaign, pooled=True).select_related("query", "document"))
    rng = np.random.default_rng(7)
    _VERSIONS.clear()
    full_reads = 0
    for step in range(60):
        for _ in range(int(rng.integers(0, 4))):  # 0-3 writes between two reads
            pair = pairs[int(rng.integers(len(pairs)))]
            kind = int(rng.integers(10))
            if kind < 6:
                who = annotator if rng.random() < 0.5 else other
                judgment_record(pair=pair, annotator=who, grade=int(rng.integers(3)))
            elif kind < 8:
                adjudication_set(pair=pair, lead=lead, grade=int(rng.integers(3)))
            elif kind == 8:
                picked = [pairs[int(i)] for i in rng.choice(len(pairs), size=5, replace=False)]
                qrels = "".join(f"{p.query.qid} 0 {p.document.docid} {int(rng.integers(3))}\n" for p in picked)
                qrels_import(campaign=campaign, data=qrels.encode(), filename="q.qrels", annotator="trec")
            else:
                adjudication_remove(pair=pair, lead=lead)
        if step == 30:
            campaign_settings_update(campaign=campaign, aggregation="max")
        versions, read = _versions_read(campaign)
        assert versions == _every_version(campaign), f"step {step}"
        full_reads += len(read)
    assert full_reads == 1  # the first request only: the policy change's 40 lines are within the log's reach


def test_a_process_the_log_cannot_bring_up_to_date_reads_every_version(campaign, annotator, monkeypatch):
    """More bumps since the kept counters than the log is read for, or log lines pruned past them: every
    query's version is read again, and is right. The log keeps a shard's lines for LABELS_LOG_KEEP bumps."""
    from judging import labels, runtime
    from judging.models import LabelsChange
    from judging.scoring import cache

    _many_queries(campaign)
    pairs = list(Pair.objects.filter(campaign=campaign, pooled=True).order_by("id"))
    runtime.kept("scoring.labels_versions").store.clear()
    assert _versions_read(campaign)[0] == _every_version(campaign)

    monkeypatch.setattr(cache, "LOG_READ_MAX", 2)
    for grade, pair in enumerate(pairs[:3]):
        judgment_record(pair=pair, annotator=annotator, grade=grade % 3)
    versions, read = _versions_read(campaign)
    assert versions == _every_version(campaign)
    assert len(read) == 1  # 3 lines behind: every version read

    monkeypatch.undo()
    monkeypatch.setattr(labels, "LABELS_LOG_KEEP", 4)
    monkeypatch.setattr(labels, "LABELS_LOG_PRUNE", 2)
    same_shard = [p for p in pairs if p.query_id % 16 == pairs[0].query_id % 16]
    shard = same_shard[0].query_id % 16
    for i in range(12):  # 12 bumps of one shard: its lines older than the last 4 bumps go
        judgment_record(pair=same_shard[i % len(same_shard)], annotator=annotator, grade=(i + 1) % 3)
    kept = LabelsChange.objects.filter(campaign=campaign, shard=shard).values_list("version", flat=True)
    counter = LabelsCounter.objects.get(campaign=campaign, shard=shard).version
    assert counter - 6 < min(kept) and max(kept) == counter  # at most KEEP + PRUNE bumps' lines
    versions, read = _versions_read(campaign)
    assert versions == _every_version(campaign)
    # its lines since are gone: the log's lines number fewer bumps than the counter moved by; every version is read
    assert len(read) == 1
