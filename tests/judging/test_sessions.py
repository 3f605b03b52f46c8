"""Sessions and the signed-in user come from Django's own code: its database sessions, its authentication
middleware and its checks (an active account, the session's password hash, a user who still exists)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

User = get_user_model()


def _home(client) -> tuple[int, list[str]]:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get("/", follow=False)
    return response.status_code, [q["sql"] for q in ctx.captured_queries]


def test_sessions_and_users_are_djangos_own():
    assert settings.SESSION_ENGINE == "django.contrib.sessions.backends.db"
    assert "django.contrib.auth.middleware.AuthenticationMiddleware" in settings.MIDDLEWARE


def test_a_request_reads_its_session_then_its_user_once(campaign, annotator):
    client = Client()
    client.force_login(annotator)
    status, queries = _home(client)
    assert status == 200
    assert len([q for q in queries if "django_session" in q]) == 1
    assert len([q for q in queries if q.lstrip().startswith("SELECT") and 'FROM "auth_user"' in q]) == 1


def test_web_login_and_logout_through_the_pages(campaign, annotator):
    annotator.set_password("a-Long-enough-passphrase-9")
    annotator.save()
    client = Client()
    login = client.post("/accounts/login/", {"username": "ann", "password": "a-Long-enough-passphrase-9"})
    assert login.status_code == 302
    session = Session.objects.get()
    assert session.get_decoded()["_auth_user_id"] == str(annotator.id)
    assert client.get("/").status_code == 200
    client.post("/accounts/logout/")
    assert not Session.objects.filter(session_key=session.session_key).exists()
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


def test_deleted_user_is_signed_out(campaign, make_user):
    user = make_user("leaving")
    client = Client()
    client.force_login(user)
    user.delete()
    assert client.get("/").status_code == 302


def test_upgrade_keeps_everyone_signed_in(transactional_db, annotator):
    """Migration 0016 copies the open sessions of judging_usersession into Django's table as they are."""
    from django.db.migrations.executor import MigrationExecutor

    client = Client()
    client.force_login(annotator)
    session = Session.objects.get()
    executor = MigrationExecutor(connection)
    executor.migrate([("judging", "0014_usersession")])
    old = executor.loader.project_state(("judging", "0014_usersession")).apps.get_model("judging", "UserSession")
    assert old.objects.get().session_data == session.session_data  # unapplied, 0016 puts the session back
    Session.objects.all().delete()  # the database as 0014 left it: the sessions in judging_usersession only
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes("judging"))
    assert client.get("/").status_code == 200
    assert client.get("/").wsgi_request.user == annotator
