"""The rows runs and qrels share: stub queries and documents, and the pool's pairs with their public ids."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from itertools import repeat

import numpy as np
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from judging.imports.service.summary import BATCH
from judging.imports.write import fetch, insert_columns, reserve_ids
from judging.models import PUBLIC_ID_MAX, PUBLIC_ID_MIN, Campaign, Document, Pair, Query, Ranking
from judging.selectors.campaigns import pool_size_forget


def existing_ids(model, campaign: Campaign, key: str) -> dict[str, int]:
    return dict(fetch(model.objects.filter(campaign=campaign).order_by().values_list(key, "id")))


def stubs_create(
    *, campaign: Campaign, qids: Iterable[str] = (), docids: Iterable[str] = ()
) -> tuple[dict, dict, list[int], list[int]]:
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


def pool_add(*, campaign: Campaign, pairs: Iterable[tuple[int, int]]) -> int:
    """Add (query id, document id) pairs to the pool; existing pairs are left alone (judgments untouched)."""
    wanted = set(pairs)
    if not wanted:
        return 0
    # This process's cached pool size is stale once the import commits (other processes' expire in a minute).
    transaction.on_commit(lambda: pool_size_forget(campaign=campaign))
    existing = {
        (q, d): (pid, pooled)
        for q, d, pid, pooled in fetch(
            Pair.objects.filter(campaign=campaign).order_by().values_list("query_id", "document_id", "id", "pooled")
        )
    }
    fresh = np.array(sorted(wanted - existing.keys()), dtype=np.int64).reshape(-1, 2)
    pairs_insert(campaign=campaign, query_ids=fresh[:, 0], document_ids=fresh[:, 1], pooled=True)
    # Pairs that only imported qrels had created now enter the pool too.
    promote = [existing[k][0] for k in wanted if k in existing and not existing[k][1]]
    for start in range(0, len(promote), BATCH):
        Pair.objects.filter(id__in=promote[start : start + BATCH]).update(pooled=True)
    return len(fresh) + len(promote)


def _public_ids(count: int, *, rng: np.random.Generator) -> list[int]:
    """``count`` distinct random public ids (see models.pair_public_id)."""
    out = rng.integers(PUBLIC_ID_MIN, PUBLIC_ID_MAX, size=count, dtype=np.int64)
    ordered = np.sort(out)
    while (ordered[1:] == ordered[:-1]).any():  # a repeat among a million draws: odds about 1 in 10**9
        out = rng.permutation(np.unique(out))
        out = np.concatenate([out, rng.integers(PUBLIC_ID_MIN, PUBLIC_ID_MAX, size=count - len(out), dtype=np.int64)])
        ordered = np.sort(out)
    return out.tolist()


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
    queries, documents = query_ids[order].tolist(), document_ids[order].tolist()
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
    """Re-pool every run at the campaign's current depth (after the depth grew); returns pairs added."""
    depth = campaign.pool_depth
    pairs = []
    for query_id, raw in (
        Ranking.objects.filter(system__campaign=campaign).values_list("query_id", "doc_ids").iterator(chunk_size=5000)
    ):
        pairs.extend((query_id, int(d)) for d in np.frombuffer(bytes(raw), dtype=np.int64)[:depth])
    return pool_add(campaign=campaign, pairs=pairs)


def pair_ids(campaign: Campaign) -> dict[tuple[int, int], int]:
    rows = fetch(Pair.objects.filter(campaign=campaign).order_by().values_list("query_id", "document_id", "id"))
    return {(q, d): pid for q, d, pid in rows}
