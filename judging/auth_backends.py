"""Logins: the client address, django-axes' lockouts (its backend, handler and 429 answer), and the
password-change hook that revokes the API token. settings.py names these (AUTHENTICATION_BACKENDS, AXES_*,
AUTH_PASSWORD_VALIDATORS)."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import User as Account
from django.db.models import Max, Q, Sum
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from judging.services.accounts import api_token_revoke

# --------------------------------------------------------------------------- client address


def client_address(request: HttpRequest) -> str | None:
    """The client's IP address: REMOTE_ADDR, or behind ``TRUSTED_PROXIES`` reverse proxies the address the
    outermost of them saw, counted from the right of X-Forwarded-For (entries further left are whatever the
    client sent). The same rule as DRF's throttles with ``NUM_PROXIES``."""
    request = getattr(request, "_request", request)  # a DRF Request wraps the Django one
    proxies = settings.TRUSTED_PROXIES
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies and forwarded:
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if hops:
            return hops[-min(proxies, len(hops))]
    return request.META.get("REMOTE_ADDR")


class LoginAttemptsBackend(AxesStandaloneBackend):
    """Refuses a locked-out username or address before any password is checked (django-axes).

    ``authenticate()`` without a request (the demo loader, a shell) has no client to count, so it is let
    through to the password backend rather than failing as axes' own backend does."""

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> AbstractBaseUser | None:
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


class LoginAttemptsHandler(AxesDatabaseHandler):
    """Axes' database handler with one limit per lockout parameter: ``AXES_FAILURE_LIMIT`` failures for a
    username, ``RELJUDGE_ADDRESS_FAILURE_LIMIT`` for a client address (shared by a room of annotators).

    Axes compares a single failure count with a single limit, so the address count is scaled to the
    username limit: ``address * user_limit // address_limit >= user_limit`` exactly when
    ``address >= address_limit``."""

    def get_failures(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        by_username, by_address = (
            attempts.aggregate(n=Sum("failures_since_start"))["n"] or 0
            for attempts in self.get_user_attempts(request, credentials)
        )
        user_limit, address_limit = settings.AXES_FAILURE_LIMIT, settings.RELJUDGE_ADDRESS_FAILURE_LIMIT
        return max(by_username, by_address * user_limit // address_limit)

    def reset_user_attempts(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        """A successful login clears the failures against that account only. Axes clears every failure of
        the client address as well, including those against other accounts: anyone with an account of their
        own could then guess 4 passwords of a lead, log in as themselves, and guess on without limit."""
        username = get_client_username(request, credentials)
        deleted, _per_model = AccessAttempt.objects.filter(username=username).delete()
        return deleted


def _retry_after(request: HttpRequest, credentials: dict[str, Any] | None) -> timedelta:
    """How long until the lockout ends: the cool-off counted from the last failure that caused it."""
    username = get_client_username(request, credentials)
    address = getattr(request, "axes_ip_address", None) or client_address(request)
    last = AccessAttempt.objects.filter(Q(username=username) | Q(ip_address=address)).aggregate(
        last=Max("attempt_time")
    )["last"]
    end = (last or timezone.now()) + settings.AXES_COOLOFF_TIME
    return max(end - timezone.now(), timedelta(seconds=1))


def lockout_response(
    request: HttpRequest, original_response: HttpResponseBase | None = None, credentials: dict[str, Any] | None = None
) -> HttpResponse:
    """429 with when to retry: JSON with a Retry-After header for the API, a page for the web login."""
    wait = _retry_after(request, credentials)
    seconds = math.ceil(wait.total_seconds())
    minutes = math.ceil(seconds / 60)
    retry_at = timezone.now() + wait
    response: HttpResponse
    if request.path.startswith(reverse("api:api-root")):
        response = JsonResponse(
            {
                "detail": ngettext(
                    "Too many failed logins. Try again in %(n)s minute.",
                    "Too many failed logins. Try again in %(n)s minutes.",
                    minutes,
                )
                % {"n": minutes},
                "retry_after": seconds,
            },
            status=429,
        )
    else:
        response = render(
            request,
            "registration/locked_out.html",
            {"minutes": minutes, "retry_at": retry_at},
            status=429,
        )
    response["Retry-After"] = str(seconds)
    response["Cache-Control"] = "no-store"
    return response


# --------------------------------------------------------------------------- password changes


class RevokeTokenOnPasswordChange:
    """Listed in AUTH_PASSWORD_VALIDATORS for its ``password_changed`` hook, which Django calls after every
    password change (the change form, the reset link, the admin, ``changepassword``): a new password also
    revokes the user's API token, so a leaked token dies with the leaked password. It never rejects a password.

    Other browser sessions end by themselves: each carries a hash of the password, which no longer matches."""

    def validate(self, password: str, user: Account | None = None) -> None:
        return None

    def password_changed(self, password: str, user: Account | None = None) -> None:
        if user is not None and user.pk is not None:
            api_token_revoke(user=user)

    def get_help_text(self) -> str:
        return _("Changing your password also revokes your API token: scripts need a new one.")
