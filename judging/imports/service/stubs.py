"""The ids of a streamed file's qids and docids, a block at a time: looked up, or made as stubs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import Future
from itertools import repeat

import numpy as np
from django.db import connection

from judging.imports import write_postgres
from judging.imports.behind import WriteBehind
from judging.imports.parse.stream import WIDE_DOCID
from judging.imports.write import columns_encode, encoded_insert, fetch, reserve_ids
from judging.models import Campaign, Document, Query

# Ids kept between blocks, in at most this many bytes. A campaign's documents that fit are read in whole before
# the first block (a docid not among them is then new, nothing is looked up); past that, a file's docids are
# looked up once (the same documents retrieved for many queries) and the cache starts again when full: memory
# stays bounded whatever the number of documents. 1M docids of 8 bytes take 24 MB.
CACHE_BYTES = 32 * 2**20
ENTRY_BYTES = 16  # an array entry's bytes beside its docid's: the hash and the id
DICT_ENTRY_BYTES = 120  # a dict entry's (wide docids): the key's bytes object, the id's int, its slot
READ_CHUNK = 50_000  # the campaign's documents read at a time (a server-side cursor on PostgreSQL)
LOOKUP_BATCH = 50_000  # values per look-up statement

_MIX = np.uint64(0xFF51AFD7ED558CCD)
RESERVE_STEP = 4096  # stub ids drawn ahead (PostgreSQL; an import leaves up to twice this many unused)


class _Reserve:
    """Row ids for a model's stubs, drawn from its sequence through the import's writer (see reserve_ids):
    RESERVE_STEP at a time, the next draw queued when half are used, so that the import's thread does not wait
    for the writer's queue (a pool merge may be in it) to reach a draw. SQLite draws past the highest id in the
    table, so there ids are drawn only as they are inserted (no step ahead)."""

    def __init__(self, model: type[Query] | type[Document], writer: WriteBehind) -> None:
        self._model, self._writer = model, writer
        self._step = RESERVE_STEP if connection.vendor == "postgresql" else 0
        self._ids = np.empty(0, dtype=np.int64)
        self._next: Future[list[int]] | None = None

    def take(self, count: int) -> list[int]:
        if not count:
            return []
        while len(self._ids) < count:
            if self._next is None:
                wanted = count - len(self._ids)
                self._next = self._writer.later(reserve_ids, self._model, max(wanted, self._step))
            drawn = self._writer.result(self._next)
            self._next = None
            self._ids = np.concatenate([self._ids, np.asarray(drawn, dtype=np.int64)])
        out, self._ids = self._ids[:count], self._ids[count:]
        if self._step and self._next is None and len(self._ids) < self._step // 2:
            self._next = self._writer.later(reserve_ids, self._model, self._step)
        return out.tolist()


def docid_hashes(docids: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each docid of a fixed-width byte-string array (S dtype), the same whatever the array's
    width: its 8-byte words are mixed one after another, the zero words of the padding skipped (a docid holds
    no NUL). numpy's binary search of byte strings compares them one byte at a time through a generic function;
    of whole numbers, in a few machine instructions (a 10M-line run's look-ups 18 s -> under 2)."""
    count, width = len(docids), docids.dtype.itemsize
    matrix = np.zeros((count, -(-width // 8) * 8), dtype=np.uint8)
    matrix[:, :width] = np.ascontiguousarray(docids).view(np.uint8).reshape(count, width)
    hashes = np.full(count, 0x9E3779B97F4A7C15, dtype=np.uint64)
    for word in matrix.view("<u8").T:
        mixed = (hashes ^ word) * _MIX
        mixed ^= mixed >> np.uint64(33)
        hashes = np.where(word != 0, mixed, hashes)
    return hashes


def _joined(chunks: list[np.ndarray]) -> np.ndarray:
    """The chunks as one array, the list emptied (its arrays' memory goes back as soon as they are joined)."""
    joined = np.concatenate(chunks)
    chunks.clear()
    return joined


def _footprint(count: int, width: int, *, as_dict: bool = False) -> int:
    """The bytes of an id cache of ``count`` docids of at most ``width`` bytes: the arrays', or a dict's (docids
    wider than WIDE_DOCID go to one)."""
    return count * (width + (DICT_ENTRY_BYTES if as_dict or width > WIDE_DOCID else ENTRY_BYTES))


class StubIds:
    """Query and document ids for a campaign's qids and docids, stubs created for the ones it lacks.

    The campaign's documents are read once, a chunk at a time, when they fit CACHE_BYTES (then a docid not among
    them is new); past that, each block's unknown docids are looked up by the (campaign, docid) index.

    Known docids are kept as an array of fixed-width byte strings beside their ids, both sorted by the docids'
    hashes (docid_hashes), so that a block's docids (an array from the parser) are found by one ``searchsorted``
    of whole numbers and one comparison of the byte strings, with no Python work per line. A block whose docids
    come as a list (one wider than the parser's arrays), or two known docids of one hash, turn the cache into a
    dict for the rest of the import.

    Its database work goes through ``writer`` (see behind.WriteBehind): stubs are inserted later, by the writer's
    thread, and their ids drawn ahead (_Reserve); only a docid look-up past the cache waits for the writer."""

    def __init__(self, campaign: Campaign, writer: WriteBehind | None = None) -> None:
        self.campaign = campaign
        self.writer = writer or WriteBehind(inline=True)
        self._document_ids = _Reserve(Document, self.writer)
        self._query_ids = _Reserve(Query, self.writer)
        self.new_documents = 0
        self.new_queries = 0
        self._queries: dict[str, int] = dict(
            fetch(Query.objects.filter(campaign=campaign).order_by().values_list("qid", "id"))
        )
        self._keys = np.empty(0, dtype="S1")  # docids (UTF-8), in the order of their hashes
        self._hashes = np.empty(0, dtype=np.uint64)  # sorted
        self._ids = np.empty(0, dtype=np.int64)
        self._dict: dict[bytes, int] | None = None  # instead of the arrays, once a block came as a list
        self._width = 0  # the widest docid in the dict (the arrays' is their itemsize)
        self._complete = self._load()

    def _load(self) -> bool:
        """Read the campaign's documents into the cache if they fit CACHE_BYTES: whether they did. A chunk at a
        time, so that the rows read never take more memory than the cache they fill; given up as soon as the
        docids read so far show that the whole would not fit."""
        documents = Document.objects.filter(campaign=self.campaign).order_by()
        count = documents.count()
        if not count:
            return True
        if _footprint(count, 1) > CACHE_BYTES:  # too many even if every docid were one byte
            return False
        keys: list[np.ndarray] = []
        hashes: list[np.ndarray] = []
        ids: list[np.ndarray] = []
        width = read = 0
        sql, params = documents.values_list("docid", "id").query.sql_with_params()
        with connection.chunked_cursor() as cursor:
            cursor.execute(sql, params)
            while rows := cursor.fetchmany(READ_CHUNK):
                chunk = np.array([docid.encode() for docid, _ in rows], dtype=bytes)
                width, read = max(width, chunk.dtype.itemsize), read + len(rows)
                if _footprint(max(count, read), width) > CACHE_BYTES:
                    return False
                keys.append(chunk)
                ids.append(np.fromiter((pk for _, pk in rows), dtype=np.int64, count=len(rows)))
                if width <= WIDE_DOCID:
                    hashes.append(docid_hashes(chunk))
        if width > WIDE_DOCID:
            self._dict = {}
            for chunk, pks in zip(keys, ids, strict=True):
                self._dict.update(zip(chunk.tolist(), pks.tolist(), strict=True))
            self._width = width
            return True
        # Joined and sorted one array at a time, each list of chunks let go as soon as it is joined: the read's
        # peak stays within about twice the cache's own size (a million docids: 24 MB, 48 MB at the peak).
        joined = _joined(hashes)
        order = np.argsort(joined, kind="stable")
        self._hashes = joined[order]
        del joined
        self._keys = _joined(keys)[order]
        self._ids = _joined(ids)[order]
        if (self._hashes[1:] == self._hashes[:-1]).any():
            self._to_dict()
        return True

    def _known(self) -> int:
        return len(self._dict) if self._dict is not None else len(self._keys)

    def _size(self, more: int, width: int) -> int:
        """The cache's bytes with ``more`` docids of at most ``width`` bytes added."""
        if self._dict is not None:
            return _footprint(self._known() + more, max(width, self._width), as_dict=True)
        return _footprint(self._known() + more, max(width, self._keys.dtype.itemsize))

    def _forget(self) -> None:
        self._keys, self._ids = np.empty(0, dtype="S1"), np.empty(0, dtype=np.int64)
        self._hashes = np.empty(0, dtype=np.uint64)
        if self._dict is not None:
            self._dict = {}

    def _to_dict(self) -> None:
        known = dict(zip(self._keys.tolist(), self._ids.tolist(), strict=True))
        width = self._keys.dtype.itemsize
        self._forget()
        self._dict, self._width = known, width

    def _remember(self, keys: list[bytes], ids: Sequence[int]) -> None:
        if self._dict is not None:
            self._dict.update(zip(keys, ids, strict=True))
            self._width = max(self._width, max(map(len, keys), default=0))
            return
        # into the arrays, in the order of their hashes
        array, id_array = np.array(keys, dtype=bytes), np.asarray(ids, dtype=np.int64)
        hashes = docid_hashes(array)
        by_hash = np.argsort(hashes, kind="stable")
        width = max(array.dtype.itemsize, self._keys.dtype.itemsize)
        at = np.searchsorted(self._hashes, hashes[by_hash])
        # copy=False: the keys are copied once (by the insert), not twice; a million docids take 8 MB each
        added = array[by_hash].astype(f"S{width}", copy=False)
        self._keys = np.insert(self._keys.astype(f"S{width}", copy=False), at, added)
        self._hashes = np.insert(self._hashes, at, hashes[by_hash])
        self._ids = np.insert(self._ids, at, id_array[by_hash])
        if (self._hashes[1:] == self._hashes[:-1]).any():  # two docids of one hash: about 3 in 10**8 at a million
            self._to_dict()

    def _lookup(self, docids: np.ndarray | list[bytes]) -> tuple[np.ndarray, np.ndarray | list[bytes]]:
        """The cached id of each docid (-1 if not cached), and the distinct docids not cached."""
        if self._dict is None and isinstance(docids, list):
            self._to_dict()
        if self._dict is not None:
            listed = docids if isinstance(docids, list) else docids.tolist()
            codes = np.fromiter(map(self._dict.get, listed, repeat(-1)), dtype=np.int64, count=len(listed))
            return codes, sorted(set(map(listed.__getitem__, np.flatnonzero(codes < 0).tolist())))
        assert isinstance(docids, np.ndarray)
        width = max(docids.dtype.itemsize, self._keys.dtype.itemsize)
        if self._keys.dtype.itemsize < width:
            self._keys = self._keys.astype(f"S{width}")
        wanted = docids.astype(f"S{width}", copy=False)
        if not len(self._keys):
            return np.full(len(docids), -1, dtype=np.int64), np.unique(wanted)
        hashes = docid_hashes(wanted)
        by_hash = np.argsort(hashes)  # the binary searches in order walk the cache's memory once: twice as fast
        at = np.empty(len(hashes), dtype=np.intp)
        at[by_hash] = np.minimum(np.searchsorted(self._hashes, hashes[by_hash]), len(self._keys) - 1)
        found = self._keys[at] == wanted
        return np.where(found, self._ids[at], -1), np.unique(wanted[~found])

    def documents(self, docids: np.ndarray | list[bytes]) -> np.ndarray:
        """The document id of each docid (UTF-8), in order: a fixed-width byte-string array (S dtype) or a list."""
        codes, unknown_docids = self._lookup(docids)
        if not len(unknown_docids):
            return codes
        unknown: list[bytes] = (
            unknown_docids.tolist() if isinstance(unknown_docids, np.ndarray) else list(unknown_docids)
        )
        width = unknown_docids.dtype.itemsize if isinstance(unknown_docids, np.ndarray) else max(map(len, unknown))
        if self._size(len(unknown), width) > CACHE_BYTES:
            self._forget()
            if self._complete and connection.vendor == "postgresql":
                # From now on docids are looked up: the planner must know how many this import has made, or it
                # takes the campaign for a handful of rows and scans them for every docid.
                self.writer.later(write_postgres.analyze, [Document._meta.db_table])
            self._complete = False
        texts = [u.decode() for u in unknown]
        found = {} if self._complete else self.writer.now(self._existing, Document, "docid", texts)
        new = [(u, t) for u, t in zip(unknown, texts, strict=True) if t not in found]
        ids_new = self._document_ids.take(len(new))
        if new:
            # In docid order: the unique (campaign, docid) index then grows at its end.
            rows = columns_encode(
                Document,
                ["id", "campaign", "docid", "title", "text", "url", "is_stub", "attributes"],
                [
                    ids_new,
                    repeat(self.campaign.pk),
                    [t for _, t in new],
                    repeat(""),
                    repeat(""),
                    repeat(""),
                    repeat(True),
                    repeat("{}"),
                ],
            )
            self.writer.later(encoded_insert, rows, size=rows.size)
            self.new_documents += len(new)
        made = dict(zip((u for u, _ in new), ids_new, strict=True))
        unknown_ids = [found[t] if t in found else made[u] for u, t in zip(unknown, texts, strict=True)]
        self._remember(unknown, unknown_ids)
        missing = np.flatnonzero(codes < 0)
        if isinstance(docids, list) or self._dict is not None:
            listed = docids if isinstance(docids, list) else docids.tolist()
            by_docid = dict(zip(unknown, unknown_ids, strict=True))
            codes[missing] = np.fromiter(
                map(by_docid.__getitem__, map(listed.__getitem__, missing.tolist())), dtype=np.int64, count=len(missing)
            )
        else:
            keys = np.asarray(unknown_docids)  # sorted, as np.unique gave them
            codes[missing] = np.asarray(unknown_ids, dtype=np.int64)[np.searchsorted(keys, docids[missing])]
        return codes

    def queries(self, qids: Sequence[str]) -> np.ndarray:
        """The query id of each qid, in order (a campaign's queries are few: all of them are kept)."""
        new = sorted(set(qids) - self._queries.keys())
        if new:
            ids = self._query_ids.take(len(new))
            rows = columns_encode(
                Query,
                ["id", "campaign", "qid", "text", "description", "is_stub", "labels_version"],
                [ids, repeat(self.campaign.pk), new, new, repeat(""), repeat(True), repeat(0)],
            )
            self.writer.later(encoded_insert, rows, size=rows.size)
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
