"""Give an existing user a role in a campaign."""

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from judging.management.commands._base import CampaignCommand
from judging.services import membership_add, user_get


class Command(CampaignCommand):
    help = "add_member SLUG USERNAME --role annotator|lead (the user must exist)"

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=["annotator", "lead"])

    def handle(self, *args, slug, username, role, **options):
        campaign = self.campaign(slug)
        try:
            user = user_get(username=username)
            membership_add(campaign=campaign, user=user, role=role)
        except ValidationError as exc:
            raise CommandError(exc.messages[0]) from None
        self.stdout.write(f"{username} is now {role} of {slug}")
