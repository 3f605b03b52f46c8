"""Sessions with the user beside them (judging.sessions): one query for both, and Django's checks kept."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from judging.models import UserSession

User = get_user_model()


def _home(client) -> tuple[int, list[str]]:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get("/", follow=False)
    return response.status_code, [q["sql"] for q in ctx.captured_queries]


def test_session_and_user_are_read_in_one_query(campaign, annotator):
    client = Client()
    client.force_login(annotator)
    assert UserSession.objects.get().user_id == annotator.id
    status, queries = _home(client)
    assert status == 200
    session_reads = [q for q in queries if "judging_usersession" in q]
    assert len(session_reads) == 1 and "auth_user" in session_reads[0]
    # the user is never read again on its own
    assert not [q for q in queries if q.lstrip().startswith("SELECT") and 'FROM "auth_user"' in q]


def test_web_login_and_logout_through_the_pages(campaign, annotator):
    annotator.set_password("a-Long-enough-passphrase-9")
    annotator.save()
    client = Client()
    login = client.post("/accounts/login/", {"username": "ann", "password": "a-Long-enough-passphrase-9"})
    assert login.status_code == 302
    assert UserSession.objects.get().user_id == annotator.id
    assert client.get("/").status_code == 200
    client.post("/accounts/logout/")
    assert not UserSession.objects.filter(user=annotator).exists()
    assert client.get("/").status_code == 302  # to the login page


def test_deactivated_account_is_signed_out_at_its_next_request(campaign, annotator):
    client = Client()
    client.force_login(annotator)
    User.objects.filter(id=annotator.id).update(is_active=False)
    assert client.get("/").status_code == 302


def test_password_change_elsewhere_ends_the_other_sessions(campaign, annotator):
    client = Client()
    client.force_login(annotator)
    assert client.get("/").status_code == 200
    annotator.set_password("another-Long-passphrase-7")
    annotator.save()
    assert client.get("/").status_code == 302  # the session's password hash no longer matches


def test_deleted_user_takes_their_sessions_along(campaign, make_user):
    user = make_user("leaving")
    client = Client()
    client.force_login(user)
    user.delete()
    assert not UserSession.objects.exists()
    assert client.get("/").status_code == 302
