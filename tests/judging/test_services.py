"""Imports, pooling, judgments, revisions and labels through the service layer."""

import logging
import re

import numpy as np
import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from judging.imports.errors import FormatError
from judging.models import Campaign, Document, Judgment, JudgmentRevision, Pair, Query, Ranking, System
from judging.selectors import system_rankings
from judging.services import (
    ImportConflict,
    adjudication_set,
    campaign_create,
    campaign_policy_set,
    campaign_update,
    documents_import,
    judgment_record,
    labels_refresh,
    pool_build,
    qrels_import,
    queries_import,
    run_import,
)
from tests.data import RUN_BM25, RUN_DENSE, TOPICS


def pooled(campaign):
    return set(Pair.objects.filter(campaign=campaign, pooled=True).values_list("query__qid", "document__docid"))


def test_queries_import_creates_and_is_idempotent(campaign):
    s1 = queries_import(campaign=campaign, data=TOPICS.encode(), filename="t.tsv")
    s2 = queries_import(campaign=campaign, data=TOPICS.encode(), filename="t.tsv")
    assert (s1.added, s2.added, s2.unchanged) == (2, 0, 2)
    q = Query.objects.get(campaign=campaign, qid="q1")
    assert (q.text, q.description) == ("wool knit sweater", "A warm sweater knitted from wool.")


def test_queries_import_fills_in_stub_query(campaign):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    assert Query.objects.get(qid="q1").is_stub
    s = queries_import(campaign=campaign, data=TOPICS.encode(), filename="t.tsv")
    q = Query.objects.get(qid="q1")
    assert (s.updated, q.is_stub, q.text) == (2, False, "wool knit sweater")


def test_documents_import_keeps_html_verbatim(campaign):
    data = b'{"docid": "x", "title": "<b>t</b>", "text": "<script>alert(1)</script>"}\n'
    documents_import(campaign=campaign, data=data, filename="d.jsonl")
    assert Document.objects.get(docid="x").text == "<script>alert(1)</script>"


def test_run_import_pools_top_depth_union_and_creates_stubs(campaign):
    s = run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    assert (s.stub_queries, s.stub_documents, s.pairs_added) == (2, 4, 4)
    assert pooled(campaign) == {("q1", "d1"), ("q1", "d3"), ("q2", "d4"), ("q2", "d2")}
    s = run_import(campaign=campaign, data=RUN_DENSE.encode(), filename="dense.run")
    # dense's top 2 of q1 adds d2; q2's d2, d4 are in the pool already: one pair however many systems
    assert s.pairs_added == 1
    assert ("q1", "d2") in pooled(campaign)
    assert Pair.objects.filter(campaign=campaign).count() == 5


def test_run_import_stores_trec_order(campaign):
    run = "q1 Q0 a 3 1.0 t\nq1 Q0 b 1 2.0 t\nq1 Q0 c 2 1.0 t\n"
    run_import(campaign=campaign, data=run.encode(), filename="r")
    (stored,) = system_rankings(system=System.objects.get())  # as the run download reads it back
    assert stored.docids == ["b", "c", "a"]  # score desc, ties docid desc
    np.testing.assert_array_equal(stored.scores, [2.0, 1.0, 1.0])


def test_run_import_same_file_twice_changes_nothing(campaign):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    before = (Pair.objects.count(), Ranking.objects.count(), Document.objects.count())
    s = run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    assert (s.added, s.pairs_added, s.stub_documents) == (0, 0, 0)
    assert (Pair.objects.count(), Ranking.objects.count(), Document.objects.count()) == before


def test_run_import_different_run_same_system_needs_replace(campaign):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    changed = RUN_BM25.replace("9.5", "1.5")
    with pytest.raises(ImportConflict, match="already has a different run"):
        run_import(campaign=campaign, data=changed.encode(), filename="bm25.run")
    run_import(campaign=campaign, data=changed.encode(), filename="bm25.run", replace=True)
    stored = next(r for r in system_rankings(system=System.objects.get(name="bm25")) if r.qid == "q1")
    assert stored.docids == ["d3", "d2", "d1"]


def test_run_import_system_option_names_system(campaign):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="x.run", system_name="baseline")
    assert list(System.objects.values_list("name", flat=True)) == ["baseline"]


def test_run_import_bad_line_writes_nothing(campaign):
    bad = RUN_BM25 + "q3 Q0 d9 1 notanumber bm25\n"
    with pytest.raises(FormatError) as exc:
        run_import(campaign=campaign, data=bad.encode(), filename="bad.run")
    assert "bad.run" in str(exc.value) and "line 6" in str(exc.value) and "score" in str(exc.value)
    assert (System.objects.count(), Query.objects.count(), Document.objects.count(), Pair.objects.count()) == (0,) * 4


def test_pool_never_touches_judgments_on_reimport_and_repool(campaign, annotator):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    pair = Pair.objects.get(query__qid="q1", document__docid="d1")
    judgment_record(pair=pair, annotator=annotator, grade=2)
    campaign.pool_depth = 3
    campaign.save()
    added = pool_build(campaign=campaign)
    assert added == 1  # q1's d2 at rank 3
    run_import(campaign=campaign, data=RUN_DENSE.encode(), filename="dense.run")
    assert Judgment.objects.get().grade.value == 2
    assert Pair.objects.get(pk=pair.pk).label == 2


def test_judgment_record_keeps_every_revision(campaign, annotator):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    pair = Pair.objects.get(query__qid="q1", document__docid="d1")
    judgment_record(pair=pair, annotator=annotator, grade=1, seconds_spent=3)
    _, changed = judgment_record(pair=pair, annotator=annotator, grade=1)  # double press
    assert not changed
    judgment_record(pair=pair, annotator=annotator, unsure=True, tentative_grade=2, note="jargon?")
    judgment_record(pair=pair, annotator=annotator, grade=0)
    revs = list(
        JudgmentRevision.objects.order_by("id").values_list(
            "old_grade", "new_grade", "new_unsure", "new_tentative_grade", "new_note"
        )
    )
    assert revs == [(None, 1, False, None, ""), (1, None, True, 2, "jargon?"), (None, 0, False, None, "")]
    assert Judgment.objects.count() == 1


def test_judgment_record_unsure_keeps_pair_unlabelled(campaign, annotator, lead):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    pair = Pair.objects.get(query__qid="q1", document__docid="d1")
    judgment_record(pair=pair, annotator=annotator, unsure=True, grade=2)  # grade taken as tentative
    pair.refresh_from_db()
    assert pair.label is None and pair.judgment_count == 1
    assert Judgment.objects.get().tentative_grade.value == 2
    judgment_record(pair=pair, annotator=lead, grade=1)
    pair.refresh_from_db()
    assert pair.label == 1


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"grade": 7}, "grade"),
        ({"grade": None}, "grade"),
        ({"grade": "x"}, "grade"),
        ({"unsure": True, "tentative_grade": 9}, "tentative_grade"),
    ],
)
def test_judgment_record_rejects_grade_off_scale(campaign, annotator, kwargs, field):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    pair = Pair.objects.first()
    with pytest.raises(ValidationError) as exc:
        judgment_record(pair=pair, annotator=annotator, **kwargs)
    assert field in exc.value.message_dict
    assert Judgment.objects.count() == 0


def test_judgment_record_refuses_non_member(campaign, make_user):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    with pytest.raises(PermissionDenied):
        judgment_record(pair=Pair.objects.first(), annotator=make_user("stranger"), grade=1)


def test_labels_median_ties_to_lower_and_bumps_query_version(campaign, annotator, lead, make_user):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    third = make_user("third")
    from judging.services import membership_add

    membership_add(campaign=campaign, user=third, role="annotator")
    pair = Pair.objects.get(query__qid="q1", document__docid="d1")
    v0 = pair.query.labels_version
    judgment_record(pair=pair, annotator=annotator, grade=2)
    judgment_record(pair=pair, annotator=lead, grade=1)
    pair.refresh_from_db()
    assert pair.label == 1  # median of (1, 2), ties to the lower grade
    judgment_record(pair=pair, annotator=third, grade=2)
    pair.refresh_from_db()
    assert pair.label == 2
    assert Query.objects.get(pk=pair.query_id).labels_version == v0 + 3
    other = Query.objects.get(campaign=campaign, qid="q2")
    assert other.labels_version == 0


def test_adjudication_wins_over_judgments(campaign, annotator, lead):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    pair = Pair.objects.get(query__qid="q1", document__docid="d1")
    judgment_record(pair=pair, annotator=annotator, grade=2)
    adjudication_set(pair=pair, lead=lead, grade=0, note="off topic")
    pair.refresh_from_db()
    assert (pair.label, pair.adjudicated) == (0, True)
    with pytest.raises(PermissionDenied):
        adjudication_set(pair=pair, lead=annotator, grade=2)


def test_qrels_import_labels_outside_pool_and_is_idempotent(campaign, annotator):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    qrels = "q1 0 d1 2\n# a comment\nq1 0 d2 1\nq1 0 zz 2\n"
    s = qrels_import(campaign=campaign, data=qrels.encode(), filename="q.qrels", annotator=annotator)
    assert (s.added, s.stub_documents) == (3, 1)
    outside = Pair.objects.get(query__qid="q1", document__docid="zz")
    assert (outside.pooled, outside.label) == (False, 2)
    s2 = qrels_import(campaign=campaign, data=qrels.encode(), filename="q.qrels", annotator=annotator)
    assert (s2.added, s2.updated, s2.unchanged) == (0, 0, 3)
    assert JudgmentRevision.objects.count() == 3


def test_qrels_import_label_off_scale_names_line_and_writes_nothing(campaign, annotator):
    qrels = "q1 0 d1 2\nq1 0 d2 5\n"
    with pytest.raises(FormatError) as exc:
        qrels_import(campaign=campaign, data=qrels.encode(), filename="q.qrels", annotator=annotator)
    assert "q.qrels, line 2, field 'label'" in str(exc.value)
    assert (Judgment.objects.count(), Pair.objects.count(), Query.objects.count()) == (0, 0, 0)


def test_qrels_import_change_is_a_revision(campaign, annotator):
    qrels_import(campaign=campaign, data=b"q1 0 d1 2\n", filename="a", annotator=annotator)
    s = qrels_import(campaign=campaign, data=b"q1 0 d1 0\n", filename="b", annotator=annotator)
    assert s.updated == 1
    assert list(JudgmentRevision.objects.order_by("id").values_list("old_grade", "new_grade")) == [(None, 2), (2, 0)]
    assert Pair.objects.get().label == 0


def test_labels_refresh_no_change_is_noop(campaign, annotator):
    qrels_import(campaign=campaign, data=b"q1 0 d1 2\n", filename="a", annotator=annotator)
    assert labels_refresh(campaign=campaign, pair_ids=list(Pair.objects.values_list("id", flat=True))) == 0


def test_imports_and_policy_switches_are_logged(campaign, lead, caplog):
    caplog.set_level(logging.INFO, logger="judging")
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    with pytest.raises(FormatError):
        run_import(campaign=campaign, data=b"q1 Q0 d1 1 abc bm25\n", filename="bad.run")
    campaign_policy_set(campaign=campaign, lead=lead, policy="max")
    messages = [r.getMessage() for r in caplog.records if r.name.startswith(("judging.services", "judging.imports"))]
    imported = (
        r"run_import bm25\.run -> demo: 100 bytes, 2 rankings added, 0 updated, 0 unchanged, 6 stubs, "
        r"4 pairs added in \d+\.\d\d s"
    )
    refused = r"run_import bad\.run -> demo refused after \d+\.\d\d s: bad\.run, line 1, field 'score': .*"
    assert re.fullmatch(imported, messages[0]) and re.fullmatch(refused, messages[1])
    assert messages[2] == "campaign demo: policy median -> max by lead, 0 labels changed"


# --------------------------------------------------------------------------- the grading scale's one check

SCALE_REFUSALS = [
    ([], "a grading scale needs at least one grade"),
    ([{"value": 1, "name": "a"}, {"value": 1, "name": "b"}], "each grade value may appear only once"),
    ([{"value": 0, "name": "no"}, {"value": 101, "name": "too high"}], "grades must be whole numbers from 0 to 100"),
]


@pytest.mark.parametrize(("scale", "message"), SCALE_REFUSALS)
def test_campaign_create_refuses_a_bad_scale_and_creates_nothing(db, scale, message):
    with pytest.raises(ValidationError) as exc:
        campaign_create(slug="bad", scale=scale)
    assert exc.value.messages == [message]
    assert not Campaign.objects.filter(slug="bad").exists()


@pytest.mark.parametrize(("scale", "message"), SCALE_REFUSALS)
def test_campaign_update_refuses_a_bad_scale_and_keeps_the_grades(campaign, scale, message):
    with pytest.raises(ValidationError) as exc:
        campaign_update(campaign=campaign, scale=scale)
    assert exc.value.message_dict == {"scale": [message]}
    assert list(campaign.grades.values_list("value", flat=True)) == [0, 1, 2]


def test_settings_changes_are_logged_by_name_only(campaign, caplog):
    """The names of the settings that changed, not their values (a description may quote an endpoint's key)."""
    with caplog.at_level(logging.INFO, logger="judging.services.campaigns"):
        campaign_update(campaign=campaign, name=campaign.name, description="see https://h/?key=sk-secret")
    assert f"campaign {campaign.slug} settings changed: description (0 pairs joined the pool)" in caplog.text
    assert "sk-secret" not in caplog.text
