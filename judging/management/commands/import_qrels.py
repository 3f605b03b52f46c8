"""Import TREC qrels as the judgments of a named source (a member, or a non-login source account)."""

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import CommandError

from judging.management.commands._base import CampaignCommand
from judging.services import qrels_import, user_get


class Command(CampaignCommand):
    help = (
        "Import TREC qrels (`qid iteration docid label`) as the confident judgments of NAME: a member of the "
        "campaign, or a source that is not a person (e.g. trec-2019), for which a source account nobody can "
        "log in with is created. Pairs NAME already judged in the app keep that judgment. Labels of documents "
        "outside the pool are kept too: they count for recall and the ideal ranking."
    )
    progress_unit = "labels"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument(
            "--annotator",
            required=True,
            metavar="NAME",
            help="whose judgments the labels become: a member's username, or a source name such as trec-2019",
        )
        parser.add_argument(
            "--by",
            metavar="USERNAME",
            help="the lead recording this import (revisions name them; without it they say 'command line')",
        )

    def handle(self, *args, slug, file, annotator, by=None, **options):
        campaign = self.campaign(slug)
        lead = None
        if by:
            try:
                lead = user_get(username=by)
            except ValidationError as exc:
                raise CommandError(f"--by: {exc.messages[0]}") from None
        data, name = self.read(file)
        try:
            self.run_import(
                qrels_import,
                total=data.count(b"\n"),
                campaign=campaign,
                data=data,
                filename=name,
                annotator=annotator,
                imported_by=lead,
            )
        except PermissionDenied as exc:
            raise CommandError(f"--by: {exc}") from None
