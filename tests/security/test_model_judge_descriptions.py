"""A model judge's description: never the endpoint's credentials (a key in the query string, user:password@),
and each campaign's own, so that one campaign's lead cannot rewrite what another campaign's lead reads."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from judging import jobs
from judging.endpoints import endpoint_display, urls_display
from judging.models import AnnotatorProfile, Membership
from judging.services import campaign_create, membership_add, run_import
from judging.services.model_judge import model_judge_get_or_create

SECRET_URL = "https://bot:hunter2@llm.example.org:8443/v1/chat/completions?api-key=SECRET-KEY-123&x=1"


def lead_sees(client, lead, slug: str, judge: str = "tiny") -> tuple[str, str]:
    client.force_login(lead)
    page = client.get(f"/campaigns/{slug}/judges/")
    assert page.status_code == 200
    api = APIClient()
    api.force_authenticate(lead)
    answer = api.get(f"/api/campaigns/{slug}/judges/{judge}/calibration/")
    assert answer.status_code == 200
    return page.content.decode(), answer.content.decode()


@pytest.fixture
def pooled_campaign(campaign):
    run_import(campaign=campaign, data=b"q1 Q0 d1 1 3 bm25\nq1 Q0 d2 2 2 bm25\n", filename="r.trec")
    return campaign


def test_job_description_names_the_endpoint_without_its_key(client, pooled_campaign, lead, monkeypatch):
    monkeypatch.setenv("RELJUDGE_MODEL_ENDPOINT", SECRET_URL)
    jobs.model_judge_job_start(campaign=pooled_campaign, user=lead, model="tiny", enqueue=False)
    for html in lead_sees(client, lead, "demo"):
        assert "SECRET-KEY-123" not in html and "hunter2" not in html
        assert "tiny at https://llm.example.org:8443/v1/chat/completions" in html
    stored = [
        *Membership.objects.values_list("description", flat=True),
        *AnnotatorProfile.objects.values_list("description", flat=True),
    ]
    assert not any("SECRET" in text or "hunter2" in text for text in stored)


def test_a_description_typed_with_a_key_is_shown_without_it(client, pooled_campaign, lead):
    model_judge_get_or_create(name="tiny", description=f"tiny, zero-shot ({SECRET_URL})", campaign=pooled_campaign)
    for html in lead_sees(client, lead, "demo"):
        assert "SECRET-KEY-123" not in html and "hunter2" not in html
        assert "tiny, zero-shot (https://llm.example.org:8443/v1/chat/completions)" in html


def test_another_campaigns_lead_cannot_rewrite_the_description(client, pooled_campaign, lead, make_user):
    model_judge_get_or_create(name="tiny", description="tiny, our careful prompt v3", campaign=pooled_campaign)
    olga = make_user("olga")
    other = campaign_create(slug="other", name="Other", pool_depth=2)
    membership_add(campaign=other, user=olga, role="lead")
    model_judge_get_or_create(name="tiny", description="THIS JUDGE IS BROKEN, DELETE ITS LABELS", campaign=other)
    ours = lead_sees(client, lead, "demo")
    theirs = lead_sees(client, olga, "other")
    assert all("tiny, our careful prompt v3" in html and "BROKEN" not in html for html in ours)
    assert all("BROKEN" in html and "careful prompt" not in html for html in theirs)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (SECRET_URL, "https://llm.example.org:8443/v1/chat/completions"),
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
        ("https://key@[::1]/v1?k=1#frag", "https://[::1]/v1"),
        ("http://host:notaport/v1?k=1", ""),
    ],
)
def test_endpoint_display(url, shown):
    assert endpoint_display(url) == shown


def test_urls_display_keeps_the_sentence():
    text = f"gpt at {SECRET_URL}. Prompt v2, see http://wiki.example/p?token=abc."
    assert urls_display(text) == (
        "gpt at https://llm.example.org:8443/v1/chat/completions. Prompt v2, see http://wiki.example/p."
    )
