"""Import TREC qrels as one annotator's judgments."""

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from judging.management.commands._base import CampaignCommand
from judging.services import qrels_import, user_get


class Command(CampaignCommand):
    help = (
        "Import TREC qrels (`qid iteration docid label`) as USERNAME's judgments. Labels of documents "
        "outside the pool are kept too: they count for recall and the ideal ranking."
    )
    progress_unit = "labels"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--annotator", required=True, help="username the judgments are recorded for")

    def handle(self, *args, slug, file, annotator, **options):
        campaign = self.campaign(slug)
        try:
            user = user_get(username=annotator)
        except ValidationError as exc:
            raise CommandError(exc.messages[0]) from None
        data, name = self.read(file)
        self.run_import(
            qrels_import, total=data.count(b"\n"), campaign=campaign, data=data, filename=name, annotator=user
        )
