"""Draw queries at random for the audit of the prediction-powered leaderboard (labels=ppi:NAME), or show it."""

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError, CommandParser

from judging.management.commands._base import CampaignCommand
from judging.params import ascii_int
from judging.selectors import audit_state
from judging.services import audit_draw


class Command(CampaignCommand):
    help = (
        "Draw QUERIES more queries of the campaign uniformly at random (among those not drawn yet) for people to "
        "judge completely in the 'audit' queue mode, and record the draw with its seed; without --queries, "
        "show the audit's state. The prediction-powered leaderboard (scores --labels ppi:NAME) corrects a model "
        "judge's scores with the audited queries."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the campaign's slug")
        parser.add_argument("--queries", help="how many more queries to draw")
        parser.add_argument("--seed", help="seed of the draw (default: a fresh random one)")

    def handle(
        self, *args: object, slug: str, queries: str | None = None, seed: str | None = None, **options: Any
    ) -> None:
        campaign = self.campaign(slug)
        if queries is not None:
            try:
                size = ascii_int(queries)
                seed_value = None if seed is None else ascii_int(seed)
            except ValueError as exc:
                raise CommandError(f"--queries and --seed take whole numbers written with 0-9, not {exc}") from None
            try:
                draw = audit_draw(campaign=campaign, size=size, user=None, seed=seed_value)
            except ValidationError as exc:
                raise CommandError(" ".join(exc.messages)) from None
            self.stdout.write(f"{campaign.slug}: drew {draw.size} queries (seed {draw.seed})")
        state = audit_state(campaign=campaign)
        self.stdout.write(
            f"{campaign.slug}: {state.n_audited} of {state.total} queries audited, {state.drawn.size} drawn, "
            f"{state.open_pairs} pooled pairs of the drawn queries without a human label"
        )
