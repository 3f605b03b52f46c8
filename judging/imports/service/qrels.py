"""Imports of qrels: existing labels as the judgments of a named source, never over a person's own judgment."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import repeat
from typing import Any, BinaryIO, NamedTuple

import numpy as np
from django.contrib.auth import get_user_model
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from judging.access import lead_required, membership_role
from judging.imports import parse, write, write_postgres, write_sqlite
from judging.imports.errors import FormatError, ImportConflict
from judging.imports.service.pool import pair_ids, pairs_insert, stubs_create
from judging.imports.service.summary import ImportSummary, Progress, logged
from judging.imports.write import fetch, insert_columns, insert_rows, reserve_ids, roomy_cache
from judging.labels import labels_bump, labels_refresh
from judging.models import (
    Account,
    AnnotatorProfile,
    Campaign,
    Document,
    Grade,
    Judgment,
    JudgmentRevision,
    LabelSource,
    Pair,
    Query,
    User,
)
from judging.usernames import account_name_resolve


def _source_account(*, campaign: Campaign, name: str, imported_by: User | None, filename: str) -> tuple[Account, bool]:
    """The account imported labels are recorded under, and whether it was created now (see qrels_import)."""

    def refuse(message: str) -> FormatError:
        return FormatError(message, filename=filename, field="annotator")

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
    name, user = account_name_resolve(name, error=refuse)  # ALICE names alice; a look-alike is refused
    if user is None:
        user = Account.objects.create_user(username=name, password=None)  # no usable password
        user.is_active = False  # and no login of any kind, token included
        user.save(update_fields=["is_active"])
        LabelSource.objects.create(user=user, created_by=imported_by if isinstance(imported_by, Account) else None)
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


@logged
@transaction.atomic
def qrels_import(
    *,
    campaign: Campaign,
    data: bytes | BinaryIO,
    filename: str,
    annotator: User | str,
    imported_by: User | None = None,
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
    qids, docids, values = parse.parse_qrels_columns(data, filename=filename)
    if not qids:
        raise FormatError(_("empty file: no labels"), filename=filename)
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
        raise FormatError(
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
    with roomy_cache():
        _qrels_write(
            campaign=campaign,
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
        _references_check(filename=filename)
    return summary


def _references_check(*, filename: str) -> None:
    """Have the database check the foreign keys of the rows just written now, inside the import, instead of at
    the commit: a row the file refers to that another session deleted since the import read it (a document, a
    query) then refuses the import with a clear message, and its transaction or savepoint rolls back whole,
    instead of the commit failing with the database's own words wherever it happens."""
    try:
        write.foreign_keys_check(_WRITTEN)
    except IntegrityError as exc:
        table = write.missing_parent(exc)
        what = _referenced_name(table)
        raise ImportConflict(
            _("some %(what)s this file refers to were deleted while it was being imported: import the file again")
            % {"what": what},
            filename=filename,
        ) from None


# The tables a qrels import writes, whose foreign keys it has checked before it returns.
_WRITTEN = (Document, Query, Pair, Judgment, JudgmentRevision)


def _referenced_name(table: str | None) -> str:
    """What the rows of ``table`` are, in words ("documents"), for the refusal above."""
    for model in (Campaign, Document, Query, Pair, Judgment, Grade, get_user_model()):
        if model._meta.db_table == table:
            return str(model._meta.verbose_name_plural)
    return _("rows")


def _qrels_write(
    *,
    campaign: Campaign,
    qids: list[str],
    docids: list[str],
    label: np.ndarray,
    grades: dict[int, Grade],
    source: Account,
    by: int | None,
    filename: str,
    summary: ImportSummary,
    progress: Progress,
) -> None:
    """The writes of qrels_import, on whole columns: row i of every array is line i of the file.

    Nothing is read back that the import wrote: new rows take ids reserved before their insert
    (reserve_ids), so the pairs' and judgments' ids are known as they are written. Pairs and judgments go
    in in (query, pair) order, so each index grows near its end instead of being written all over. Three steps:
    the lines' pairs (:func:`_qrels_pairs`), the source's judgments the file changes (:func:`_qrels_updates`), the
    judgments it adds (:func:`_qrels_judgments_add`); then the labels of the pairs that moved are refreshed.
    """
    query, pair, fresh = _qrels_pairs(campaign=campaign, qids=qids, docids=docids, label=label, source=source)
    summary.stub_queries, summary.stub_documents = fresh.stub_queries, fresh.stub_documents
    summary.pairs_added = 0
    grade_ids = np.array([grades[value].id for value in sorted(grades)], dtype=np.int64)
    grade = grade_ids[np.searchsorted(np.array(sorted(grades), dtype=np.int64), label)]
    stamp = timezone.now()
    write = _QrelsWrite(
        campaign=campaign,
        source=source,
        by=by,
        name=filename[:255],
        stamp=stamp,
        now=connection.ops.adapt_datetimefield_value(stamp),  # as the database stores it, for raw rows
    )
    has, revisions, touched = _qrels_updates(write, pair=pair, grade=grade, label=label, summary=summary)
    new = np.flatnonzero(~has)
    new = new[np.argsort(pair[new], kind="stable")]
    _qrels_judgments_add(
        write, pair=pair, grade=grade, label=label, new=new, fresh=fresh, revisions=revisions, progress=progress
    )
    # Pairs created now with their label need no refresh; their queries' labels moved all the same.
    refresh = new[~fresh.mask[new]] if fresh.direct else new
    touched = np.concatenate([touched, pair[refresh]])
    if fresh.direct and fresh.mask.any():
        labels_bump(campaign_id=campaign.pk, query_ids=np.unique(query[fresh.mask]).tolist())
    labels_refresh(campaign=campaign, pair_ids=touched.tolist())
    summary.added = len(new)


class _Fresh(NamedTuple):
    """The pairs a qrels file created: which lines' pairs are new, whether the source's labels are the pairs'
    own (a person's or a source account's; a model judge's never are), and the stubs created for its ids."""

    mask: np.ndarray
    direct: bool
    stub_queries: int
    stub_documents: int


@dataclass(frozen=True)
class _QrelsWrite:
    """Who a qrels file's judgments are written as and when."""

    campaign: Campaign
    source: Account
    by: int | None
    name: str  # the file's name, as the revisions record it
    stamp: datetime.datetime
    now: Any  # ``stamp`` as the database stores it, for raw rows

    REVISION_COLUMNS = (
        "judgment",
        "changed_by",
        "on_behalf_of",
        "imported_from",
        "changed_at",
        *JudgmentRevision.CHANGE_FIELDS,
        "seconds_spent",
    )


def _qrels_pairs(
    *, campaign: Campaign, qids: list[str], docids: list[str], label: np.ndarray, source: Account
) -> tuple[np.ndarray, np.ndarray, _Fresh]:
    """Each line's query id and pair id: stubs for the queries and documents the campaign does not have, the
    existing pairs looked up, the others inserted (qrels-only pairs are kept for scoring but not pooled for
    judging; their one judgment is the label, stored with them when the source's labels are the pairs' own)."""
    count = len(qids)
    qmap, dmap, new_queries, new_documents = stubs_create(campaign=campaign, qids=qids, docids=docids)
    query = np.fromiter(map(qmap.__getitem__, qids), dtype=np.int64, count=count)
    document = np.fromiter(map(dmap.__getitem__, docids), dtype=np.int64, count=count)
    existing = pair_ids(campaign)
    if existing:
        keys = zip(query.tolist(), document.tolist(), strict=True)
        pair = np.fromiter(map(existing.get, keys, repeat(-1)), dtype=np.int64, count=count)
    else:
        pair = np.full(count, -1, dtype=np.int64)
    del existing
    fresh = pair < 0
    direct = source.pk not in AnnotatorProfile.model_user_ids()
    pair[fresh] = pairs_insert(
        campaign=campaign,
        query_ids=query[fresh],
        document_ids=document[fresh],
        pooled=False,
        labels=label[fresh] if direct else None,
    )
    return query, pair, _Fresh(fresh, direct, len(new_queries), len(new_documents))


def _qrels_updates(
    write: _QrelsWrite, *, pair: np.ndarray, grade: np.ndarray, label: np.ndarray, summary: ImportSummary
) -> tuple[np.ndarray, Iterable[tuple[Any, ...]], np.ndarray]:
    """The source's judgments on pairs that existed before: each is unchanged, the person's own (judged in the
    app: kept), or updated to the file's grade (one UPDATE per grade). Returns which lines had a judgment, the
    revisions of the updated ones (rows, written later) and their pairs."""
    count = len(pair)
    mine = Judgment.objects.filter(pair__campaign=write.campaign, annotator=write.source)
    current = fetch(
        mine.order_by("pair_id").values_list(
            "pair_id", "id", "grade_id", "grade__value", "unsure", "tentative_grade__value", "note"
        )
    )
    has = np.zeros(count, dtype=bool)
    revisions: Iterable[tuple[Any, ...]] = ()
    touched = np.empty(0, dtype=np.int64)
    if not current:
        return has, revisions, touched
    c_pair, c_id, c_grade, c_value, c_unsure, c_tentative, c_note = zip(*current, strict=True)
    del current
    pairs_had = np.array(c_pair, dtype=np.int64)
    at = np.searchsorted(pairs_had, pair).clip(0, len(pairs_had) - 1)
    has = pairs_had[at] == pair
    c_grade_ids = np.array([-1 if g is None else g for g in c_grade], dtype=np.int64)
    unchanged = has & ~np.array(c_unsure, dtype=bool)[at] & (c_grade_ids[at] == grade)
    rest = has & ~unchanged
    summary.unchanged = int(unchanged.sum())
    if not rest.any():
        return has, revisions, touched
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
    revisions = zip(
        judgment_ids,
        repeat(write.by),
        repeat(write.source.pk),
        repeat(write.name),
        repeat(write.now),
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
                grade_id=grade_id, unsure=False, tentative_grade=None, updated_at=write.stamp
            )
    return has, revisions, touched


def _qrels_judgments_add(
    write: _QrelsWrite,
    *,
    pair: np.ndarray,
    grade: np.ndarray,
    label: np.ndarray,
    new: np.ndarray,
    fresh: _Fresh,
    revisions: Iterable[tuple[Any, ...]],
    progress: Progress,
) -> None:
    """The source's new judgments (the lines ``new``, in pair order) and every revision: the updated judgments'
    ``revisions`` and one per new judgment."""
    source, now = write.source, write.now
    columns = list(_QrelsWrite.REVISION_COLUMNS)
    judgment_ids = reserve_ids(Judgment, len(new))
    # New pairs have the highest ids, so their judgments come last; on SQLite, where the new pairs' ids are one
    # range and so are the new judgments', SQLite makes those judgments from the pairs and their stored labels.
    in_range = len(new) - int(fresh.mask[new].sum()) if connection.vendor == "sqlite" and fresh.direct else len(new)
    if in_range < len(new) and not fresh.mask[new[in_range:]].all():
        in_range = len(new)
    insert_columns(
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
        write_sqlite.judgments_of_pairs(
            first=int(pair[new[in_range]]),
            last=int(pair[new[-1]]),
            first_id=judgment_ids[in_range],
            annotator=source.id,
            now=now,
        )
        if progress:
            progress(len(new) - in_range)
    if len(new) > 50_000 and connection.vendor == "postgresql":
        write_postgres.analyze(["judging_pair", "judging_judgment", "judging_document", "judging_query"])
    insert_rows(JudgmentRevision, columns, revisions)
    if connection.vendor == "sqlite" and judgment_ids:
        # The new judgments' ids are one range (reserve_ids): their revisions are made from them inside SQLite,
        # in one statement. Python rows would cost a statement step each (5 s per million, against 1 s).
        write_sqlite.revisions_of_range(
            first=judgment_ids[0], last=judgment_ids[-1], by=write.by, source=source.id, name=write.name, now=now
        )
    else:
        insert_columns(
            JudgmentRevision,
            columns,
            [
                judgment_ids,
                repeat(write.by),
                repeat(source.pk),
                repeat(write.name),
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


def _qrels_line(data: bytes | BinaryIO, qid: str, docid: str) -> int | None:
    """The line of a parsed qrel, looked up only on the error path."""
    text = parse.read_whole(data).decode("utf-8-sig", errors="replace")
    for number, line in enumerate(text.splitlines(), start=1):
        cols = line.split()
        if len(cols) >= 4 and cols[0] == qid and cols[2] == docid:
            return number
    return None
