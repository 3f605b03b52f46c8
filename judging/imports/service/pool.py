"""The rows runs and qrels share: stub queries and documents, and the pool's pairs with their public ids."""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import Any

import numpy as np
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from judging.imports.write import Stage, fetch, insert_columns, reserve_ids
from judging.models import PUBLIC_ID_MAX, PUBLIC_ID_MIN, Campaign, Document, Pair, PoolCount, Query, Ranking
from judging.reads import pool_size_forget


def existing_ids(model: type[Query] | type[Document], campaign: Campaign, key: str) -> dict[str, int]:
    return dict(fetch(model.objects.filter(campaign=campaign).order_by().values_list(key, "id")))


def stubs_create(
    *, campaign: Campaign, qids: Iterable[str] = (), docids: Iterable[str] = ()
) -> tuple[dict[str, int], dict[str, int], list[int], list[int]]:
    """Make sure every qid and docid exists (as a stub if new); return the id maps and the ids of the queries
    and documents made now."""
    qmap = existing_ids(Query, campaign, "qid")
    new_q = sorted(set(qids) - qmap.keys())
    new_q_ids: list[int] = []
    new_d_ids: list[int] = []
    if new_q:
        ids = new_q_ids = reserve_ids(Query, len(new_q))
        insert_columns(
            Query,
            ["id", "campaign", "qid", "text", "description", "is_stub", "labels_version"],
            [ids, repeat(campaign.pk), new_q, new_q, repeat(""), repeat(True), repeat(0)],
        )
        qmap.update(zip(new_q, ids, strict=True))
    dmap = existing_ids(Document, campaign, "docid")
    new_d = sorted(set(docids) - dmap.keys())
    if new_d:
        # In docid order: the unique (campaign, docid) index then grows at its end.
        ids = new_d_ids = reserve_ids(Document, len(new_d))
        insert_columns(
            Document,
            ["id", "campaign", "docid", "title", "text", "url", "is_stub", "attributes"],
            [ids, repeat(campaign.pk), new_d, repeat(""), repeat(""), repeat(""), repeat(True), repeat("{}")],
        )
        dmap.update(zip(new_d, ids, strict=True))
    return qmap, dmap, new_q_ids, new_d_ids


def pool_count_add(*, campaign: Campaign, pairs: int) -> None:
    """Add ``pairs`` pairs that joined the pool to the campaign's PoolCount, in the pool's writer's transaction
    (pool_merge: the one place pairs join the pool, and they never leave it). An upsert that adds (Django's
    bulk_create can only overwrite a conflicting row)."""
    table = PoolCount._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (campaign_id, pairs) VALUES (%s, %s) "
            f"ON CONFLICT (campaign_id) DO UPDATE SET pairs = {table}.pairs + EXCLUDED.pairs",
            [campaign.pk, pairs],
        )


PAIR_BATCH = 100_000  # new pool pairs inserted at a time


def pool_merge(*, campaign: Campaign, stage: Stage, where: str = "", params: Sequence[Any] = ()) -> int:
    """Add the (query_id, document_id) pairs staged in ``stage`` (the rows matching ``where``, SQL on the stage's
    columns, its alias ``s``) to the pool; returns how many pairs entered it. Pairs the campaign lacks are read
    back to be inserted with their public ids (pairs_insert); pairs only a qrels import had made, unpooled, are
    pooled by an UPDATE (on PostgreSQL of the ids the same look-up read: each staged pair is looked up once);
    pairs in the pool stay as they are, their judgments untouched. The database merges:
    neither the stage nor the campaign's pairs come into memory."""
    if not stage.rows:
        return 0
    condition = f"AND ({where})" if where else ""
    stage.prepare("query_id", "document_id")
    # On PostgreSQL each staged pair looks its pair up by the (query, document) index (LATERAL ... LIMIT 1): the
    # planner's statistics of judging_pair predate this transaction, which may have added millions of pairs, and
    # it hashed the whole table or scanned the campaign's pairs for every merge (a run merges in steps).
    pg = connection.vendor == "postgresql"
    pair = (
        "LEFT JOIN LATERAL (SELECT p.id, p.pooled FROM judging_pair p WHERE p.query_id = s.query_id "
        "AND p.document_id = s.document_id LIMIT 1) p ON true"
    )
    with connection.cursor() as cursor:
        if pg:
            # Nor is a merge's plan compiled (JIT): its cost, an index probe per staged row, passes the threshold
            # and compiling took about 0.3 s of the server's CPU per statement.
            cursor.execute("SELECT current_setting('jit'), set_config('jit', 'off', true)")
            jit = cursor.fetchone()[0]
            # One pass: the staged pairs the campaign lacks (id 0) and the unpooled ones it has (their id).
            cursor.execute(
                f"SELECT DISTINCT s.query_id, s.document_id, COALESCE(p.id, 0) FROM {stage.name} s {pair} "
                f"WHERE (p.id IS NULL OR NOT p.pooled) {condition} ORDER BY 1, 2",
                list(params),
            )
        else:
            cursor.execute(
                f"SELECT DISTINCT s.query_id, s.document_id, 0 FROM {stage.name} s WHERE NOT EXISTS "
                "(SELECT 1 FROM judging_pair p WHERE p.query_id = s.query_id AND p.document_id = s.document_id) "
                f"{condition} ORDER BY 1, 2",
                list(params),
            )
        blocks = []
        while rows := cursor.fetchmany(100_000):
            blocks.append(np.array(rows, dtype=np.int64).reshape(-1, 3))
        found = np.concatenate(blocks) if blocks else np.empty((0, 3), dtype=np.int64)
        del blocks
        fresh = found[found[:, 2] == 0, :2]
        if pg:
            unpooled = np.unique(found[found[:, 2] != 0, 2])
            promoted = 0
            for start in range(0, len(unpooled), PAIR_BATCH):  # the ids as one array literal per statement
                ids = ",".join(map(str, unpooled[start : start + PAIR_BATCH].tolist()))
                cursor.execute(
                    "UPDATE judging_pair SET pooled = %s WHERE id = ANY(%s::bigint[]) AND NOT pooled",
                    [True, "{" + ids + "}"],
                )
                promoted += int(cursor.rowcount)
            cursor.execute("SELECT set_config('jit', %s, true)", [jit])
        else:
            cursor.execute(
                "UPDATE judging_pair SET pooled = %s WHERE campaign_id = %s AND NOT pooled AND EXISTS "
                f"(SELECT 1 FROM {stage.name} s WHERE s.query_id = judging_pair.query_id "
                f"AND s.document_id = judging_pair.document_id {condition})",
                [True, campaign.pk, *params],
            )
            promoted = int(cursor.rowcount)
        del found
    if len(fresh) or promoted:
        pool_count_add(campaign=campaign, pairs=len(fresh) + promoted)
        transaction.on_commit(lambda: pool_size_forget(campaign=campaign))
    # A batch of whole queries at a time (pairs_insert shuffles within a query): memory stays bounded however
    # many pairs the run brings.
    boundaries = np.flatnonzero(np.diff(fresh[:, 0])) + 1
    at = np.searchsorted(boundaries, np.arange(PAIR_BATCH, len(fresh), PAIR_BATCH))
    cuts = np.unique(boundaries[at[at < len(boundaries)]])
    for start, stop in zip([0, *cuts.tolist()], [*cuts.tolist(), len(fresh)], strict=True):
        pairs_insert(campaign=campaign, query_ids=fresh[start:stop, 0], document_ids=fresh[start:stop, 1], pooled=True)
    return len(fresh) + promoted


def _public_ids(count: int, *, rng: np.random.Generator) -> np.ndarray:
    """``count`` distinct random public ids (see models.pair_public_id)."""
    out = rng.integers(PUBLIC_ID_MIN, PUBLIC_ID_MAX, size=count, dtype=np.int64)
    ordered = np.sort(out)
    while (ordered[1:] == ordered[:-1]).any():  # a repeat among a million draws: odds about 1 in 10**9
        out = rng.permutation(np.unique(out))
        out = np.concatenate([out, rng.integers(PUBLIC_ID_MIN, PUBLIC_ID_MAX, size=count - len(out), dtype=np.int64)])
        ordered = np.sort(out)
    return out


def pairs_insert(
    *,
    campaign: Campaign,
    query_ids: np.ndarray,
    document_ids: np.ndarray,
    pooled: bool,
    labels: np.ndarray | None = None,
) -> np.ndarray:
    """Insert new pairs (``query_ids[i]``, ``document_ids[i]``), each with a random public id; return their
    row ids in the order given.

    The pairs a run adds that no earlier run had are the ones only that system found: inserted in key order,
    one run after another, their row ids and creation order would single them out. Public ids hide the
    row ids from annotators, and within each query the rows are inserted in a random order, so that not even
    the row order follows the systems. Queries come one after another (in id order): that says nothing about
    systems, and keeps the inserts near the end of the (query, document) index instead of all over it.
    A public id already taken by another pair (odds about n / 10**15 per pair, with n pairs stored) fails the
    insert: it is retried with fresh ids. ``labels``: each new pair's label from its one judgment, written
    now with a judgment count of 1 (a qrels import's new pairs), instead of by a labels_refresh afterwards.
    """
    count = len(query_ids)
    if not count:
        return np.empty(0, dtype=np.int64)
    rng = np.random.default_rng(secrets.randbits(128))
    shuffled = rng.permutation(count)
    order = shuffled[np.argsort(query_ids[shuffled], kind="stable")]
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    ids = reserve_ids(Pair, count)
    # Arrays, not lists: PostgreSQL's COPY encodes them whole (a batch of 100,000 pairs as lists of Python ints
    # took about 10 MB more of the import's peak memory); SQLite's insert makes them lists.
    queries, documents = query_ids[order], document_ids[order]
    pair_labels = repeat(None) if labels is None else labels[order].tolist()
    for attempt in range(3):
        public_ids = _public_ids(count, rng=rng)
        try:
            with transaction.atomic():  # a savepoint: a clash undoes only this insert
                insert_columns(
                    Pair,
                    [
                        "id",
                        "campaign",
                        "query",
                        "document",
                        "pooled",
                        "adjudicated",
                        "judgment_count",
                        "public_id",
                        "created_at",
                        "label",
                    ],
                    [
                        ids,
                        repeat(campaign.pk),
                        queries,
                        documents,
                        repeat(pooled),
                        repeat(False),
                        repeat(0 if labels is None else 1),
                        public_ids,
                        repeat(now),
                        pair_labels,
                    ],
                )
            break
        except IntegrityError:
            if attempt == 2:
                raise
    out = np.empty(count, dtype=np.int64)
    out[order] = ids
    return out


@transaction.atomic
def pool_build(*, campaign: Campaign) -> int:
    """Re-pool every run at the campaign's current depth (after the depth grew); returns pairs added. The top
    documents are staged a batch of rankings at a time and merged by the database (see pool_merge)."""
    depth = campaign.pool_depth
    rankings = Ranking.objects.filter(system__campaign=campaign).values_list("query_id", "doc_ids")
    with Stage("reljudge_pool_build", [("query_id", "bigint"), ("document_id", "bigint")]) as stage:
        queries: list[np.ndarray] = []
        documents: list[np.ndarray] = []
        for query_id, raw in rankings.iterator(chunk_size=5000):
            top = np.frombuffer(bytes(raw), dtype=np.int64)[:depth]
            queries.append(np.full(len(top), query_id, dtype=np.int64))
            documents.append(top)
            if len(queries) >= 5000:
                stage.add([np.concatenate(queries), np.concatenate(documents)], sum(map(len, queries)))
                queries, documents = [], []
        if queries:
            stage.add([np.concatenate(queries), np.concatenate(documents)], sum(map(len, queries)))
        return pool_merge(campaign=campaign, stage=stage)


def pair_ids(campaign: Campaign) -> dict[tuple[int, int], int]:
    rows = fetch(Pair.objects.filter(campaign=campaign).order_by().values_list("query_id", "document_id", "id"))
    return {(q, d): pid for q, d, pid in rows}
