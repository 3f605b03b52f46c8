"""The audit wins over assignments: in the "audit" queue mode an annotator is served drawn pairs, or nothing, even
when a lead assigned them queries that were not drawn (the prediction-powered estimate needs a random sample)."""

from __future__ import annotations

import pytest

from judging.models import AuditQuery, Campaign, Query
from judging.selectors import pair_next
from judging.services import audit_draw, campaign_create, judgment_record, membership_add, run_import
from judging.services.assignments import assignments_add, queries_of_batch
from tests.data import client_for


@pytest.fixture
def audited(make_user):
    """Eight queries of three pooled documents each, two of them drawn for the audit, in audit mode."""
    lead, person = make_user("boss"), make_user("person")
    campaign = campaign_create(slug="audit", name="Audit", pool_depth=3)
    membership_add(campaign=campaign, user=lead, role="lead")
    membership_add(campaign=campaign, user=person, role="annotator")
    run = "".join(f"q{q} Q0 d{q}_{d} {d + 1} {9 - d} sys\n" for q in range(8) for d in range(3))
    run_import(campaign=campaign, data=run.encode(), filename="run.trec")
    audit_draw(campaign=campaign, size=2, user=lead, seed=5)
    Campaign.objects.filter(pk=campaign.pk).update(queue_mode=Campaign.QueueMode.AUDIT)
    campaign.refresh_from_db()
    drawn = set(AuditQuery.objects.filter(draw__campaign=campaign).values_list("query__qid", flat=True))
    return campaign, lead, person, drawn


def _give(campaign, lead, person, qids):
    assignments_add(campaign=campaign, by=lead, annotator=person.username, queries=queries_of_batch(
        campaign=campaign, qids=qids))  # fmt: skip


def _served(campaign, person) -> list[str]:
    seen = []
    while (found := pair_next(campaign=campaign, annotator=person).pair) is not None:
        seen.append(found.query.qid)
        judgment_record(pair=found, annotator=person, grade=1)
    return seen


def test_assigned_queries_not_drawn_are_never_served_in_audit_mode(audited):
    campaign, lead, person, drawn = audited
    undrawn = sorted(set(Query.objects.filter(campaign=campaign).values_list("qid", flat=True)) - drawn)
    _give(campaign, lead, person, undrawn[:3])
    seen = _served(campaign, person)
    assert set(seen) == drawn and len(seen) == 6  # the drawn pairs, and then nothing
    response = client_for(person).get("/api/campaigns/audit/next/")
    assert response.status_code == 204


def test_an_assigned_query_that_was_drawn_comes_first(audited):
    campaign, lead, person, drawn = audited
    last = max(drawn, key=lambda q: AuditQuery.objects.get(query__qid=q, draw__campaign=campaign).position)
    _give(campaign, lead, person, [last])
    seen = _served(campaign, person)
    assert seen[:3] == [last] * 3 and set(seen) == drawn
