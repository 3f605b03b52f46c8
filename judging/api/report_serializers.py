"""The API's report shapes and their query parameters: progress, the leaderboard and its verdicts, online agreement,
a model judge's calibration and prompt template (the resources' own serializers are in judging/api/serializers.py)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

import metrics
from judging import params
from judging.aggregation import POLICIES
from judging.api.serializers import AsciiFloatField, AsciiIntegerField
from judging.models import Membership
from judging.params import PARAMS, Param

# --------------------------------------------------------------------------- progress and leaderboard


class AnnotatorProgressSerializer(serializers.Serializer):
    username = serializers.CharField(source="user.username")
    role = serializers.ChoiceField(
        choices=Membership.Role.choices, allow_null=True, help_text="Null for a past judge who is no longer a member."
    )
    model_judge = serializers.BooleanField(help_text="A model judge's row, not a person's.")
    judgments = AsciiIntegerField()
    unsure = AsciiIntegerField()
    notes = AsciiIntegerField()
    last = serializers.DateTimeField(allow_null=True, help_text="When they last judged.")
    mean_seconds = AsciiFloatField(allow_null=True, help_text="Mean time per judgment.")
    judged = AsciiIntegerField(help_text="Pairs they have judged.")
    judged_today = AsciiIntegerField(help_text="Pairs they judged today (the server's time zone).")
    assigned = AsciiIntegerField(help_text="Pairs of the queries given to them still to judge.")
    remaining = AsciiIntegerField(
        allow_null=True, help_text="Pairs assigned or still open to them (null for leads and model judges)."
    )
    median_seconds = AsciiFloatField(
        allow_null=True,
        help_text="Median seconds per judgment over their last 50 (time on the pair, else the gap "
        "since their previous judgment, capped at 10 minutes).",
    )
    eta_seconds = AsciiFloatField(allow_null=True, help_text="Judging time left at their pace.")
    eta = serializers.DateTimeField(allow_null=True, help_text="When they would finish judging without a break.")


class ProgressSerializer(serializers.Serializer):
    campaign = serializers.CharField()
    queries = AsciiIntegerField()
    pooled = AsciiIntegerField(help_text="Pairs in the judging pool.")
    touched = AsciiIntegerField(help_text="Pooled pairs with at least one judgment.")
    complete = AsciiIntegerField(help_text="Pooled pairs with as many judgments as the redundancy asks.")
    labelled = AsciiIntegerField(help_text="Pooled pairs with a label.")
    judgments = AsciiIntegerField()
    needed = AsciiIntegerField(help_text="Judgments the pool needs: pooled pairs x redundancy.")
    percent = AsciiFloatField(help_text="complete / pooled, in percent.")
    unsure_open = AsciiIntegerField(help_text="Pairs somebody was unsure about that have no label yet.")
    annotators = AnnotatorProgressSerializer(
        many=True, help_text="Per annotator; an annotator sees only their own row."
    )
    eta = serializers.DateTimeField(
        required=False, allow_null=True, help_text="Leads: when the campaign would be done at the team's pace."
    )
    eta_seconds = AsciiFloatField(required=False, allow_null=True, help_text="Leads: the team's judging time left.")
    median_seconds = AsciiFloatField(
        required=False, allow_null=True, help_text="Leads: the team's median seconds per judgment."
    )


def query_serializer(
    name: str, names: tuple[str, ...], doc: str, **help_texts: str | None
) -> type[serializers.Serializer]:
    """A serializer that documents query parameters ``names`` in the schema, from their declarations in
    judging.params (LeaderboardQuery.parse reads them); ``help_texts`` replaces a parameter's help text."""

    def field(p: Param) -> serializers.Field:
        options: dict[str, Any] = {
            "required": False,
            "default": p.default,
            "help_text": help_texts.get(p.name, p.help_text),
        }
        if p.default is None:
            options["allow_null"] = True
        if p.kind == "int":
            return AsciiIntegerField(min_value=p.low, max_value=p.high, **options)  # type: ignore[arg-type]  # None: no bound
        if p.kind == "choice":
            return serializers.ChoiceField(choices=list(p.choices), **options)
        if p.kind == "bool":
            return serializers.BooleanField(**options)
        return serializers.CharField(max_length=p.max_length, **options)  # type: ignore[arg-type]  # None: no limit

    return type(name, (serializers.Serializer,), {"__doc__": doc, **{n: field(PARAMS[n]) for n in names}})


LeaderboardQuerySerializer = query_serializer(
    "LeaderboardQuerySerializer", params.LEADERBOARD, "The leaderboard's parameters."
)
SignificanceQuerySerializer = query_serializer(
    "SignificanceQuerySerializer",
    params.SIGNIFICANCE,
    "The significance matrix's parameters.",
    measure="The measure compared (nDCG, P, R, MAP, ...).",
)
TrustQuerySerializer = query_serializer(
    "TrustQuerySerializer",
    params.TRUST,
    "Parameters of the leaderboard's curves, segments and pool-bias endpoints.",
    segment=None,
    measure="Measure.",
)


class LeaderboardSystemSerializer(serializers.Serializer):
    name = serializers.CharField()
    measures = serializers.DictField(
        child=AsciiFloatField(), help_text='Mean of each measure, e.g. {"P@10": 0.41, "nDCG@10": 0.45}.'
    )
    per_query = serializers.DictField(
        child=serializers.DictField(child=AsciiFloatField()),
        required=False,
        help_text="qid -> measure -> value (absent with per_query=false).",
    )
    bounds = serializers.DictField(
        child=serializers.ListField(child=AsciiFloatField(), min_length=2, max_length=2),
        required=False,
        help_text="measure -> [low, high]: the lowest and highest final mean over today's scored queries, once "
        "every pooled pair is judged, whatever grades the pooled unjudged documents (the system's own and the other "
        "systems') get; documents outside the pool stay unjudged.",
    )
    micro = serializers.DictField(child=AsciiFloatField(), required=False, help_text="Micro P@k and R@k.")
    # labels=ppi:NAME (prediction-powered): the estimates in `measures`, clipped to [0, 1] as shown, and these
    measures_raw = serializers.DictField(
        child=AsciiFloatField(),
        required=False,
        help_text="labels=ppi:NAME: the unclipped estimates (PPI is unbiased, not bounded: one can step outside [0, "
        "1]); `measures` holds them clipped to the measure's range.",
    )
    model_measures = serializers.DictField(
        child=AsciiFloatField(), required=False, help_text="labels=ppi:NAME: the model judge's labels alone."
    )
    intervals = serializers.DictField(
        child=serializers.ListField(child=AsciiFloatField(), min_length=2, max_length=2),
        required=False,
        help_text="labels=ppi:NAME: measure -> [low, high], the 95% interval clipped to [0, 1] (absent below 2 "
        "audited queries).",
    )
    intervals_raw = serializers.DictField(
        child=serializers.ListField(child=AsciiFloatField(), min_length=2, max_length=2),
        required=False,
        help_text="labels=ppi:NAME: the same intervals unclipped.",
    )


class SettledSerializer(serializers.Serializer):
    systems = serializers.ListField(child=serializers.CharField(), min_length=2, max_length=2)
    settled = serializers.BooleanField(
        help_text="No grading of the pooled unjudged documents (of every query, labelled or not) can swap these two "
        "once the pool is judged."
    )
    verdict = serializers.ChoiceField(
        choices=["settled", "tied", "likely", "open"],
        help_text="settled; tied (no judgment left can part them); likely (p_holds >= 0.95); open.",
    )
    p_holds = AsciiFloatField(
        help_text="Probability that the order holds once every pooled pair is judged, under relevance rates per "
        "system and rank learned from the campaign's judgments (1 when settled or tied)."
    )
    open_pairs = AsciiIntegerField(help_text="Unjudged pairs in either system's cutoff (0 when settled).")
    open_queries = AsciiIntegerField(help_text="Queries holding those pairs (0 when settled).")
    top_queries = serializers.ListField(
        child=serializers.DictField(),
        help_text='The (up to 5) queries holding most of those pairs: [{"qid", "pairs"}], most first.',
    )


class StopSerializer(serializers.Serializer):
    top_k = AsciiIntegerField(help_text="The lead's K (the top_k parameter, default 3).")
    confidence = AsciiFloatField(help_text="0.95.")
    reached = serializers.BooleanField(
        help_text="The order of the top K, and their border with the next system, holds with this confidence "
        "(Bonferroni over the K comparisons' p_holds)."
    )
    judgments_left_estimate = AsciiIntegerField(
        help_text="About how many more judgments before the lead may stop: 0 once reached; otherwise an estimate "
        "(the pending pairs whose labels take enough uncertainty out of the top K comparisons as they stand)."
    )
    settled = serializers.BooleanField(
        help_text="The order of the top K and their border is settled for certain: every one of those comparisons "
        "is settled or tied, whatever the unjudged labels are."
    )
    judgments_to_settle = AsciiIntegerField(
        help_text="What more judging would still buy: about how many judgments would settle the order of the top K "
        "for certain (the unjudged pairs in the cutoff of the systems in a comparison among them that is neither "
        "settled nor tied, times the annotators per pair); 0 when settled."
    )


class LeaderboardSerializer(serializers.Serializer):
    """The same shape as `manage.py scores --json` (SPEC §4)."""

    campaign = serializers.CharField()
    k = AsciiIntegerField()
    gain = serializers.ChoiceField(choices=metrics.GAINS)
    threshold = AsciiIntegerField()
    judged_only = serializers.BooleanField()
    policy = serializers.ChoiceField(choices=POLICIES, help_text="The aggregation policy the labels were made with.")
    labels = serializers.CharField(help_text="The label source: humans, model:NAME or hybrid:NAME.")
    queries = AsciiIntegerField(help_text="Queries in the mean: those with at least one label.")
    systems = LeaderboardSystemSerializer(many=True)
    settled = SettledSerializer(many=True, required=False, help_text="Adjacent systems in the ranking.")
    pairs_left = AsciiIntegerField(required=False, help_text="Unjudged pairs that can still change it.")
    stop = StopSerializer(required=False, help_text="Whether the order of the top top_k systems holds.")
    verdict_queries = AsciiIntegerField(
        required=False,
        help_text="Queries the verdicts cover: every query the final means will hold (a label now, or pooled pairs).",
    )
    queries_without_labels = AsciiIntegerField(
        required=False, help_text="Of those, queries with no label yet (they join the means once judged)."
    )
    verdicts_behind = AsciiIntegerField(
        required=False,
        help_text="Present only when bounds, settled, pairs_left, stop and the verdict counts are those of an "
        "earlier labels state: on a large campaign, a server process that has not built them yet answers with the "
        "latest published ones while it builds these in the background (seconds). The number of queries whose "
        "labels moved since. The scores and per-query values are always current.",
    )


class OnlineAgreementSerializer(serializers.Serializer):
    measure = serializers.CharField(help_text="Offline measure, e.g. nDCG@10.")
    metric = serializers.CharField(help_text="Online metric, e.g. ctr.")
    kendall_tau = AsciiFloatField(allow_null=True, help_text="Across systems; null when undefined.")
    pearson_r = AsciiFloatField(allow_null=True)
    n_systems = AsciiIntegerField()
    discordant_pairs = serializers.ListField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Pairs of systems the measure and the metric order differently.",
    )


class OnlineSerializer(serializers.Serializer):
    """Offline vs online."""

    campaign = serializers.CharField()
    k = AsciiIntegerField()
    gain = serializers.CharField()
    threshold = AsciiIntegerField()
    labels = serializers.CharField()
    measures = serializers.ListField(child=serializers.CharField())
    metrics = serializers.ListField(child=serializers.CharField())
    per_query_metrics = serializers.ListField(child=serializers.CharField())
    agreement = OnlineAgreementSerializer(many=True)
    best = serializers.DictField(help_text="Online metric -> the offline measure that agrees with it most.")
    per_query = serializers.ListField(child=serializers.DictField())
    few_systems = serializers.BooleanField(help_text="Fewer than 5 systems: read the correlations with care.")
    figures = serializers.ListField(child=serializers.DictField(), help_text="Every imported figure.")


class CalibrationSerializer(serializers.Serializer):
    """A model judge against the human labels."""

    campaign = serializers.CharField()
    judge = serializers.CharField()
    description = serializers.CharField()
    categories = serializers.ListField(child=AsciiIntegerField())
    judged = AsciiIntegerField()
    unsure = AsciiIntegerField()
    compared = AsciiIntegerField(help_text="Pairs the model graded confidently that have a human label.")
    agreement = serializers.DictField()
    confusion = serializers.ListField(child=serializers.ListField(child=AsciiIntegerField()))
    leniency = serializers.DictField()
    per_query = serializers.ListField(child=serializers.DictField())
    ranking = serializers.DictField(
        help_text="System ranking under the model's labels vs the humans': kendall_tau (tau-b), tau_ap (Yilmaz, "
        "Aslam & Robertson 2008, the humans' ranking as reference), top (the top-5 of each and their overlap)."
    )
    disagreements = serializers.ListField(child=serializers.DictField())
    examples_left_out = AsciiIntegerField(
        help_text="Pairs left out of the comparison because the judge's prompt quotes them as examples."
    )
    verdict = serializers.DictField(
        allow_null=True,
        help_text="Landis & Koch band of Cohen's kappa claimed by its 95% interval: band (chance, slight, fair, "
        "moderate, substantial, almost_perfect), at_least (the interval spans bands), point_band, text.",
    )
    bias = serializers.DictField(
        help_text="Per system: the model's measure minus the humans', over the queries both scored, with a 95% "
        "t interval (systems, for nDCG@k), and per_measure: {measure: {system: bias}}."
    )
    self_consistency = serializers.DictField(
        allow_null=True,
        help_text="Pairs asked several times (judge_with_model --repeat N): pairs, unanimous (share with all N "
        "answers equal), pairwise (mean share of agreeing answer pairs), repeats, temperatures.",
    )
    canary = serializers.DictField(
        allow_null=True,
        help_text="Query-word-stuffing canary (judge_with_model --canary): probes, compared, could_rise (of "
        "those, the documents the model had not already given the top grade), at_top, rose, fell, share_rose "
        "(rose / could_rise), rows.",
    )
    template_version = AsciiIntegerField(allow_null=True, help_text="The judge's current prompt template version.")


class JudgeTemplateSerializer(serializers.Serializer):
    """A new version of a model judge's prompt template and scale mapping (leads only)."""

    text = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=20_000,
        trim_whitespace=False,
        help_text="The system message; empty (or rebuild=true) builds it from the guidelines, scale and examples.",
    )
    rebuild = serializers.BooleanField(required=False, default=False)
    scale_low = AsciiIntegerField(
        required=False, allow_null=True, help_text="The model's lowest answer (e.g. 0 for 0-100)."
    )
    scale_high = AsciiIntegerField(required=False, allow_null=True, help_text="The model's highest answer.")
    thresholds = serializers.ListField(
        child=AsciiFloatField(),
        required=False,
        max_length=50,
        help_text="Ascending, one per campaign grade above the lowest: an answer at least the i-th threshold "
        "maps to the i-th grade above the lowest.",
    )
