"""The database itself enforces what must hold, whatever code writes to it."""

import pytest
from django.db import IntegrityError, transaction

from judging.models import Document, Grade, Judgment, Pair, Query, System


@pytest.fixture
def pair(campaign):
    q = Query.objects.create(campaign=campaign, qid="q1", text="wool")
    d = Document.objects.create(campaign=campaign, docid="d1", text="x")
    return Pair.objects.create(campaign=campaign, query=q, document=d)


@pytest.mark.parametrize(
    ("model", "kwargs"),
    [
        (Query, {"qid": "q1", "text": "again"}),
        (Document, {"docid": "d1", "text": "again"}),
        (System, {"name": "bm25"}),
        (Grade, {"value": 1, "name": "dup"}),
    ],
)
def test_unique_keys_per_campaign_enforced_by_database(campaign, model, kwargs):
    if model is not Grade:
        model.objects.create(campaign=campaign, **kwargs)
    with pytest.raises(IntegrityError), transaction.atomic():
        model.objects.create(campaign=campaign, **kwargs)


def test_same_qid_allowed_in_another_campaign(campaign):
    from judging.services import campaign_create

    other = campaign_create(slug="other")
    Query.objects.create(campaign=campaign, qid="q1", text="a")
    Query.objects.create(campaign=other, qid="q1", text="b")
    assert Query.objects.filter(qid="q1").count() == 2


def test_pair_unique_per_query_document(pair):
    with pytest.raises(IntegrityError), transaction.atomic():
        Pair.objects.create(campaign=pair.campaign, query=pair.query, document=pair.document)


def test_judgment_unique_per_pair_and_annotator(pair, annotator):
    g = pair.campaign.grades.get(value=1)
    Judgment.objects.create(pair=pair, annotator=annotator, grade=g)
    with pytest.raises(IntegrityError), transaction.atomic():
        Judgment.objects.create(pair=pair, annotator=annotator, grade=g)


@pytest.mark.parametrize(
    ("grade_value", "unsure", "tentative_value"),
    [(None, False, None), (1, True, None), (1, False, 2)],
    ids=["confident-without-grade", "unsure-with-grade", "tentative-on-confident"],
)
def test_judgment_grade_xor_unsure_enforced_by_database(pair, annotator, grade_value, unsure, tentative_value):
    grades = {g.value: g for g in pair.campaign.grades.all()}
    with pytest.raises(IntegrityError), transaction.atomic():
        Judgment.objects.create(
            pair=pair,
            annotator=annotator,
            grade=grades.get(grade_value),
            unsure=unsure,
            tentative_grade=grades.get(tentative_value),
        )


def test_grade_value_range_enforced_by_database(campaign):
    with pytest.raises(IntegrityError), transaction.atomic():
        Grade.objects.create(campaign=campaign, value=-1, name="negative")


def test_campaign_with_judgments_can_be_deleted_but_a_used_grade_cannot(pair, annotator):
    from django.db.models import RestrictedError

    g = pair.campaign.grades.get(value=1)
    Judgment.objects.create(pair=pair, annotator=annotator, grade=g)
    with pytest.raises(RestrictedError), transaction.atomic():
        g.delete()
    pair.campaign.delete()
    assert Judgment.objects.count() == 0 and Grade.objects.count() == 0
