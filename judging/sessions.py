"""Sessions stored in the database with the signed-in user's id beside them: the session and the user in one query.

Django's database sessions read the session row, and the authentication middleware then reads the user row
named inside it: two queries on every request. Here the session row (judging.models.UserSession) carries
the user's id in a column, so one compiled statement reads the session and, joined to it, the user; the
middleware below hands that user to the same checks django.contrib.auth.get_user makes (the backend the
user logged in with still listed, an active account, the session's password hash) instead of reading it
again. Anything unusual (another backend, another user id) takes Django's own path.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib import auth
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.auth.models import AnonymousUser
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.core.exceptions import SuspiciousOperation
from django.db.models import CharField, DateTimeField
from django.utils import timezone
from django.utils.crypto import constant_time_compare
from django.utils.functional import SimpleLazyObject

from judging.compiled import Slots, compiled_select, model_columns, model_from
from judging.models import UserSession

_NO_USER = object()


def _session_with_user_query():
    args = Slots({"key": CharField(), "now": DateTimeField()})
    return UserSession.objects.filter(session_key=args["key"], expire_date__gt=args["now"]).values_list(
        *model_columns(UserSession), *model_columns(get_user_model(), "user__")
    )[:1]


class SessionStore(DatabaseSessionStore):
    """Django's database session store on UserSession: the user's id is written beside the data, and the
    user row is read with the session (``loaded_user``)."""

    loaded_user = _NO_USER  # the user row read with the session (None: the session names no user)

    @classmethod
    def get_model_class(cls):
        return UserSession

    def create_model_instance(self, data):
        session = super().create_model_instance(data)
        user_id = data.get(auth.SESSION_KEY)
        session.user_id = int(user_id) if isinstance(user_id, (int, str)) and str(user_id).isdigit() else None
        return session

    def _get_session_from_db(self):
        try:
            query = compiled_select(("session_with_user",), _session_with_user_query)
            row = query.first({"key": self.session_key, "now": timezone.now()})
        except SuspiciousOperation as e:  # as Django's store: log it, and start a new session
            logging.getLogger(f"django.security.{e.__class__.__name__}").warning(str(e))
            row = None
        if row is None:
            self._session_key = None
            return None
        session, at = model_from(UserSession, row)
        self.loaded_user = model_from(get_user_model(), row, at)[0] if session.user_id is not None else None
        return session


def _user(request):
    """django.contrib.auth.get_user, with the user row the session store read beside the session."""
    session = request.session
    try:
        user_id = get_user_model()._meta.pk.to_python(session[auth.SESSION_KEY])
        backend_path = session[auth.BACKEND_SESSION_KEY]
    except KeyError:
        return AnonymousUser()
    loaded = getattr(session, "loaded_user", _NO_USER)
    if backend_path not in settings.AUTHENTICATION_BACKENDS:
        return AnonymousUser()
    backend = auth.load_backend(backend_path)
    if loaded in (_NO_USER, None) or loaded.pk != user_id or type(backend).get_user is not ModelBackend.get_user:
        return auth.get_user(request)  # Django's own path
    user = loaded if backend.user_can_authenticate(loaded) else None
    if user is not None:
        # Verify the session, exactly as django.contrib.auth.get_user does.
        session_hash = session.get(auth.HASH_SESSION_KEY)
        verified = bool(session_hash) and constant_time_compare(session_hash, user.get_session_auth_hash())
        if not verified:
            if session_hash and any(
                constant_time_compare(session_hash, fallback) for fallback in user.get_session_auth_fallback_hash()
            ):
                session.cycle_key()
                session[auth.HASH_SESSION_KEY] = user.get_session_auth_hash()
            else:
                session.flush()
                user = None
    return user or AnonymousUser()


def _cached_user(request):
    if not hasattr(request, "_cached_user"):
        request._cached_user = _user(request)
    return request._cached_user


class SessionUserMiddleware(AuthenticationMiddleware):
    """Django's AuthenticationMiddleware, taking the user the session store read with the session."""

    def process_request(self, request):
        super().process_request(request)
        request.user = SimpleLazyObject(lambda: _cached_user(request))
