"""Give a user a role in a campaign, creating the account (with a one-time set-password link) if asked."""

import os
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User as Account
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import CommandError, CommandParser

from judging.management.commands._base import CampaignCommand
from judging.models import Membership
from judging.services import member_add

BASE_URL = "http://127.0.0.1:8000"


class Command(CampaignCommand):
    help = (
        "add_member SLUG USERNAME --role annotator|lead [--create [--email E] [--name N]]: add a user to a "
        "campaign or change their role; --create makes a new account and prints its one-time set-password link"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=Membership.Role.values)
        parser.add_argument("--create", action="store_true", help="create the account if there is none")
        parser.add_argument("--email", default="", help="the new account's e-mail address (the link is mailed)")
        parser.add_argument("--name", default="", help="the new account's full name")
        parser.add_argument(
            "--base-url",
            default=os.environ.get("RELJUDGE_BASE_URL", BASE_URL),
            help=f"where people reach RelJudge, for the link (RELJUDGE_BASE_URL; default {BASE_URL})",
        )

    def handle(
        self,
        *args: object,
        slug: str,
        username: str,
        role: str,
        create: bool,
        email: str,
        name: str,
        base_url: str,
        **options: Any,
    ) -> None:
        campaign = self.campaign(slug)
        try:
            # The shell is the operator's: the command acts with the powers of a superuser.
            added = member_add(
                campaign=campaign,
                by=_operator(),
                username=username,
                role=role,
                create=create,
                email=email,
                name=name,
                base_url=base_url,
            )
        except (ValidationError, PermissionDenied) as exc:
            raise CommandError(getattr(exc, "messages", [str(exc)])[0]) from None
        article = "an" if role[:1] in "aeiou" else "a"
        self.stdout.write(
            f"{added.username} is now {article} {role} of {slug}" + (" (new account)" if added.created else "")
        )
        if added.link_path:
            self.stdout.write(f"one-time set-password link for {added.username}: {added.url(base_url)}")
            if added.emailed:
                self.stdout.write(f"(also e-mailed to {added.membership.user.email})")
            elif added.mail_refused:
                self.stdout.write(f"({added.mail_refused})")


def _operator() -> Account:
    """A stand-in superuser for the lead checks: whoever runs manage.py already controls the database."""
    return get_user_model()(username="manage.py", is_superuser=True)
