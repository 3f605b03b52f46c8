"""Leaderboard endpoints under /api/campaigns/SLUG/: scores, curves, segments, pool bias, significance, online."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from judging import params
from judging.access import signed_in
from judging.api import report_serializers
from judging.api.jobs import JobStartedSerializer, job_accepted
from judging.api.leaderboard_text import leaderboard_json_pieces, pieces_response
from judging.api.permissions import CanSeeLeaderboard, access
from judging.api.renderers import LeaderboardCSVRenderer, leaderboard_csv, leaderboard_per_query_csv
from judging.api.views.base import (
    BOM_PARAMETER,
    ONE_OBJECT,
    ViewBase,
    attachment,
    bom_param,
    download_name,
    leaderboard_query,
)
from judging.errors import RequestError
from judging.jobs import significance_get
from judging.models import Campaign
from judging.params import LeaderboardQuery
from judging.scoring import (
    TESTS,
    Leaderboard,
    leaderboard,
    leaderboard_data,
    measure_names,
    ppi_judge,
    trust,
)
from judging.selectors import grade_top
from judging.selectors.online import offline_vs_online, online_figures, per_query_for_page
from metrics import Measure
from metrics.measures import JUDGED

# One campaign's leaderboard: leads see it, annotators while the leads show it to them (get_object() checks).
ONE_BOARD: dict[str, Any] = {**ONE_OBJECT, "permission_classes": [IsAuthenticated, CanSeeLeaderboard]}


class LeaderboardActions(ViewBase):
    """CampaignViewSet's leaderboard actions."""

    @extend_schema(
        parameters=[report_serializers.LeaderboardQuerySerializer, BOM_PARAMETER],
        responses=report_serializers.LeaderboardSerializer,
        description=(
            "Every system's mean measures on the current labels; the same JSON as `manage.py scores --json`. "
            "`per_query=true` adds each system's per-query values as `trec_eval -q` gives them (`scores --json "
            "--per-query`), and with `format=csv` gives them as one row per system and query (streamed). Leads "
            "only, unless the campaign shows the leaderboard to annotators: "
            "they get what the leaderboard page shows them, the means only (no `per_query`, 403 if asked for) "
            "with the page's limits on the parameters (`threshold` up to the scale's top grade)."
        ),
    )
    @action(
        detail=True,
        methods=["get"],
        renderer_classes=[JSONRenderer, BrowsableAPIRenderer, LeaderboardCSVRenderer],
        **ONE_BOARD,
    )
    def leaderboard(self, request: Request, slug: str | None = None) -> HttpResponseBase:
        campaign = self.get_object()
        if access(request).is_lead(campaign.id):
            query = leaderboard_query(request, campaign, params.LEADERBOARD)
        else:
            query = self._annotator_query(request, campaign)
        as_csv = isinstance(request.accepted_renderer, LeaderboardCSVRenderer)
        if as_csv:
            bom = bom_param(request)
            if query.per_query:  # one row per system and query, streamed from the score table
                return self._per_query_csv(campaign, query, bom)
        settings = query.settings(*params.LEADERBOARD)
        try:
            if type(request.accepted_renderer) is JSONRenderer and query.per_query:
                # Every per-query value of every system: written as JSON text directly (leaderboard_json_pieces).
                pieces = leaderboard_json_pieces(campaign=campaign, **settings, allow_stale=True)
                if pieces is not None:
                    return pieces_response(pieces, content_type="application/json")
            data = leaderboard_data(campaign=campaign, **settings, allow_stale=True)
        except RequestError as exc:
            raise DRFValidationError(exc.errors) from None
        if as_csv:
            response = HttpResponse(
                ("\ufeff" if bom else "") + leaderboard_csv(data), content_type="text/csv; charset=utf-8"
            )
            stem = download_name(campaign.slug, "leaderboard", f"k{data['k']}", data["gain"], f"t{data['threshold']}")
            response["Content-Disposition"] = attachment(f"{stem}.csv")
            response["Cache-Control"] = "no-store"
            return response
        return Response(data)

    @staticmethod
    def _per_query_csv(campaign: Campaign, query: LeaderboardQuery, bom: bool) -> StreamingHttpResponse:
        """``?per_query=true&format=csv``: renderers.leaderboard_per_query_csv, in constant memory."""
        if ppi_judge(query.labels) is not None:
            raise DRFValidationError(
                {
                    "per_query": [
                        _(
                            "prediction-powered estimates (ppi:NAME) are means over the audit: they have no "
                            "per-query values"
                        )
                    ]
                }
            )
        lb = leaderboard(campaign, query.params())
        response = StreamingHttpResponse(leaderboard_per_query_csv(lb, bom=bom), content_type="text/csv; charset=utf-8")
        stem = download_name(campaign.slug, "per-query", f"k{lb.params.k}", lb.params.gain, f"t{lb.params.threshold}")
        response["Content-Disposition"] = attachment(f"{stem}.csv")
        response["Cache-Control"] = "no-store"
        return response

    @staticmethod
    def _annotator_query(request: Request, campaign: Campaign) -> LeaderboardQuery:
        """Hold an annotator to what the leaderboard page shows them: the parameters checked as the page checks
        them, and the means only (the per-query drill-down is the leads': the page answers 403 there)."""
        query = leaderboard_query(request, campaign, params.LEADERBOARD, top_grade=grade_top(campaign=campaign))
        if "per_query" in request.query_params and query.per_query:
            raise PermissionDenied(
                _("Only a lead of campaign %(campaign)s can see per-query values; annotators get the means.")
                % {"campaign": repr(campaign.slug)}
            )
        return query.but(per_query=False)

    def _trust_board(self, request: Request) -> tuple[Campaign, Leaderboard, LeaderboardQuery]:
        """The campaign's leaderboard under the request's parameters, for the trust endpoints below."""
        campaign = self.get_object()
        query = leaderboard_query(request, campaign, params.TRUST)
        try:
            lb = leaderboard(campaign, query.params())
        except RequestError as exc:
            raise DRFValidationError(exc.errors) from None
        return campaign, lb, query

    @extend_schema(
        parameters=[report_serializers.TrustQuerySerializer],
        responses=OpenApiTypes.OBJECT,
        description=(
            "Each system's mean `measure` (P, R, F1, Hit or nDCG) at every cutoff k = 1..k_max (default: the "
            'pool depth, at most 100): `{"measure", "k": [...], "systems": [{"name", "values": [...]}]}`.'
        ),
    )
    @action(detail=True, methods=["get"], url_path="leaderboard/curves", **ONE_BOARD)
    def leaderboard_curves(self, request: Request, slug: str | None = None) -> Response:
        campaign, lb, query = self._trust_board(request)
        measure = query.measure.partition("@")[0]
        k_max = query.k_max or trust.curve_k_default(lb)
        try:
            values = trust.curves(lb, measure, k_max)
        except RequestError as exc:
            raise DRFValidationError(exc.errors) from None
        systems = [{"name": n, "values": values[i].tolist()} for i, n in enumerate(lb.cube.system_names)]
        return Response(
            {
                "campaign": campaign.slug,
                "measure": measure,
                "k": list(range(1, k_max + 1)),
                "queries": lb.n_scored,
                "systems": systems,
            }
        )

    @extend_schema(
        parameters=[report_serializers.TrustQuerySerializer],
        responses=OpenApiTypes.OBJECT,
        description=(
            "Each query tag's leaderboard: every system's mean `measure` over the segment's scored queries, its "
            "95% bootstrap CI and the Holm-corrected randomization test against the segment's best system; "
            f"`few_queries` marks segments of fewer than {10} scored queries."
        ),
    )
    @action(detail=True, methods=["get"], url_path="leaderboard/segments", **ONE_BOARD)
    def leaderboard_segments(self, request: Request, slug: str | None = None) -> Response:
        campaign, lb, query = self._trust_board(request)
        try:
            measure = trust.resolve_measure(query.measure, lb.params.k)
            segments = trust.segments(lb, measure)
        except RequestError as exc:
            raise DRFValidationError(exc.errors) from None
        return Response(
            {
                "campaign": campaign.slug,
                "measure": measure,
                "segments": [trust.segment_json(seg, lb.cube.system_names) for seg in segments],
            }
        )

    @extend_schema(
        parameters=[report_serializers.TrustQuerySerializer],
        responses=OpenApiTypes.OBJECT,
        description=(
            "Leave one run out: each system's means when the pool pairs only it contributed count as unjudged "
            "(same query set), the drop from its real means, and how many of its top-k documents (summed over "
            "the queries) and pool pairs only it contributed."
        ),
    )
    @action(detail=True, methods=["get"], url_path="leaderboard/pool-bias", **ONE_BOARD)
    def leaderboard_pool_bias(self, request: Request, slug: str | None = None) -> Response:
        campaign, lb, _query = self._trust_board(request)
        result = trust.pool_bias(lb)
        return Response({"campaign": campaign.slug, **trust.pool_bias_json(result, lb)})

    @extend_schema(
        parameters=[report_serializers.SignificanceQuerySerializer],
        responses={200: OpenApiTypes.OBJECT, 202: JobStartedSerializer},
        description=(
            "Every pair of systems compared on one measure with the chosen test: `diff[i][j]` (mean of row "
            "minus column) and the adjusted `p[i][j]` (null on the diagonal), systems in `systems` order. "
            "Above RELJUDGE_STATS_JOB_CELLS (systems x queries x permutations) the test runs as a background "
            "job: 202 with its URL in Location; ask again once it is done (its result holds the matrix too). "
            "A matrix is only ever returned for the current labels (`state`)."
        ),
    )
    @action(detail=True, methods=["get"], url_path="leaderboard/significance", **ONE_BOARD)
    def leaderboard_significance(self, request: Request, slug: str | None = None) -> Response:
        campaign = self.get_object()
        query = leaderboard_query(request, campaign, params.SIGNIFICANCE)
        # Any leaderboard measure but the coverage Judged@k, read as the leaderboard page reads it.
        tested = [n for n in measure_names(query.k) if Measure.parse(n).base != JUDGED]
        try:
            measure = trust.resolve_measure(query.measure, query.k)
        except RequestError as exc:
            raise DRFValidationError(exc.errors) from None
        if measure not in tested:
            raise DRFValidationError(
                {
                    "measure": [
                        _("unknown measure %(measure)r; expected one of %(choices)s")
                        % {"measure": query.measure[:40], "choices": ", ".join(Measure.parse(n).base for n in tested)}
                    ]
                }
            )
        try:
            lb = leaderboard(campaign, query.params())
        except RequestError as exc:
            raise DRFValidationError(exc.errors) from None
        pairwise, job = significance_get(lb=lb, measure=measure, test=query.test, user=signed_in(request.user))
        if pairwise is None:
            assert job is not None  # significance_get queues a job (start=True) when it has no matrix
            return job_accepted(request, job)
        return Response(
            {
                "campaign": campaign.slug,
                "measure": pairwise.measure,
                "test": pairwise.test,
                "test_label": TESTS[pairwise.test],
                "state": pairwise.state,
                "queries": pairwise.n_queries,
                "alpha": pairwise.alpha,
                "systems": list(lb.cube.system_names),
                "diff": [[round(float(x), 10) for x in row] for row in pairwise.diff],
                "p": [[None if x != x else float(x) for x in row] for row in pairwise.p],
                "computed_at": pairwise.computed_at,
            }
        )

    @extend_schema(
        parameters=[report_serializers.LeaderboardQuerySerializer],
        responses=report_serializers.OnlineSerializer,
        description=(
            "The imported online figures, and for each offline measure (at k, threshold, gain, labels) and "
            "online metric: Kendall's tau and Pearson's r across systems, how many systems, and the pairs of "
            "systems the two order differently; the same per query where per-query figures exist. Leads, or "
            "annotators when the campaign shows them the leaderboard (they get the page's per-query rows: each "
            "metric's best measure only)."
        ),
    )
    @action(detail=True, methods=["get"], **ONE_BOARD)
    def online(self, request: Request, slug: str | None = None) -> Response:
        campaign = self.get_object()
        query = leaderboard_query(request, campaign, params.LEADERBOARD)
        try:
            data = offline_vs_online(campaign=campaign, params=query.params())
        except RequestError as exc:
            raise DRFValidationError(exc.errors) from None
        data.pop("_points")
        if not access(request).is_lead(campaign.id):
            # the page's per-query table (each metric's best measure), not every measure's
            data["per_query"] = per_query_for_page(data)
        data["figures"] = online_figures(campaign=campaign)
        return Response(data)
