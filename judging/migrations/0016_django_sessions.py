"""Sessions go back to Django's own table (django.contrib.sessions): the open sessions are copied over, so
nobody is signed out by the upgrade, and judging_usersession is dropped."""

from django.db import migrations
from django.utils import timezone

_BATCH = 2000


def copy_sessions(apps, schema_editor):
    """Both tables hold Django's encoded session data (signed with the same salt), so a row moves as it is."""
    UserSession = apps.get_model("judging", "UserSession")
    Session = apps.get_model("sessions", "Session")
    alias = schema_editor.connection.alias
    rows = (
        UserSession.objects.using(alias)
        .filter(expire_date__gt=timezone.now())
        .values_list("session_key", "session_data", "expire_date")
        .order_by("session_key")
    )
    batch = []
    for key, data, expires in rows.iterator(_BATCH):
        batch.append(Session(session_key=key, session_data=data, expire_date=expires))
        if len(batch) == _BATCH:
            Session.objects.using(alias).bulk_create(batch, ignore_conflicts=True)
            batch = []
    Session.objects.using(alias).bulk_create(batch, ignore_conflicts=True)


def copy_sessions_back(apps, schema_editor):
    """Unapplied: the sessions go back to judging_usersession (the user's id is filled in at their next save)."""
    UserSession = apps.get_model("judging", "UserSession")
    Session = apps.get_model("sessions", "Session")
    alias = schema_editor.connection.alias
    rows = Session.objects.using(alias).filter(expire_date__gt=timezone.now())
    UserSession.objects.using(alias).bulk_create(
        [UserSession(session_key=s.session_key, session_data=s.session_data, expire_date=s.expire_date) for s in rows],
        batch_size=_BATCH,
        ignore_conflicts=True,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("judging", "0015_membership_description"),
        ("sessions", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(copy_sessions, copy_sessions_back),
        migrations.DeleteModel(name="UserSession"),
    ]
