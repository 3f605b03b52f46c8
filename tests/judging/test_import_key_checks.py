"""PostgreSQL: a qrels import checks its rows' foreign keys set-wise (services.imports._key_checks) instead of by
one trigger per row, where the database role may; the checks it replaces still hold."""

from __future__ import annotations

import logging
import threading
from itertools import repeat

import pytest
from django.db import IntegrityError, connection, connections, transaction
from django.test import override_settings
from django.utils import timezone, translation

from judging.models import Document, Judgment, JudgmentRevision, Pair, Query
from judging.services import ImportConflict, campaign_create, documents_import, imports, qrels_import, queries_import

pytestmark = pytest.mark.postgres

QRELS = "".join(f"q{q} 0 d{q}-{d} {(q + d) % 3}\n" for q in range(4) for d in range(6))


@pytest.fixture
def postgres(db):
    if connection.vendor != "postgresql":
        pytest.skip("session_replication_role and the foreign-key triggers it skips are PostgreSQL's")


def replication_role() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW session_replication_role")
        return cursor.fetchone()[0]


def stored(campaign) -> tuple:
    """What an import left, by identifiers (row ids differ between two campaigns)."""
    pairs = sorted(
        Pair.objects.filter(campaign=campaign).values_list("query__qid", "document__docid", "label", "judgment_count")
    )
    judgments = sorted(
        Judgment.objects.filter(pair__campaign=campaign).values_list(
            "pair__query__qid", "pair__document__docid", "annotator__username", "grade__value", "unsure"
        )
    )
    revisions = sorted(
        JudgmentRevision.objects.filter(judgment__pair__campaign=campaign).values_list(
            "judgment__pair__document__docid", "on_behalf_of__username", "imported_from", "old_grade", "new_grade"
        )
    )
    stubs = (
        Query.objects.filter(campaign=campaign, is_stub=True).count(),
        Document.objects.filter(campaign=campaign, is_stub=True).count(),
    )
    return pairs, judgments, revisions, stubs


def test_set_wise_checks_store_what_per_row_checks_store(postgres, caplog):
    """The same file into two campaigns, once with the set-wise checks and once with PostgreSQL's own
    triggers: the same pairs, labels, judgments, revisions and stubs; only the first logs the set-wise path."""
    on, off = campaign_create(slug="set-wise"), campaign_create(slug="per-row")
    for c in (on, off):
        queries_import(campaign=c, data=b"q0\tknown query\n", filename="t.tsv")
        documents_import(campaign=c, data=b'{"docid": "d0-0", "text": "known document"}\n', filename="d.jsonl")
    with caplog.at_level(logging.INFO, logger="judging.services.imports"):
        qrels_import(campaign=on, data=QRELS.encode(), filename="old.qrels", annotator="trec-old")
        assert "foreign keys checked set-wise" in caplog.text
        caplog.clear()
        with override_settings(RELJUDGE_IMPORT_SET_CHECKS=False):
            qrels_import(campaign=off, data=QRELS.encode(), filename="old.qrels", annotator="trec-old")
        assert "set-wise" not in caplog.text
    assert stored(on) == stored(off)
    pairs, judgments, revisions, stubs = stored(on)
    assert len(pairs) == len(judgments) == len(revisions) == 24
    assert stubs == (3, 23)  # q0 and d0-0 were imported before: not stubs


def test_the_triggers_check_again_after_the_import_in_the_same_transaction(postgres):
    """The setting lasts only for the import's writes: a dangling reference written later in the same
    transaction is refused by PostgreSQL as always."""
    campaign = campaign_create(slug="after")
    with transaction.atomic():
        qrels_import(campaign=campaign, data=QRELS.encode(), filename="old.qrels", annotator="trec-old")
        assert replication_role() == "origin"
        pair = Pair.objects.filter(campaign=campaign).first()
        with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("UPDATE judging_pair SET document_id = %s WHERE id = %s", [2**40, pair.pk])
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    assert replication_role() == "origin"


def test_a_refused_import_leaves_the_triggers_on(postgres):
    """An import refused midway rolls back its savepoint, and the setting with it."""
    campaign = campaign_create(slug="refused")
    with transaction.atomic():
        with pytest.raises(ImportConflict), imports._key_checks(filename="old.qrels") as referenced:
            assert replication_role() == "replica"
            referenced.add(Query, [2**40])  # a row that does not exist: the hold refuses
        assert replication_role() == "origin"
        with transaction.atomic():
            try:
                with imports._key_checks(filename="old.qrels"):
                    raise ValueError("a crash inside the import")
            except ValueError:
                transaction.set_rollback(True)
        assert replication_role() == "origin"
        qrels_import(campaign=campaign, data=QRELS.encode(), filename="old.qrels", annotator="trec-old")
    assert replication_role() == "origin"


@pytest.mark.django_db(transaction=True)
def test_a_row_deleted_by_another_session_during_the_import_refuses_it(postgres, monkeypatch):
    """Another session deletes (and commits) a document the file refers to after the import read it and before
    it commits. PostgreSQL's trigger would have refused the commit; the set-wise check refuses the import with
    a message saying what happened, and nothing of the file is written."""
    campaign = campaign_create(slug="raced")
    documents_import(campaign=campaign, data=b'{"docid": "d1-1", "text": "about to go"}\n', filename="d.jsonl")
    doomed = Document.objects.get(campaign=campaign, docid="d1-1").pk
    hold = imports._Referenced.hold

    def delete_then_hold(self, *, filename):
        errors = []

        def delete():
            try:
                with connections["default"].cursor() as cursor:  # this thread's own connection, autocommit
                    cursor.execute("DELETE FROM judging_document WHERE id = %s", [doomed])
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)
            finally:
                connections.close_all()

        other = threading.Thread(target=delete)
        other.start()
        other.join(timeout=30)
        assert not other.is_alive() and not errors, errors
        hold(self, filename=filename)

    monkeypatch.setattr(imports._Referenced, "hold", delete_then_hold)
    with pytest.raises(ImportConflict) as refused, translation.override("en"):
        qrels_import(campaign=campaign, data=QRELS.encode(), filename="old.qrels", annotator="trec-old")
    assert refused.value.filename == "old.qrels"
    assert "1 of the documents this file refers to were deleted" in str(refused.value)
    assert not Pair.objects.filter(campaign=campaign).exists()
    assert not Judgment.objects.filter(pair__campaign=campaign).exists()
    assert not Document.objects.filter(campaign=campaign).exists()
    assert not Query.objects.filter(campaign=campaign).exists()


def test_a_role_without_the_privilege_keeps_the_triggers(postgres):
    """Turning the triggers off is for a superuser, or (PostgreSQL 15+) a role granted SET on the parameter;
    any other role imports with PostgreSQL's own per-row checks."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE ROLE reljudge_test_importer NOSUPERUSER")  # undone with the test's transaction
        cursor.execute("SET LOCAL ROLE reljudge_test_importer")
        assert not imports._set_checks_allowed()
        if connection.pg_version >= 150000:
            cursor.execute("RESET ROLE")
            cursor.execute("GRANT SET ON PARAMETER session_replication_role TO reljudge_test_importer")
            cursor.execute("SET LOCAL ROLE reljudge_test_importer")
            assert imports._set_checks_allowed()
        cursor.execute("RESET ROLE")
    assert imports._set_checks_allowed()
    with override_settings(RELJUDGE_IMPORT_SET_CHECKS=False):
        assert not imports._set_checks_allowed()


# The rows of a large import go to PostgreSQL as COPY text made by one %-format per row (imports._insert_columns):
# identifiers must arrive byte for byte, whatever they hold; the same on SQLite, where the rows take the plain path.

ODD = [("q%d", "doc\\with\\backslashes"), ("질의", "문서-%s-100%"), ("q\\N", "\\N"), ("ＮＦＫＣ", "e\u0301")]


@pytest.mark.parametrize("set_checks", [True, False])
def test_identifiers_with_copy_metacharacters_arrive_byte_for_byte(db, set_checks):
    """Backslashes, percent signs, \\N (COPY's NULL), Hangul and a decomposed accent, as qids and docids of new
    stubs, pairs, judgments and revisions."""
    campaign = campaign_create(slug="odd")
    data = "".join(f"{qid} 0 {docid} {i % 3}\n" for i, (qid, docid) in enumerate(ODD)).encode()
    with override_settings(RELJUDGE_IMPORT_SET_CHECKS=set_checks):
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
    ids = imports._reserve_ids(Pair, 2)
    imports._insert_columns(
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
