"""Score every system of a campaign from the current labels, trec_eval-exact."""

import json as jsonlib

from django.core.management.base import CommandError

import metrics
from judging.management.commands._base import CampaignCommand
from judging.scoring import leaderboard_data


class Command(CampaignCommand):
    help = (
        "Per-system means (and per-query values with --json) of P@k, R@k, F1@k, Hit@k, MRR, MAP, nDCG@k and "
        "Judged@k over every query that has a label (queries a system did not answer score 0, as trec_eval -c)."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--k", type=int, default=10, help="cutoff for the @k measures (default 10)")
        parser.add_argument("--gain", choices=metrics.GAINS, default="linear", help="nDCG gain")
        parser.add_argument("--threshold", type=int, default=1, help="lowest label that counts as relevant")
        parser.add_argument("--judged-only", action="store_true", help="condensed scoring (trec_eval -J)")
        parser.add_argument("--policy", default=None, help="aggregation policy (default: the campaign's)")
        parser.add_argument(
            "--labels",
            default="humans",
            help="label source: humans (default), model:NAME (a model judge's labels) or hybrid:NAME "
            "(the human label where one exists, the model's elsewhere)",
        )
        parser.add_argument("--json", action="store_true", help="print the API's JSON shape")

    def handle(self, *args, slug, k, gain, threshold, judged_only, policy, labels, json: bool, **options):
        campaign = self.campaign(slug)
        try:
            data = leaderboard_data(
                campaign=campaign,
                k=k,
                gain=gain,
                threshold=threshold,
                judged_only=judged_only,
                policy=policy,
                labels=labels,
                per_query=json,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if json:
            self.stdout.write(_dumps(data))
            return
        names = list(data["systems"][0]["measures"]) if data["systems"] else []
        width = max([len(s["name"]) for s in data["systems"]] + [6])
        self.stdout.write(
            f"{campaign.slug}: {data['queries']} queries with labels, k={k}, gain={gain}, threshold={threshold}"
            f"{', judged only' if judged_only else ''}, policy={data['policy']}"
            f"{'' if labels == 'humans' else ', labels=' + labels}"
        )
        self.stdout.write("system".ljust(width) + "".join(n.rjust(11) for n in names))
        ranked = sorted(data["systems"], key=lambda s: -s["measures"].get(str(metrics.Measure("nDCG", k)), 0))
        for s in ranked:
            self.stdout.write(s["name"].ljust(width) + "".join(f"{s['measures'][n]:11.4f}" for n in names))
        if not data["systems"]:
            self.stdout.write("(no systems: import a run first)")


def _dumps(data: dict) -> str:
    return jsonlib.dumps(data, indent=1)
