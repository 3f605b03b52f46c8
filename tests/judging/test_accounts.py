"""Accounts run by leads: new members, one-time set-password links, bulk adds, and the limits of a lead."""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import PasswordResetTokenGenerator
from django.core import mail
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from rest_framework.test import APIClient

from judging.models import Membership
from judging.services import campaign_create, membership_add, qrels_import
from judging.services.accounts import api_token_get, set_password_tokens
from judging.services.model_judge import model_judge_get_or_create

User = get_user_model()
LINK = re.compile(r"https?://[^\s\"<]+/accounts/set-password/[^\s\"<]+/")


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def members_url(campaign) -> str:
    return reverse("judging:campaign_members", args=[campaign.slug])


def set_password(link: str, password: str = "a-Long-enough-passphrase-9") -> Client:
    """Follow a set-password link as its owner would, anonymously, and set the password."""
    client = Client()
    response = client.get(link, follow=True)
    assert response.status_code == 200 and "Set your password" in response.content.decode()
    form_url = response.redirect_chain[-1][0] if response.redirect_chain else link
    done = client.post(form_url, {"new_password1": password, "new_password2": password}, follow=True)
    assert "Your password is set" in done.content.decode()
    return client


def test_members_page_creates_account_and_link_sets_password(campaign, lead):
    response = login(lead).post(
        members_url(campaign),
        {"action": "add", "username": "dave", "email": "", "name": "Dave Lee", "role": "annotator", "create": "on"},
    )
    html = response.content.decode()
    assert response.status_code == 200 and "Pass these links on" in html
    dave = User.objects.get(username="dave")
    assert not dave.has_usable_password() and dave.get_full_name() == "Dave Lee"
    assert Membership.objects.get(campaign=campaign, user=dave).role == "annotator"
    link = LINK.search(html).group(0)
    set_password(link)
    assert Client().login(username="dave", password="a-Long-enough-passphrase-9")
    # The link works once.
    again = Client().get(link, follow=True).content.decode()
    assert "This link no longer works" in again


def _new_member_link(campaign, lead, username="dave") -> str:
    response = login(lead).post(
        members_url(campaign), {"action": "add", "username": username, "role": "annotator", "create": "on"}
    )
    return LINK.search(response.content.decode()).group(0)


REVOKES = "Changing your password also revokes your API token"


def test_set_password_speaks_of_an_api_token_only_to_someone_who_has_one(campaign, lead):
    link = _new_member_link(campaign, lead)
    page = Client().get(link, follow=True).content.decode()
    assert "Set your password" in page and REVOKES not in page
    assert "Your password must contain at least" in page  # the other rules stay
    api_token_get(user=User.objects.get(username="dave"))
    assert REVOKES in Client().get(link, follow=True).content.decode()


def test_set_password_logs_the_new_member_in(campaign, lead):
    client = set_password(_new_member_link(campaign, lead))
    done = client.get(reverse("judging:set_password_done")).content.decode()
    assert "You are logged in as <strong>dave</strong>" in done and "Your campaigns" in done
    home = client.get(reverse("judging:home"))
    assert home.status_code == 200 and int(client.session["_auth_user_id"]) == User.objects.get(username="dave").pk
    assert campaign.name in home.content.decode()


def test_set_password_done_page_in_korean(campaign, lead):
    client = set_password(_new_member_link(campaign, lead))
    done = client.get(reverse("judging:set_password_done"), HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    assert "<strong>dave</strong>(으)로 로그인했습니다." in done


def test_unknown_user_without_create_says_how_to_create(campaign, lead):
    response = login(lead).post(members_url(campaign), {"action": "add", "username": "ghost", "role": "annotator"})
    assert response.status_code == 422
    assert "--create" in response.content.decode() and "createsuperuser" not in response.content.decode()
    assert not User.objects.filter(username="ghost").exists()


def test_existing_user_keeps_one_account_and_gets_no_link(campaign, lead, make_user):
    erin = make_user("erin", email="erin@example.org")
    other = campaign_create(slug="other", name="Other")
    membership_add(campaign=other, user=erin, role="annotator")
    response = login(lead).post(
        members_url(campaign),
        {"action": "add", "username": "erin", "email": "evil@example.org", "role": "annotator", "create": "on"},
    )
    assert response.status_code == 302
    erin.refresh_from_db()
    assert erin.email == "erin@example.org" and erin.has_usable_password()  # not the lead's to change
    assert User.objects.filter(username="erin").count() == 1
    assert set(Membership.objects.filter(user=erin).values_list("campaign__slug", flat=True)) == {"demo", "other"}


@pytest.mark.parametrize("kind", ["has_password", "superuser", "pending_elsewhere", "model_judge", "label_source"])
def test_lead_cannot_issue_links_outside_their_powers(campaign, lead, make_user, kind):
    if kind == "has_password":
        target = make_user("target")
    elif kind == "superuser":
        target = User.objects.create_superuser("target", password=None)
    elif kind == "model_judge":
        # Nobody logs in as a model judge (it has no password and never gets one).
        target = model_judge_get_or_create(name="target", campaign=campaign)
    elif kind == "label_source":
        # Nor as the source an import recorded labels under.
        qrels_import(campaign=campaign, data=b"q1 0 d1 2\n", filename="old.qrels", annotator="target", imported_by=lead)
        target = User.objects.get(username="target")
    else:
        # Waiting for a password, but also a lead of a campaign this lead does not lead.
        target = User.objects.create_user("target", password=None)
        membership_add(campaign=campaign_create(slug="theirs"), user=target, role="lead")
    membership_add(campaign=campaign, user=target, role="annotator")
    password_before = target.password
    client = login(lead)
    response = client.post(members_url(campaign), {"action": "link", "user": target.id}, follow=True)
    assert "/accounts/set-password/" not in response.content.decode()
    # Adding them again with create does not hand out a link either.
    response = client.post(
        members_url(campaign), {"action": "add", "username": "target", "role": "annotator", "create": "on"}, follow=True
    )
    assert "/accounts/set-password/" not in response.content.decode()
    target.refresh_from_db()
    assert target.password == password_before


def test_members_page_names_model_judges_and_label_sources(campaign, lead):
    model_judge_get_or_create(name="overlap-judge", campaign=campaign)
    qrels_import(campaign=campaign, data=b"q1 0 d1 2\n", filename="old.qrels", annotator="trec-2019", imported_by=lead)
    membership_add(campaign=campaign, user=User.objects.get(username="trec-2019"), role="annotator")
    page = login(lead).get(members_url(campaign)).content.decode()
    assert "model judge (no login)" in page and "imported labels (no login)" in page
    assert "no password yet" not in page


def test_new_link_for_pending_member_and_old_one_still_single_use(campaign, lead):
    client = login(lead)
    first = LINK.search(
        client.post(
            members_url(campaign), {"action": "add", "username": "dave", "role": "annotator", "create": "on"}
        ).content.decode()
    ).group(0)
    dave = User.objects.get(username="dave")
    page = client.get(members_url(campaign)).content.decode()
    assert "no password yet" in page
    second = LINK.search(client.post(members_url(campaign), {"action": "link", "user": dave.id}).content.decode())
    set_password(second.group(0))
    assert "This link no longer works" in Client().get(first, follow=True).content.decode()
    assert "no password yet" not in client.get(members_url(campaign)).content.decode()


def test_annotator_cannot_add_members(campaign, annotator):
    response = login(annotator).post(
        members_url(campaign), {"action": "add", "username": "mallory", "role": "lead", "create": "on"}
    )
    assert response.status_code == 403
    assert not User.objects.filter(username="mallory").exists()


def test_bulk_paste_creates_accounts(campaign, lead, make_user):
    make_user("erin")
    text = "dave\nerin\n# a comment\n\nfrank,frank@example.org,Frank Ocean\n"
    response = login(lead).post(members_url(campaign), {"action": "bulk", "people": text, "role": "annotator"})
    html = response.content.decode()
    assert response.status_code == 200
    assert len(LINK.findall(html)) == 2  # dave and frank are new; erin already has a password
    assert User.objects.get(username="frank").email == "frank@example.org"
    assert set(Membership.objects.filter(campaign=campaign).values_list("user__username", flat=True)) >= {
        "dave",
        "erin",
        "frank",
    }


def test_bulk_csv_with_header(campaign, lead):
    from django.core.files.uploadedfile import SimpleUploadedFile

    data = b"\xef\xbb\xbfname,username,email\nGina Ho,gina,gina@example.org\n,hal,\n"
    upload = SimpleUploadedFile("team.csv", data, content_type="text/csv")
    response = login(lead).post(members_url(campaign), {"action": "bulk", "file": upload, "people": "", "role": "lead"})
    assert response.status_code == 200
    gina = User.objects.get(username="gina")
    assert gina.get_full_name() == "Gina Ho" and gina.email == "gina@example.org"
    assert Membership.objects.get(campaign=campaign, user__username="hal").role == "lead"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("dave\nbad name!\n", "the list, line 2: username 'bad name!'"),
        ("dave\ndave\n", "the list, line 2: 'dave' is listed twice (also line 1)"),
        ("dave,not-an-address\n", "the list, line 1: 'not-an-address' is not an e-mail address"),
        ("username,phone\ndave,123\n", "the list, line 1: unknown column 'phone'"),
    ],
)
def test_bulk_bad_line_names_it_and_writes_nothing(campaign, lead, text, message):
    response = login(lead).post(members_url(campaign), {"action": "bulk", "people": text, "role": "annotator"})
    assert response.status_code == 422
    assert message in response.content.decode().replace("&#x27;", "'")
    assert not User.objects.filter(username="dave").exists()


def test_remove_and_role_change_keep_last_lead(campaign, lead):
    client = login(lead)
    response = client.post(members_url(campaign), {"action": "role", "user": lead.id, "role": "annotator"}, follow=True)
    assert "at least one lead" in response.content.decode()
    assert Membership.objects.get(campaign=campaign, user=lead).role == "lead"


def test_link_is_emailed_when_a_backend_is_configured(campaign, lead, settings, django_capture_on_commit_callbacks):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    with django_capture_on_commit_callbacks(execute=True):
        response = login(lead).post(
            members_url(campaign),
            {"action": "add", "username": "ivy", "email": "ivy@example.org", "role": "annotator", "create": "on"},
        )
    assert "Also e-mailed to ivy@example.org" in response.content.decode()
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["ivy@example.org"]
    assert LINK.search(mail.outbox[0].body).group(0) in response.content.decode()


def test_no_mail_without_backend(campaign, lead, django_capture_on_commit_callbacks, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.dummy.EmailBackend"
    with django_capture_on_commit_callbacks(execute=True):
        response = login(lead).post(
            members_url(campaign),
            {"action": "add", "username": "ivy", "email": "ivy@example.org", "role": "annotator", "create": "on"},
        )
    assert "Also e-mailed" not in response.content.decode() and LINK.search(response.content.decode())


def test_api_create_returns_set_password_url(campaign, lead):
    client = APIClient()
    client.force_authenticate(lead)
    response = client.post(
        "/api/campaigns/demo/members/", {"username": "dave", "role": "annotator", "create": True}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert body["created"] is True and body["password_set"] is False and body["role"] == "annotator"
    set_password(body["set_password_url"])
    missing = client.post("/api/campaigns/demo/members/", {"username": "ghost", "role": "annotator"}, format="json")
    assert missing.status_code == 400 and '"create": true' in str(missing.json())


def test_api_annotator_cannot_create_accounts(campaign, annotator):
    client = APIClient()
    client.force_authenticate(annotator)
    response = client.post("/api/campaigns/demo/members/", {"username": "x", "create": True}, format="json")
    assert response.status_code == 403 and not User.objects.filter(username="x").exists()


def test_add_member_command_create_prints_link(campaign, capsys):
    call_command("add_member", "demo", "dave", "--role", "annotator", "--create", "--email", "d@example.org")
    out = capsys.readouterr().out
    assert "dave is now an annotator of demo (new account)" in out
    link = LINK.search(out).group(0)
    assert link.startswith("http://127.0.0.1:8000/accounts/set-password/")
    set_password(link.removeprefix("http://127.0.0.1:8000"))
    with pytest.raises(CommandError, match="--create"):
        call_command("add_member", "demo", "ghost", "--role", "annotator")


def test_api_new_link_only_for_pending_members(campaign, lead, annotator):
    client = APIClient()
    client.force_authenticate(lead)
    client.post("/api/campaigns/demo/members/", {"username": "dave", "create": True}, format="json")
    response = client.post("/api/campaigns/demo/members/dave/link/")
    assert response.status_code == 200
    set_password(response.json()["set_password_url"])
    again = client.post("/api/campaigns/demo/members/dave/link/")
    assert again.status_code == 400 and "already set a password" in str(again.json())
    assert client.post("/api/campaigns/demo/members/ann/link/").status_code == 400  # has a password
    assert client.post("/api/campaigns/demo/members/nobody/link/").status_code == 404
    other = APIClient()
    other.force_authenticate(annotator)
    assert other.post("/api/campaigns/demo/members/dave/link/").status_code == 403


@pytest.mark.parametrize(("age", "works"), [(timedelta(days=2, hours=23), True), (timedelta(days=3, hours=1), False)])
def test_set_password_link_lasts_three_days(campaign, lead, age, works, monkeypatch):
    """The link a lead passes on is valid for settings.PASSWORD_RESET_TIMEOUT (3 days), then refused."""
    login(lead).post(members_url(campaign), {"action": "add", "username": "dave", "role": "annotator", "create": "on"})
    dave = User.objects.get(username="dave")
    uid = urlsafe_base64_encode(force_bytes(dave.pk))
    with monkeypatch.context() as issued_earlier:
        issued_earlier.setattr(PasswordResetTokenGenerator, "_now", lambda self: datetime.now() - age)
        token = set_password_tokens.make_token(dave, by=lead)
    link = reverse("judging:set_password", args=[uid, token])
    page = Client().get(link, follow=True).content.decode()
    assert ('name="new_password1"' in page) is works
    assert ("This link no longer works" in page) is not works


def test_member_changes_are_logged_without_the_link(campaign, lead, make_user, caplog):
    """An operator reads who added whom, role changes and removals, and that a link was issued, never the link."""
    from judging.services import membership_remove

    with caplog.at_level(logging.INFO, logger="judging.services"):
        response = login(lead).post(
            members_url(campaign),
            {"action": "add", "username": "dave", "email": "", "role": "annotator", "create": "on"},
        )
        dave = User.objects.get(username="dave")
        membership_add(campaign=campaign, user=dave, role="lead")
        membership_remove(campaign=campaign, user=dave)
    link = LINK.search(response.content.decode()).group(0)
    assert f"account dave created by {lead.username} for campaign {campaign.slug}" in caplog.text
    assert f"{lead.username} made dave a member of campaign {campaign.slug} as annotator" in caplog.text
    assert f"set-password link for dave issued by {lead.username}" in caplog.text
    assert f"dave's role in campaign {campaign.slug}: annotator -> lead" in caplog.text
    assert f"dave left campaign {campaign.slug}" in caplog.text
    token = link.rstrip("/").rsplit("/", 1)[-1]
    assert token not in caplog.text and "set-password/" not in caplog.text
