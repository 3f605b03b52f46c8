"""Account names: the one rule for every place that creates or names an account, below the services and the
imports that both name accounts (a member added, a qrels import's source, a model judge).

Usernames are compared as Django's own forms compare them: NFKC-normalised and case-insensitively. A name
that only looks like an existing one (``lеad2`` with a Cyrillic е, ``ɑlice`` with a Latin alpha, ``alİce``,
full-width letters: the same Unicode TR39 confusable skeleton) is refused with the account it resembles
(``account_name_resolve``), wherever an account is created or named.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable
from typing import cast

import icu
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User as Account
from django.core.exceptions import ValidationError
from django.db import connection
from django.utils.translation import gettext as _


def username_check(username: str) -> str:
    """``username`` as it is stored (trimmed, NFKC-normalised as Django's forms do), or ValidationError."""
    username = unicodedata.normalize("NFKC", (username or "").strip())
    field = get_user_model()._meta.get_field("username")
    if not username:
        raise ValidationError(_("a username is required"))
    try:
        field.run_validators(username)
    except ValidationError as exc:
        raise ValidationError(
            _("username %(username)s: %(errors)s") % {"username": repr(username), "errors": " ".join(exc.messages)}
        ) from None
    if len(username) > cast(int, field.max_length):
        raise ValidationError(
            _("username %(username)s: at most %(limit)s characters")
            % {"username": repr(username), "limit": field.max_length}
        )
    return username


# Unicode TR39 (Security Mechanisms, section 4 "Confusable Detection"): two strings are confusable when their
# skeletons are equal; the skeleton maps each character to its prototype in Unicode's confusables.txt (NFD before
# and after). ICU's SpoofChecker implements it with the data of its Unicode version. Thread-safe for this use (a
# const checker's getSkeleton).
_SPOOF = icu.SpoofChecker()
# A dot above a soft-dotted letter (i, j: Unicode's Soft_Dotted property) is not seen: "İ" lower-cased is "i" and
# U+0307, which reads as "i". In skeletons i stays i and I becomes l, so the dot goes after either, and after j.
_INVISIBLE_DOT = re.compile("(?<=[ijl])\u0307")


# Cyrillic and Greek letters that read as a Latin letter in a username though TR39 keeps some of them apart
# (Greek ε is confusable with ꞓ there, not with e): mapped before the skeleton, both cases.
_LATIN_LOOKALIKES = str.maketrans(
    {
        **dict(zip("аАвВеЕһНіІјЈкКмМоОрРсСтТуУхХѕЅԁԛԝӏ", "aAbBeEhHiIjJkKmMoOpPcCtTyYxXsSdqwl", strict=True)),
        **dict(zip("αΑΒεΕΖηΗιΙκΚΜνΝοΟρΡτΤυΥχΧϲ", "aABeEZnHiIkKMvNoOpPtTuYxXc", strict=True)),
        "ı": "i",
    }
)


def _tr39(text: str) -> str:
    return _INVISIBLE_DOT.sub("", _SPOOF.getSkeleton(0, text.translate(_LATIN_LOOKALIKES)))


def username_skeletons(username: str) -> tuple[str, str]:
    """What ``username`` looks like to a reader, twice: the TR39 skeleton of its case-folded NFKC form (``ALICE``,
    ``ɑlice``, ``alİce`` and ``ａｌｉｃｅ`` all read ``alice``), and the case-folded skeleton of the name as
    written (``aIice`` with a capital I reads ``alice`` too, which case-folding first would hide). Two names that
    share either are one name to a reader."""
    name = unicodedata.normalize("NFKC", username)
    return _tr39(name.casefold()), _tr39(name).casefold()


def username_skeleton(username: str) -> str:
    """The case-insensitive skeleton of ``username`` (the first of :func:`username_skeletons`).
    Two names with one skeleton are one name to a reader (``lead2``, ``LEAD2``, ``ｌｅａｄ２``, ``lеad2``)."""
    return username_skeletons(username)[0]


# Scripts whose letters pass for one another; other mixes are ordinary (Japanese writes kanji with kana).
_LOOKALIKE_SCRIPTS = {"LATIN", "CYRILLIC", "GREEK"}


def _scripts(username: str) -> set[str]:
    """The writing systems of the letters of ``username`` (LATIN, CYRILLIC, GREEK, HANGUL, ...)."""
    return {unicodedata.name(ch, "?").split(" ")[0] for ch in username if ch.isalpha()}


class AccountNames:
    """Every account's username by skeleton, read once for a batch of names (a bulk add, an import)."""

    def __init__(self) -> None:
        self._by_skeleton: dict[str, list[str]] | None = None

    def like(self, username: str) -> list[str]:
        """The existing usernames ``username`` looks like (by either skeleton)."""
        if self._by_skeleton is None:
            self._by_skeleton = {}
            # One pass over the usernames (a team's accounts, not its documents) instead of a stored skeleton.
            for name in get_user_model().objects.order_by("pk").values_list("username", flat=True).iterator():
                self.add(name)
        found = [name for key in set(username_skeletons(username)) for name in self._by_skeleton.get(key, [])]
        return list(dict.fromkeys(found))

    def add(self, username: str) -> None:
        if self._by_skeleton is not None:
            for key in set(username_skeletons(username)):
                self._by_skeleton.setdefault(key, []).append(username)


def _name_lock(username: str) -> bool:
    """On PostgreSQL, hold a lock on ``username``'s skeleton until the transaction ends, so that two requests
    creating ``newbie`` (or ``newbie`` and ``NEWBIE``) at once create one account: the second waits, then
    finds the first's. True when a lock was taken (SQLite writes one transaction at a time anyway)."""
    if connection.vendor != "postgresql" or not connection.in_atomic_block:
        return False
    digest = hashlib.blake2b(username_skeleton(username).encode(), digest_size=8, person=b"reljudge-user").digest()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [int.from_bytes(digest, "big", signed=True)])
    return True


def account_name_resolve(
    username: str, *, names: AccountNames | None = None, error: Callable[[str], Exception] = ValidationError
) -> tuple[str, Account | None]:
    """The username to store and the existing account it names (None: no such account, the name is free).

    The one rule for every place that creates or names an account (members page, API, add_member, a qrels
    import's source, a model judge): the name is NFKC-normalised and validated; an account whose name
    differs only in case is that account (``ALICE`` names ``alice``, as Django's forms compare usernames);
    a name that looks like another account's (mixed-in Cyrillic or Greek letters, full-width forms) or that
    mixes scripts is refused, naming the account it resembles. ``error`` builds the exception raised.
    """
    try:
        username = username_check(username)
    except ValidationError as exc:
        raise error(exc.messages[0]) from None
    model = get_user_model()
    user = model.objects.filter(username=username).first()
    if user is not None:
        return username, user
    if _name_lock(username):
        user = model.objects.filter(username=username).first()
        if user is not None:
            return username, user
    like = (names or AccountNames()).like(username)
    same = [name for name in like if name.casefold() == username.casefold()]
    if len(same) == 1:
        return same[0], model.objects.get(username=same[0])
    if same:
        raise error(
            _("%(username)s names several accounts (%(accounts)s): type one exactly")
            % {"username": repr(username), "accounts": ", ".join(sorted(same))}
        )
    if like:
        raise error(
            _(
                "%(username)s looks like the existing account %(account)s: use that name, or one nobody can "
                "mistake for it"
            )
            % {"username": repr(username), "account": repr(like[0])}
        )
    scripts = _scripts(username) & _LOOKALIKE_SCRIPTS
    if len(scripts) > 1:
        raise error(
            _("%(username)s mixes letters of several scripts (%(scripts)s): use letters of one script")
            % {"username": repr(username), "scripts": ", ".join(sorted(s.title() for s in scripts))}
        )
    return username, None
