"""The one writer of labels: a pair's stored label recomputed from its judgments (``labels_refresh``) and the
versions the leaderboard and the queue modes read bumped (``labels_bump``). Below the services and the imports,
which both call it inside the transaction that changed the judgments."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import F, QuerySet

from judging.aggregation import aggregate_grades
from judging.compiled import Slots, compiled_sql, compiled_update, int_slot
from judging.models import (
    LABELS_LOG_KEEP,
    LABELS_LOG_PRUNE,
    LABELS_SHARDS,
    Adjudication,
    AnnotatorProfile,
    Campaign,
    Judgment,
    LabelsChange,
    LabelsCounter,
    Pair,
    Query,
)

# Above this many pairs labels_refresh reads the whole campaign's judgments in one pass instead of
# chunks of ids (an import of a million labels): one streamed query beats hundreds of IN lists.
_REFRESH_WHOLE_CAMPAIGN = 20_000
_IDS_PER_STATEMENT = 10_000  # well under SQLite's limit of bound parameters


def labels_refresh(*, campaign: Campaign, pair_ids: Sequence[int]) -> int:
    """Recompute the stored label and (human) judgment count of these pairs and bump the labels version of their
    queries. Callers pass only pairs whose judgments changed: any change can move a label under some
    aggregation policy, so the leaderboard rescores those queries. Returns how many stored labels changed.
    Call inside the transaction that changed the judgments.

    Plain rows and numpy throughout: a million pairs (a qrels import) take seconds, not minutes.

    One function: the reads and the two writes of one refresh, in the order the callers' locks ask for.
    """
    ids = np.unique(np.asarray(pair_ids, dtype=np.int64))
    if not ids.size:
        return 0
    # Read the policy now, under the callers' pair locks, not from a campaign object loaded earlier:
    # a lead may just have switched it (campaign_policy_set).
    policy = Campaign.objects.filter(pk=campaign.pk).values_list("aggregation", flat=True).get()
    # Model judges' judgments never count toward the human label nor the judgment count (which the queue
    # reads to decide who still needs to see a pair): the leaderboard asks for model labels explicitly.
    models_ = AnnotatorProfile.model_user_ids()
    if ids.size > _REFRESH_WHOLE_CAMPAIGN:
        scopes = [{"pair__campaign_id": campaign.id}]
        pair_scopes = [{"campaign_id": campaign.id}]
    else:
        chunks = [ids[i : i + _IDS_PER_STATEMENT].tolist() for i in range(0, ids.size, _IDS_PER_STATEMENT)]
        scopes = [{"pair_id__in": c} for c in chunks]
        pair_scopes = [{"id__in": c} for c in chunks]

    def rows(qs: QuerySet[Any, Any], *fields: str) -> np.ndarray:
        out = [r for scope in scopes for r in qs.filter(**scope).order_by().values_list(*fields).iterator(20000)]
        return np.array(out, dtype=np.int64).reshape(-1, len(fields))

    humans = Judgment.objects.exclude(annotator_id__in=models_) if models_ else Judgment.objects.all()
    judged = rows(humans, "pair_id")
    confident = rows(humans.filter(unsure=False), "pair_id", "grade__value")
    adjudicated = rows(Adjudication.objects.all(), "pair_id", "grade__value")
    stored = np.array(
        [
            r
            for scope in pair_scopes
            for r in Pair.objects.filter(**scope)
            .order_by()
            .values_list("id", "query_id", "label", "judgment_count", "adjudicated")
            .iterator(20000)
        ],
        dtype=object,
    ).reshape(-1, 5)
    stored = stored[np.isin(stored[:, 0].astype(np.int64), ids)]
    pid = stored[:, 0].astype(np.int64)
    order = np.argsort(pid)
    stored, pid = stored[order], pid[order]

    def at(keys: np.ndarray) -> np.ndarray:
        """Positions of ``keys`` in pid, -1 where absent."""
        if not pid.size:
            return np.full(keys.size, -1)
        pos = np.searchsorted(pid, keys).clip(0, pid.size - 1)
        return np.where(pid[pos] == keys, pos, -1)

    count = np.zeros(pid.size, dtype=np.int64)
    if judged.size:
        where = at(judged[:, 0])
        np.add.at(count, where[where >= 0], 1)
    label = np.full(pid.size, -1, dtype=np.int64)  # -1: no label
    if confident.size:
        keys, values = aggregate_grades(confident[:, 0], confident[:, 1], policy=policy)
        where = at(keys)
        label[where[where >= 0]] = values[where >= 0]
    is_adjudicated = np.zeros(pid.size, dtype=bool)
    if adjudicated.size:
        where = at(adjudicated[:, 0])
        label[where[where >= 0]] = adjudicated[:, 1][where >= 0]
        is_adjudicated[where[where >= 0]] = True
    old_label = np.array([-1 if v is None else v for v in stored[:, 2]], dtype=np.int64)
    old_count = stored[:, 3].astype(np.int64)
    old_adjudicated = stored[:, 4].astype(bool)
    dirty = (old_label != label) | (old_count != count) | (old_adjudicated != is_adjudicated)
    changed = int((old_label != label).sum())
    # Few distinct (label, count, adjudicated) values: one UPDATE per value (and per batch of ids) beats
    # bulk_update's per-row CASE expressions.
    if dirty.any():
        values = np.stack([label[dirty], count[dirty], is_adjudicated[dirty].astype(np.int64)], axis=1)
        groups, inverse = np.unique(values, axis=0, return_inverse=True)
        dirty_ids = pid[dirty]
        for g, (lab, cnt, adj) in enumerate(groups.tolist()):
            members = dirty_ids[inverse.reshape(-1) == g].tolist()
            for i in range(0, len(members), _IDS_PER_STATEMENT):
                Pair.objects.filter(id__in=members[i : i + _IDS_PER_STATEMENT]).update(
                    label=None if lab < 0 else lab, judgment_count=cnt, adjudicated=bool(adj)
                )
    labels_bump(campaign_id=campaign.id, query_ids=np.unique(stored[:, 1].astype(np.int64)).tolist())
    return changed


def labels_bump(*, campaign_id: int, query_ids: Sequence[int]) -> None:
    """Say that labels of these queries of the campaign may have moved: their labels_version (the leaderboard
    rescores the queries whose version moved), the campaign's labels counter of each one's shard
    (LabelsCounter: the queue modes' one-row question "did any label move?") and a line per query in the labels
    log (LabelsChange: which queries moved since a counter value). The one place all three are written: call it
    inside the transaction that changed the labels, after its pairs and queries, before its holds (the order
    every writer locks them in)."""
    if len(query_ids) == 1:
        # A judgment's: statements compiled once per process (judging.compiled), as every judgment runs them
        query_id = int(query_ids[0])
        shard = query_id % LABELS_SHARDS
        values = {"campaign_id": campaign_id, "shard0": shard, "query_id": query_id}
        if connection.vendor == "postgresql":
            # the query's version, the counter and the log's line in one statement (a round trip less for every
            # judgment; PostgreSQL's CPU is what the two statements cost, bench/load_bench.py --statements)
            bumped = compiled_sql(("labels_bump_query_counter_line",), _query_counter_bump_line_sql).first(values)
        else:  # no data-modifying WITH: three
            compiled_update(("labels_bump_query",), labels_bump_query_of).run({"query_id": query_id})
            bumped = compiled_sql(("labels_bump_counter",), lambda: _counter_bump_sql(1)).first(values)
            assert bumped is not None
            compiled_sql(("labels_log_line",), _log_line_sql).run({**values, "version": bumped[1]})
        assert bumped is not None
        version = int(bumped[1])
        _log_prune(campaign_id, {shard: version})
        return
    for i in range(0, len(query_ids), _IDS_PER_STATEMENT):
        chunk = query_ids[i : i + _IDS_PER_STATEMENT]
        Query.objects.filter(id__in=chunk).update(labels_version=F("labels_version") + 1)
    shards = sorted({int(q) % LABELS_SHARDS for q in query_ids})
    if not shards:
        return
    sql, _params = _counter_bump_sql(len(shards))
    with connection.cursor() as cursor:
        cursor.execute(sql, [v for shard in shards for v in (campaign_id, shard)])
        versions = {int(shard): int(version) for shard, version in cursor.fetchall()}
    LabelsChange.objects.bulk_create(
        [
            LabelsChange(
                campaign_id=campaign_id, shard=q % LABELS_SHARDS, version=versions[q % LABELS_SHARDS], query_id=q
            )
            for q in map(int, query_ids)
        ],
        batch_size=_IDS_PER_STATEMENT,
    )
    _log_prune(campaign_id, versions)


def _log_prune(campaign_id: int, versions: dict[int, int]) -> None:
    """Drop a shard's labels log lines older than LABELS_LOG_KEEP of its bumps, when its counter (the value just
    given) reaches a multiple of LABELS_LOG_PRUNE."""
    for shard, version in versions.items():
        if version % LABELS_LOG_PRUNE == 0 and version > LABELS_LOG_KEEP:
            LabelsChange.objects.filter(
                campaign_id=campaign_id, shard=shard, version__lte=version - LABELS_LOG_KEEP
            ).delete()


def labels_bump_query_of() -> tuple[QuerySet[Query, Query], dict[str, Any]]:
    return Query.objects.filter(id=Slots()["query_id"]), {"labels_version": F("labels_version") + 1}


def _counter_bump_sql(shards: int) -> tuple[str, tuple[Any, ...]]:
    """An upsert that adds one to each of ``shards`` counters of a campaign (Django's bulk_create can only
    overwrite a conflicting row) and returns each one's (shard, version); its parameters (campaign_id, shard)
    per row, named campaign_id and shard0... The callers give the shards in order, so that two writers of
    several shards take their rows in the same order."""
    table = LabelsCounter._meta.db_table
    rows = ", ".join(["(%s, %s, 1)"] * shards)
    sql = (
        f"INSERT INTO {table} (campaign_id, shard, version) VALUES {rows} "
        f"ON CONFLICT (campaign_id, shard) DO UPDATE SET version = {table}.version + 1 RETURNING shard, version"
    )
    return sql, tuple(p for i in range(shards) for p in (int_slot("campaign_id"), int_slot(f"shard{i}")))


def _log_line_sql() -> tuple[str, tuple[Any, ...]]:
    """One line of the labels log (what bulk_create writes for one LabelsChange)."""
    table = LabelsChange._meta.db_table
    sql = f"INSERT INTO {table} (campaign_id, shard, version, query_id) VALUES (%s, %s, %s, %s)"
    return sql, tuple(int_slot(name) for name in ("campaign_id", "shard0", "version", "query_id"))


def _query_counter_bump_line_sql() -> tuple[str, tuple[Any, ...]]:
    """PostgreSQL: in one statement, labels_bump_query_of's update of the query (``query_id``), _counter_bump_sql(1)
    and the log's line of the query, returning (shard, version) as _counter_bump_sql does. The counter's row is
    inserted from the query's updated row, so the query's row is locked first and the counter's after it (the order
    every writer of labels takes them in); a statement of WITH parts that do not read each other runs them in no
    set order."""
    queries, counters, log = Query._meta.db_table, LabelsCounter._meta.db_table, LabelsChange._meta.db_table
    sql = (
        f'WITH touched AS (UPDATE "{queries}" SET "labels_version" = "labels_version" + 1 WHERE "id" = %s '
        "RETURNING 1), "
        f"bumped AS (INSERT INTO {counters} (campaign_id, shard, version) SELECT %s, %s, 1 FROM touched "
        f"ON CONFLICT (campaign_id, shard) DO UPDATE SET version = {counters}.version + 1 RETURNING shard, version) "
        f"INSERT INTO {log} (campaign_id, shard, version, query_id) "
        f"SELECT %s, shard, version, %s FROM bumped RETURNING shard, version"
    )
    names = ("query_id", "campaign_id", "shard0", "campaign_id", "query_id")
    return sql, tuple(int_slot(name) for name in names)
