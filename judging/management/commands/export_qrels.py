"""Export a campaign's aggregated labels as TREC qrels."""

import sys
from typing import Any

from django.core.management.base import CommandParser

from judging.formats import format_qrels
from judging.management.commands._base import CampaignCommand
from judging.selectors import qrels_rows


class Command(CampaignCommand):
    help = "Write the labels the leaderboard scores as TREC qrels (`qid 0 docid label`)"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--output", default=None, help="file to write (default: standard output)")

    def handle(self, *args: object, slug: str, output: str | None, **options: Any) -> None:
        campaign = self.campaign(slug)
        lines = format_qrels(qrels_rows(campaign=campaign))
        if output:
            count = 0
            with open(output, "w", encoding="utf-8") as fh:
                for line in lines:
                    fh.write(line)
                    count += 1
            self.stderr.write(f"wrote {count} labels to {output}")
        else:
            for line in lines:
                sys.stdout.write(line)
