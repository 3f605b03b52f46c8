"""Import documents (JSONL or TSV) into a campaign."""

from typing import Any

from judging.management.commands._base import CampaignCommand
from judging.services import documents_import


class Command(CampaignCommand):
    help = "Import documents: JSONL {docid, title?, text, url?} or TSV docid<TAB>title<TAB>text"
    progress_unit = "docs"

    def handle(self, *args: object, slug: str, file: str, **options: Any) -> None:
        campaign = self.campaign(slug)
        data, name = self.read(file)
        self.run_import(documents_import, total=data.count(b"\n"), campaign=campaign, data=data, filename=name)
