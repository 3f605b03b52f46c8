"""The audit of the prediction-powered leaderboard under /api/campaigns/SLUG/audit/: its state, and new draws."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from judging.api.permissions import access
from judging.api.serializers import AsciiIntegerField
from judging.api.views.base import ONE_OBJECT, ViewBase
from judging.models import Campaign
from judging.selectors import audit_draws, audit_queries, audit_state
from judging.services import audit_draw
from judging.services.audit import SEED_MAX


class AuditDrawSerializer(serializers.Serializer):
    queries = AsciiIntegerField(min_value=1, help_text="How many more queries to draw (among those not drawn yet).")
    seed = AsciiIntegerField(
        min_value=0, max_value=SEED_MAX, required=False, help_text="Seed of the draw (default: a fresh random one)."
    )


def audit_json(campaign: Campaign) -> dict[str, Any]:
    state = audit_state(campaign=campaign)
    return {
        "campaign": campaign.slug,
        "queries": state.n_audited,
        "of": state.total,
        "drawn": int(state.drawn.size),
        "open_pairs": state.open_pairs,
        "draws": [dict(d, drawn_at=d["drawn_at"].isoformat()) for d in audit_draws(campaign=campaign)],
        "drawn_queries": audit_queries(campaign=campaign),
    }


class AuditActions(ViewBase):
    """CampaignViewSet's audit actions (leads only)."""

    @extend_schema(
        methods=["GET"],
        responses={200: dict},
        description=(
            "The audit of the prediction-powered leaderboard (`labels=ppi:NAME`): audited queries (`queries`, "
            "each pooled pair has a human label) of all (`of`), queries drawn, pooled pairs of the drawn queries "
            "still without a label, the draws (when, by whom, seed, size) and the drawn queries in order. "
            "Leads only."
        ),
    )
    @extend_schema(
        methods=["POST"],
        request=AuditDrawSerializer,
        responses={201: dict},
        description=(
            "Draw `queries` more queries uniformly at random among those not drawn yet (optionally with `seed`) "
            "and record the draw; the answer is the audit's state. 400 when fewer queries are left. Leads only."
        ),
    )
    @action(detail=True, methods=["get", "post"], **ONE_OBJECT)
    def audit(self, request: Request, slug: str | None = None) -> Response:
        campaign = self.get_object()
        if request.method == "GET":
            access(request).require_lead(campaign, _("see its audit"))
            return Response(audit_json(campaign))
        access(request).require_lead(campaign, _("draw queries for its audit"))
        body = AuditDrawSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            audit_draw(
                campaign=campaign,
                size=body.validated_data["queries"],
                user=request.user,
                seed=body.validated_data.get("seed"),
            )
        except DjangoValidationError as exc:
            raise DRFValidationError({"queries": exc.messages}) from None
        return Response(audit_json(campaign), status=status.HTTP_201_CREATED)
