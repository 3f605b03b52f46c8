"""A person's saved interface language."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User as Account

from judging.models import AnnotatorProfile


def user_language(*, user: Account) -> str:
    """The language ``user`` chose, or "" when they never chose one (or it is no longer offered)."""
    language = AnnotatorProfile.objects.filter(user_id=user.id).values_list("language", flat=True).first() or ""
    return language if language in {code for code, _name in settings.LANGUAGES} else ""
