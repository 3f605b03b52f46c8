"""Imports of topics, documents, runs and qrels: one transaction each, file/line/field errors, pooling."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
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
    sql = f"INSERT INTO {connection.ops.quote_name(meta.db_table)} ({columns}) VALUES ({marks})"
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
        for row in rows:
            batch.append(row)
            if len(batch) >= 10_000:
                cursor.executemany(sql, batch)
                total += len(batch)
                if progress:
                    progress(len(batch))
                batch = []
        if batch:
            cursor.executemany(sql, batch)
            total += len(batch)
            if progress:
                progress(len(batch))
    return total


def _existing_ids(model, campaign: Campaign, key: str) -> dict[str, int]:
    return dict(model.objects.filter(campaign=campaign).values_list(key, "id").iterator(chunk_size=20000))


def _stubs_create(
    *, campaign: Campaign, qids: Iterable[str] = (), docids: Iterable[str] = ()
) -> tuple[dict, dict, int, int]:
    """Make sure every qid and docid exists (as a stub if new); return the id maps and how many were made."""
    qmap = _existing_ids(Query, campaign, "qid")
    new_q = sorted(set(qids) - qmap.keys())
    if new_q:
        _insert_rows(
            Query,
            ["campaign", "qid", "text", "description", "is_stub", "labels_version"],
            ((campaign.pk, q, q, "", True, 0) for q in new_q),
        )
        qmap = _existing_ids(Query, campaign, "qid")
    dmap = _existing_ids(Document, campaign, "docid")
    new_d = sorted(set(docids) - dmap.keys())
    if new_d:
        _insert_rows(
            Document,
            ["campaign", "docid", "title", "text", "url", "is_stub", "attributes"],
            ((campaign.pk, d, "", "", "", True, "{}") for d in new_d),
        )
        dmap = _existing_ids(Document, campaign, "docid")
    return qmap, dmap, len(new_q), len(new_d)


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
    qmap, dmap, summary.stub_queries, summary.stub_documents = _stubs_create(
        campaign=campaign, qids=all_qids, docids=all_docids
    )
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
        for q, d, pid, pooled in Pair.objects.filter(campaign=campaign)
        .values_list("query_id", "document_id", "id", "pooled")
        .iterator(chunk_size=20000)
    }
    added = _pairs_insert(campaign=campaign, keys=wanted - existing.keys(), pooled=True)
    # Pairs that only imported qrels had created now enter the pool too.
    promote = [existing[k][0] for k in wanted if k in existing and not existing[k][1]]
    for start in range(0, len(promote), BATCH):
        Pair.objects.filter(id__in=promote[start : start + BATCH]).update(pooled=True)
    return added + len(promote)


def _public_ids(count: int, *, rng: np.random.Generator) -> list[int]:
    """``count`` distinct random public ids (see models.pair_public_id)."""
    out = np.empty(0, dtype=np.int64)
    while len(out) < count:
        draw = rng.integers(PUBLIC_ID_MIN, PUBLIC_ID_MAX, size=count - len(out), dtype=np.int64)
        out = np.unique(np.concatenate([out, draw]))
    return rng.permutation(out).tolist()


def _pairs_insert(
    *, campaign: Campaign, keys: set[tuple[int, int]], pooled: bool, labels: dict[tuple[int, int], int] | None = None
) -> int:
    """Insert new pairs (query id, document id) in a random order, each with a random public id.

    The pairs a run adds that no earlier run had are the ones only that system found: inserted in key order,
    one run after another, their row ids and creation order would single them out. Public ids hide the
    row ids from annotators; the shuffle keeps even the row order from following the systems within an import.
    A public id already taken by another pair (odds about n / 10**15 per pair, with n pairs stored) fails the
    insert: it is retried with fresh ids. ``labels``: each new pair's label from its one judgment, written
    now with a judgment count of 1 (a qrels import's new pairs), instead of by a labels_refresh afterwards.
    """
    if not keys:
        return 0
    rng = np.random.default_rng(secrets.randbits(128))
    order = sorted(keys)
    shuffled = [order[i] for i in rng.permutation(len(order))]
    now = timezone.now()
    for attempt in range(3):
        public_ids = _public_ids(len(shuffled), rng=rng)
        try:
            with transaction.atomic():  # a savepoint: a clash undoes only this insert
                return _insert_rows(
                    Pair,
                    [
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
                    (
                        (campaign.pk, q, d, pooled, False, 0, public_id, now, None)
                        if labels is None
                        else (campaign.pk, q, d, pooled, False, 1, public_id, now, labels[(q, d)])
                        for (q, d), public_id in zip(shuffled, public_ids, strict=True)
                    ),
                )
        except IntegrityError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


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
    user = User.objects.filter(username=name).select_related("label_source").first()
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
    qrels = formats.parse_qrels(data, filename=filename)
    if not qrels:
        raise formats.FormatError(_("empty file: no labels"), filename=filename)
    if imported_by is not None:
        lead_required(campaign=campaign, user=imported_by, what=_("import labels"))
    grades = {g.value: g for g in campaign.grades.all()}
    bad = next((q for q in qrels if q.label not in grades), None)
    if bad is not None:
        raise formats.FormatError(
            _("label %(label)s is not on campaign %(campaign)s's scale (%(allowed)s)")
            % {"label": bad.label, "campaign": repr(campaign.slug), "allowed": ", ".join(map(str, sorted(grades)))},
            filename=filename,
            line=_qrels_line(data, bad),
            field="label",
        )
    name = annotator if isinstance(annotator, str) else annotator.get_username()
    source, created = _source_account(campaign=campaign, name=name, imported_by=imported_by, filename=filename)
    summary = ImportSummary(kind="judgments", filename=filename, source=source.get_username(), source_created=created)
    qmap, dmap, summary.stub_queries, summary.stub_documents = _stubs_create(
        campaign=campaign, qids={q.qid for q in qrels}, docids={q.docid for q in qrels}
    )
    keys = {(qmap[q.qid], dmap[q.docid]) for q in qrels}
    existing_pairs = _pair_ids(campaign)
    # qrels-only pairs are kept for scoring but are not pooled for judging. Their one judgment is the label
    # (a person's, or a source account's; a model judge's never is): stored with them, not refreshed later.
    fresh = keys - existing_pairs.keys()
    direct = source.pk not in AnnotatorProfile.model_user_ids()
    labels = {(qmap[q.qid], dmap[q.docid]): q.label for q in qrels} if direct else None
    _pairs_insert(campaign=campaign, keys=fresh, pooled=False, labels=labels)
    summary.pairs_added = 0
    pair_ids = _pair_ids(campaign)
    mine = Judgment.objects.filter(pair__campaign=campaign, annotator=source)
    # Plain rows, not model instances: a million labels are a million judgments (and revisions).
    current = {
        row[0]: row[1:]
        for row in mine.values_list(
            "pair_id", "id", "grade_id", "grade__value", "unsure", "tentative_grade__value", "note"
        ).iterator(chunk_size=20000)
    }
    # A judgment with any revision not made by an import was judged in the app: it is the person's own.
    # (Judgments imported before revisions recorded imports look like that too, and are left alone as well.)
    judged_in_app = set(
        JudgmentRevision.objects.filter(judgment__in=mine, on_behalf_of__isnull=True)
        .order_by()
        .values_list("judgment__pair_id", flat=True)
        .distinct()
    )
    stamp = timezone.now()
    now = connection.ops.adapt_datetimefield_value(stamp)  # as the database stores it, for raw rows
    name = filename[:255]
    by = imported_by.pk if imported_by is not None else None
    revision_columns = [
        "judgment",
        "changed_by",
        "on_behalf_of",
        "imported_from",
        "changed_at",
        "old_grade",
        "new_grade",
        "old_unsure",
        "new_unsure",
        "old_tentative_grade",
        "new_tentative_grade",
        "old_note",
        "new_note",
        "seconds_spent",
    ]

    def revision(judgment_id, new_grade, old_grade=None, old_unsure=None, old_tentative=None) -> tuple:
        """A revision row made by the import on behalf of the source (revision_columns' order)."""
        return (judgment_id, by, source.pk, name, now, old_grade, new_grade, old_unsure, False, old_tentative, None)

    new: list[tuple[int, Grade]] = []  # (pair id, grade) of the judgments to create
    changed: dict[int, list[int]] = {}  # grade id -> ids of the judgments that take it
    touched: list[int] = []
    revisions: list[tuple] = []
    for q in qrels:
        pid = pair_ids[(qmap[q.qid], dmap[q.docid])]
        grade = grades[q.label]
        j = current.get(pid)
        if j is None:
            new.append((pid, grade))
            continue
        jid, grade_id, value, unsure, tentative, note = j
        if not unsure and grade_id == grade.id:
            summary.unchanged += 1
        elif pid in judged_in_app:
            summary.kept += 1
        else:
            revisions.append(revision(jid, grade.value, value, unsure, tentative) + (note, note, 0.0))
            changed.setdefault(grade.id, []).append(jid)
            touched.append(pid)
    _insert_rows(
        Judgment,
        ["pair", "annotator", "grade", "unsure", "tentative_grade", "note", "seconds_spent"]
        + ["created_at", "updated_at"],
        ((pid, source.pk, grade.id, False, None, "", 0.0, now, now) for pid, grade in new),
        progress=progress,
    )
    if len(new) > 50_000 and connection.vendor == "postgresql":
        # Statistics for what this transaction just wrote (as autovacuum would after the commit): without
        # them the planner takes the million new rows for a handful and joins them in nested loops.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE judging_pair, judging_judgment, judging_document, judging_query")
    if new:
        ids = dict(mine.values_list("pair_id", "id").iterator(chunk_size=20000))
        revisions.extend(revision(ids[pid], grade.value) + ("", "", 0.0) for pid, grade in new)
        touched.extend(pid for pid, _ in new)
    # updated_at moves with the grade, so ?updated_since= finds the change. One UPDATE per grade.
    for grade_id, jids in changed.items():
        for start in range(0, len(jids), 10_000):
            Judgment.objects.filter(id__in=jids[start : start + 10_000]).update(
                grade_id=grade_id, unsure=False, tentative_grade=None, updated_at=stamp
            )
    _insert_rows(JudgmentRevision, revision_columns, revisions)
    if direct and fresh:
        labelled = {pair_ids[key] for key in fresh}
        touched = [pid for pid in touched if pid not in labelled]
        queries = sorted({q for q, _ in fresh})
        for start in range(0, len(queries), 10_000):
            Query.objects.filter(id__in=queries[start : start + 10_000]).update(labels_version=F("labels_version") + 1)
    labels_refresh(campaign=campaign, pair_ids=touched)
    summary.added, summary.updated = len(new), sum(map(len, changed.values()))
    return summary


def _pair_ids(campaign: Campaign) -> dict[tuple[int, int], int]:
    rows = Pair.objects.filter(campaign=campaign).values_list("query_id", "document_id", "id")
    return {(q, d): pid for q, d, pid in rows.iterator(chunk_size=20000)}


def _qrels_line(data: bytes, qrel) -> int | None:
    """The line of a parsed qrel, looked up only on the error path."""
    for number, line in enumerate(data.decode("utf-8-sig", errors="replace").splitlines(), start=1):
        cols = line.split()
        if len(cols) >= 4 and cols[0] == qrel.qid and cols[2] == qrel.docid:
            return number
    return None


# The importers by the kind of file, as the upload page, the API and the jobs name them.
IMPORTERS = {"topics": queries_import, "docs": documents_import, "run": run_import, "qrels": qrels_import}
