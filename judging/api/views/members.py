"""A campaign's members under /api/campaigns/SLUG/members/."""

from __future__ import annotations

from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from judging.access import signed_in
from judging.api import serializers
from judging.api.permissions import access
from judging.api.views.base import ONE_OBJECT, ViewBase, base_url, not_member
from judging.selectors import membership_get
from judging.services import member_add, membership_remove, set_password_link_issue


class MemberActions(ViewBase):
    """CampaignViewSet's member actions (leads only)."""

    @extend_schema(
        methods=["GET"],
        responses=serializers.MemberSerializer(many=True),
        description="The campaign's members and their roles (leads only).",
    )
    @extend_schema(
        methods=["POST"],
        request=serializers.MemberAddSerializer,
        responses={200: serializers.MemberAddedSerializer, 201: serializers.MemberAddedSerializer},
        description=(
            'Add a user as annotator or lead, or change their role. With `"create": true` an unknown username '
            "becomes a new account (201) and the answer carries `set_password_url`, a one-time link (valid a "
            "few days) with which the person sets their own password; it is also e-mailed when the account has "
            "an address and the server has an e-mail backend."
        ),
    )
    @action(detail=True, methods=["get", "post"], **ONE_OBJECT)
    def members(self, request: Request, slug: str | None = None) -> Response:
        campaign = self.get_object()
        access(request).require_lead(campaign, _("manage its members"))
        if request.method == "POST":
            form = serializers.MemberAddSerializer(data=request.data)
            form.is_valid(raise_exception=True)
            added = member_add(
                campaign=campaign, by=signed_in(request.user), base_url=base_url(request), **form.validated_data
            )
            data = dict(
                serializers.MemberSerializer(added.membership).data,
                created=added.created,
                set_password_url=added.url(base_url(request)),
                emailed=added.emailed,
                mail_refused=added.mail_refused,
            )
            return Response(data, status=status.HTTP_201_CREATED if added.created else status.HTTP_200_OK)
        memberships = campaign.memberships.select_related("user").order_by("user__username")
        return Response(serializers.MemberSerializer(memberships, many=True).data)

    @extend_schema(
        parameters=[OpenApiParameter("username", str, OpenApiParameter.PATH)],
        request=None,
        responses={204: None},
        description="Take a user off the campaign; their judgments stay.",
    )
    @action(
        detail=True,
        methods=["delete"],
        url_path=r"members/(?P<username>[^/]+)",
        **ONE_OBJECT,
    )
    def member_remove(self, request: Request, slug: str, username: str) -> Response:
        campaign = self.get_object()
        access(request).require_lead(campaign, _("manage its members"))
        membership = membership_get(campaign=campaign, username=username)
        if membership is None:
            raise NotFound(not_member(username, campaign))
        membership_remove(campaign=campaign, user=membership.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        parameters=[OpenApiParameter("username", str, OpenApiParameter.PATH)],
        request=None,
        responses={200: serializers.MemberAddedSerializer},
        description=(
            'A fresh one-time set-password link for a member who has not set a password yet ("resend"). '
            "Refused (400) for accounts that already have a password, administrators, and accounts that also "
            "belong to campaigns you do not lead."
        ),
    )
    @action(
        detail=True,
        methods=["post"],
        url_path=r"members/(?P<username>[^/]+)/link",
        **ONE_OBJECT,
    )
    def member_link(self, request: Request, slug: str, username: str) -> Response:
        campaign = self.get_object()
        access(request).require_lead(campaign, _("manage its members"))
        membership = membership_get(campaign=campaign, username=username)
        if membership is None:
            raise NotFound(not_member(username, campaign))
        added = set_password_link_issue(
            campaign=campaign, by=signed_in(request.user), user=membership.user, base_url=base_url(request)
        )
        return Response(
            dict(
                serializers.MemberSerializer(added.membership).data,
                created=False,
                set_password_url=added.url(base_url(request)),
                emailed=added.emailed,
                mail_refused=added.mail_refused,
            )
        )
