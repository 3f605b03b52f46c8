"""Failed logins are counted per username and per client address (django-axes), on the web login and on
POST /api/auth/token/, with the client address taken from REMOTE_ADDR unless proxies are trusted."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.core.cache import cache
from django.core.management import call_command
from django.test import Client, RequestFactory, override_settings
from rest_framework.test import APIClient
from rest_framework.throttling import AnonRateThrottle

from judging.auth_backends import client_address

LOGIN = "/accounts/login/"
TOKEN = "/api/auth/token/"


@pytest.fixture(autouse=True)
def _empty_cache(db):
    # DRF's throttles count in the cache, which outlives a test's database transaction.
    cache.clear()
    yield
    cache.clear()


def web_login(client, username, password, address="198.51.100.7", **headers):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address, **headers)


def token_login(username, password, address="198.51.100.7", **headers):
    return APIClient().post(
        TOKEN, {"username": username, "password": password}, format="json", REMOTE_ADDR=address, **headers
    )


def test_web_login_50_wrong_passwords_lock_the_account_and_the_right_one_is_refused(client, lead):
    statuses = [web_login(client, "lead", f"guess-{i}").status_code for i in range(50)]
    assert statuses[:4] == [200] * 4  # the form again, "do not match"
    assert set(statuses[4:]) == {429}
    page = web_login(client, "lead", "pw-lead")
    assert page.status_code == 429
    assert "_auth_user_id" not in client.session
    text = page.content.decode()
    assert "Too many failed logins" in text and "Try again in 15 minutes" in text and "UTC" in text
    assert page["Retry-After"] == str(15 * 60) or 14 * 60 < int(page["Retry-After"]) <= 15 * 60


def test_web_lockout_is_per_username_whatever_the_address(client, lead):
    for i in range(5):
        web_login(Client(), "lead", "wrong", address=f"203.0.113.{i + 1}")
    assert web_login(client, "lead", "pw-lead", address="203.0.113.99").status_code == 429


def test_other_users_still_log_in_while_one_username_is_locked(client, lead, annotator):
    for _ in range(5):
        web_login(Client(), "lead", "wrong")
    response = web_login(client, "ann", "pw-ann")
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(annotator.pk)


def test_one_address_guessing_many_usernames_is_locked(client, make_user):
    make_user("victim")
    for i in range(50):
        web_login(Client(), f"nobody{i}", "wrong", address="203.0.113.50")
    assert web_login(client, "victim", "pw-victim", address="203.0.113.50").status_code == 429
    # From elsewhere the same account is fine: it was the address, not the account, that was locked.
    assert web_login(client, "victim", "pw-victim", address="203.0.113.51").status_code == 302


def test_twenty_annotators_behind_one_address_all_log_in_within_a_minute(make_user):
    users = [make_user(f"annotator{i:02d}") for i in range(20)]
    # A few typos on the way, as in a real room: they neither lock the address nor anyone else.
    for user in users[:8]:
        assert web_login(Client(), user.username, "typo").status_code == 200
    for user in users:
        c = Client()
        assert web_login(c, user.username, f"pw-{user.username}").status_code == 302, user.username
        assert c.session["_auth_user_id"] == str(user.pk)
    # ...and their scripts fetch their API tokens from the same address.
    for user in users:
        response = token_login(user.username, f"pw-{user.username}")
        assert response.status_code == 200, (user.username, response.content)


def test_api_token_lockout_answers_429_json_with_retry_after(lead):
    statuses = [token_login("lead", "wrong").status_code for _ in range(6)]
    assert statuses == [400] * 4 + [429] * 2
    response = token_login("lead", "pw-lead")
    assert response.status_code == 429
    body = response.json()
    assert "Too many failed logins" in body["detail"] and "15 minutes" in body["detail"]
    assert 14 * 60 < body["retry_after"] <= 15 * 60
    assert response["Retry-After"] == str(body["retry_after"])


def test_api_token_lockout_ignores_a_client_set_x_forwarded_for(lead):
    """The old throttle keyed on X-Forwarded-For: a new fake address per request was never throttled."""
    statuses = [token_login("lead", "wrong", HTTP_X_FORWARDED_FOR=f"192.0.2.{i}").status_code for i in range(1, 12)]
    assert statuses[-1] == 429
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"198.51.100.7"}


def test_drf_throttles_key_on_remote_addr_not_a_spoofed_header():
    request = RequestFactory().get("/api/", REMOTE_ADDR="198.51.100.7", HTTP_X_FORWARDED_FOR="192.0.2.1")
    assert AnonRateThrottle().get_ident(request) == "198.51.100.7"


def test_client_address_without_trusted_proxies_is_remote_addr():
    request = RequestFactory().get("/", REMOTE_ADDR="198.51.100.7", HTTP_X_FORWARDED_FOR="192.0.2.1")
    assert client_address(request) == "198.51.100.7"


@override_settings(TRUSTED_PROXIES=1)
def test_client_address_behind_one_trusted_proxy_is_what_that_proxy_saw():
    # The client wrote "192.0.2.1"; the proxy appended the address it saw, 203.0.113.9.
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="192.0.2.1, 203.0.113.9")
    assert client_address(request) == "203.0.113.9"
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.2")
    assert client_address(request) == "10.0.0.2"


@override_settings(TRUSTED_PROXIES=1)
def test_web_lockout_behind_a_proxy_counts_the_real_client(client, lead):
    for i in range(5):
        web_login(Client(), "lead", "wrong", address="10.0.0.2", HTTP_X_FORWARDED_FOR=f"192.0.2.{i}, 203.0.113.9")
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"203.0.113.9"}


def test_lockout_ends_after_the_cool_off(client, lead):
    for _ in range(5):
        web_login(Client(), "lead", "wrong")
    assert web_login(Client(), "lead", "pw-lead").status_code == 429
    AccessAttempt.objects.update(attempt_time=AccessAttempt.objects.get().attempt_time - timedelta(minutes=16))
    assert web_login(client, "lead", "pw-lead").status_code == 302


def test_an_admin_command_unlocks_an_account(client, lead):
    for _ in range(5):
        web_login(Client(), "lead", "wrong")
    assert web_login(Client(), "lead", "pw-lead").status_code == 429
    call_command("axes_reset_username", "lead")
    assert web_login(client, "lead", "pw-lead").status_code == 302


def test_a_successful_login_clears_earlier_failures(client, lead):
    for _ in range(4):
        web_login(Client(), "lead", "wrong")
    assert web_login(Client(), "lead", "pw-lead").status_code == 302
    assert web_login(Client(), "lead", "wrong").status_code == 200  # counting starts again
    assert web_login(client, "lead", "pw-lead").status_code == 302


@pytest.mark.parametrize("login", ["web", "token"])
def test_a_login_to_another_account_from_the_same_address_keeps_the_failures(client, lead, annotator, login):
    """axes' reset on success deleted every failure from the address: an attacker with an account of their own
    could guess 4 passwords of the lead, log in as themselves, and guess again, without end."""
    for _ in range(4):
        web_login(Client(), "lead", "wrong")
    if login == "web":
        assert web_login(Client(), "ann", "pw-ann").status_code == 302
    else:
        assert token_login("ann", "pw-ann").status_code == 200
    assert web_login(Client(), "lead", "wrong").status_code == 429  # the fifth failure locks the account
    assert web_login(client, "lead", "pw-lead").status_code == 429
    # ann's own slate is clean: her success cleared her failures, and only hers
    assert not AccessAttempt.objects.filter(username="ann").exists()
    assert AccessAttempt.objects.filter(username="lead").exists()
