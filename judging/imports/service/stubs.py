"""The ids of a streamed file's qids and docids, a block at a time: looked up, or made as stubs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import repeat

import numpy as np
from django.db import connection

from judging.imports import write_postgres
from judging.imports.write import fetch, insert_columns, reserve_ids
from judging.models import Campaign, Document, Query

# Ids kept between blocks. A file's docids repeat from block to block (the same documents retrieved for many
# queries), so they are looked up once; past this many the cache starts again, and memory stays bounded
# whatever the number of documents.
CACHE_MAX = 500_000
LOOKUP_BATCH = 50_000  # values per look-up statement


class StubIds:
    """Query and document ids for a campaign's qids and docids, stubs created for the ones it lacks.

    The campaign's documents are read once when they are at most CACHE_MAX (then a docid not among them is new);
    past that, each block's unknown docids are looked up by the (campaign, docid) index."""

    def __init__(self, campaign: Campaign) -> None:
        self.campaign = campaign
        self.new_documents = 0
        self.new_queries = 0
        self._queries: dict[str, int] = dict(
            fetch(Query.objects.filter(campaign=campaign).order_by().values_list("qid", "id"))
        )
        self._documents: dict[bytes, int] = {}
        self._complete = Document.objects.filter(campaign=campaign).count() <= CACHE_MAX
        if self._complete:
            rows = fetch(Document.objects.filter(campaign=campaign).order_by().values_list("docid", "id"))
            self._documents = {docid.encode(): pk for docid, pk in rows}

    def documents(self, docids: Sequence[bytes]) -> np.ndarray:
        """The document id of each docid (UTF-8), in order."""
        codes = np.fromiter(map(self._documents.get, docids, repeat(-1)), dtype=np.int64, count=len(docids))
        missing = np.flatnonzero(codes < 0)
        if not len(missing):
            return codes
        unknown = sorted(set(map(docids.__getitem__, missing.tolist())))
        if len(self._documents) + len(unknown) > CACHE_MAX:
            self._documents.clear()
            if self._complete and connection.vendor == "postgresql":
                # From now on docids are looked up: the planner must know how many this import has made, or it
                # takes the campaign for a handful of rows and scans them for every docid.
                write_postgres.analyze([Document._meta.db_table])
            self._complete = False
        texts = [u.decode() for u in unknown]
        found = {} if self._complete else self._existing(Document, "docid", texts)
        if found:
            self._documents.update((u, found[t]) for u, t in zip(unknown, texts, strict=True) if t in found)
            kept = [(u, t) for u, t in zip(unknown, texts, strict=True) if t not in found]
            unknown, texts = [u for u, _ in kept], [t for _, t in kept]
        if unknown:
            # In docid order: the unique (campaign, docid) index then grows at its end.
            ids = reserve_ids(Document, len(unknown))
            insert_columns(
                Document,
                ["id", "campaign", "docid", "title", "text", "url", "is_stub", "attributes"],
                [ids, repeat(self.campaign.pk), texts, repeat(""), repeat(""), repeat(""), repeat(True), repeat("{}")],
            )
            self._documents.update(zip(unknown, ids, strict=True))
            self.new_documents += len(unknown)
        codes[missing] = np.fromiter(
            map(self._documents.__getitem__, map(docids.__getitem__, missing.tolist())),
            dtype=np.int64,
            count=len(missing),
        )
        return codes

    def queries(self, qids: Sequence[str]) -> np.ndarray:
        """The query id of each qid, in order (a campaign's queries are few: all of them are kept)."""
        new = sorted(set(qids) - self._queries.keys())
        if new:
            ids = reserve_ids(Query, len(new))
            insert_columns(
                Query,
                ["id", "campaign", "qid", "text", "description", "is_stub", "labels_version"],
                [ids, repeat(self.campaign.pk), new, new, repeat(""), repeat(True), repeat(0)],
            )
            self._queries.update(zip(new, ids, strict=True))
            self.new_queries += len(new)
        return np.fromiter(map(self._queries.__getitem__, qids), dtype=np.int64, count=len(qids))

    def _existing(self, model: type[Document], key: str, values: list[str]) -> dict[str, int]:
        """Ids of the values the campaign has, by one parameter per look-up (an array, or JSON on SQLite): a
        statement with a placeholder per value costs more to build than to run."""
        table = connection.ops.quote_name(model._meta.db_table)
        column = connection.ops.quote_name(key)
        if connection.vendor == "postgresql":
            among = f"{column} = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)))"
        else:
            among = f"{column} IN (SELECT value FROM json_each(%s))"
        found: dict[str, int] = {}
        with connection.cursor() as cursor:
            for start in range(0, len(values), LOOKUP_BATCH):
                batch = values[start : start + LOOKUP_BATCH]
                cursor.execute(
                    f"SELECT {column}, id FROM {table} WHERE campaign_id = %s AND {among}",
                    [self.campaign.pk, json.dumps(batch)],
                )
                found.update(cursor.fetchall())
        return found
