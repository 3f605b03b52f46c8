"""The caller's next pair at /api/campaigns/SLUG/next/: the judging queue for scripts and crowd platforms."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from judging.api.views.base import ONE_OBJECT, ViewBase
from judging.selectors import latest_query_id, pair_next
from judging.services import pair_assign
from judging.services.queue import ASSIGNMENT_MINUTES


class NextQuerySerializer(serializers.Serializer):
    text = serializers.CharField()
    description = serializers.CharField()


class NextDocumentSerializer(serializers.Serializer):
    title = serializers.CharField()
    text = serializers.CharField()
    url = serializers.CharField()


class NextPairSerializer(serializers.Serializer):
    """What an annotator needs to judge one pair, and nothing about the systems that retrieved it."""

    pair = serializers.IntegerField(help_text="The pair's public id: post the judgment with it.")
    qid = serializers.CharField()
    docid = serializers.CharField()
    query = NextQuerySerializer()
    document = NextDocumentSerializer()
    held_until = serializers.DateTimeField(
        allow_null=True,
        help_text="The pair is held for the caller until then; null when it was only shown, not held (a GET from "
        "a browser session).",
    )
    was_skipped = serializers.BooleanField()


class NextPairActions(ViewBase):
    """CampaignViewSet's ``next`` action (any member: leads judge too)."""

    @extend_schema(
        request=None,
        responses={
            200: NextPairSerializer,
            204: OpenApiResponse(description="Nothing is left for the caller to judge."),
        },
        description=(
            "The caller's next pair of the campaign's judging queue (its queue mode), held for them as the "
            "judging page holds it, so no other annotator is handed its last open slot. Calling again before "
            "judging it returns the same pair. Post the judgment with `POST /api/judgments/` "
            '`{"pair": ID, "grade": G}`. 204 when nothing is left for the caller. Never names the systems or '
            "the ranks that brought the pair into the pool. A token caller holds the pair with GET or POST; a "
            "browser session only with POST (and its CSRF token): its GET shows the pair without holding it "
            "(`held_until` null), so a link on another site cannot take holds in a member's name."
        ),
    )
    @action(detail=True, methods=["get", "post"], url_path="next", **ONE_OBJECT)
    def next_pair(self, request: Request, slug: str | None = None) -> Response:
        campaign = self.get_object()  # 404 for non-members (access.campaigns)
        # Only a token (request.auth) or a POST, which DRF's session authentication checks for CSRF, holds.
        hold = request.auth is not None or request.method == "POST"
        found = (pair_assign if hold else pair_next)(
            campaign=campaign,
            annotator=request.user,
            current_query_id=latest_query_id(campaign=campaign, annotator=request.user),
        )
        pair = found.pair
        if pair is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        body = {
            "pair": pair.public_id,
            "qid": pair.query.qid,
            "docid": pair.document.docid,
            "query": {"text": pair.query.text, "description": pair.query.description},
            "document": {"title": pair.document.title, "text": pair.document.text, "url": pair.document.url},
            "held_until": timezone.now() + timedelta(minutes=ASSIGNMENT_MINUTES) if hold else None,
            "was_skipped": found.was_skipped,
        }
        response = Response(NextPairSerializer(body).data)
        response["Cache-Control"] = "no-store"
        return response
