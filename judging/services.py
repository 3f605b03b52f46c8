"""Everything that writes: campaigns, imports, pooling, judgments and the labels derived from them."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from judging import formats
from judging.aggregation import aggregate_grades
from judging.models import (
    DEFAULT_SCALE,
    Adjudication,
    Assignment,
    Campaign,
    Document,
    Grade,
    Judgment,
    JudgmentRevision,
    Membership,
    Pair,
    Query,
    Ranking,
    System,
)

BATCH = 2000
Progress = Callable[[int], None] | None


class ImportError_(ValueError):
    """An import that cannot go ahead; the message says what and where. Nothing was written."""


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

    def lines(self) -> list[str]:
        out = [f"{self.filename}: {self.added} {self.kind} added, {self.updated} updated, {self.unchanged} unchanged"]
        if self.systems:
            out.append("systems: " + ", ".join(self.systems))
        if self.stub_queries or self.stub_documents:
            out.append(
                f"stubs created: {self.stub_queries} queries, {self.stub_documents} documents "
                "(import their topics/documents to fill them in)"
            )
        out.append(f"pairs added to the pool: {self.pairs_added}")
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
        }


# --------------------------------------------------------------------------- campaigns and members


def scale_from_values(values: Sequence[int]) -> list[dict]:
    """A scale for the given grade values, named like the default 0/1/2 scale where it can be."""
    values = sorted({int(v) for v in values})
    if not values:
        raise ValidationError("a grading scale needs at least one grade")
    if any(v < 0 or v > 100 for v in values):
        raise ValidationError("grades must be whole numbers from 0 to 100")
    if values == [0, 1, 2]:
        return [dict(g) for g in DEFAULT_SCALE]
    top = values[-1]
    scale = []
    for v in values:
        if v == 0:
            name = "Not relevant"
        elif v == top:
            name = "Highly relevant"
        else:
            name = f"Relevant (level {v})"
        scale.append({"value": v, "name": name, "description": ""})
    return scale


@transaction.atomic
def campaign_create(
    *,
    slug: str,
    name: str = "",
    scale: Sequence[dict] | None = None,
    pool_depth: int = 10,
    guidelines: str = "",
    description: str = "",
    redundancy: int = 1,
    created_by=None,
) -> Campaign:
    if Campaign.objects.filter(slug=slug).exists():
        raise ValidationError(f"a campaign with slug {slug!r} already exists")
    campaign = Campaign(
        slug=slug,
        name=name or slug,
        pool_depth=pool_depth,
        guidelines=guidelines,
        description=description,
        redundancy=redundancy,
        created_by=created_by,
    )
    campaign.full_clean()
    campaign.save()
    grades = [
        Grade(
            campaign=campaign,
            value=g["value"],
            name=g["name"],
            description=g.get("description", ""),
            examples=g.get("examples", ""),
        )
        for g in (scale if scale is not None else DEFAULT_SCALE)
    ]
    Grade.objects.bulk_create(grades)
    return campaign


def campaign_has_judgments(*, campaign: Campaign) -> bool:
    return Judgment.objects.filter(pair__campaign=campaign).exists()


@transaction.atomic
def campaign_scale_set(*, campaign: Campaign, scale: Sequence[dict]) -> None:
    """Replace the grading scale; refused once judging has started (labels would change meaning)."""
    new_values = sorted(int(g["value"]) for g in scale)
    if len(set(new_values)) != len(new_values):
        raise ValidationError("each grade value may appear only once")
    old_values = list(campaign.grades.values_list("value", flat=True))
    if new_values != sorted(old_values) and campaign_has_judgments(campaign=campaign):
        raise ValidationError("the grading scale is fixed once judging has started; names and descriptions can change")
    existing = {g.value: g for g in campaign.grades.all()}
    for g in scale:
        obj = existing.pop(int(g["value"]), None) or Grade(campaign=campaign, value=int(g["value"]))
        obj.name = g["name"]
        obj.description = g.get("description", "")
        obj.examples = g.get("examples", "")
        obj.save()
    for obj in existing.values():
        obj.delete()


def membership_add(*, campaign: Campaign, user, role: str) -> Membership:
    if role not in Membership.Role.values:
        raise ValidationError(f"unknown role {role!r}; expected annotator or lead")
    membership, created = Membership.objects.get_or_create(campaign=campaign, user=user, defaults={"role": role})
    if not created and membership.role != role:
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


def user_role(*, campaign: Campaign, user) -> str | None:
    """'lead', 'annotator' or None. Superusers are leads everywhere."""
    if not user.is_authenticated:
        return None
    if user.is_superuser:
        return Membership.Role.LEAD
    return Membership.objects.filter(campaign=campaign, user=user).values_list("role", flat=True).first()


# --------------------------------------------------------------------------- imports


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
            ["campaign", "docid", "title", "text", "url", "is_stub"],
            ((campaign.pk, d, "", "", "", True) for d in new_d),
        )
        dmap = _existing_ids(Document, campaign, "docid")
    return qmap, dmap, len(new_q), len(new_d)


@transaction.atomic
def topics_import(*, campaign: Campaign, data: bytes, filename: str) -> ImportSummary:
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
    return summary


@transaction.atomic
def docs_import(*, campaign: Campaign, data: bytes, filename: str, progress: Progress = None) -> ImportSummary:
    docs = formats.parse_docs(data, filename=filename)
    summary = ImportSummary(kind="documents", filename=filename)
    existing = {
        d[0]: d
        for d in Document.objects.filter(campaign=campaign)
        .values_list("docid", "id", "title", "text", "url", "is_stub")
        .iterator(chunk_size=20000)
    }
    new, changed = [], []
    for d in docs:
        row = existing.get(d.docid)
        if row is None:
            new.append(Document(campaign=campaign, docid=d.docid, title=d.title, text=d.text, url=d.url))
        elif row[2:] != (d.title, d.text, d.url, False):
            changed.append(Document(id=row[1], docid=d.docid, title=d.title, text=d.text, url=d.url, is_stub=False))
        else:
            summary.unchanged += 1
    _insert_rows(
        Document,
        ["campaign", "docid", "title", "text", "url", "is_stub"],
        ((campaign.pk, d.docid, d.title, d.text, d.url, False) for d in new),
        progress=progress,
    )
    Document.objects.bulk_update(changed, ["title", "text", "url", "is_stub"], batch_size=BATCH)
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
    runs = formats.parse_run(data, filename=filename)
    if not runs:
        raise formats.FormatError("empty file: no ranked documents", filename=filename)
    if system_name and len(runs) > 1:
        raise formats.FormatError(
            f"the file holds {len(runs)} runs (tags {', '.join(sorted(runs))}); import them without --system "
            "to create one system per tag, or split the file",
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
                raise ImportError_(
                    f"{filename}: system {name!r} already has a different run in campaign {campaign.slug!r}; "
                    "pass --replace (or replace=true) to overwrite it"
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
    existing = {
        (q, d): (pid, pooled)
        for q, d, pid, pooled in Pair.objects.filter(campaign=campaign)
        .values_list("query_id", "document_id", "id", "pooled")
        .iterator(chunk_size=20000)
    }
    now = timezone.now()
    added = _insert_rows(
        Pair,
        ["campaign", "query", "document", "pooled", "adjudicated", "judgment_count", "created_at"],
        ((campaign.pk, q, d, True, False, 0, now) for (q, d) in sorted(wanted - existing.keys())),
    )
    # Pairs that only imported qrels had created now enter the pool too.
    promote = [existing[k][0] for k in wanted if k in existing and not existing[k][1]]
    for start in range(0, len(promote), BATCH):
        Pair.objects.filter(id__in=promote[start : start + BATCH]).update(pooled=True)
    return added + len(promote)


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


@transaction.atomic
def qrels_import(
    *, campaign: Campaign, data: bytes, filename: str, annotator, progress: Progress = None
) -> ImportSummary:
    """Import existing labels as one annotator's confident judgments (history kept, labels refreshed)."""
    qrels = formats.parse_qrels(data, filename=filename)
    if not qrels:
        raise formats.FormatError("empty file: no labels", filename=filename)
    grades = {g.value: g for g in campaign.grades.all()}
    bad = next((q for q in qrels if q.label not in grades), None)
    if bad is not None:
        raise formats.FormatError(
            f"label {bad.label} is not on campaign {campaign.slug!r}'s scale ({', '.join(map(str, sorted(grades)))})",
            filename=filename,
            line=_qrels_line(data, bad),
            field="label",
        )
    summary = ImportSummary(kind="judgments", filename=filename)
    qmap, dmap, summary.stub_queries, summary.stub_documents = _stubs_create(
        campaign=campaign, qids={q.qid for q in qrels}, docids={q.docid for q in qrels}
    )
    keys = {(qmap[q.qid], dmap[q.docid]) for q in qrels}
    existing_pairs = _pair_ids(campaign)
    now = timezone.now()
    _insert_rows(
        Pair,
        ["campaign", "query", "document", "pooled", "adjudicated", "judgment_count", "created_at"],
        ((campaign.pk, q, d, False, False, 0, now) for q, d in sorted(keys - existing_pairs.keys())),
    )
    summary.pairs_added = 0  # qrels-only pairs are kept for scoring but are not pooled for judging
    pair_ids = _pair_ids(campaign)
    current = {
        j.pair_id: j
        for j in Judgment.objects.filter(pair__campaign=campaign, annotator=annotator).select_related(
            "grade", "tentative_grade"
        )
    }
    new, changed, revisions = [], [], []
    for q in qrels:
        pid = pair_ids[(qmap[q.qid], dmap[q.docid])]
        grade = grades[q.label]
        j = current.get(pid)
        if j is None:
            new.append(Judgment(pair_id=pid, annotator=annotator, grade=grade, unsure=False))
        elif j.unsure or j.grade_id != grade.id:
            revisions.append(
                JudgmentRevision(
                    judgment=j,
                    changed_by=annotator,
                    old_grade=j.grade.value if j.grade else None,
                    new_grade=grade.value,
                    old_unsure=j.unsure,
                    new_unsure=False,
                    old_tentative_grade=j.tentative_grade.value if j.tentative_grade else None,
                    old_note=j.note,
                    new_note=j.note,
                )
            )
            j.grade, j.unsure, j.tentative_grade = grade, False, None
            changed.append(j)
        else:
            summary.unchanged += 1
    for start in range(0, len(new), BATCH):
        chunk = new[start : start + BATCH]
        Judgment.objects.bulk_create(chunk)
        if progress:
            progress(len(chunk))
    if new and new[0].pk is None:  # backends that cannot return ids from bulk inserts
        ids = dict(Judgment.objects.filter(pair__campaign=campaign, annotator=annotator).values_list("pair_id", "id"))
        for j in new:
            j.pk = ids[j.pair_id]
    revisions.extend(
        JudgmentRevision(judgment=j, changed_by=annotator, new_grade=j.grade.value, new_unsure=False) for j in new
    )
    Judgment.objects.bulk_update(changed, ["grade", "unsure", "tentative_grade", "updated_at"], batch_size=BATCH)
    JudgmentRevision.objects.bulk_create(revisions, batch_size=BATCH)
    touched = [j.pair_id for j in new] + [j.pair_id for j in changed]
    labels_refresh(campaign=campaign, pair_ids=touched)
    summary.added, summary.updated = len(new), len(changed)
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


# --------------------------------------------------------------------------- judgments and labels


def labels_refresh(*, campaign: Campaign, pair_ids: Sequence[int]) -> int:
    """Recompute the stored label and judgment count of these pairs and bump the labels version of their
    queries. Callers pass only pairs whose judgments changed: any change can move a label under some
    aggregation policy, so the leaderboard rescores those queries. Returns how many stored labels changed.
    Call inside the transaction that changed the judgments."""
    if not len(pair_ids):
        return 0
    changed = 0
    pair_ids = sorted(set(pair_ids))
    # Read the policy now, under the callers' pair locks, not from a campaign object loaded earlier:
    # a lead may just have switched it (campaign_policy_set).
    policy = Campaign.objects.filter(pk=campaign.pk).values_list("aggregation", flat=True).get()
    for start in range(0, len(pair_ids), 5000):
        chunk = pair_ids[start : start + 5000]
        rows = list(
            Judgment.objects.filter(pair_id__in=chunk, unsure=False).order_by().values_list("pair_id", "grade__value")
        )
        counts: dict[int, int] = {}
        for pid in Judgment.objects.filter(pair_id__in=chunk).order_by().values_list("pair_id", flat=True):
            counts[pid] = counts.get(pid, 0) + 1
        keys, labels = aggregate_grades(
            np.array([r[0] for r in rows], dtype=np.int64),
            np.array([r[1] for r in rows], dtype=np.int64),
            policy=policy,
        )
        new_label = dict(zip(keys.tolist(), labels.tolist(), strict=True))
        new_label.update(
            dict(Adjudication.objects.filter(pair_id__in=chunk).order_by().values_list("pair_id", "grade__value"))
        )
        pairs = list(
            Pair.objects.filter(id__in=chunk)
            .order_by()
            .only("id", "query_id", "label", "judgment_count", "adjudicated")
        )
        dirty = []
        adjudicated = set(Adjudication.objects.filter(pair_id__in=chunk).order_by().values_list("pair_id", flat=True))
        for p in pairs:
            label, count, adj = new_label.get(p.id), counts.get(p.id, 0), p.id in adjudicated
            if (p.label, p.judgment_count, p.adjudicated) != (label, count, adj):
                changed += p.label != label
                p.label, p.judgment_count, p.adjudicated = label, count, adj
                dirty.append(p)
        # Few distinct (label, count, adjudicated) values: one UPDATE per value beats bulk_update's
        # per-row CASE expressions (which made a 150k-label qrels import spend 70% of its time here).
        by_value: dict[tuple, list[int]] = {}
        for p in dirty:
            by_value.setdefault((p.label, p.judgment_count, p.adjudicated), []).append(p.id)
        for (label, count, adj), ids in by_value.items():
            Pair.objects.filter(id__in=ids).update(label=label, judgment_count=count, adjudicated=adj)
        queries = sorted({p.query_id for p in pairs})
        Query.objects.filter(id__in=queries).update(labels_version=F("labels_version") + 1)
    return changed


def _grade_of(campaign: Campaign, value: int | None, what: str) -> Grade | None:
    if value is None:
        return None
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise ValidationError({what: f"{what} must be a whole number, not {value!r}"}) from None
    grade = Grade.objects.filter(campaign=campaign, value=value).first()
    if grade is None:
        allowed = ", ".join(str(v) for v in campaign.grades.values_list("value", flat=True))
        raise ValidationError({what: f"{value} is not on this campaign's scale ({allowed})"})
    return grade


def judgment_record(
    *,
    pair: Pair,
    annotator,
    grade: int | None = None,
    unsure: bool = False,
    tentative_grade: int | None = None,
    note: str = "",
    seconds_spent: float = 0.0,
) -> tuple[Judgment, bool]:
    """Record or change ``annotator``'s judgment of ``pair``; returns (judgment, changed).

    A confident judgment needs a grade on the campaign's scale. An unsure one has no grade but may carry
    a tentative grade (a ``grade`` sent with ``unsure`` is taken as the tentative grade). Recording the
    same values again (a double key press, a retried request) changes nothing and adds no revision.
    Every change is kept as a revision, and the pair's label is refreshed in the same transaction.
    """
    campaign = pair.campaign
    if user_role(campaign=campaign, user=annotator) is None:
        raise PermissionDenied("you are not a member of this campaign")
    if unsure and grade is not None and tentative_grade is None:
        grade, tentative_grade = None, grade
    if not unsure and grade is None:
        raise ValidationError({"grade": "choose a grade, or mark the pair unsure"})
    if not unsure and tentative_grade is not None:
        raise ValidationError({"tentative_grade": "a tentative grade goes only with unsure"})
    note = (note or "").strip()
    if len(note) > 5000:
        raise ValidationError({"note": "a note can be at most 5,000 characters"})
    try:
        seconds_spent = max(0.0, min(float(seconds_spent or 0), 24 * 3600.0))
    except (TypeError, ValueError):
        raise ValidationError({"seconds_spent": "seconds_spent must be a number"}) from None
    grade_obj = _grade_of(campaign, grade, "grade")
    tentative_obj = _grade_of(campaign, tentative_grade, "tentative_grade")

    for attempt in range(3):
        try:
            with transaction.atomic():
                # Lock the pair first: every writer of this pair's judgments and label queues here, so
                # the label is recomputed from a consistent set and no revision is lost.
                Pair.objects.select_for_update().filter(id=pair.id).order_by().values_list("id", flat=True).get()
                judgment = (
                    Judgment.objects.select_for_update(of=("self",))
                    .select_related("grade", "tentative_grade")
                    .filter(pair=pair, annotator=annotator)
                    .order_by()
                    .first()
                )
                if judgment is None:
                    judgment = Judgment.objects.create(
                        pair=pair,
                        annotator=annotator,
                        grade=grade_obj,
                        unsure=unsure,
                        tentative_grade=tentative_obj,
                        note=note,
                        seconds_spent=seconds_spent,
                    )
                    JudgmentRevision.objects.create(
                        judgment=judgment,
                        changed_by=annotator,
                        new_grade=grade_obj.value if grade_obj else None,
                        new_unsure=unsure,
                        new_tentative_grade=tentative_obj.value if tentative_obj else None,
                        new_note=note,
                        seconds_spent=seconds_spent,
                    )
                else:
                    old = (judgment.grade_id, judgment.unsure, judgment.tentative_grade_id, judgment.note)
                    new = (
                        grade_obj.id if grade_obj else None,
                        unsure,
                        tentative_obj.id if tentative_obj else None,
                        note,
                    )
                    if old == new:
                        return judgment, False
                    JudgmentRevision.objects.create(
                        judgment=judgment,
                        changed_by=annotator,
                        old_grade=judgment.grade.value if judgment.grade else None,
                        new_grade=grade_obj.value if grade_obj else None,
                        old_unsure=judgment.unsure,
                        new_unsure=unsure,
                        old_tentative_grade=judgment.tentative_grade.value if judgment.tentative_grade else None,
                        new_tentative_grade=tentative_obj.value if tentative_obj else None,
                        old_note=judgment.note,
                        new_note=note,
                        seconds_spent=seconds_spent,
                    )
                    judgment.grade, judgment.unsure, judgment.tentative_grade = grade_obj, unsure, tentative_obj
                    judgment.note = note
                    judgment.seconds_spent += seconds_spent
                    judgment.save()
                # The pair is judged now: the annotator's hold on it must not count twice toward redundancy.
                Assignment.objects.filter(annotator=annotator, pair=pair).delete()
                labels_refresh(campaign=campaign, pair_ids=[pair.id])
                return judgment, True
        except IntegrityError:
            # Only reachable where the pair lock is not honoured (SQLite has no row locks but serializes
            # writers); a concurrent first judgment by the same annotator won the insert: retry as an update.
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


@transaction.atomic
def adjudication_set(*, pair: Pair, lead, grade: int, note: str = "") -> Adjudication:
    """A lead decides a pair's label; it wins over the annotators' judgments until removed."""
    if user_role(campaign=pair.campaign, user=lead) != Membership.Role.LEAD:
        raise PermissionDenied("only a lead of this campaign can adjudicate")
    grade_obj = _grade_of(pair.campaign, grade, "grade")
    adjudication, _ = Adjudication.objects.update_or_create(
        pair=pair, defaults={"grade": grade_obj, "decided_by": lead, "note": (note or "").strip()}
    )
    labels_refresh(campaign=pair.campaign, pair_ids=[pair.id])
    return adjudication


def user_get(*, username: str):
    User = get_user_model()
    try:
        return User.objects.get(username=username)
    except User.DoesNotExist:
        raise ValidationError(
            f"no user named {username!r}; create it first (manage.py createsuperuser or the admin)"
        ) from None


# --- judging UI

CAMPAIGN_SETTINGS = (
    "name",
    "description",
    "guidelines",
    "pool_depth",
    "redundancy",
    "aggregation",
    "leaderboard_visible_to_annotators",
)


@transaction.atomic
def campaign_update(*, campaign: Campaign, **values) -> int:
    """Change a campaign's settings (a lead's edit page); returns how many pairs joined the pool.

    A deeper pool adds the runs' next documents to it; a shallower one keeps the pairs already pooled,
    since they may have judgments. A new aggregation policy recomputes every label.
    """
    unknown = set(values) - set(CAMPAIGN_SETTINGS)
    if unknown:
        raise ValidationError(f"unknown campaign settings: {', '.join(sorted(unknown))}")
    old_depth, old_policy = campaign.pool_depth, campaign.aggregation
    for name, value in values.items():
        setattr(campaign, name, value)
    campaign.full_clean()
    campaign.save()
    added = pool_build(campaign=campaign) if campaign.pool_depth > old_depth else 0
    if campaign.aggregation != old_policy:
        # The pair locks first, as judgment_record and campaign_policy_set take them: a judgment being
        # recorded now is aggregated under the new policy, never under a mix of the two.
        judged = list(
            Pair.objects.select_for_update()
            .filter(campaign=campaign, judgment_count__gt=0)
            .order_by("id")
            .values_list("id", flat=True)
        )
        labels_refresh(campaign=campaign, pair_ids=judged)
    return added


def membership_remove(*, campaign: Campaign, user) -> None:
    """Take a user off a campaign. Their judgments stay: they are part of the labels and the history."""
    Membership.objects.filter(campaign=campaign, user=user).delete()


# --- API


@transaction.atomic
def campaign_create_led(
    *,
    lead,
    slug: str,
    scale: Sequence[dict] | None = None,
    name: str = "",
    pool_depth: int = 10,
    guidelines: str = "",
    description: str = "",
    redundancy: int = 1,
    **settings,
) -> Campaign:
    """Create a campaign for ``lead`` (a script's POST /api/campaigns/): the creator becomes its first lead.

    ``settings`` are the other CAMPAIGN_SETTINGS (aggregation, leaderboard visibility)."""
    campaign = campaign_create(
        slug=slug,
        name=name,
        scale=scale,
        pool_depth=pool_depth,
        guidelines=guidelines,
        description=description,
        redundancy=redundancy,
        created_by=lead,
    )
    if settings:
        campaign_update(campaign=campaign, **settings)
    membership_add(campaign=campaign, user=lead, role=Membership.Role.LEAD)
    return campaign


@transaction.atomic
def campaign_edit(*, campaign: Campaign, scale: Sequence[dict] | None = None, **settings) -> int:
    """Change settings and, optionally, the grading scale in one transaction; returns pairs added to the pool.

    The scale's values are fixed once anything refers to its grades (a judgment or an adjudication);
    names and descriptions can always change."""
    added = campaign_update(campaign=campaign, **settings) if settings else 0
    if scale is not None:
        old_values = sorted(campaign.grades.values_list("value", flat=True))
        new_values = sorted(int(g["value"]) for g in scale)
        if new_values != old_values and Adjudication.objects.filter(pair__campaign=campaign).exists():
            raise ValidationError({"scale": "the grading scale is fixed once pairs have been adjudicated"})
        try:
            campaign_scale_set(campaign=campaign, scale=scale)
        except ValidationError as exc:
            raise ValidationError({"scale": exc.messages}) from None
    return added


# --- review


def _lead_required(*, campaign: Campaign, user, what: str) -> None:
    if user_role(campaign=campaign, user=user) != Membership.Role.LEAD:
        raise PermissionDenied(f"only a lead of this campaign can {what}")


@transaction.atomic
def adjudication_remove(*, pair: Pair, lead) -> bool:
    """Withdraw a lead's decision on a pair: its label goes back to the aggregated judgments (and the pair
    back to the review queue if it is still unsure or disputed). Returns whether there was a decision."""
    _lead_required(campaign=pair.campaign, user=lead, what="withdraw an adjudication")
    # Same lock as judgment_record: the label is recomputed from a consistent set of judgments.
    Pair.objects.select_for_update().filter(id=pair.id).order_by().values_list("id", flat=True).get()
    deleted, _ = Adjudication.objects.filter(pair=pair).delete()
    if deleted:
        labels_refresh(campaign=pair.campaign, pair_ids=[pair.id])
    return bool(deleted)


def gold_label_set(*, pair: Pair, lead, grade: int | None) -> Pair:
    """Give a pair a gold label (a grade on the campaign's scale), or take it away with ``grade=None``.

    Gold labels measure each annotator's accuracy; they are not labels the scorer uses and never change
    Pair.label (a lead who wants the gold grade scored adjudicates the pair)."""
    _lead_required(campaign=pair.campaign, user=lead, what="set gold labels")
    grade_obj = _grade_of(pair.campaign, grade, "grade")
    value = grade_obj.value if grade_obj is not None else None
    Pair.objects.filter(id=pair.id).update(gold_label=value)
    pair.gold_label = value
    return pair


@transaction.atomic
def campaign_policy_set(*, campaign: Campaign, lead, policy: str) -> int:
    """Switch the campaign's aggregation policy and recompute every judged pair's label under it, in one
    transaction (the leaderboard never scores a mix of policies). Returns how many labels changed."""
    _lead_required(campaign=campaign, user=lead, what="change the aggregation policy")
    if policy not in Campaign.Aggregation.values:
        raise ValidationError(
            {
                "policy": f"unknown aggregation policy {policy!r}; expected one of "
                f"{', '.join(Campaign.Aggregation.values)}"
            }
        )
    # Lock the campaign row: two leads switching at once are applied one after the other.
    locked = Campaign.objects.select_for_update().only("id", "aggregation").get(id=campaign.id)
    campaign.aggregation = policy
    if locked.aggregation == policy:
        return 0
    Campaign.objects.filter(id=campaign.id).update(aggregation=policy)
    # Take every judged pair's lock, as judgment_record does, before reading any judgment: a judgment
    # being recorded now finishes first and is aggregated here, and one recorded later waits and then
    # reads the new policy (labels_refresh reads it from the database).
    judged = list(
        Pair.objects.select_for_update()
        .filter(campaign=campaign, judgment_count__gt=0)
        .order_by("id")
        .values_list("id", flat=True)
    )
    return labels_refresh(campaign=campaign, pair_ids=judged)


# --- queue

ASSIGNMENT_MINUTES = 15


def pair_assign(*, campaign: Campaign, annotator, current_query_id: int | None = None, exclude=()):
    """Hand ``annotator`` the next pair of their queue and hold it for them (see Assignment).

    The choice (selectors.pair_next) is re-checked under the pair's row lock before the pair is held,
    so two annotators asking at the same moment are never both given the last open slot of a pair
    (redundancy); the loser of the race gets the next candidate. Returns selectors.NextPair.
    """
    from judging import selectors

    passed: list[int] = []
    for _ in range(10):
        found = selectors.pair_next(
            campaign=campaign,
            annotator=annotator,
            current_query_id=current_query_id,
            exclude=[*exclude, *passed],
        )
        if found.pair is None:
            Assignment.objects.filter(campaign=campaign, annotator=annotator).delete()
            return found
        with transaction.atomic():
            Pair.objects.select_for_update().filter(id=found.pair.id).order_by().values_list("id").get()
            if selectors.pair_is_open(campaign=campaign, annotator_id=annotator.id, pair_id=found.pair.id):
                Assignment.objects.update_or_create(
                    campaign=campaign,
                    annotator=annotator,
                    defaults={"pair": found.pair, "expires_at": timezone.now() + timedelta(minutes=ASSIGNMENT_MINUTES)},
                )
                return found
        passed.append(found.pair.id)
    return selectors.NextPair(None)
