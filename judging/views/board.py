"""What a leaderboard page is asked (``BoardRequest``: who, which campaign, which parameters) and the links
between the leaderboard's pages; shared by the leaderboard views (leaderboard.py, its drill-down, trust, PPI,
online and judges pages)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from judging import scoring
from judging.access import Member
from judging.aggregation import Policy
from judging.models import Campaign
from judging.scoring import trust
from metrics import Measure
from metrics.measures import JUDGED, MENU

MEASURES = MENU  # order of the ranking-measure menu (metrics.measures)


@dataclass
class BoardRequest:
    """Who is asking about which campaign's leaderboard, with which parameters."""

    member: Member
    params: scoring.Params
    ranked_by: Measure  # with the cutoff k, e.g. nDCG@10
    label_sources: list[tuple[str, str]]  # (value, label) of the campaign's label sources
    top_k: int = 3  # the stop signal's top K
    # what the page shows without a labels parameter: hybrid:NAME on a campaign with a model judge, else humans
    default_labels: str = "humans"

    @property
    def measure(self) -> str:
        """The ranking measure's name, e.g. "nDCG@10" (how the score table names it)."""
        return str(self.ranked_by)

    @property
    def measure_base(self) -> str:
        return self.ranked_by.base

    @property
    def campaign(self) -> Campaign:
        return self.member.campaign

    @property
    def role(self) -> str:
        return self.member.role

    @property
    def is_lead(self) -> bool:
        return self.member.is_lead

    @property
    def judged(self) -> str:
        """The coverage measure shown beside the scores, e.g. "Judged@10"."""
        return str(Measure(JUDGED, self.params.k))

    @property
    def changed_params(self) -> dict[str, str]:
        """The parameters that differ from the defaults, for links between the pages."""
        p = self.params
        q = {}
        if p.k != 10:
            q["k"] = str(p.k)
        if p.gain != "linear":
            q["gain"] = p.gain
        if p.threshold != 1:
            q["threshold"] = str(p.threshold)
        if p.judged_only:
            q["judged_only"] = "1"
        if p.policy:
            q["policy"] = p.policy
        if p.labels != self.default_labels:
            q["labels"] = p.labels
        if self.measure_base != "nDCG":
            q["measure"] = self.measure_base
        if p.segment:
            q["segment"] = p.segment
        if self.top_k != 3:
            q["top_k"] = str(self.top_k)
        return q

    @property
    def qs(self) -> str:
        return urlencode(self.changed_params)

    def url(self, name: str, *args: object, **extra: Any) -> str:
        query = {**self.changed_params, **{k: v for k, v in extra.items() if v not in (None, "")}}
        if name not in PPI_PAGES and scoring.ppi_judge(query.get("labels")):
            query.pop("labels")  # the prediction-powered estimates are on the leaderboard itself only
        base = reverse(f"judging:{name}", args=[self.campaign.slug, *args])
        return f"{base}?{urlencode(query, doseq=True)}" if query else base

    def base(self, **extra: Any) -> dict:
        """Template context every leaderboard page shares (the campaign nav of base.html included)."""
        return self.member.context(
            nav="leaderboard",
            ctx=self,
            measure=self.measure,
            measure_choices=[
                (m, name, scoring.measure_title(name)) for m in MEASURES for name in [str(Measure(m).at(self.params.k))]
            ],
            measure_title=scoring.measure_title(self.measure),
            segment_choices=trust.campaign_tags(self.campaign),
            policy_choices=Policy.choices,
            label_sources=self.label_sources,
            urls=self.urls,
            **{"keep": [], **extra},
        )

    @property
    def urls(self) -> dict[str, str]:
        names = [
            "leaderboard",
            "leaderboard_table",
            "leaderboard_stats",
            "leaderboard_significance",
            "leaderboard_pictures",
            "leaderboard_queries",
            "leaderboard_compare",
            "leaderboard_trust",
            "leaderboard_curves",
            "leaderboard_segments",
            "leaderboard_tags",
        ]
        urls = {n.removeprefix("leaderboard_") if n != "leaderboard" else "page": self.url(n) for n in names}
        for kind in ("bars", "distribution", "progress"):
            urls[f"chart_{kind}"] = self.url("leaderboard_chart", kind)
        api = reverse("api:campaign-leaderboard", args=[self.campaign.slug])
        api_query = {
            k: v
            for k, v in self.changed_params.items()
            if k in ("k", "gain", "threshold", "judged_only", "policy", "labels", "segment")
        }
        if self.params.labels != "humans":  # the API's default is people's labels, whatever the page's is
            api_query["labels"] = self.params.labels
        urls["api"] = f"{api}?{urlencode(api_query)}" if api_query else api
        return urls


# The pages that take labels=ppi:NAME (the prediction-powered leaderboard, judging.scoring.ppi); the other
# tabs answer 400 for it and their links leave it out.
PPI_PAGES = ("leaderboard", "leaderboard_table")
