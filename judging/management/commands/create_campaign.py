"""Create a judging campaign with its grading scale and pool depth."""

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from judging.services import campaign_create, scale_from_values


class Command(BaseCommand):
    help = "Create a campaign: create_campaign SLUG [--name TEXT] [--grades 0,1,2] [--pool-depth N]"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", default="")
        parser.add_argument("--grades", default="0,1,2", help="comma-separated grade values (default 0,1,2)")
        parser.add_argument("--pool-depth", type=int, default=10, help="pool each run's top N per query")
        parser.add_argument("--guidelines", default="", help="judging guidelines text")

    def handle(
        self, *args: object, slug: str, name: str, grades: str, pool_depth: int, guidelines: str, **options: Any
    ) -> None:
        try:
            values = [int(v) for v in grades.split(",") if v.strip()]
        except ValueError:
            raise CommandError(f"--grades must be comma-separated whole numbers, not {grades!r}") from None
        try:
            campaign = campaign_create(
                slug=slug, name=name, scale=scale_from_values(values), pool_depth=pool_depth, guidelines=guidelines
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        self.stdout.write(
            f"created campaign {campaign.slug!r} (grades {', '.join(map(str, sorted(set(values))))}, "
            f"pool depth {campaign.pool_depth})"
        )
