"""Adding members: concurrent creations of one account, set-password mails throttled and free of lead-written
subjects, and accounts that stand for a model or an imported source kept to the annotator role."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.cache import cache
from django.db import connection
from rest_framework.test import APIClient

from judging.models import Membership
from judging.services import campaign_create, membership_add, qrels_import, run_import
from judging.services.model_judge import model_judge_get_or_create
from tests.data import run_concurrently

User = get_user_model()


@pytest.fixture(autouse=True)
def _empty_cache(db):
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def api(campaign, lead):
    client = APIClient()
    client.force_authenticate(lead)
    return client


# --------------------------------------------------------------------------- concurrent creation


@pytest.fixture
def pg_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent transactions are tested on PostgreSQL (SQLite writes one at a time)")


@pytest.mark.postgres
@pytest.mark.parametrize("spellings", [["newbie"] * 8, ["newbie", "NEWBIE", "Newbie", "ｎｅｗｂｉｅ"] * 2])
def test_concurrent_creates_of_one_username_make_one_account_and_no_500(pg_only, make_user, spellings):
    lead = make_user("lead")
    campaign = campaign_create(slug="race", name="Race", pool_depth=2)
    membership_add(campaign=campaign, user=lead, role="lead")
    statuses: list[int] = []
    lock = threading.Lock()

    def add(username):
        client = APIClient()
        client.force_authenticate(lead)
        response = client.post("/api/campaigns/race/members/", {"username": username, "create": True}, format="json")
        with lock:
            statuses.append(response.status_code)

    errors = run_concurrently(add, [(name,) for name in spellings])
    assert not errors, errors
    assert sorted(statuses) == [200] * 7 + [201], statuses
    assert User.objects.filter(username__iexact="newbie").count() == 1
    assert Membership.objects.filter(campaign=campaign, user__username__iexact="newbie").count() == 1


# --------------------------------------------------------------------------- set-password mails


@pytest.fixture
def mailing(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.SET_PASSWORD_MAIL_RATE = (2, 3)


def test_mail_subject_carries_no_campaign_name(api, campaign, mailing, django_capture_on_commit_callbacks):
    campaign.name = "URGENT: your account is locked, log in at evil.example"
    campaign.save(update_fields=["name"])
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            "/api/campaigns/demo/members/",
            {"username": "dave", "create": True, "email": "dave@example.com"},
            format="json",
        )
    assert response.status_code == 201 and response.json()["emailed"] is True
    assert mail.outbox[0].subject == "RelJudge: set your password"
    assert '"URGENT: your account is locked, log in at evil.example"' in mail.outbox[0].body


def test_mails_per_recipient_are_throttled_with_when_to_try_again(
    api, campaign, mailing, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        person = {"username": "dave", "create": True, "email": "d@example.com"}
        added = api.post("/api/campaigns/demo/members/", person, format="json").json()
        answers = [api.post("/api/campaigns/demo/members/dave/link/").json() for _ in range(3)]
    assert added["emailed"] is True and added["mail_refused"] is None
    assert [a["emailed"] for a in answers] == [True, False, False]
    assert len(mail.outbox) == 2
    # The lead still gets the link to pass on, and is told why it was not mailed and when to ask again.
    assert all(a["set_password_url"] for a in answers)
    assert answers[-1]["mail_refused"] == (
        "Not e-mailed: too many set-password e-mails for d@example.com (at most 2 an hour). Pass the link on "
        "yourself, or ask for a new one by e-mail in 60 minutes."
    )
    # Another address is not affected by dave's limit.
    assert api.post(
        "/api/campaigns/demo/members/", {"username": "erin", "create": True, "email": "e@example.com"}, format="json"
    ).json()["emailed"]


def test_mails_per_lead_are_throttled(api, campaign, mailing, client, lead):
    for i in range(3):
        response = api.post(
            "/api/campaigns/demo/members/",
            {"username": f"p{i}", "create": True, "email": f"p{i}@example.com"},
            format="json",
        )
        assert response.status_code == 201 and response.json()["emailed"]
    response = api.post(
        "/api/campaigns/demo/members/", {"username": "p3", "create": True, "email": "p3@example.com"}, format="json"
    )
    assert response.status_code == 201 and response.json()["emailed"] is False
    assert "too many set-password e-mails for lead (at most 3 an hour)" in response.json()["mail_refused"]
    # The page shows the link and says the same beside it.
    client.force_login(lead)
    page = client.post(
        "/campaigns/demo/members/",
        {"action": "add", "username": "p4", "role": "annotator", "create": "on", "email": "p4@example.com"},
    )
    html = page.content.decode()
    assert page.status_code == 200 and "/accounts/set-password/" in html
    assert "Not e-mailed: too many set-password e-mails for lead" in html and "Also e-mailed" not in html


def test_members_without_mail_are_not_throttled(api, campaign, mailing):
    for i in range(6):
        response = api.post("/api/campaigns/demo/members/", {"username": f"n{i}", "create": True}, format="json")
        assert response.status_code == 201


# --------------------------------------------------------------------------- roles of accounts that are no person


@pytest.fixture
def not_people(campaign, lead):
    run_import(campaign=campaign, data=b"q1 Q0 d1 1 3 bm25\n", filename="r.trec")
    qrels_import(campaign=campaign, data=b"q1 0 d1 1\n", filename="q.qrels", annotator="trec-2019", imported_by=lead)
    model_judge_get_or_create(name="gpt-x", campaign=campaign)
    return ["trec-2019", "gpt-x"]


def test_model_judge_and_label_source_cannot_be_leads(api, campaign, not_people, client, lead):
    for name in not_people:
        response = api.post("/api/campaigns/demo/members/", {"username": name, "role": "lead"}, format="json")
        assert response.status_code == 400
        assert f"{name} is a model judge or a source of imported labels: it can only be an annotator" in str(
            response.json()
        )
        assert not Membership.objects.filter(campaign=campaign, user__username=name, role="lead").exists()
    client.force_login(lead)
    judge = User.objects.get(username="gpt-x")
    page = client.post("/campaigns/demo/members/", {"action": "role", "user": judge.pk, "role": "lead"}, follow=True)
    assert "gpt-x is a model judge or a source of imported labels" in page.content.decode()
    assert Membership.objects.get(campaign=campaign, user=judge).role == "annotator"


def test_a_model_judge_made_lead_earlier_does_not_count_as_the_last_lead(api, campaign, not_people, lead):
    Membership.objects.filter(campaign=campaign, user__username="gpt-x").update(role="lead")
    response = api.post("/api/campaigns/demo/members/", {"username": "lead", "role": "annotator"}, format="json")
    assert response.status_code == 400 and "A campaign needs at least one lead" in str(response.json())
    other = campaign_create(slug="other", name="Other", pool_depth=2)
    membership_add(campaign=other, user=User.objects.get(username="gpt-x"), role="annotator")
    assert Membership.objects.get(campaign=campaign, user=lead).role == "lead"
