"""Score every system of a campaign from the current labels, trec_eval-exact."""

import json as jsonlib
import math
import re
import secrets
from typing import Any

from django.core.management.base import CommandError, CommandParser

import metrics
from judging import params
from judging.errors import RequestError
from judging.management.commands._base import CampaignCommand
from judging.params import LeaderboardQuery, ParamErrors
from judging.scoring import leaderboard_data


class Command(CampaignCommand):
    help = (
        "Per-system means (and per-query values with --per-query) of P@k, R@k, F1@k, Hit@k, MRR, MAP, nDCG@k, bpref "
        "and Judged@k over every query that has a label (queries a system did not answer score 0, as trec_eval -c), "
        "and whether each adjacent order of the ranking is settled (the JSON adds each system's score bounds)."
    )
    # A read-only report: Django's system checks (URLs, admin, templates: 0.4 s) are `manage.py check`'s job, not
    # a cost of every scores run (a cold `scores --json` at 10M entries should start in under 5 s).
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        # Values are read by judging.params.LeaderboardQuery, as the page and the API read them.
        parser.add_argument("--k", help="cutoff for the @k measures (default 10)")
        parser.add_argument("--gain", help=f"nDCG gain: {' or '.join(metrics.GAINS)} (default linear)")
        parser.add_argument("--threshold", help="lowest label that counts as relevant (default 1)")
        parser.add_argument("--judged-only", action="store_true", help="condensed scoring (trec_eval -J)")
        parser.add_argument("--policy", help="aggregation policy (default: the campaign's)")
        parser.add_argument(
            "--labels",
            help="label source: humans (default), model:NAME (a model judge's labels), hybrid:NAME "
            "(the human label where one exists, the model's elsewhere) or ppi:NAME (prediction-powered: the "
            "model's scores corrected by the random audit, with 95%% intervals; see audit_draw)",
        )
        parser.add_argument("--segment", help="only the queries carrying this tag (e.g. tail)")
        parser.add_argument(
            "--measure",
            help="rank the systems by this measure (nDCG, P, R, F1, Hit, MRR, MAP, bpref) and say, for each "
            "adjacent pair, whether its order is settled (default nDCG)",
        )
        parser.add_argument("--attribute", help="a document attribute (e.g. brand): add ILD@k and Coverage@k")
        parser.add_argument("--micro", action="store_true", help="add micro-averaged P@k and R@k")
        parser.add_argument(
            "--top-k",
            help="the stop signal: whether the order of the top K systems holds with 95%% confidence (default 3)",
        )
        parser.add_argument("--json", action="store_true", help="print the API's JSON shape")
        parser.add_argument(
            "--per-query",
            action="store_true",
            help="add every system's per-query values, as trec_eval -q gives them (in the JSON: each system's "
            "per_query object; as text: a line per system, query and measure)",
        )

    def handle(self, *args: object, slug: str, json: bool, per_query: bool, **options: Any) -> None:
        campaign = self.campaign(slug)
        names = [n for n in params.LEADERBOARD if n not in ("per_query", "bounds")]
        try:
            query = LeaderboardQuery.parse(options, campaign=campaign, names=names)
        except ParamErrors as exc:
            problems = "; ".join(f"--{name.replace('_', '-')}: {' '.join(m)}" for name, m in exc.errors.items())
            raise CommandError(problems) from None
        try:
            data = leaderboard_data(campaign=campaign, **query.settings(*names), per_query=per_query)
        except RequestError as exc:  # a value the caller chose; anything else is ours and keeps its traceback
            raise CommandError(str(exc)) from None
        if json:
            self.stdout.write(scores_dumps(data))
            return
        if "audit" in data:
            self._ppi(data)
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
            self.stdout.write(f"  {a} above {b}: {_verdict_words(entry)}")
        if "stop" in data:
            self.stdout.write(_stop_words(data["stop"], data["queries_without_labels"], len(data["systems"])))
        if per_query:
            self._per_query(data)

    def _per_query(self, data: dict) -> None:
        """trec_eval -q's lines: ``measure<TAB>qid<TAB>value`` per system (a ``runid`` line first)."""
        for s in data["systems"]:
            lines = [f"runid\tall\t{s['name']}"]
            for qid, values in s.get("per_query", {}).items():  # over queries: a command's text output
                lines.extend(f"{m}\t{qid}\t{v:.4f}" for m, v in values.items())
            self.stdout.write("\n".join(lines))

    def _ppi(self, data: dict) -> None:
        """The prediction-powered leaderboard as text: estimates of the ranking measure with their intervals."""
        audit, by = data["audit"], data["ranked_by"]
        self.stdout.write(
            f"{data['campaign']}: {data['labels']}, k={data['k']}, audit: {audit['queries']} of {audit['of']} queries "
            f"audited ({audit['drawn']} drawn)"
        )
        width = max([len(s["name"]) for s in data["systems"]] + [6])
        self.stdout.write("system".ljust(width) + f"{by:>12}{'95% interval':>22}{'model alone':>13}")
        for s in data["systems"]:
            low_high = s.get("intervals", {}).get(by)
            interval = f"{low_high[0]:.4f} - {low_high[1]:.4f}" if low_high and None not in low_high else "-"
            self.stdout.write(
                s["name"].ljust(width) + f"{s['measures'][by]:12.4f}{interval:>22}{s['model_measures'][by]:13.4f}"
            )
        if audit["more_needed"]:
            self.stdout.write(f"no intervals yet: audit {audit['more_needed']} more queries (manage.py audit_draw)")
        self.stdout.write(
            "Estimates are unbiased for the all-human value; 95% of such intervals contain it. PPI buys valid "
            "intervals, not a better ranking than the model's own."
        )


def _verdict_words(entry: dict) -> str:
    word = entry["verdict"]
    if word == "settled":
        return "settled (no judgment left can flip it)"
    if word == "tied":
        return "tied (no judgment left can part them)"
    pairs = entry["open_pairs"]
    noun = "pair" if pairs == 1 else "pairs"
    return f"{word}, holds with probability {entry['p_holds']:.2f} ({pairs} unjudged {noun} could change it)"


def _stop_words(stop: dict, without_labels: int, n_systems: int) -> str:
    """The stop signal in one line, as the pages say it (judging.scoring.presenters.stop_sentence)."""
    k, left = stop["top_k"], stop.get("judgments_to_settle", stop["judgments_left_estimate"])
    confidence = f"{stop['confidence']:.0%}"
    scope = f"all {n_systems} systems (top {k} asked)" if k >= n_systems else f"the top {k}"
    if stop.get("settled"):
        head = f"you may stop judging for {scope}: their order is settled, no judgment left can change it"
    elif stop["reached"]:
        head = f"you may stop judging for {scope}: their order holds with {confidence} confidence, not yet for certain"
    else:
        head = f"keep judging for {scope}: their order does not hold with {confidence} confidence yet"
    rest = ""
    if left and not stop.get("settled"):
        rest = f"; about {left} more {'judgment' if left == 1 else 'judgments'} would settle it for certain"
    note = f" (verdicts count {without_labels} queries without a label yet)" if without_labels else ""
    return f"stop: {head}{rest}{note}"


def scores_dumps(data: dict) -> str:
    """``json.dumps(data, indent=1)``, byte for byte, with each system's per-query values written by one
    %-format per query: the json module indents in pure Python, 1.5 s for 20 systems x 5,000 queries."""
    systems = data.get("systems") or []
    if not all(isinstance(entry.get("per_query"), dict) for entry in systems):
        return jsonlib.dumps(data, indent=1)
    token = secrets.token_hex(8)
    blocks = []
    outline = dict(data, systems=[])
    keys: dict[str, str] = {}  # each query's '"qid": ', the same for every system
    for i, entry in enumerate(systems):
        block = _per_query_text(entry["per_query"], keys)
        if block is None:  # a value the shortcut does not write as json does (not a finite float)
            return jsonlib.dumps(data, indent=1)
        blocks.append(block)
        outline["systems"].append(dict(entry, per_query=f"{token}:{i}"))
    pieces = re.split(f'"{token}:([0-9]+)"', jsonlib.dumps(outline, indent=1))
    pieces[1::2] = [blocks[int(i)] for i in pieces[1::2]]
    return "".join(pieces)


_QUERY_INDENT = " " * 4  # the per-query objects are the fourth level: top, systems, a system, per_query


def _per_query_text(per_query: dict[str, dict], keys: dict[str, str]) -> str | None:
    """One system's ``per_query`` object as json.dumps(indent=1) writes it at its depth, or None when a value
    is not a finite float. ``keys``: each query's key text, kept across systems."""
    if not per_query:
        return "{}"
    rows = []
    row_format, names = "", None
    for qid, values in per_query.items():  # one format per query, not one encoder call per value
        if names != tuple(values):
            names = tuple(values)
            row_format = (
                "{\n"
                + ",\n".join(f"{_QUERY_INDENT} " + jsonlib.dumps(n).replace("%", "%%") + ": %r" for n in names)
                + f"\n{_QUERY_INDENT}}}"
            )
        numbers = tuple(values.values())
        # floats only (json writes True, %r True), and finite: a NaN or an infinity makes the sum one
        if set(map(type, numbers)) != {float} or not math.isfinite(sum(numbers)):
            return None
        key = keys.get(qid)
        if key is None:
            key = keys[qid] = f"{_QUERY_INDENT}{jsonlib.dumps(qid)}: "
        rows.append(key + row_format % numbers)
    return "{\n" + ",\n".join(rows) + "\n   }"
