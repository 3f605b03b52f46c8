"""Import online figures (CTR, conversion, ...) of a campaign's systems."""

from typing import Any

from judging.management.commands._base import CampaignCommand
from judging.services.online import online_import


class Command(CampaignCommand):
    help = (
        "Import online figures from CSV `system,metric,value[,ci_low,ci_high][,qid]` (an A/B test or a log "
        "analysis), campaign-wide or per query, for the 'Offline vs online' page. Re-importing replaces them."
    )
    progress_unit = "figures"

    def handle(self, *args: object, slug: str, file: str, **options: Any) -> None:
        campaign = self.campaign(slug)
        data, name = self.read(file)
        self.run_import(online_import, campaign=campaign, data=data, filename=name)
