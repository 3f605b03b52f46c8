"""The language of a signed-in user's pages: their saved choice, copied into the session when they log in.

Django's LocaleMiddleware picks a language from the language cookie, else the browser's Accept-Language.
A person who chose a language with the header's switcher expects it on every device they log in from, so
the choice is kept on their account (AnnotatorProfile.language); at login it is copied into the session,
and this middleware, placed after the authentication middleware, applies it to each of their requests (and
sets the language cookie to match, so that the page after logging out speaks it too). Reading it from the
session costs no query per request; the database is read once per login.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, cast

from django.conf import settings
from django.contrib.auth.models import User as Account
from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponseBase
from django.urls import reverse
from django.utils import translation

from judging.selectors.languages import user_language
from judging.services.languages import language_codes

SESSION_KEY = "reljudge_language"
# What set_cookie takes as samesite (django-stubs); settings.LANGUAGE_COOKIE_SAMESITE is typed as any text.
_SameSite = Literal["Lax", "Strict", "None", False] | None


def remember_in_session(request: HttpRequest, language: str) -> None:
    if language:
        request.session[SESSION_KEY] = language
    else:
        request.session.pop(SESSION_KEY, None)


@receiver(user_logged_in, dispatch_uid="reljudge-language-at-login")
def _language_at_login(sender: object, request: HttpRequest | None, user: Account, **kwargs: Any) -> None:
    # Every way in (the login page, a set-password link, the admin's login) sends this signal.
    if request is not None and hasattr(request, "session"):
        remember_in_session(request, user_language(user=user))


class UserLanguageMiddleware:
    """Activate the signed-in user's saved language for the request (after LocaleMiddleware chose one)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        # Only a session that holds the key has a chooser's language: no query, and no session is loaded for
        # a request without a session cookie.
        session = getattr(request, "session", None)
        language = session.get(SESSION_KEY) if session is not None and session.session_key else None
        if not (language and language in language_codes()):
            return self.get_response(request)
        translation.activate(language)
        request.LANGUAGE_CODE = language
        response = self.get_response(request)
        # The browser learns it too (once), so that the pages after logging out stay in that language.
        if request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME) != language:
            response.set_cookie(
                settings.LANGUAGE_COOKIE_NAME,
                language,
                max_age=settings.LANGUAGE_COOKIE_AGE,
                path=settings.LANGUAGE_COOKIE_PATH,
                domain=settings.LANGUAGE_COOKIE_DOMAIN,
                secure=settings.LANGUAGE_COOKIE_SECURE,
                httponly=settings.LANGUAGE_COOKIE_HTTPONLY,
                samesite=cast(_SameSite, settings.LANGUAGE_COOKIE_SAMESITE),  # one of those: Django checks it
            )
        return response


@functools.cache
def catalog_version(language: str) -> str:
    """A short digest of the compiled script catalogs of ``language`` (every djangojs.mo of LOCALE_PATHS): the
    same in every server process of one deployment, and a new one whenever a translation changes."""
    digest = hashlib.sha256(language.encode())
    for folder in settings.LOCALE_PATHS:
        compiled = Path(folder) / language / "LC_MESSAGES" / "djangojs.mo"
        if compiled.exists():
            digest.update(compiled.read_bytes())
    return digest.hexdigest()[:12]


def catalog_url(language: str) -> str:
    """Where a page in ``language`` loads its scripts' translations: the URL names the language and the
    catalog's version, so a browser never reuses one language's catalog for another, nor an old one."""
    return reverse("javascript-catalog", kwargs={"language": language, "version": catalog_version(language)})
