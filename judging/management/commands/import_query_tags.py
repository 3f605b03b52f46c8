"""Import query tags (segments such as head/torso/tail) into a campaign."""

from typing import Any

from judging.management.commands._base import CampaignCommand
from judging.services import query_tags_import


class Command(CampaignCommand):
    help = (
        "Set query tags from a TSV file qid<TAB>tag,tag (one line per query; an empty second column clears "
        "that query's tags). The leaderboard filters on them with ?segment=TAG."
    )

    def handle(self, *args: object, slug: str, file: str, **options: Any) -> None:
        campaign = self.campaign(slug)
        data, name = self.read(file)
        self.run_import(lambda progress, **kw: query_tags_import(**kw), campaign=campaign, data=data, filename=name)
