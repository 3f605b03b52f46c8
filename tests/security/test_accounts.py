"""Passwords and tokens: a new password revokes the API token and ends other sessions; the token never sits
in a cache; password reset exists only where mail can be sent, and is rate-limited there."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from django.core.cache import cache
from django.test import Client, override_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

NEW_PASSWORD = "a-new-long-passphrase-2026"


@pytest.fixture(autouse=True)
def _empty_cache(db):
    cache.clear()
    yield
    cache.clear()


def api_status(token_key: str) -> int:
    return APIClient().get("/api/campaigns/", HTTP_AUTHORIZATION=f"Token {token_key}").status_code


def test_web_password_change_revokes_the_token_and_ends_other_sessions(client, annotator):
    token = Token.objects.create(user=annotator)
    assert api_status(token.key) == 200
    other = Client()
    other.force_login(annotator)
    client.force_login(annotator)
    response = client.post(
        "/accounts/password_change/",
        {"old_password": "pw-ann", "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert response.status_code == 302 and response["Location"] == "/accounts/password_change/done/"
    assert api_status(token.key) == 401
    assert not Token.objects.filter(user=annotator).exists()
    # This browser stays logged in; the other one is sent to the login page.
    assert client.get("/").status_code == 200
    assert other.get("/").status_code == 302
    done = client.get("/accounts/password_change/done/").content.decode()
    assert "API token was revoked" in done


def test_password_change_form_says_the_token_will_be_revoked(client, annotator):
    client.force_login(annotator)
    assert "also revokes your API token" in client.get("/accounts/password_change/").content.decode()


def test_admin_set_password_revokes_the_token(client, annotator, make_user):
    token = Token.objects.create(user=annotator)
    client.force_login(make_user("root", is_staff=True, is_superuser=True))
    response = client.post(
        f"/admin/auth/user/{annotator.pk}/password/", {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD}
    )
    assert response.status_code == 302
    assert api_status(token.key) == 401


def test_set_password_in_code_revokes_the_token(annotator):
    """set_password + save, as `manage.py changepassword` and the demo loader do."""
    Token.objects.create(user=annotator)
    annotator.set_password(NEW_PASSWORD)
    annotator.save()
    assert not Token.objects.filter(user=annotator).exists()


def test_saving_a_user_without_a_new_password_keeps_the_token(annotator):
    token = Token.objects.create(user=annotator)
    annotator.first_name = "Ann"
    annotator.save()
    assert Token.objects.filter(key=token.key).exists()


def test_token_page_is_never_cached(client, annotator):
    client.force_login(annotator)
    client.post("/accounts/token/", {"action": "create"})
    page = client.get("/accounts/token/")
    assert Token.objects.get(user=annotator).key in page.content.decode()
    assert "no-store" in page["Cache-Control"]


def test_token_api_response_is_never_cached(annotator):
    response = APIClient().post("/api/auth/token/", {"username": "ann", "password": "pw-ann"}, format="json")
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"


# --------------------------------------------------------------------------- password reset


def test_password_reset_is_absent_without_mail(client, annotator):
    assert client.get("/accounts/password_reset/").status_code == 404
    assert client.post("/accounts/password_reset/", {"email": "ann@example.com"}).status_code == 404
    assert client.get("/accounts/reset/MQ/set-password/").status_code == 404
    assert "password_reset" not in client.get("/accounts/login/").content.decode()
    assert mail.outbox == []


@override_settings(PASSWORD_RESET_ENABLED=True)
def test_password_reset_with_mail_sets_a_password_and_revokes_the_token(client, make_user):
    user = make_user("mailed", email="mailed@example.com")
    token = Token.objects.create(user=user)
    assert 'href="/accounts/password_reset/"' in client.get("/accounts/login/").content.decode()
    response = client.post("/accounts/password_reset/", {"email": "mailed@example.com"})
    assert response.status_code == 302 and len(mail.outbox) == 1
    link = re.search(r"/accounts/reset/[^/\s]+/[^/\s]+/", mail.outbox[0].body).group(0)
    form_url = client.get(link)["Location"]  # Django moves the token into the session first
    response = client.post(form_url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/accounts/reset/done/"
    assert api_status(token.key) == 401
    assert Client().login(username="mailed", password=NEW_PASSWORD)


@override_settings(PASSWORD_RESET_ENABLED=True, PASSWORD_RESET_RATE=5)
def test_password_reset_requests_are_rate_limited(client, make_user):
    make_user("mailed", email="mailed@example.com")
    statuses = [client.post("/accounts/password_reset/", {"email": "mailed@example.com"}).status_code for _ in range(7)]
    assert statuses == [302] * 5 + [429] * 2
    assert len(mail.outbox) == 5
    page = client.post("/accounts/password_reset/", {"email": "other@example.com"})
    # The same address asking for other accounts is limited too.
    assert page.status_code == 429 and "Too many password reset requests" in page.content.decode()


@override_settings(PASSWORD_RESET_ENABLED=True)
def test_password_reset_pages_are_reljudges_not_the_admins(client, make_user):
    """Every page of the reset flow extends RelJudge's base.html; none is the Django admin's look-alike."""
    make_user("mailed", email="mailed@example.com")
    client.post("/accounts/password_reset/", {"email": "mailed@example.com"})
    link = re.search(r"/accounts/reset/[^/\s]+/[^/\s]+/", mail.outbox[0].body).group(0)
    form_url = client.get(link)["Location"]
    for url in ("/accounts/password_reset/", "/accounts/password_reset/done/", form_url, "/accounts/reset/done/"):
        response = client.get(url)
        names = [t.name for t in response.templates]
        assert response.status_code == 200 and "base.html" in names, (url, names)
        assert not any(name.startswith("admin/") for name in names), (url, names)
        assert "Django administration" not in response.content.decode()
