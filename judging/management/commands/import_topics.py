"""Import topics (TSV or JSONL) into a campaign."""

from typing import Any

from judging.management.commands._base import CampaignCommand
from judging.services import queries_import


class Command(CampaignCommand):
    help = "Import topics: TSV qid<TAB>text[<TAB>description] or JSONL {qid, text, description?}"

    def handle(self, *args: object, slug: str, file: str, **options: Any) -> None:
        campaign = self.campaign(slug)
        data, name = self.read(file)
        self.run_import(lambda progress, **kw: queries_import(**kw), campaign=campaign, data=data, filename=name)
