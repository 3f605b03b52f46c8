"""A qrels import's rows keep every foreign key PostgreSQL and SQLite check: a row the file refers to that another
session deletes during the import refuses it with a clear message and nothing written; identifiers reach the
database byte for byte whichever way the rows are sent."""

from __future__ import annotations

import threading
from itertools import repeat

import pytest
from django.db import IntegrityError, connection, connections, transaction
from django.utils import timezone, translation

from judging.imports import write
from judging.imports.service import qrels
from judging.models import Document, Judgment, JudgmentRevision, Pair, Query
from judging.services import ImportConflict, campaign_create, documents_import, qrels_import, queries_import

QRELS = "".join(f"q{q} 0 d{q}-{d} {(q + d) % 3}\n" for q in range(4) for d in range(6))


def deleted_by_another_session(sql: str, params: list) -> None:
    """Run one statement on another connection, committed before this returns (as another request would)."""
    errors = []

    def run():
        try:
            with connections["default"].cursor() as cursor:  # this thread's own connection, autocommit
                cursor.execute(sql, params)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    other = threading.Thread(target=run)
    other.start()
    other.join(timeout=30)
    assert not other.is_alive() and not errors, errors


@pytest.mark.django_db(transaction=True)
def test_a_document_deleted_by_another_session_during_the_import_refuses_it(monkeypatch):
    """Another session deletes (and commits) a document the file refers to after the import read it and before
    its pairs are written. The database's own foreign-key check finds the pair pointing at nothing; the import
    answers a conflict naming what happened (not the database's text at the commit), and nothing of the file is
    written: no stub, pair, judgment, revision or source account's judgment."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite imports hold the database's write lock from their start: no other session can delete")
    campaign = campaign_create(slug="raced")
    queries_import(campaign=campaign, data=b"q1\tknown query\n", filename="t.tsv")
    documents_import(campaign=campaign, data=b'{"docid": "d1-1", "text": "about to go"}\n', filename="d.jsonl")
    doomed = Document.objects.get(campaign=campaign, docid="d1-1").pk
    insert = qrels.pairs_insert

    def delete_then_insert(**kwargs):
        deleted_by_another_session("DELETE FROM judging_document WHERE id = %s", [doomed])
        return insert(**kwargs)

    monkeypatch.setattr(qrels, "pairs_insert", delete_then_insert)
    with pytest.raises(ImportConflict) as refused, translation.override("en"):
        qrels_import(campaign=campaign, data=QRELS.encode(), filename="old.qrels", annotator="trec-old")
    assert refused.value.filename == "old.qrels"
    assert refused.value.status == 409
    assert str(refused.value) == (
        "old.qrels: some documents this file refers to were deleted while it was being imported: import the file again"
    )
    assert not Pair.objects.filter(campaign=campaign).exists()
    assert not Judgment.objects.filter(pair__campaign=campaign).exists()
    assert not JudgmentRevision.objects.filter(judgment__pair__campaign=campaign).exists()
    assert list(Query.objects.filter(campaign=campaign).values_list("qid", flat=True)) == ["q1"]  # no stubs
    assert not Document.objects.filter(campaign=campaign).exists()


@pytest.mark.django_db(transaction=True)
def test_a_query_deleted_during_an_import_inside_a_larger_transaction_refuses_only_the_import(monkeypatch):
    """The import is a savepoint of its caller's transaction: the refusal undoes the import alone, and the
    caller's own writes before it still commit."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite imports hold the database's write lock from their start: no other session can delete")
    campaign = campaign_create(slug="nested")
    queries_import(campaign=campaign, data=b"q0\tabout to go\n", filename="t.tsv")
    doomed = Query.objects.get(campaign=campaign, qid="q0").pk
    insert = qrels.pairs_insert

    def delete_then_insert(**kwargs):
        deleted_by_another_session("DELETE FROM judging_query WHERE id = %s", [doomed])
        return insert(**kwargs)

    monkeypatch.setattr(qrels, "pairs_insert", delete_then_insert)
    with transaction.atomic():
        documents_import(campaign=campaign, data=b'{"docid": "kept", "text": "written first"}\n', filename="d.jsonl")
        with pytest.raises(ImportConflict, match="import the file again"):
            qrels_import(campaign=campaign, data=QRELS.encode(), filename="old.qrels", annotator="trec-old")
    assert list(Document.objects.filter(campaign=campaign).values_list("docid", flat=True)) == ["kept"]
    assert not Pair.objects.filter(campaign=campaign).exists()


def test_the_foreign_keys_stay_deferred_for_what_the_transaction_writes_after_an_import(db):
    """The import checks its own rows' keys before it returns; a dangling reference written later in the same
    transaction is still refused by the database."""
    campaign = campaign_create(slug="after")
    with transaction.atomic():
        qrels_import(campaign=campaign, data=QRELS.encode(), filename="old.qrels", annotator="trec-old")
        pair = Pair.objects.filter(campaign=campaign).first()
        with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("UPDATE judging_pair SET document_id = %s WHERE id = %s", [2**40, pair.pk])
            if connection.vendor == "postgresql":
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            else:
                cursor.execute("PRAGMA foreign_key_check")
                if cursor.fetchall():
                    raise IntegrityError("dangling reference")
    assert Pair.objects.filter(campaign=campaign).count() == 24


# The rows of a large import go to PostgreSQL as COPY text made by one %-format per row (imports.write.insert_columns):
# identifiers must arrive byte for byte, whatever they hold; the same on SQLite, where the rows take the plain path.

ODD = [("q%d", "doc\\with\\backslashes"), ("질의", "문서-%s-100%"), ("q\\N", "\\N"), ("ＮＦＫＣ", "e\u0301")]


def test_identifiers_with_copy_metacharacters_arrive_byte_for_byte(db):
    """Backslashes, percent signs, \\N (COPY's NULL), Hangul and a decomposed accent, as qids and docids of new
    stubs, pairs, judgments and revisions."""
    campaign = campaign_create(slug="odd")
    data = "".join(f"{qid} 0 {docid} {i % 3}\n" for i, (qid, docid) in enumerate(ODD)).encode()
    summary = qrels_import(campaign=campaign, data=data, filename="odd%s.qrels", annotator="trec-odd")
    assert summary.added == len(ODD)
    got = sorted(Pair.objects.filter(campaign=campaign).values_list("query__qid", "document__docid", "label"))
    assert got == sorted((qid, docid, i % 3) for i, (qid, docid) in enumerate(ODD))
    assert sorted(Query.objects.filter(campaign=campaign).values_list("qid", "text")) == sorted(
        (qid, qid) for qid, _ in ODD
    )
    assert set(JudgmentRevision.objects.filter(judgment__pair__campaign=campaign).values_list("imported_from")) == {
        ("odd%s.qrels",)
    }


def test_columns_with_a_null_among_their_values_take_the_row_path(db):
    """A column whose values mix numbers and NULL cannot be one %-conversion: the rows go one by one, stored
    the same."""
    campaign = campaign_create(slug="nulls")
    qrels_import(campaign=campaign, data=b"q1 0 d1 1\nq1 0 d2 2\n", filename="a.qrels", annotator="trec-a")
    query = Query.objects.get(campaign=campaign, qid="q1")
    documents = list(Document.objects.filter(campaign=campaign).order_by("docid").values_list("id", flat=True))
    fresh = Document.objects.bulk_create(
        [Document(campaign=campaign, docid=f"d{n}", text="", is_stub=True) for n in (3, 4)]
    )
    ids = write.reserve_ids(Pair, 2)
    write.insert_columns(
        Pair,
        ["id", "campaign", "query", "document", "pooled", "adjudicated", "judgment_count", "public_id", "label"]
        + ["created_at"],
        [
            ids,
            repeat(campaign.pk),
            repeat(query.pk),
            [d.pk for d in fresh],
            repeat(True),
            repeat(False),
            repeat(0),
            [10**12 + 1, 10**12 + 2],
            [2, None],
            repeat(connection.ops.adapt_datetimefield_value(timezone.now())),
        ],
    )
    labels = dict(Pair.objects.filter(id__in=ids).values_list("document__docid", "label"))
    assert labels == {"d3": 2, "d4": None}
    assert len(documents) == 2
