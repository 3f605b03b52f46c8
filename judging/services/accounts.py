"""Accounts for a campaign's team, run by its leads: adding people by username, one-time set-password links.

A lead never types a password for someone else. A new account gets an unusable password and a link to
RelJudge's set-password page (Django's reset-confirm view, with or without mail) carrying a
PasswordResetTokenGenerator token: it is valid for
``settings.PASSWORD_RESET_TIMEOUT`` (a few days) and only once, since the token hashes the password, which
changes when it is used.

What a lead may do to an account is bounded by their campaigns: they may add any existing user to a
campaign they lead (a person on several campaigns keeps one account), but they may issue a set-password
link only for an account that has never had a password and that belongs to no campaign they do not lead,
and never for a superuser or staff account. Otherwise a lead could take over an account that holds powers
outside their campaigns.
"""

from __future__ import annotations

import csv
import io
import logging
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.utils.translation import gettext as _
from rest_framework.authtoken.models import Token

from judging.access import lead_required
from judging.models import AnnotatorProfile, Campaign, Membership, User
from judging.services.campaigns import membership_add, no_user

logger = logging.getLogger(__name__)

LINK_DAYS = settings.PASSWORD_RESET_TIMEOUT // 86400


def _username_check(username: str) -> str:
    username = (username or "").strip()
    field = get_user_model()._meta.get_field("username")
    if not username:
        raise ValidationError(_("a username is required"))
    try:
        field.run_validators(username)
    except ValidationError as exc:
        raise ValidationError(
            _("username %(username)s: %(errors)s") % {"username": repr(username), "errors": " ".join(exc.messages)}
        ) from None
    if len(username) > field.max_length:
        raise ValidationError(
            _("username %(username)s: at most %(limit)s characters")
            % {"username": repr(username), "limit": field.max_length}
        )
    return username


def _email_check(email: str) -> str:
    email = (email or "").strip()
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise ValidationError(_("%(email)s is not an e-mail address") % {"email": repr(email)}) from None
        # validate_email takes up to 320 characters; the column holds fewer (PostgreSQL answered a DataError).
        limit = get_user_model()._meta.get_field("email").max_length
        if len(email) > limit:
            raise ValidationError(
                _("e-mail %(email)s: at most %(limit)s characters")
                % {"email": repr(email[:60] + "..."), "limit": limit}
            )
    return email


def mail_configured() -> bool:
    """Whether this server sends e-mail: SMTP once EMAIL_HOST is set (settings.PASSWORD_RESET_ENABLED), or
    any other backend chosen on purpose (console, file, the test suite's locmem), but not the dummy."""
    backend = settings.EMAIL_BACKEND
    if backend == "django.core.mail.backends.smtp.EmailBackend":
        return bool(getattr(settings, "PASSWORD_RESET_ENABLED", False))
    return backend != "django.core.mail.backends.dummy.EmailBackend"


def password_pending(user: User) -> bool:
    """True for an account whose owner has not set a password yet (created by a lead, link not used)."""
    return not user.has_usable_password()


def not_a_person(user: User) -> bool:
    """A model judge or a source of imported labels (e.g. trec-2019): an account nobody may log in as."""
    profile = getattr(user, "annotator_profile", None)
    return hasattr(user, "label_source") or (profile is not None and profile.kind == AnnotatorProfile.Kind.MODEL)


def set_password_path(*, user: User) -> str:
    """The path of a fresh one-time set-password link for ``user`` (Django's reset-confirm view)."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    return reverse("judging:set_password", kwargs={"uidb64": uid, "token": token})


def _may_issue_link(*, by: User, user: User) -> str | None:
    """Why ``by`` may not issue a set-password link for ``user``, or None when they may."""
    names = {"username": user.username}
    if user.is_superuser or user.is_staff:
        return _("%(username)s is an administrator account: only they (or another administrator) can change it") % names
    if not_a_person(user):
        return _("%(username)s is a model judge or a source of imported labels: nobody logs in as it") % names
    if not password_pending(user):
        return (
            _("%(username)s has already set a password; they can use 'Forgot your password?' on the login page") % names
        )
    if by.is_superuser:
        return None
    elsewhere = (
        Membership.objects.filter(user=user)
        .exclude(campaign__in=Membership.objects.filter(user=by, role=Membership.Role.LEAD).values("campaign"))
        .exists()
    )
    if elsewhere:
        return (
            _("%(username)s also belongs to campaigns you do not lead: ask one of their leads for a new link") % names
        )
    return None


@dataclass
class MemberAdded:
    """What adding one person did: their membership, whether the account is new, and the link to pass on."""

    membership: Membership
    created: bool
    link_path: str | None = None
    emailed: bool = False

    @property
    def username(self) -> str:
        return self.membership.user.username

    def url(self, base: str) -> str | None:
        return base.rstrip("/") + self.link_path if self.link_path else None


def _link_mail(*, user: User, campaign: Campaign, url: str, by: User) -> bool:
    """E-mail the link, once the transaction commits, when the account has an address and an e-mail backend
    is configured; True when it will be sent. The lead sees the link on the page in any case."""
    if not user.email or not mail_configured():
        return False
    inviter = by.get_full_name() or by.username
    names = {"campaign": campaign.name, "inviter": inviter, "username": user.username, "days": LINK_DAYS, "url": url}
    subject = _("RelJudge: set your password for %(campaign)s") % names
    body = (
        _('%(inviter)s added you to the RelJudge campaign "%(campaign)s" as %(username)s.') % names
        + "\n\n"
        + _("Set your password here (the link works once, for %(days)s days):") % names
        + f"\n{url}\n"
    )

    def send():
        try:
            send_mail(subject, body, None, [user.email])
        except OSError:
            # A mail server that is down must not undo the membership: the lead passes the link on instead.
            logger.warning("could not e-mail the set-password link to %s", user.username, exc_info=True)

    # After the commit: a bulk add that fails on a later line must not have sent mail for the earlier ones.
    transaction.on_commit(send)
    return True


@transaction.atomic
def member_add(
    *,
    campaign: Campaign,
    by: User,
    username: str,
    role: str = Membership.Role.ANNOTATOR,
    create: bool = False,
    email: str = "",
    name: str = "",
    base_url: str = "",
) -> MemberAdded:
    """Add ``username`` to ``campaign`` with ``role`` (or change their role), on behalf of the lead ``by``.

    With ``create`` an unknown username becomes a new account (no password, optional e-mail and name) and
    gets a one-time set-password link; an existing user is added as they are (their e-mail and name are
    theirs, not the lead's to change). An existing account still waiting for its password gets a fresh link
    when ``by`` may issue one. ``base_url`` (scheme and host) makes the e-mailed link absolute.
    """
    lead_required(campaign=campaign, user=by, what=_("add members"))
    username = _username_check(username)
    email = _email_check(email)
    model = get_user_model()
    user = model.objects.filter(username=username).first()
    created = False
    if user is None:
        if not create:
            raise ValidationError(no_user(username))
        first, _space, last = (name or "").strip().partition(" ")
        user = model(username=username, email=email, first_name=first[:150], last_name=last.strip()[:150])
        user.set_unusable_password()
        user.save()
        created = True
        logger.info("account %s created by %s for campaign %s", username, by.username, campaign.slug)
    membership = membership_add(campaign=campaign, user=user, role=role)
    result = MemberAdded(membership=membership, created=created)
    if created or _may_issue_link(by=by, user=user) is None:
        result.link_path = set_password_path(user=user)
        if base_url:
            result.emailed = _link_mail(user=user, campaign=campaign, url=result.url(base_url), by=by)
    return result


def set_password_link_issue(*, campaign: Campaign, by: User, user: User, base_url: str = "") -> MemberAdded:
    """A fresh set-password link for a member of ``campaign`` who has not set a password yet ("resend")."""
    lead_required(campaign=campaign, user=by, what=_("send set-password links"))
    membership = Membership.objects.filter(campaign=campaign, user=user).select_related("user").first()
    if membership is None:
        raise PermissionDenied(_("%(username)s is not a member of this campaign") % {"username": user.username})
    why_not = _may_issue_link(by=by, user=user)
    if why_not:
        raise ValidationError(why_not)
    result = MemberAdded(membership=membership, created=False, link_path=set_password_path(user=user))
    if base_url:
        result.emailed = _link_mail(user=user, campaign=campaign, url=result.url(base_url), by=by)
    return result


@dataclass(frozen=True)
class PersonRow:
    username: str
    email: str = ""
    name: str = ""


def people_parse(text: str, *, source: str | None = None) -> list[PersonRow]:
    """People to add, one per line: ``username[,email[,name]]`` (a pasted list or a CSV file).

    A first line naming the columns (``username,email,name`` in any order) is a header. Blank lines and
    lines starting with ``#`` are skipped. Errors name the line and the field; a username listed twice is
    an error (which of the two lines was meant?).
    """
    source = source or _("the list")
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    columns = ["username", "email", "name"]
    start = 0
    for i, row in enumerate(rows):
        cells = [c.strip().lower() for c in row]
        if not any(cells) or cells[0].startswith("#"):
            continue
        if "username" in cells:
            unknown = [c for c in cells if c and c not in columns]
            if unknown:
                raise ValidationError(
                    _("%(source)s, line %(line)s: unknown column %(name)s; expected username, email, name")
                    % {"source": source, "line": i + 1, "name": repr(unknown[0])}
                )
            columns, start = cells, i + 1
        break
    people: list[PersonRow] = []
    seen: dict[str, int] = {}
    for i, row in enumerate(rows[start:], start=start + 1):
        cells = [c.strip() for c in row]
        if not any(cells) or cells[0].startswith("#"):
            continue
        if len(cells) > len(columns):
            raise ValidationError(
                _("%(source)s, line %(line)s: %(found)s fields; expected at most %(limit)s")
                % {"source": source, "line": i, "found": len(cells), "limit": len(columns)}
            )
        values = dict(zip(columns, cells, strict=False))
        try:
            username = _username_check(values.get("username", ""))
            email = _email_check(values.get("email", ""))
        except ValidationError as exc:
            raise ValidationError(
                _("%(source)s, line %(line)s: %(error)s") % {"source": source, "line": i, "error": exc.messages[0]}
            ) from None
        if username in seen:
            raise ValidationError(
                _("%(source)s, line %(line)s: %(username)s is listed twice (also line %(first)s)")
                % {"source": source, "line": i, "username": repr(username), "first": seen[username]}
            )
        seen[username] = i
        people.append(PersonRow(username=username, email=email, name=values.get("name", "")))
    if not people:
        raise ValidationError(_("%(source)s: no usernames found") % {"source": source})
    return people


@transaction.atomic
def members_add(
    *, campaign: Campaign, by: User, people: list[PersonRow], role: str, base_url: str = ""
) -> list[MemberAdded]:
    """Add many people at once, creating the accounts that do not exist; all or nothing."""
    return [
        member_add(
            campaign=campaign,
            by=by,
            username=p.username,
            role=role,
            create=True,
            email=p.email,
            name=p.name,
            base_url=base_url,
        )
        for p in people
    ]


# --------------------------------------------------------------------------- API tokens


def api_token_get(*, user: User) -> Token:
    """The user's API token, created on first use (the token endpoint's login)."""
    token, _created = Token.objects.get_or_create(user=user)
    return token


@transaction.atomic
def api_token_rotate(*, user: User) -> Token:
    """A new API token for the user: the old one, if any, stops working at once (scripts get 401)."""
    Token.objects.filter(user=user).delete()
    token = Token.objects.create(user=user)
    logger.info("API token of %s rotated", user.get_username())
    return token


def api_token_revoke(*, user: User) -> bool:
    """Delete the user's API token (a logout of every script, or a password change); True if there was one."""
    deleted, _per_model = Token.objects.filter(user=user).delete()
    if deleted:
        logger.info("API token of %s revoked", user.get_username())
    return bool(deleted)
