"""Imports of topics, query tags and documents."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import BinaryIO

from django.db import transaction
from django.utils.translation import gettext as _

from judging.imports import parse
from judging.imports.errors import FormatError
from judging.imports.service.summary import BATCH, ImportSummary, Progress, logged
from judging.imports.write import insert_rows
from judging.models import Campaign, Document, Query, QueryTag


@logged
@transaction.atomic
def queries_import(*, campaign: Campaign, data: bytes | BinaryIO, filename: str) -> ImportSummary:
    topics = parse.parse_topics(data, filename=filename)
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
        retagged = tags_replace(campaign=campaign, tags=tagged)
        # a topic whose only change is its tags counts as updated
        retagged -= {q.qid for q in new} | {q.qid for q in changed}
        summary.updated += len(retagged)
        summary.unchanged -= len(retagged)
    return summary


def tags_replace(*, campaign: Campaign, tags: Mapping[str, Sequence[str]]) -> set[str]:
    """Set the tags of the queries named in ``tags`` (qid -> tags); returns the qids whose tags changed."""
    ids = dict(Query.objects.filter(campaign=campaign, qid__in=list(tags)).values_list("qid", "id"))
    current: dict[int, set[str]] = {}
    for query_id, tag in QueryTag.objects.filter(query_id__in=list(ids.values())).values_list("query_id", "tag"):
        current.setdefault(query_id, set()).add(tag)
    changed: set[str] = set()
    add: list[QueryTag] = []
    remove: list[tuple[int, str]] = []
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


@logged
@transaction.atomic
def query_tags_import(*, campaign: Campaign, data: bytes | BinaryIO, filename: str) -> ImportSummary:
    """Replace the tags of the queries a ``qid<TAB>tag,tag`` file names (parse.parse_query_tags).

    Every qid must be a query of the campaign: a typo would otherwise tag nothing without a word.
    """
    rows = parse.parse_query_tags(data, filename=filename)
    known = set(Query.objects.filter(campaign=campaign, qid__in=[q for q, _ in rows]).values_list("qid", flat=True))
    for line, (qid, _tags) in enumerate(rows, 1):
        if qid not in known:
            # the data line number: parse_query_tags skipped blank lines and a header, so find it again
            lines = parse.decode_lines(data, filename=filename)
            lineno = next((i for i, text in enumerate(lines, 1) if text.split("\t")[0].strip() == qid), line)
            raise FormatError(
                _("unknown qid %(qid)s (import the topics first)") % {"qid": repr(qid[:60])},
                filename=filename,
                line=lineno,
                field="qid",
            )
    changed = tags_replace(campaign=campaign, tags=dict(rows))
    summary = ImportSummary(kind="query tags", filename=filename)
    summary.updated, summary.unchanged = len(changed), len(rows) - len(changed)
    return summary


@transaction.atomic
def query_tags_set(*, campaign: Campaign, qid: str, tags: Sequence[str]) -> bool:
    """A lead's edit of one query's tags (checked like an import's); returns whether they changed."""
    if not Query.objects.filter(campaign=campaign, qid=qid).exists():
        raise ValueError(_("unknown qid %(qid)s") % {"qid": repr(qid[:60])})
    clean = parse.tag_list(",".join(tags), "tags", 1, "tags")
    return bool(tags_replace(campaign=campaign, tags={qid: clean}))


@logged
@transaction.atomic
def documents_import(
    *, campaign: Campaign, data: bytes | BinaryIO, filename: str, progress: Progress = None
) -> ImportSummary:
    """Import documents (parse.parse_docs) from bytes or a file object: new ones added, changed ones updated.

    A file object is read a line at a time and written DOCUMENT_BATCH documents at a time, each batch compared
    with the stored documents of its docids: a collection of any size holds one batch in memory, never the file
    or the campaign's stored texts. The import is one transaction all the same: a bad line refuses it whole.
    """
    summary = ImportSummary(kind="documents", filename=filename)
    batch: list[parse.Doc] = []
    for doc in parse.iter_docs(data, filename=filename):
        batch.append(doc)
        if len(batch) == DOCUMENT_BATCH:
            _documents_write(campaign=campaign, docs=batch, summary=summary, progress=progress)
            batch = []
    if batch:
        _documents_write(campaign=campaign, docs=batch, summary=summary, progress=progress)
    return summary


DOCUMENT_BATCH = 400


def _documents_write(*, campaign: Campaign, docs: list[parse.Doc], summary: ImportSummary, progress: Progress) -> None:
    """Add or update one batch of documents, counting them in ``summary``."""
    existing = {
        row[0]: row
        for row in Document.objects.filter(campaign=campaign, docid__in=[d.docid for d in docs]).values_list(
            "docid", "id", "title", "text", "url", "is_stub", "attributes"
        )
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
    insert_rows(
        Document,
        ["campaign", "docid", "title", "text", "url", "is_stub", "attributes"],
        ((campaign.pk, d.docid, d.title, d.text, d.url, False, json.dumps(d.attributes or {})) for d in new),
    )
    Document.objects.bulk_update(changed, ["title", "text", "url", "is_stub", "attributes"], batch_size=BATCH)
    summary.added += len(new)
    summary.updated += len(changed)
    if progress:
        progress(len(docs))
