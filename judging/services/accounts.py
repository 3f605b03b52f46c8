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
outside their campaigns. The same rules are checked again when the link is used (``set_password_refusal``):
a link names the account that issued it, so an account made an administrator, or added to a campaign its
issuer does not lead, after the link was issued cannot be taken over with it.

Usernames (how a name is checked, and refused when it looks like another account's) are ``judging.usernames``'s.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import time
from dataclasses import dataclass
from typing import cast

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User as Account
from django.contrib.auth.tokens import PasswordResetTokenGenerator
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import base36_to_int, int_to_base36, urlsafe_base64_encode
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from rest_framework.authtoken.models import Token

from judging.access import lead_required
from judging.endpoints import urls_display
from judging.models import Campaign, Membership
from judging.services.campaigns import membership_add, no_user, not_a_person
from judging.usernames import AccountNames, account_name_resolve, username_check, username_skeleton

logger = logging.getLogger(__name__)

LINK_DAYS = settings.PASSWORD_RESET_TIMEOUT // 86400


def _email_check(email: str) -> str:
    email = (email or "").strip()
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise ValidationError(_("%(email)s is not an e-mail address") % {"email": repr(email)}) from None
        # validate_email takes up to 320 characters; the column holds fewer (PostgreSQL answered a DataError).
        limit = cast(int, get_user_model()._meta.get_field("email").max_length)
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


def password_pending(user: Account) -> bool:
    """True for an account whose owner has not set a password yet (created by a lead, link not used)."""
    return not user.has_usable_password()


class SetPasswordTokens:
    """One-time set-password tokens that name who issued them: ``<issuer>-<timestamp>-<hash>``.

    The hash is Django's password-reset token (it covers the password, so the link works once, and expires
    after ``PASSWORD_RESET_TIMEOUT``) keyed also by the issuer's id, so the issuer cannot be changed without
    the secret key. The issuer ``0`` is the operator (``manage.py add_member``). ``check_token`` is the
    interface Django's reset-confirm view calls; ``issuer`` reads the issuer of a token it accepted."""

    OPERATOR = 0

    def _generator(self, issuer: int) -> PasswordResetTokenGenerator:
        generator = PasswordResetTokenGenerator()
        generator.key_salt = f"judging.services.accounts.SetPasswordTokens:{issuer}"
        return generator

    def make_token(self, user: Account, *, by: Account) -> str:
        issuer = by.pk or self.OPERATOR
        return f"{int_to_base36(issuer)}-{self._generator(issuer).make_token(user)}"

    def issuer(self, token: str | None) -> int | None:
        head, _dash, _rest = (token or "").partition("-")
        try:
            return base36_to_int(head) if head and len(head) <= 13 else None
        except ValueError:
            return None

    def check_token(self, user: Account | None, token: str | None) -> bool:
        issuer = self.issuer(token)
        if user is None or issuer is None:
            return False
        return self._generator(issuer).check_token(user, (token or "").partition("-")[2])


set_password_tokens = SetPasswordTokens()


def set_password_path(*, user: Account, by: Account) -> str:
    """The path of a fresh one-time set-password link for ``user`` issued by ``by`` (Django's reset-confirm
    view, with RelJudge's tokens)."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    token = set_password_tokens.make_token(user, by=by)
    return reverse("judging:set_password", kwargs={"uidb64": uid, "token": token})


def set_password_refusal(*, user: Account, token: str | None) -> str | None:
    """Why a valid set-password link may no longer be used, in words for the person who opened it, or None.

    The rules for issuing the link are checked again now: the account may have been made an administrator,
    or added to a campaign its issuer does not lead, since the link was issued; the issuer must still be an
    active account leading one of the account's campaigns. None too for a token that is not valid at all
    (used, expired, altered): the view then says that the link no longer works."""
    if not set_password_tokens.check_token(user, token):
        return None
    names = {"username": user.username}
    if user.is_superuser or user.is_staff:
        return (
            _(
                "%(username)s is now an administrator account: a link from a campaign's lead cannot set its "
                "password. Ask an administrator."
            )
            % names
        )
    if not_a_person(user):
        return _("%(username)s is a model judge or a source of imported labels: nobody logs in as it.") % names
    issuer_id = set_password_tokens.issuer(token)
    if issuer_id == SetPasswordTokens.OPERATOR:
        return None
    by = get_user_model().objects.filter(pk=issuer_id, is_active=True).first() if issuer_id is not None else None
    if by is None:
        return _(
            "The account that issued this link no longer exists or was deactivated: ask a lead of your "
            "campaign for a new link."
        )
    if by.is_superuser:
        return None
    led = Membership.objects.filter(user=by, role=Membership.Role.LEAD).values("campaign")
    memberships = Membership.objects.filter(user=user)
    names["issuer"] = by.username
    if not memberships.filter(campaign__in=led).exists():
        return (
            _(
                "%(issuer)s, who issued this link, no longer leads a campaign of %(username)s: ask a lead of "
                "your campaign for a new link."
            )
            % names
        )
    if memberships.exclude(campaign__in=led).exists():
        return (
            _(
                "%(username)s now belongs to a campaign that %(issuer)s, who issued this link, does not lead: "
                "ask a lead of that campaign for a new link."
            )
            % names
        )
    return None


def _may_issue_link(*, by: Account, user: Account) -> str | None:
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


def model_judge_membership(*, campaign: Campaign, user: Account, description: str = "") -> Membership:
    """A model judge's annotator membership of ``campaign``, with this campaign's description of it when one
    is given (every endpoint URL in it without credentials). Another campaign's description is not touched."""
    membership, _created = Membership.objects.get_or_create(
        campaign=campaign, user=user, defaults={"role": Membership.Role.ANNOTATOR}
    )
    description = urls_display(description)
    if description and membership.description != description:
        membership.description = description
        membership.save(update_fields=["description"])
    return membership


@dataclass
class MemberAdded:
    """What adding one person did: their membership, whether the account is new, and the link to pass on."""

    membership: Membership
    created: bool
    link_path: str | None = None
    emailed: bool = False
    mail_refused: str | None = None  # why the link was not e-mailed (the hourly limits) and when to retry

    @property
    def username(self) -> str:
        return self.membership.user.username

    def url(self, base: str) -> str | None:
        return base.rstrip("/") + self.link_path if self.link_path else None

    def mail(self, *, campaign: Campaign, by: Account, base_url: str) -> None:
        """E-mail the link (see ``_link_mail``); past the hourly limits, say why it was not sent instead."""
        url = self.url(base_url)
        if url is None:  # no link to send
            return
        try:
            self.emailed = _link_mail(user=self.membership.user, campaign=campaign, url=url, by=by)
        except MailThrottled as exc:
            self.mail_refused = exc.messages[0]


class MailThrottled(ValidationError):
    """Too many set-password mails for one address or from one lead this hour; the message says when to retry."""


def _mail_throttle(*, user: Account, by: Account) -> None:
    """Count one set-password mail to ``user`` sent by ``by``; MailThrottled saying when to try again once
    ``SET_PASSWORD_MAIL_RATE`` (per recipient, per lead, per ``SET_PASSWORD_MAIL_WINDOW`` seconds) is reached.
    A lead cannot use the server to flood an inbox, nor to mail many addresses text of their own."""
    per_recipient, per_lead = settings.SET_PASSWORD_MAIL_RATE
    window = settings.SET_PASSWORD_MAIL_WINDOW
    limits = [(f"reljudge:setpw-mail:to:{user.email.strip().lower()}", per_recipient)]
    if by.pk:  # the operator (manage.py) is not limited per sender
        limits.append((f"reljudge:setpw-mail:by:{by.pk}", per_lead))
    now = time.time()
    for key, limit in limits:
        cache.add(f"{key}:since", now, timeout=window)
        cache.add(key, 0, timeout=window)
        if cache.get(key, 0) >= limit:
            since = cache.get(f"{key}:since", now)
            minutes = max(1, math.ceil((since + window - now) / 60))
            who = user.email if key.startswith("reljudge:setpw-mail:to:") else by.username
            raise MailThrottled(
                ngettext(
                    "Not e-mailed: too many set-password e-mails for %(who)s (at most %(limit)s an hour). Pass "
                    "the link on yourself, or ask for a new one by e-mail in %(n)s minute.",
                    "Not e-mailed: too many set-password e-mails for %(who)s (at most %(limit)s an hour). Pass "
                    "the link on yourself, or ask for a new one by e-mail in %(n)s minutes.",
                    minutes,
                )
                % {"who": who, "limit": limit, "n": minutes}
            )
    for key, _limit in limits:
        try:
            cache.incr(key)
        except ValueError:  # expired between the check and now: a new window starts with this mail
            cache.set(key, 1, timeout=window)


def _link_mail(*, user: Account, campaign: Campaign, url: str, by: Account) -> bool:
    """E-mail the link, once the transaction commits, when the account has an address and an e-mail backend
    is configured; True when it will be sent, MailThrottled past the hourly limits. The lead sees the link on
    the page in any case. The subject carries nothing a lead wrote; the body quotes the campaign's name and
    the inviter's."""
    if not user.email or not mail_configured():
        return False
    _mail_throttle(user=user, by=by)
    inviter = by.get_full_name() or by.username
    names = {"campaign": campaign.name, "inviter": inviter, "username": user.username, "days": LINK_DAYS, "url": url}
    subject = _("RelJudge: set your password")
    body = (
        _('%(inviter)s added you to the RelJudge campaign "%(campaign)s" as %(username)s.') % names
        + "\n\n"
        + _("Set your password here (the link works once, for %(days)s days):") % names
        + f"\n{url}\n"
    )

    def send() -> None:
        try:
            send_mail(subject, body, None, [user.email])
            logger.info("set-password link e-mailed to %s (issued by %s)", user.username, by.username)
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
    by: Account,
    username: str,
    role: str = Membership.Role.ANNOTATOR,
    create: bool = False,
    email: str = "",
    name: str = "",
    base_url: str = "",
    names: AccountNames | None = None,
) -> MemberAdded:
    """Add ``username`` to ``campaign`` with ``role`` (or change their role), on behalf of the lead ``by``.

    With ``create`` an unknown username becomes a new account (no password, optional e-mail and name) and
    gets a one-time set-password link; an existing user is added as they are (their e-mail and name are
    theirs, not the lead's to change). An existing account still waiting for its password gets a fresh link
    when ``by`` may issue one. ``base_url`` (scheme and host) makes the e-mailed link absolute. The name is
    read as ``account_name_resolve`` reads it (``names``: the accounts read once for a batch).
    """
    lead_required(campaign=campaign, user=by, what=_("add members"))
    username, user = account_name_resolve(username, names=names)
    email = _email_check(email)
    model = get_user_model()
    created = False
    if user is None:
        if not create:
            raise ValidationError(no_user(username))
        first, _space, last = (name or "").strip().partition(" ")
        user = model(username=username, email=email, first_name=first[:150], last_name=last.strip()[:150])
        user.set_unusable_password()
        user.save()
        if names is not None:
            names.add(username)
        created = True
        logger.info("account %s created by %s for campaign %s", username, by.username, campaign.slug)
    membership = membership_add(campaign=campaign, user=user, role=role)
    logger.info("%s made %s a member of campaign %s as %s", by.username, username, campaign.slug, role)
    result = MemberAdded(membership=membership, created=created)
    if created or _may_issue_link(by=by, user=user) is None:
        result.link_path = set_password_path(user=user, by=by)
        logger.info("set-password link for %s issued by %s (campaign %s)", username, by.username, campaign.slug)
        if base_url:
            result.mail(campaign=campaign, by=by, base_url=base_url)
    return result


def set_password_link_issue(*, campaign: Campaign, by: Account, user: Account, base_url: str = "") -> MemberAdded:
    """A fresh set-password link for a member of ``campaign`` who has not set a password yet ("resend")."""
    lead_required(campaign=campaign, user=by, what=_("send set-password links"))
    membership = Membership.objects.filter(campaign=campaign, user=user).select_related("user").first()
    if membership is None:
        raise PermissionDenied(_("%(username)s is not a member of this campaign") % {"username": user.username})
    why_not = _may_issue_link(by=by, user=user)
    if why_not:
        raise ValidationError(why_not)
    result = MemberAdded(membership=membership, created=False, link_path=set_password_path(user=user, by=by))
    logger.info("set-password link for %s issued again by %s (campaign %s)", user.username, by.username, campaign.slug)
    if base_url:
        result.mail(campaign=campaign, by=by, base_url=base_url)
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
            username = username_check(values.get("username", ""))
            email = _email_check(values.get("email", ""))
        except ValidationError as exc:
            raise ValidationError(
                _("%(source)s, line %(line)s: %(error)s") % {"source": source, "line": i, "error": exc.messages[0]}
            ) from None
        key = username_skeleton(username)
        if key in seen:
            raise ValidationError(
                _("%(source)s, line %(line)s: %(username)s is listed twice (also line %(first)s)")
                % {"source": source, "line": i, "username": repr(username), "first": seen[key]}
            )
        seen[key] = i
        people.append(PersonRow(username=username, email=email, name=values.get("name", "")))
    if not people:
        raise ValidationError(_("%(source)s: no usernames found") % {"source": source})
    return people


@transaction.atomic
def members_add(
    *, campaign: Campaign, by: Account, people: list[PersonRow], role: str, base_url: str = ""
) -> list[MemberAdded]:
    """Add many people at once, creating the accounts that do not exist; all or nothing."""
    names = AccountNames()
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
            names=names,
        )
        for p in people
    ]


# --------------------------------------------------------------------------- API tokens


def api_token_get(*, user: Account) -> Token:
    """The user's API token, created on first use (the token endpoint's login)."""
    token, created = Token.objects.get_or_create(user=user)
    if created:
        logger.info("API token of %s created", user.get_username())
    return token


@transaction.atomic
def api_token_rotate(*, user: Account) -> Token:
    """A new API token for the user: the old one, if any, stops working at once (scripts get 401)."""
    Token.objects.filter(user=user).delete()
    token = Token.objects.create(user=user)
    logger.info("API token of %s rotated", user.get_username())
    return token


def api_token_revoke(*, user: Account) -> bool:
    """Delete the user's API token (a logout of every script, or a password change); True if there was one."""
    deleted, _per_model = Token.objects.filter(user=user).delete()
    if deleted:
        logger.info("API token of %s revoked", user.get_username())
    return bool(deleted)
