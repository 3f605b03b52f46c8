"""Issue 11 #4: importing qrels "as" someone never rewrites what a person judged in the app; revisions name the
importing lead on behalf of the source; updated_at moves; only members or non-login source accounts qualify."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from judging.models import Judgment, JudgmentRevision, Pair
from judging.services import campaign_create, judgment_record, membership_add, run_import
from tests.data import RUN_BM25

pytestmark = pytest.mark.django_db


@pytest.fixture
def pooled(campaign):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    return campaign


def pair_of(campaign, qid, docid) -> Pair:
    return Pair.objects.select_related("campaign").get(campaign=campaign, query__qid=qid, document__docid=docid)


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def api_upload(user, campaign, text: str, **extra):
    data = {"file": SimpleUploadedFile("old.qrels", text.encode()), **extra}
    return api(user).post(f"/api/campaigns/{campaign.slug}/upload/qrels/", data, format="multipart")


def web_upload(user, campaign, text: str, annotator: str):
    client = Client()
    client.force_login(user)
    data = {
        "kind": "qrels",
        "qrels-kind": "qrels",
        "qrels-file": SimpleUploadedFile("old.qrels", text.encode()),
        "qrels-annotator": annotator,
    }
    return client.post(reverse("judging:campaign_upload", args=[campaign.slug]), data, follow=True)


def command_import(campaign, text: str, annotator: str, tmp_path, *extra: str) -> str:
    path = tmp_path / "old.qrels"
    path.write_text(text)
    out = io.StringIO()
    call_command("import_qrels", campaign.slug, str(path), "--annotator", annotator, *extra, stdout=out)
    return out.getvalue()


def test_qrels_import_keeps_an_unsure_judgment_made_in_the_app(pooled, lead, annotator):
    """ann flagged q1/d1 unsure in the app; an import naming ann with a confident 2 leaves it unsure."""
    mine = pair_of(pooled, "q1", "d1")
    judgment_record(pair=mine, annotator=annotator, unsure=True, tentative_grade=1, note="can't tell the fabric")
    response = api_upload(lead, pooled, "q1 0 d1 2\nq1 0 d3 1\n", annotator="ann")
    assert response.status_code == 200, response.content
    j = Judgment.objects.get(pair=mine, annotator=annotator)
    assert (j.unsure, j.grade, j.tentative_grade.value, j.note) == (True, None, 1, "can't tell the fabric")
    assert (response.json()["added"], response.json()["kept"]) == (1, 1)
    assert pair_of(pooled, "q1", "d1").label is None  # still unjudged for the scorer: nobody was confident
    assert Judgment.objects.get(pair=pair_of(pooled, "q1", "d3"), annotator=annotator).grade.value == 1


def test_qrels_import_keeps_a_confident_grade_made_in_the_app(pooled, lead, annotator, tmp_path):
    judgment_record(pair=pair_of(pooled, "q1", "d1"), annotator=annotator, grade=0)
    out = command_import(pooled, "q1 0 d1 2\n", "ann", tmp_path, "--by", "lead")
    assert "1 label left alone: ann had already judged that pair in the app" in out
    assert Judgment.objects.get(annotator=annotator).grade.value == 0
    assert JudgmentRevision.objects.count() == 1  # ann's own, nothing on her behalf


def test_qrels_import_revisions_name_the_lead_on_behalf_of_the_source(pooled, lead, annotator):
    response = api_upload(lead, pooled, "q1 0 d1 2\n", annotator="ann")
    assert response.status_code == 200, response.content
    judgment = Judgment.objects.get(annotator=annotator)
    history = api(lead).get(f"/api/judgments/{judgment.pk}/history/").json()
    assert [(h["changed_by"], h["on_behalf_of"], h["imported_from"], h["new_grade"]) for h in history] == [
        ("lead", "ann", "old.qrels", 2)
    ]


def test_qrels_reimport_moves_updated_at_so_updated_since_sees_it(pooled, lead, annotator):
    assert api_upload(lead, pooled, "q1 0 d1 2\n", annotator="ann").status_code == 200
    judgment = Judgment.objects.get(annotator=annotator)
    earlier = timezone.now() - timedelta(days=1)
    Judgment.objects.filter(pk=judgment.pk).update(updated_at=earlier)  # as if imported yesterday
    since = (earlier + timedelta(hours=1)).isoformat()
    client = api(lead)
    assert client.get("/api/judgments/", {"campaign": "demo", "updated_since": since}).json()["results"] == []
    # A corrected file: the earlier import's label (not ann's own judgment) is brought up to date.
    response = api_upload(lead, pooled, "q1 0 d1 1\n", annotator="ann")
    assert response.json()["updated"] == 1
    rows = client.get("/api/judgments/", {"campaign": "demo", "updated_since": since}).json()["results"]
    assert [(r["annotator"], r["grade"]) for r in rows] == [("ann", 1)]


def test_qrels_import_creates_a_source_account_nobody_can_log_in_with(pooled, lead):
    response = web_upload(lead, pooled, "q1 0 d1 2\nq2 0 d4 1\n", "trec-2019")
    page = response.content.decode()
    assert response.status_code == 200 and "created the source account &#x27;trec-2019&#x27;" in page
    from judging.models import LabelSource  # new with this rule

    source = get_user_model().objects.get(username="trec-2019")
    assert LabelSource.objects.get(user=source).created_by == lead
    assert not source.has_usable_password() and not source.is_active and not source.is_superuser
    assert Judgment.objects.filter(annotator=source).count() == 2
    revision = JudgmentRevision.objects.filter(judgment__annotator=source).first()
    assert (revision.changed_by, revision.on_behalf_of) == (lead, source)
    # Nobody logs in as the source, on the web or for a token, whatever password they try.
    for password in ("", "trec-2019", "!"):
        login = Client().post(reverse("login"), {"username": "trec-2019", "password": password})
        assert login.status_code == 200 and "_auth_user_id" not in login.client.session
        token = APIClient().post("/api/auth/token/", {"username": "trec-2019", "password": password}, format="json")
        assert token.status_code in (400, 401)
    # A second import, here or in another campaign, reuses the source account.
    assert api_upload(lead, pooled, "q1 0 d3 0\n", annotator="trec-2019").json()["source_created"] is False
    assert get_user_model().objects.filter(username__startswith="trec").count() == 1


def test_qrels_command_without_a_lead_records_the_command_line(pooled, tmp_path):
    out = command_import(pooled, "q1 0 d1 2\n", "trec-2019", tmp_path)
    assert "1 judgment added" in out
    revision = JudgmentRevision.objects.get()
    assert revision.changed_by is None and revision.on_behalf_of.username == "trec-2019"


@pytest.mark.parametrize("who", ["outsider", "root"])
@pytest.mark.parametrize("interface", ["command", "web", "api"])
def test_qrels_import_refuses_non_members_and_superusers(pooled, lead, make_user, tmp_path, who, interface):
    # outsider annotates another campaign, not this one
    membership_add(campaign=campaign_create(slug="other"), user=make_user("outsider"), role="annotator")
    get_user_model().objects.create_superuser(username="root", password="pw-root-secret")
    expected = "is a superuser" if who == "root" else "is not a member of campaign 'demo'"
    before = (Judgment.objects.count(), Pair.objects.count(), get_user_model().objects.count())
    if interface == "command":
        with pytest.raises(CommandError, match=expected):
            command_import(pooled, "q1 0 d1 2\nq9 0 d9 1\n", who, tmp_path)
    elif interface == "web":
        response = web_upload(lead, pooled, "q1 0 d1 2\nq9 0 d9 1\n", who)
        assert response.status_code == 422
        assert "old.qrels, field &#x27;annotator&#x27;" in response.content.decode()
    else:
        response = api_upload(lead, pooled, "q1 0 d1 2\nq9 0 d9 1\n", annotator=who)
        assert response.status_code == 400 and response.json()["field"] == "annotator"
        assert expected in response.json()["detail"]
    assert (Judgment.objects.count(), Pair.objects.count(), get_user_model().objects.count()) == before


def test_qrels_import_names_a_bad_source_name(pooled, lead):
    response = api_upload(lead, pooled, "q1 0 d1 2\n", annotator="trec 2019!")
    assert response.status_code == 400
    assert response.json()["field"] == "annotator" and "not a valid source name" in response.json()["detail"]
    assert not Judgment.objects.exists()
