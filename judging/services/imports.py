"""Imports of topics, documents, runs and qrels: one transaction each, file/line/field errors, pooling."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from judging import formats
from judging.access import lead_required, membership_role
from judging.formats import ImportRefused  # noqa: F401  (re-exported: the base every interface catches)
from judging.models import (
    PUBLIC_ID_MAX,
    PUBLIC_ID_MIN,
    AnnotatorProfile,
    Campaign,
    Document,
    Grade,
    Judgment,
    JudgmentRevision,
    LabelSource,
    Pair,
    Query,
    QueryTag,
    Ranking,
    System,
    User,
)
from judging.selectors.campaigns import pool_size_forget
from judging.services.judgments import labels_refresh

BATCH = 2000
_IMPORT_CACHE_KIB = 1024 * 1024  # SQLite page cache while an import runs (see _roomy_cache)
logger = logging.getLogger(__name__)


Progress = Callable[[int], None] | None


class ImportConflict(formats.ImportRefused):
    """The file is well formed but clashes with what the campaign holds (a different run under an existing
    system name without ``replace``). Nothing was written."""

    status = 409


# What the summary calls each kind of row (``kind`` itself stays English: the API and the logs name it).
_KIND_NAMES = {
    "queries": gettext_lazy("queries"),
    "query tags": gettext_lazy("query tags"),
    "documents": gettext_lazy("documents"),
    "rankings": gettext_lazy("rankings"),
    "judgments": gettext_lazy("judgments"),
    "online figures": gettext_lazy("online figures"),
}


@dataclass
class ImportSummary:
    """What one import did, for the command's output, the upload page and the API."""

    kind: str
    filename: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    stub_queries: int = 0
    stub_documents: int = 0
    pairs_added: int = 0
    systems: list[str] = field(default_factory=list)
    # Qrels only: whose judgments the labels became, and how many labels were not applied because that
    # person had judged the pair in the app (imports never rewrite a person's own judgment).
    source: str = ""
    source_created: bool = False
    kept: int = 0

    def lines(self) -> list[str]:
        counts = {
            "file": self.filename,
            "kind": _KIND_NAMES.get(self.kind, self.kind),
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "source": self.source,
            "kept": self.kept,
        }
        out = [_("%(file)s: %(added)s %(kind)s added, %(updated)s updated, %(unchanged)s unchanged") % counts]
        if self.source_created:
            out.append(
                _("created the source account %(source)s for these labels (nobody can log in with it)")
                % {"source": repr(self.source)}
            )
        if self.kept:
            out.append(
                _(
                    "%(kept)s labels left alone: %(source)s had already judged those pairs in the app, "
                    "and imports never overwrite a person's own judgment"
                )
                % counts
            )
        if self.systems:
            out.append(_("systems: %(names)s") % {"names": ", ".join(self.systems)})
        if self.stub_queries or self.stub_documents:
            out.append(
                _(
                    "stubs created: %(queries)s queries, %(documents)s documents "
                    "(import their topics/documents to fill them in)"
                )
                % {"queries": self.stub_queries, "documents": self.stub_documents}
            )
        out.append(_("pairs added to the pool: %(n)s") % {"n": self.pairs_added})
        return out

    @classmethod
    def from_dict(cls, data: dict) -> ImportSummary:
        """The summary as_dict() stored (a job's result); keys a field added since does not know take its default."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "filename": self.filename,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "stub_queries": self.stub_queries,
            "stub_documents": self.stub_documents,
            "pairs_added": self.pairs_added,
            "systems": self.systems,
            "source": self.source,
            "source_created": self.source_created,
            "kept": self.kept,
        }


def _logged(importer):
    """Log each import with its row counts and duration (outside its transaction: the commit counts too)."""

    @functools.wraps(importer)
    def logged(*, campaign: Campaign, filename: str, **kwargs) -> ImportSummary:
        started = time.monotonic()
        try:
            summary = importer(campaign=campaign, filename=filename, **kwargs)
        except formats.ImportRefused as exc:
            logger.info(
                "%s %s -> %s refused after %.2f s: %s",
                importer.__name__,
                filename,
                campaign.slug,
                time.monotonic() - started,
                exc,
            )
            raise
        logger.info(
            "%s %s -> %s: %d bytes, %d %s added, %d updated, %d unchanged, %d stubs, %d pairs added in %.2f s",
            importer.__name__,
            filename,
            campaign.slug,
            len(kwargs.get("data", b"")),
            summary.added,
            summary.kind,
            summary.updated,
            summary.unchanged,
            summary.stub_queries + summary.stub_documents,
            summary.pairs_added,
            time.monotonic() - started,
        )
        return summary

    return logged


def _insert_rows(model, fields: Sequence[str], rows: Iterable[Sequence], progress: Progress = None) -> int:
    """Insert plain rows with one prepared statement, in batches.

    Imports create hundreds of thousands of stub documents, pairs and rankings: building a model
    instance per row made the ORM's bulk_create the slowest step of a 1M-line run import (about 60%
    of the time), while executemany hands the driver the values directly. Constraints still hold:
    the database checks them on every row.
    """
    meta = model._meta
    columns = ", ".join(connection.ops.quote_name(meta.get_field(f).column) for f in fields)
    marks = ", ".join(["%s"] * len(fields))
    total = 0
    batch: list[Sequence] = []
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # COPY streams rows without a round trip per row: several times faster than executemany.
            table = connection.ops.quote_name(meta.db_table)
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
                    total += 1
                    if progress and total % 10_000 == 0:
                        progress(10_000)
            return total
        # SQLite: the rows go to a table of their own first, with no index, then into the real table in one
        # statement. Each executemany step of an INSERT opens the table and every index of it again; one
        # INSERT ... SELECT opens them once (a million pairs: 8 s -> 3 s of CPU).
        staging = connection.ops.quote_name("reljudge_import_rows")
        cursor.execute(f"DROP TABLE IF EXISTS temp.{staging}")
        cursor.execute(f"CREATE TEMP TABLE {staging} ({columns})")
        try:
            staged = f"INSERT INTO temp.{staging} ({columns}) VALUES ({marks})"
            for row in rows:
                batch.append(row)
                if len(batch) >= 10_000:
                    cursor.executemany(staged, batch)
                    total += len(batch)
                    if progress:
                        progress(len(batch))
                    batch = []
            if batch:
                cursor.executemany(staged, batch)
                total += len(batch)
                if progress:
                    progress(len(batch))
            cursor.execute(
                f"INSERT INTO {connection.ops.quote_name(meta.db_table)} ({columns}) "
                f"SELECT {columns} FROM temp.{staging} ORDER BY rowid"
            )
        finally:
            cursor.execute(f"DROP TABLE IF EXISTS temp.{staging}")
    return total


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_literal(value) -> str:
    """One value in COPY's text format: NULL, a boolean, a number, a timestamp or text."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, float):
        return repr(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value).translate(_COPY_ESCAPES)


def _copy_values(values: list) -> tuple[str, list] | None:
    """The %-conversion of a column of values in a COPY line, and the values it takes (text escaped); None
    for a column with anything but whole numbers or anything but text in it (a NULL, say)."""
    kinds = set(map(type, values))
    if kinds <= {int}:
        return "%d", values
    if kinds == {str}:
        joined = "".join(values)
        if any(c in joined for c in "\\\t\n\r"):
            values = [v.translate(_COPY_ESCAPES) for v in values]
        return "%s", values
    return None


def _insert_columns(model, fields: Sequence[str], columns: Sequence, progress: Progress = None) -> int:
    """_insert_rows for rows given as columns: each a list or numpy array of values, or ``repeat(value)`` for a
    value every row shares.

    On PostgreSQL each COPY line is made by one %-format, the shared values written into the format once:
    write_row converts value by value, which took a third of a 1M-label qrels import's time (7 to 13 us a row
    against about 1). A column with a NULL among its values, or values other than whole numbers or text, sends
    the rows through _insert_rows, as on SQLite."""
    if len(fields) != len(columns):
        raise ValueError("one column per field")
    columns = [c if isinstance(c, repeat) else (c.tolist() if isinstance(c, np.ndarray) else list(c)) for c in columns]
    varying = [c for c in columns if not isinstance(c, repeat)]
    count = len(varying[0]) if varying else 0
    if any(len(c) != count for c in varying):
        raise ValueError("columns of different lengths")
    if not count:
        return 0
    conversions: list[str] | None = None
    if connection.vendor == "postgresql":
        conversions, varying = [], []
        for column in columns:
            if isinstance(column, repeat):
                conversions.append(_copy_literal(next(column)).replace("%", "%%"))
                continue
            converted = _copy_values(column)
            if converted is None:  # a NULL among the values, or a type %-formats cannot write as COPY reads it
                conversions = None
                break
            conversions.append(converted[0])
            varying.append(converted[1])
    if conversions is None:
        # zip ends with the lists of values; the repeat()s are endless.
        return _insert_rows(model, fields, zip(*columns, strict=False), progress=progress)
    line = "\t".join(conversions) + "\n"
    meta = model._meta
    table = connection.ops.quote_name(meta.db_table)
    names = ", ".join(connection.ops.quote_name(meta.get_field(f).column) for f in fields)
    step = 50_000
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for start in range(0, count, step):
            copy.write("".join(map(line.__mod__, zip(*(c[start : start + step] for c in varying), strict=True))))
            if progress:
                progress(min(step, count - start))
    return count


def _reserve_ids(model, count: int) -> list[int]:
    """Row ids for ``count`` rows about to be inserted, increasing, so that the caller knows each row's id
    without reading the rows back (a million new pairs would otherwise be read again to find their ids).

    PostgreSQL: drawn from the table's sequence, as the inserts themselves would (other writers may draw
    between them: the ids are distinct, not always consecutive). SQLite: the ids after the highest one
    ever used (AUTOINCREMENT's rule); the import holds the database's write lock (IMMEDIATE transactions),
    so no other writer can take them before the insert. Call inside the import's transaction.
    """
    if count <= 0:
        return []
    table = model._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table])
            (sequence,) = cursor.fetchone()
            cursor.execute("SELECT array_agg(nextval(%s::regclass)) FROM generate_series(1, %s)", [sequence, count])
            return sorted(cursor.fetchone()[0])
        cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [table])
        row = cursor.fetchone()
        cursor.execute(f"SELECT max(id) FROM {connection.ops.quote_name(table)}")
        base = max(row[0] if row else 0, cursor.fetchone()[0] or 0)
    return list(range(base + 1, base + 1 + count))


def _fetch(queryset) -> list[tuple]:
    """All rows of a values_list() queryset at once, through the cursor: no per-row ORM work (a million
    pairs or judgments are read in about a second instead of several)."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


@contextmanager
def _roomy_cache():
    """On SQLite, a page cache big enough for a large import's indexes while it runs (the default 2 MB makes
    every insert into a million-row index go to the file; 1M qrels labels took four minutes). The pages are
    taken only as they are used; the setting is this connection's and is put back afterwards."""
    if connection.vendor != "sqlite":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA cache_size")
        (before,) = cursor.fetchone()
        cursor.execute(f"PRAGMA cache_size = {-_IMPORT_CACHE_KIB}")
        try:
            yield
        finally:
            cursor.execute(f"PRAGMA cache_size = {int(before)}")


class _Referenced:
    """The rows an import's new rows refer to that it did not create itself: what PostgreSQL's per-row foreign-key
    triggers would have checked and locked, gathered by table while the set-wise checks are on (_key_checks)."""

    def __init__(self) -> None:
        self._ids: dict[type, list[np.ndarray]] = {}

    def add(self, model, ids) -> None:
        self._ids.setdefault(model, []).append(np.asarray(ids, dtype=np.int64).ravel())

    def hold(self, *, filename: str) -> None:
        """Lock every referenced row FOR KEY SHARE, as the trigger would, a statement per 100,000 ids: until
        this transaction ends nobody can delete them or change their id. A row that is gone (deleted since the
        import read it) refuses the import: it rolls back whole."""
        for model, parts in self._ids.items():
            ids = np.unique(np.concatenate(parts))
            table = connection.ops.quote_name(model._meta.db_table)
            held = 0
            with connection.cursor() as cursor:
                for start in range(0, ids.size, 100_000):
                    cursor.execute(
                        f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE id = ANY(%s) FOR KEY SHARE) AS held",
                        [ids[start : start + 100_000].tolist()],
                    )
                    held += cursor.fetchone()[0]
            if held < ids.size:
                raise ImportConflict(
                    _(
                        "%(count)s of the %(what)s this file refers to were deleted while it was being imported: "
                        "import the file again"
                    )
                    % {"count": f"{ids.size - held:,}", "what": model._meta.verbose_name_plural},
                    filename=filename,
                )


def _set_checks_allowed() -> bool:
    """Whether this connection may turn off the per-row foreign-key triggers for its own transaction: PostgreSQL,
    RELJUDGE_IMPORT_SET_CHECKS on, and a role that may set session_replication_role (a superuser, or on
    PostgreSQL 15 and later a role granted SET ON PARAMETER session_replication_role)."""
    if connection.vendor != "postgresql" or not settings.RELJUDGE_IMPORT_SET_CHECKS:
        return False
    sql = "SELECT current_setting('is_superuser') = 'on'"
    if connection.pg_version >= 150000:
        sql += " OR has_parameter_privilege('session_replication_role', 'SET')"
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return bool(cursor.fetchone()[0])


@contextmanager
def _key_checks(*, filename: str):
    """Foreign keys checked set-wise for the writes inside, instead of by PostgreSQL's trigger per row and key.

    A million qrels labels of new pairs write four million rows (stub documents, pairs, judgments, revisions) and
    nine million foreign-key values; PostgreSQL queues a trigger for each and runs them at the commit, where they
    cost more than the writes (bench/import_bench.py on the 2-core machine: 151 s with them, 60-65 s without),
    besides the WAL of the row locks they take. Where the role
    may (_set_checks_allowed), the writes inside run with session_replication_role = replica, which this
    transaction alone sees: no trigger is queued for them. Yields a _Referenced the writer fills with every row
    its new rows refer to that it did not create in this transaction; at the end those rows are locked, as the
    triggers would have locked them, and a missing one refuses the import. The rows the import creates need no
    check: their ids come from the import's own inserts. Every other session keeps its checks, and a delete
    of a parent after this commits still finds the import's rows. Yields None (nothing to gather: the triggers
    check) where the role may not; on SQLite the foreign keys are checked at the commit as always.

    On an exception the transaction, or its savepoint, rolls back, and the setting with it."""
    if not _set_checks_allowed():
        yield None
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('session_replication_role', 'replica', true)")
    referenced = _Referenced()
    yield referenced
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('session_replication_role', 'origin', true)")
    referenced.hold(filename=filename)
    logger.info("import %s: foreign keys checked set-wise", filename)


def _existing_ids(model, campaign: Campaign, key: str) -> dict[str, int]:
    return dict(_fetch(model.objects.filter(campaign=campaign).order_by().values_list(key, "id")))


def _stubs_create(
    *, campaign: Campaign, qids: Iterable[str] = (), docids: Iterable[str] = ()
) -> tuple[dict, dict, list[int], list[int]]:
    """Make sure every qid and docid exists (as a stub if new); return the id maps and the ids of the queries
    and documents made now."""
    qmap = _existing_ids(Query, campaign, "qid")
    new_q = sorted(set(qids) - qmap.keys())
    new_q_ids: list[int] = []
    new_d_ids: list[int] = []
    if new_q:
        ids = new_q_ids = _reserve_ids(Query, len(new_q))
        _insert_columns(
            Query,
            ["id", "campaign", "qid", "text", "description", "is_stub", "labels_version"],
            [ids, repeat(campaign.pk), new_q, new_q, repeat(""), repeat(True), repeat(0)],
        )
        qmap.update(zip(new_q, ids, strict=True))
    dmap = _existing_ids(Document, campaign, "docid")
    new_d = sorted(set(docids) - dmap.keys())
    if new_d:
        # In docid order: the unique (campaign, docid) index then grows at its end.
        ids = new_d_ids = _reserve_ids(Document, len(new_d))
        _insert_columns(
            Document,
            ["id", "campaign", "docid", "title", "text", "url", "is_stub", "attributes"],
            [ids, repeat(campaign.pk), new_d, repeat(""), repeat(""), repeat(""), repeat(True), repeat("{}")],
        )
        dmap.update(zip(new_d, ids, strict=True))
    return qmap, dmap, new_q_ids, new_d_ids


@_logged
@transaction.atomic
def queries_import(*, campaign: Campaign, data: bytes, filename: str) -> ImportSummary:
    topics = formats.parse_topics(data, filename=filename)
    summary = ImportSummary(kind="queries", filename=filename)
    existing = {q.qid: q for q in Query.objects.filter(campaign=campaign)}
    new, changed = [], []
    for t in topics:
        q = existing.get(t.qid)
        if q is None:
            new.append(Query(campaign=campaign, qid=t.qid, text=t.text, description=t.description))
        elif (q.text, q.description, q.is_stub) != (t.text, t.description, False):
            q.text, q.description, q.is_stub = t.text, t.description, False
            changed.append(q)
        else:
            summary.unchanged += 1
    Query.objects.bulk_create(new, batch_size=BATCH)
    Query.objects.bulk_update(changed, ["text", "description", "is_stub"], batch_size=BATCH)
    summary.added, summary.updated = len(new), len(changed)
    tagged = {t.qid: t.tags for t in topics if t.tags is not None}
    if tagged:
        retagged = _tags_replace(campaign=campaign, tags=tagged)
        # a topic whose only change is its tags counts as updated
        retagged -= {q.qid for q in new} | {q.qid for q in changed}
        summary.updated += len(retagged)
        summary.unchanged -= len(retagged)
    return summary


def _tags_replace(*, campaign: Campaign, tags: dict[str, Sequence[str]]) -> set[str]:
    """Set the tags of the queries named in ``tags`` (qid -> tags); returns the qids whose tags changed."""
    ids = dict(Query.objects.filter(campaign=campaign, qid__in=list(tags)).values_list("qid", "id"))
    current: dict[int, set[str]] = {}
    for query_id, tag in QueryTag.objects.filter(query_id__in=list(ids.values())).values_list("query_id", "tag"):
        current.setdefault(query_id, set()).add(tag)
    changed, add, remove = set(), [], []
    for qid, wanted in tags.items():
        query_id = ids[qid]
        have, want = current.get(query_id, set()), set(wanted)
        if have != want:
            changed.add(qid)
            add.extend(QueryTag(query_id=query_id, tag=t) for t in sorted(want - have))
            remove.extend((query_id, t) for t in have - want)
    for query_id, tag in remove:
        QueryTag.objects.filter(query_id=query_id, tag=tag).delete()
    QueryTag.objects.bulk_create(add, batch_size=BATCH)
    return changed


@_logged
@transaction.atomic
def query_tags_import(*, campaign: Campaign, data: bytes, filename: str) -> ImportSummary:
    """Replace the tags of the queries a ``qid<TAB>tag,tag`` file names (formats.parse_query_tags).

    Every qid must be a query of the campaign: a typo would otherwise tag nothing without a word.
    """
    rows = formats.parse_query_tags(data, filename=filename)
    known = set(Query.objects.filter(campaign=campaign, qid__in=[q for q, _ in rows]).values_list("qid", flat=True))
    for line, (qid, _tags) in enumerate(rows, 1):
        if qid not in known:
            # the data line number: parse_query_tags skipped blank lines and a header, so find it again
            lines = formats.decode_lines(data, filename=filename)
            lineno = next((i for i, text in enumerate(lines, 1) if text.split("\t")[0].strip() == qid), line)
            raise formats.FormatError(
                _("unknown qid %(qid)s (import the topics first)") % {"qid": repr(qid[:60])},
                filename=filename,
                line=lineno,
                field="qid",
            )
    changed = _tags_replace(campaign=campaign, tags=dict(rows))
    summary = ImportSummary(kind="query tags", filename=filename)
    summary.updated, summary.unchanged = len(changed), len(rows) - len(changed)
    return summary


@transaction.atomic
def query_tags_set(*, campaign: Campaign, qid: str, tags: Sequence[str]) -> bool:
    """A lead's edit of one query's tags (checked like an import's); returns whether they changed."""
    if not Query.objects.filter(campaign=campaign, qid=qid).exists():
        raise ValueError(_("unknown qid %(qid)s") % {"qid": repr(qid[:60])})
    clean = formats._tag_list(",".join(tags), "tags", 1, "tags")
    return bool(_tags_replace(campaign=campaign, tags={qid: clean}))


@_logged
@transaction.atomic
def documents_import(*, campaign: Campaign, data: bytes, filename: str, progress: Progress = None) -> ImportSummary:
    docs = formats.parse_docs(data, filename=filename)
    summary = ImportSummary(kind="documents", filename=filename)
    existing = {
        d[0]: d
        for d in Document.objects.filter(campaign=campaign)
        .values_list("docid", "id", "title", "text", "url", "is_stub", "attributes")
        .iterator(chunk_size=20000)
    }
    new, changed = [], []
    for d in docs:
        row = existing.get(d.docid)
        # attributes absent from the file stay as they are
        attributes = row[6] if row is not None and d.attributes is None else (d.attributes or {})
        if row is None:
            new.append(d)
        elif row[2:] != (d.title, d.text, d.url, False, attributes):
            changed.append(
                Document(
                    id=row[1],
                    docid=d.docid,
                    title=d.title,
                    text=d.text,
                    url=d.url,
                    is_stub=False,
                    attributes=attributes,
                )
            )
        else:
            summary.unchanged += 1
    _insert_rows(
        Document,
        ["campaign", "docid", "title", "text", "url", "is_stub", "attributes"],
        ((campaign.pk, d.docid, d.title, d.text, d.url, False, json.dumps(d.attributes or {})) for d in new),
        progress=progress,
    )
    Document.objects.bulk_update(changed, ["title", "text", "url", "is_stub", "attributes"], batch_size=BATCH)
    summary.added, summary.updated = len(new), len(changed)
    return summary


def _fingerprint(rows: list[tuple[str, np.ndarray, np.ndarray]]) -> str:
    h = hashlib.sha256()
    for qid, doc_ids, scores in sorted(rows, key=lambda r: r[0]):
        h.update(qid.encode())
        h.update(b"\0")
        h.update(doc_ids.tobytes())
        h.update(scores.tobytes())
    return h.hexdigest()


@_logged
@transaction.atomic
def run_import(
    *,
    campaign: Campaign,
    data: bytes,
    filename: str,
    system_name: str | None = None,
    replace: bool = False,
    progress: Progress = None,
) -> ImportSummary:
    """Import a run (one system, or one per tag), create stubs for unknown qids/docids, and pool its top k.

    Re-importing an identical run changes nothing. A different run for an existing system is refused
    unless ``replace`` is set, because scores and history would silently change.
    """
    if system_name and len(system_name) > formats.SYSTEM_NAME_MAX_LENGTH:
        raise formats.FormatError(
            _("system name too long: %(length)s characters (at most %(limit)s)")
            % {"length": f"{len(system_name):,}", "limit": formats.SYSTEM_NAME_MAX_LENGTH},
            filename=filename,
            field="system",
        )
    runs = formats.parse_run(data, filename=filename)
    if not runs:
        raise formats.FormatError(_("empty file: no ranked documents"), filename=filename)
    if system_name and len(runs) > 1:
        raise formats.FormatError(
            _(
                "the file holds %(n)s runs (tags %(tags)s); import them without --system "
                "to create one system per tag, or split the file"
            )
            % {"n": len(runs), "tags": ", ".join(sorted(runs))},
            filename=filename,
            field="tag",
        )
    summary = ImportSummary(kind="rankings", filename=filename)
    all_qids = {r.qid for rankings in runs.values() for r in rankings}
    all_docids = {d for rankings in runs.values() for r in rankings for d in r.docids}
    qmap, dmap, new_queries, new_documents = _stubs_create(campaign=campaign, qids=all_qids, docids=all_docids)
    summary.stub_queries, summary.stub_documents = len(new_queries), len(new_documents)
    for tag, rankings in sorted(runs.items()):
        name = system_name or tag
        rows = [
            (
                r.qid,
                np.fromiter(map(dmap.__getitem__, r.docids), dtype=np.int64, count=len(r.docids)),
                np.asarray(r.scores, dtype=np.float64),
            )
            for r in rankings
        ]
        fingerprint = _fingerprint(rows)
        system = System.objects.filter(campaign=campaign, name=name).first()
        if system is not None:
            if system.fingerprint == fingerprint:
                summary.unchanged += len(rows)
                summary.systems.append(f"{name} (unchanged)")
                continue
            if not replace:
                raise ImportConflict(
                    _(
                        "system %(system)s already has a different run in campaign %(campaign)s; "
                        "pass --replace (or replace=true) to overwrite it"
                    )
                    % {"system": repr(name), "campaign": repr(campaign.slug)},
                    filename=filename,
                )
            system.rankings.all().delete()
            summary.updated += len(rows)
        else:
            system = System(campaign=campaign, name=name)
            summary.added += len(rows)
        system.source = filename[:255]
        system.fingerprint = fingerprint
        system.entries = int(sum(len(r[1]) for r in rows))
        system.save()
        _insert_rows(
            Ranking,
            ["system", "query", "doc_ids", "scores", "length"],
            (
                (system.pk, qmap[qid], doc_ids.tobytes(), scores.tobytes(), len(doc_ids))
                for qid, doc_ids, scores in rows
            ),
        )
        if progress:
            progress(system.entries)
        summary.systems.append(name)
        depth = campaign.pool_depth
        summary.pairs_added += _pool_add(
            campaign=campaign,
            pairs=((qmap[qid], int(d)) for qid, doc_ids, _ in rows for d in doc_ids[:depth]),
        )
    return summary


def _pool_add(*, campaign: Campaign, pairs: Iterable[tuple[int, int]]) -> int:
    """Add (query id, document id) pairs to the pool; existing pairs are left alone (judgments untouched)."""
    wanted = set(pairs)
    if not wanted:
        return 0
    # This process's cached pool size is stale once the import commits (other processes' expire in a minute).
    transaction.on_commit(lambda: pool_size_forget(campaign=campaign))
    existing = {
        (q, d): (pid, pooled)
        for q, d, pid, pooled in _fetch(
            Pair.objects.filter(campaign=campaign).order_by().values_list("query_id", "document_id", "id", "pooled")
        )
    }
    fresh = np.array(sorted(wanted - existing.keys()), dtype=np.int64).reshape(-1, 2)
    _pairs_insert(campaign=campaign, query_ids=fresh[:, 0], document_ids=fresh[:, 1], pooled=True)
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


def _pairs_insert(
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
    ids = _reserve_ids(Pair, count)
    queries, documents = query_ids[order].tolist(), document_ids[order].tolist()
    pair_labels = repeat(None) if labels is None else labels[order].tolist()
    for attempt in range(3):
        public_ids = _public_ids(count, rng=rng)
        try:
            with transaction.atomic():  # a savepoint: a clash undoes only this insert
                _insert_columns(
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
    return _pool_add(campaign=campaign, pairs=pairs)


def _source_account(*, campaign: Campaign, name: str, imported_by, filename: str):
    """The account imported labels are recorded under, and whether it was created now (see qrels_import)."""

    def refuse(message: str):
        return formats.FormatError(message, filename=filename, field="annotator")

    name = (name or "").strip()
    if not name:
        raise refuse(_("name the source of these labels: a member of the campaign, or a new source such as trec-2019"))
    if len(name) > 150:
        raise refuse(_("a source name can be at most %(limit)s characters") % {"limit": 150})
    try:
        UnicodeUsernameValidator()(name)
    except ValidationError:
        raise refuse(
            _("%(name)s is not a valid source name: use letters, digits and @ . + - _ only") % {"name": repr(name)}
        ) from None
    User = get_user_model()
    from judging.services.accounts import account_name_resolve  # here: accounts imports this module

    name, user = account_name_resolve(name, error=refuse)  # ALICE names alice; a look-alike is refused
    if user is None:
        user = User.objects.create_user(username=name, password=None)  # no usable password
        user.is_active = False  # and no login of any kind, token included
        user.save(update_fields=["is_active"])
        LabelSource.objects.create(user=user, created_by=imported_by)
        return user, True
    if user.is_superuser:
        raise refuse(
            _(
                "%(name)s is a superuser: imported labels cannot be recorded for a superuser; name a member of "
                "the campaign, or a new source such as trec-2019"
            )
            % {"name": repr(name)}
        )
    if hasattr(user, "label_source") or membership_role(campaign=campaign, user=user) is not None:
        return user, False
    raise refuse(
        _(
            "%(name)s is not a member of campaign %(campaign)s: add them first, or name a source that is "
            "not a user (such as trec-2019) to record the labels under a source account"
        )
        % {"name": repr(name), "campaign": repr(campaign.slug)}
    )


@_logged
@transaction.atomic
def qrels_import(
    *,
    campaign: Campaign,
    data: bytes,
    filename: str,
    annotator: User,
    imported_by=None,
    progress: Progress = None,
) -> ImportSummary:
    """Import existing labels (e.g. from an earlier campaign) as the confident judgments of a named source.

    The rule: imported labels never rewrite what a person judged in the app.

    - ``annotator`` names the source (a username; a user object is taken by its username). It is a member
      of the campaign (annotator or lead), or a label source created by an earlier import, or a name no
      account has yet: then a source account is created under it (``LabelSource``: inactive, no usable
      password, nobody can log in with it). Superusers and users outside the campaign are refused.
    - A pair the source already judged in the app keeps that judgment, however it differs (an unsure one
      stays unsure); the summary counts these labels as ``kept``. Judgments an earlier import made for the
      source are brought up to date.
    - Every imported change is a revision made by ``imported_by`` (the lead who imported the file; None for
      the command line) on behalf of the source, naming the file; the judgment's ``updated_at`` moves, so
      ``?updated_since=`` exports see it.
    """
    qids, docids, values = formats.parse_qrels_columns(data, filename=filename)
    if not qids:
        raise formats.FormatError(_("empty file: no labels"), filename=filename)
    if imported_by is not None:
        lead_required(campaign=campaign, user=imported_by, what=_("import labels"))
    grades = {g.value: g for g in campaign.grades.all()}
    scale = np.array(sorted(grades), dtype=np.int64)
    try:
        label = np.array(values, dtype=np.int64)
        off_scale = np.flatnonzero(~np.isin(label, scale))
        bad = int(off_scale[0]) if off_scale.size else None
    except OverflowError:  # a label past 64 bits is on no scale
        bad = next(i for i, value in enumerate(values) if value not in grades)
    if bad is not None:
        raise formats.FormatError(
            _("label %(label)s is not on campaign %(campaign)s's scale (%(allowed)s)")
            % {
                "label": values[bad],
                "campaign": repr(campaign.slug),
                "allowed": ", ".join(map(str, scale.tolist())),
            },
            filename=filename,
            line=_qrels_line(data, qids[bad], docids[bad]),
            field="label",
        )
    name = annotator if isinstance(annotator, str) else annotator.get_username()
    source, created = _source_account(campaign=campaign, name=name, imported_by=imported_by, filename=filename)
    summary = ImportSummary(kind="judgments", filename=filename, source=source.get_username(), source_created=created)
    with _roomy_cache(), _key_checks(filename=filename) as referenced:
        _qrels_write(
            campaign=campaign,
            referenced=referenced,
            qids=qids,
            docids=docids,
            label=label,
            grades=grades,
            source=source,
            by=imported_by.pk if imported_by is not None else None,
            filename=filename,
            summary=summary,
            progress=progress,
        )
    return summary


def _qrels_write(
    *,
    campaign: Campaign,
    referenced: _Referenced | None,
    qids: list[str],
    docids: list[str],
    label: np.ndarray,
    grades: dict[int, Grade],
    source: User,
    by: int | None,
    filename: str,
    summary: ImportSummary,
    progress: Progress,
) -> None:
    """The writes of qrels_import, on whole columns: row i of every array is line i of the file.

    Nothing is read back that the import wrote: new rows take ids reserved before their insert
    (_reserve_ids), so the pairs' and judgments' ids are known as they are written. Pairs and judgments go
    in in (query, pair) order, so each index grows near its end instead of being written all over.
    ``referenced`` (see _key_checks): gathers each row the new rows refer to that this import did not create.
    """
    count = len(qids)
    qmap, dmap, new_queries, new_documents = _stubs_create(campaign=campaign, qids=qids, docids=docids)
    summary.stub_queries, summary.stub_documents = len(new_queries), len(new_documents)
    query = np.fromiter(map(qmap.__getitem__, qids), dtype=np.int64, count=count)
    document = np.fromiter(map(dmap.__getitem__, docids), dtype=np.int64, count=count)
    existing = _pair_ids(campaign)
    if existing:
        keys = zip(query.tolist(), document.tolist(), strict=True)
        pair = np.fromiter(map(existing.get, keys, repeat(-1)), dtype=np.int64, count=count)
    else:
        pair = np.full(count, -1, dtype=np.int64)
    del existing
    # qrels-only pairs are kept for scoring but are not pooled for judging. Their one judgment is the label
    # (a person's, or a source account's; a model judge's never is): stored with them, not refreshed later.
    fresh = pair < 0
    direct = source.pk not in AnnotatorProfile.model_user_ids()
    if referenced is not None:
        referenced.add(Campaign, [campaign.pk])
        referenced.add(get_user_model(), [source.pk] if by is None else [source.pk, by])
        referenced.add(Query, np.setdiff1d(query[fresh], new_queries))
        referenced.add(Document, np.setdiff1d(document[fresh], new_documents))
    pair[fresh] = _pairs_insert(
        campaign=campaign,
        query_ids=query[fresh],
        document_ids=document[fresh],
        pooled=False,
        labels=label[fresh] if direct else None,
    )
    summary.pairs_added = 0
    grade_ids = np.array([grades[value].id for value in sorted(grades)], dtype=np.int64)
    grade = grade_ids[np.searchsorted(np.array(sorted(grades), dtype=np.int64), label)]
    if referenced is not None:
        referenced.add(Grade, grade_ids)

    stamp = timezone.now()
    now = connection.ops.adapt_datetimefield_value(stamp)  # as the database stores it, for raw rows
    name = filename[:255]
    revision_columns = [
        "judgment",
        "changed_by",
        "on_behalf_of",
        "imported_from",
        "changed_at",
        *JudgmentRevision.CHANGE_FIELDS,
        "seconds_spent",
    ]
    # The source's judgments on pairs that existed before: each is unchanged, the person's own, or updated.
    mine = Judgment.objects.filter(pair__campaign=campaign, annotator=source)
    current = _fetch(
        mine.order_by("pair_id").values_list(
            "pair_id", "id", "grade_id", "grade__value", "unsure", "tentative_grade__value", "note"
        )
    )
    has = np.zeros(count, dtype=bool)
    revisions: Iterable[tuple] = ()
    touched = np.empty(0, dtype=np.int64)
    if current:
        c_pair, c_id, c_grade, c_value, c_unsure, c_tentative, c_note = zip(*current, strict=True)
        del current
        c_pair = np.array(c_pair, dtype=np.int64)
        at = np.searchsorted(c_pair, pair).clip(0, len(c_pair) - 1)
        has = c_pair[at] == pair
        c_grade_ids = np.array([-1 if g is None else g for g in c_grade], dtype=np.int64)
        unchanged = has & ~np.array(c_unsure, dtype=bool)[at] & (c_grade_ids[at] == grade)
        rest = has & ~unchanged
        summary.unchanged = int(unchanged.sum())
        if rest.any():
            # A judgment with any revision not made by an import was judged in the app: it is the person's own.
            # (Judgments imported before revisions recorded imports look like that too, and are left alone.)
            judged_in_app = np.array(
                JudgmentRevision.objects.filter(judgment__in=mine, on_behalf_of__isnull=True)
                .order_by()
                .values_list("judgment__pair_id", flat=True)
                .distinct(),
                dtype=np.int64,
            )
            kept = rest & np.isin(pair, judged_in_app)
            update = np.flatnonzero(rest & ~kept)
            summary.kept, summary.updated = int(kept.sum()), len(update)
            rows = at[update].tolist()
            judgment_ids = [c_id[r] for r in rows]
            if referenced is not None:
                referenced.add(Judgment, judgment_ids)
            revisions = zip(
                judgment_ids,
                repeat(by),
                repeat(source.pk),
                repeat(name),
                repeat(now),
                [c_value[r] for r in rows],
                label[update].tolist(),
                [c_unsure[r] for r in rows],
                repeat(False),
                [c_tentative[r] for r in rows],
                repeat(None),
                [c_note[r] for r in rows],
                [c_note[r] for r in rows],
                repeat(0.0),
            )
            touched = pair[update]
            # updated_at moves with the grade, so ?updated_since= finds the change. One UPDATE per grade.
            by_grade = np.array(judgment_ids, dtype=np.int64)
            for grade_id in np.unique(grade[update]).tolist():
                jids = by_grade[grade[update] == grade_id].tolist()
                for start in range(0, len(jids), 10_000):
                    Judgment.objects.filter(id__in=jids[start : start + 10_000]).update(
                        grade_id=grade_id, unsure=False, tentative_grade=None, updated_at=stamp
                    )

    new = np.flatnonzero(~has)
    new = new[np.argsort(pair[new], kind="stable")]
    if referenced is not None:
        referenced.add(Pair, pair[new[~fresh[new]]])
    judgment_ids = _reserve_ids(Judgment, len(new))
    # New pairs have the highest ids, so their judgments come last; on SQLite, where the new pairs' ids are one
    # range and so are the new judgments', SQLite makes those judgments from the pairs and their stored labels.
    in_range = len(new) - int(fresh[new].sum()) if connection.vendor == "sqlite" and direct else len(new)
    if in_range < len(new) and not fresh[new[in_range:]].all():
        in_range = len(new)
    _insert_columns(
        Judgment,
        ["id", "pair", "annotator", "grade", "unsure", "tentative_grade", "note", "seconds_spent"]
        + ["created_at", "updated_at"],
        [
            judgment_ids[:in_range],
            pair[new[:in_range]],
            repeat(source.pk),
            grade[new[:in_range]],
            repeat(False),
            repeat(None),
            repeat(""),
            repeat(0.0),
            repeat(now),
            repeat(now),
        ],
        progress=progress,
    )
    if in_range < len(new):
        _judgments_of_pairs(
            first=int(pair[new[in_range]]),
            last=int(pair[new[-1]]),
            first_id=judgment_ids[in_range],
            annotator=source.pk,
            now=now,
        )
        if progress:
            progress(len(new) - in_range)
    if len(new) > 50_000 and connection.vendor == "postgresql":
        # Statistics for what this transaction just wrote (as autovacuum would after the commit): without
        # them the planner takes the million new rows for a handful and joins them in nested loops.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE judging_pair, judging_judgment, judging_document, judging_query")
    _insert_rows(JudgmentRevision, revision_columns, revisions)
    if connection.vendor == "sqlite" and judgment_ids:
        # The new judgments' ids are one range (_reserve_ids): their revisions are made from them inside SQLite,
        # in one statement. Python rows would cost a statement step each (5 s per million, against 1 s).
        _revisions_of_range(first=judgment_ids[0], last=judgment_ids[-1], by=by, source=source.pk, name=name, now=now)
    else:
        _insert_columns(
            JudgmentRevision,
            revision_columns,
            [
                judgment_ids,
                repeat(by),
                repeat(source.pk),
                repeat(name),
                repeat(now),
                repeat(None),
                label[new],
                repeat(None),
                repeat(False),
                repeat(None),
                repeat(None),
                repeat(""),
                repeat(""),
                repeat(0.0),
            ],
        )
    # Pairs created now with their label need no refresh; their queries' labels moved all the same.
    refresh = new[~fresh[new]] if direct else new
    touched = np.concatenate([touched, pair[refresh]])
    if direct and fresh.any():
        queries = np.unique(query[fresh]).tolist()
        for start in range(0, len(queries), 10_000):
            Query.objects.filter(id__in=queries[start : start + 10_000]).update(labels_version=F("labels_version") + 1)
    labels_refresh(campaign=campaign, pair_ids=touched)
    summary.added = len(new)


def _judgments_of_pairs(*, first: int, last: int, first_id: int, annotator: int, now) -> None:
    """The judgments behind the labels of pairs ``first..last``, all just created by an import with their label,
    with ids from ``first_id`` on (SQLite; see _qrels_write)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO judging_judgment (id, pair_id, annotator_id, grade_id, unsure, tentative_grade_id, note, "
            "seconds_spent, created_at, updated_at) "
            "SELECT p.id - %s + %s, p.id, %s, g.id, %s, NULL, '', 0.0, %s, %s "
            "FROM judging_pair p JOIN judging_grade g ON g.campaign_id = p.campaign_id AND g.value = p.label "
            "WHERE p.id BETWEEN %s AND %s ORDER BY p.id",
            [first, first_id, annotator, False, now, now, first, last],
        )
        if cursor.rowcount != last - first + 1:
            raise AssertionError(f"{cursor.rowcount} judgments made for {last - first + 1} new pairs")


def _revisions_of_range(*, first: int, last: int, by: int | None, source: int, name: str, now) -> None:
    """The revisions of the judgments with ids ``first..last``, all just created by an import (SQLite)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO judging_judgmentrevision (judgment_id, changed_by_id, on_behalf_of_id, imported_from, "
            "changed_at, new_grade, new_unsure, old_note, new_note, seconds_spent) "
            "SELECT j.id, %s, %s, %s, %s, g.value, %s, '', '', 0.0 "
            "FROM judging_judgment j JOIN judging_grade g ON g.id = j.grade_id "
            "WHERE j.id BETWEEN %s AND %s ORDER BY j.id",
            [by, source, name, now, False, first, last],
        )


def _pair_ids(campaign: Campaign) -> dict[tuple[int, int], int]:
    rows = _fetch(Pair.objects.filter(campaign=campaign).order_by().values_list("query_id", "document_id", "id"))
    return {(q, d): pid for q, d, pid in rows}


def _qrels_line(data: bytes, qid: str, docid: str) -> int | None:
    """The line of a parsed qrel, looked up only on the error path."""
    for number, line in enumerate(data.decode("utf-8-sig", errors="replace").splitlines(), start=1):
        cols = line.split()
        if len(cols) >= 4 and cols[0] == qid and cols[2] == docid:
            return number
    return None


# The importers by the kind of file, as the upload page, the API and the jobs name them.
IMPORTERS = {"topics": queries_import, "docs": documents_import, "run": run_import, "qrels": qrels_import}
