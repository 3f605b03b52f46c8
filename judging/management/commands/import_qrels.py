"""Import TREC qrels as the judgments of a named source (a member, or a non-login source account)."""

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import CommandError, CommandParser
from django.db import transaction

from judging.management.commands._base import CampaignCommand
from judging.services import qrels_import, user_get
from judging.services.model_judge import model_judge_get_or_create


class Command(CampaignCommand):
    help = (
        "Import TREC qrels (`qid iteration docid label`) as the confident judgments of NAME: a member of the "
        "campaign, or a source that is not a person (e.g. trec-2019), for which a source account nobody can "
        "log in with is created. Pairs NAME already judged in the app keep that judgment. Labels of documents "
        "outside the pool are kept too: they count for recall and the ideal ranking."
    )
    progress_unit = "labels"

    def add_arguments(self, parser: CommandParser) -> None:
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
        parser.add_argument(
            "--model",
            action="store_true",
            help="the labels come from an automatic judge: NAME is a model judge (created if new), whose "
            "labels never count as human labels unless the leaderboard asks for them (labels=model:NAME)",
        )
        parser.add_argument("--description", default="", help="with --model: which model and prompt made them")

    def handle(
        self,
        *args: object,
        slug: str,
        file: str,
        annotator: str,
        by: str | None = None,
        model: bool = False,
        description: str = "",
        **options: Any,
    ) -> None:
        campaign = self.campaign(slug)
        lead = None
        if by:
            try:
                lead = user_get(username=by)
            except ValidationError as exc:
                raise CommandError(f"--by: {exc.messages[0]}") from None
        data, name = self.read(file)
        # one transaction: a model judge named for a file that turns out bad is not left behind
        with transaction.atomic():
            if model:
                try:
                    model_judge_get_or_create(name=annotator, description=description, campaign=campaign)
                except ValidationError as exc:
                    raise CommandError(exc.messages[0]) from None
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
