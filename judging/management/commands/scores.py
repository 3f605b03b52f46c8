"""Score every system of a campaign from the current labels, trec_eval-exact."""

import json as jsonlib

from django.core.management.base import CommandError

import metrics
from judging import params
from judging.management.commands._base import CampaignCommand
from judging.params import LeaderboardQuery, ParamErrors
from judging.scoring import leaderboard_data


class Command(CampaignCommand):
    help = (
        "Per-system means (and per-query values with --json) of P@k, R@k, F1@k, Hit@k, MRR, MAP, nDCG@k, bpref "
        "and Judged@k over every query that has a label (queries a system did not answer score 0, as trec_eval -c), "
        "and whether each adjacent order of the ranking is settled (the JSON adds each system's score bounds)."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug")
        # Values are read by judging.params.LeaderboardQuery, as the page and the API read them.
        parser.add_argument("--k", help="cutoff for the @k measures (default 10)")
        parser.add_argument("--gain", help=f"nDCG gain: {' or '.join(metrics.GAINS)} (default linear)")
        parser.add_argument("--threshold", help="lowest label that counts as relevant (default 1)")
        parser.add_argument("--judged-only", action="store_true", help="condensed scoring (trec_eval -J)")
        parser.add_argument("--policy", help="aggregation policy (default: the campaign's)")
        parser.add_argument(
            "--labels",
            help="label source: humans (default), model:NAME (a model judge's labels) or hybrid:NAME "
            "(the human label where one exists, the model's elsewhere)",
        )
        parser.add_argument("--segment", help="only the queries carrying this tag (e.g. tail)")
        parser.add_argument(
            "--measure",
            help="rank the systems by this measure (nDCG, P, R, F1, Hit, MRR, MAP, bpref) and say, for each "
            "adjacent pair, whether its order is settled (default nDCG)",
        )
        parser.add_argument("--attribute", help="a document attribute (e.g. brand): add ILD@k and Coverage@k")
        parser.add_argument("--micro", action="store_true", help="add micro-averaged P@k and R@k")
        parser.add_argument("--json", action="store_true", help="print the API's JSON shape")

    def handle(self, *args, slug, json: bool, **options):
        campaign = self.campaign(slug)
        names = [n for n in params.LEADERBOARD if n not in ("per_query", "bounds")]
        try:
            query = LeaderboardQuery.parse(options, campaign=campaign, names=names)
        except ParamErrors as exc:
            problems = "; ".join(f"--{name.replace('_', '-')}: {' '.join(m)}" for name, m in exc.errors.items())
            raise CommandError(problems) from None
        try:
            data = leaderboard_data(campaign=campaign, **query.settings(*names), per_query=json)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if json:
            self.stdout.write(_dumps(data))
            return
        names = list(data["systems"][0]["measures"]) if data["systems"] else []
        width = max([len(s["name"]) for s in data["systems"]] + [6])
        self.stdout.write(
            f"{campaign.slug}: {data['queries']} queries with labels, k={query.k}, gain={query.gain}, "
            f"threshold={query.threshold}{', judged only' if query.judged_only else ''}, policy={data['policy']}"
            f"{'' if query.labels == 'humans' else ', labels=' + query.labels}"
            f"{'' if query.segment is None else ', segment=' + query.segment}"
        )
        widths = [max(11, len(n) + 2) for n in names]
        self.stdout.write("system".ljust(width) + "".join(n.rjust(w) for n, w in zip(names, widths, strict=True)))
        by = data["ranked_by"]
        ranked = sorted(data["systems"], key=lambda s: (-round(s["measures"][by], 12), s["name"]))
        for s in ranked:
            values = "".join(f"{s['measures'][n]:{w}.4f}" for n, w in zip(names, widths, strict=True))
            self.stdout.write(s["name"].ljust(width) + values)
        if not data["systems"]:
            self.stdout.write("(no systems: import a run first)")
            return
        for s in ranked:
            if "micro" in s:
                micro_text = ", ".join(f"{n} {v:.4f}" for n, v in s["micro"].items())
                self.stdout.write(f"micro {s['name']}: {micro_text}")
        # Whether more judgments can still reorder the ranking (see judging.scoring.trust.verdicts).
        self.stdout.write(f"ranked by {by}: {data['pairs_left']} unjudged pairs left can still change the ranking")
        for entry in data["settled"]:
            a, b = entry["systems"]
            state = "settled" if entry["settled"] else f"open ({entry['open_pairs']} unjudged pairs could change it)"
            self.stdout.write(f"  {a} above {b}: {state}")


def _dumps(data: dict) -> str:
    return jsonlib.dumps(data, indent=1)
