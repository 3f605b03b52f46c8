"""Import a ranked run and pool its top documents."""

from typing import Any

from django.core.management.base import CommandParser

from judging.management.commands._base import CampaignCommand
from judging.services import run_import


class Command(CampaignCommand):
    help = (
        "Import a run (TREC `qid Q0 docid rank score tag`, TSV or JSONL) as a system and add its top "
        "pool-depth documents per query to the pool. Unknown queries and documents become stubs."
    )
    progress_unit = "entries"

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--system", default=None, help="system name (default: the run's tag column)")
        parser.add_argument("--replace", action="store_true", help="overwrite a different run of the same system")

    def handle(self, *args: object, slug: str, file: str, system: str | None, replace: bool, **options: Any) -> None:
        campaign = self.campaign(slug)
        data, name, lines = self.open(file)  # read a piece at a time: memory stays flat whatever the file's size
        with data:
            self.run_import(
                run_import,
                total=lines,
                campaign=campaign,
                data=data,
                filename=name,
                system_name=system,
                replace=replace,
            )
