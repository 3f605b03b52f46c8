"""A person's interface language, kept on their account so that it follows them to every device."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError

from judging.models import AnnotatorProfile, User


def language_codes() -> set[str]:
    return {code for code, _name in settings.LANGUAGES}


def user_language_set(*, user: User, language: str) -> None:
    """Remember ``language`` (a code of settings.LANGUAGES, or "" to follow the browser) for ``user``."""
    if language and language not in language_codes():
        raise ValidationError(f"unknown language {language!r}")
    # A person has no profile row until something is kept for them; a model judge keeps its kind.
    AnnotatorProfile.objects.update_or_create(user=user, defaults={"language": language})
