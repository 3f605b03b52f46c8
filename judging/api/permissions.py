"""Who may do what in the API: campaign roles looked up once per request, and the permission classes."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from judging.access import can_create_campaigns, leads_everywhere, may_see_leaderboard, may_see_pair, membership_role
from judging.models import Campaign, Membership, Pair, System, User
from judging.selectors import campaign_list, membership_roles

LEAD = Membership.Role.LEAD
_LEAD_ONLY = gettext_lazy("Only a lead of campaign %(campaign)s can %(what)s.")


class Access:
    """The caller's role in each campaign, by judging.access's rules (read once per request).

    Non-members get 404 for a campaign (its existence is not theirs to know); members who lack the
    role an action needs get 403. Superusers are leads everywhere.
    """

    def __init__(self, user: User) -> None:
        self.user = user
        self.superuser = leads_everywhere(user)
        self.roles = membership_roles(user=user)

    def role(self, campaign_id: int) -> str | None:
        return membership_role(campaign=campaign_id, user=self.user, roles=self.roles)

    def is_lead(self, campaign_id: int) -> bool:
        return self.role(campaign_id) == LEAD

    @property
    def led_ids(self) -> list[int] | None:
        """Ids of the campaigns the caller leads; None means every campaign (a superuser)."""
        if self.superuser:
            return None
        return [cid for cid, role in self.roles.items() if role == LEAD]

    def campaigns(self) -> QuerySet[Campaign]:
        if not self.user.is_authenticated:  # e.g. while the schema is generated
            return Campaign.objects.none()
        return campaign_list(user=self.user)

    def campaign(self, slug: str) -> Campaign:
        """A campaign the caller belongs to, by slug, or 404."""
        campaign = self.campaigns().filter(slug=slug).first() if _is_slug(slug) else None
        if campaign is None:
            raise NotFound(_("You are not a member of a campaign %(slug)s.") % {"slug": repr(slug)})
        return campaign

    def require_lead(self, campaign: Campaign, what: str | None = None) -> None:
        """``what`` completes "only a lead of campaign X can ..." (translated by the caller)."""
        if not self.is_lead(campaign.id):
            raise PermissionDenied(_LEAD_ONLY % {"campaign": repr(campaign.slug), "what": what or _("do this")})

    def may_see_pair(self, pair: Pair) -> bool:
        return may_see_pair(role=self.role(pair.campaign_id), pooled=pair.pooled)

    def pairs(self) -> QuerySet[Pair]:
        """The pairs the caller may see, by judging.access.may_see_pair: every pair of the campaigns they lead,
        the pooled ones of the others."""
        pairs = Pair.objects.filter(campaign__in=self.campaigns())
        if self.led_ids is None:
            return pairs
        return pairs.filter(Q(campaign_id__in=self.led_ids) | Q(pooled=True))

    def can_create_campaigns(self) -> bool:
        """The pages' rule (judging.access.can_create_campaigns), from the roles already read."""
        return can_create_campaigns(self.user, roles=self.roles)


def _is_slug(value: str) -> bool:
    # Checked before querying: PostgreSQL refuses text with NUL bytes, which would surface as a 500.
    return 0 < len(value) <= 64 and all(c.isascii() and (c.isalnum() or c in "-_") for c in value)


def access(request: Request) -> Access:
    """The caller's Access, computed once per request."""
    cached = getattr(request, "_reljudge_access", None)
    if cached is None or cached.user != request.user:
        cached = Access(request.user)
        request._reljudge_access = cached  # type: ignore[attr-defined]  # a per-request cache DRF's Request does not declare
    return cached


class CanCreateCampaign(BasePermission):
    message = gettext_lazy("Only campaign leads can create campaigns.")

    def has_permission(self, request: Request, view: APIView) -> bool:
        return getattr(view, "action", None) != "create" or access(request).can_create_campaigns()


class CanSeeLeaderboard(BasePermission):
    """Object permission on a campaign for its leaderboard's endpoints: judging.access.may_see_leaderboard
    (leads; annotators only while the leads show it to them)."""

    def has_object_permission(self, request: Request, view: APIView, obj: Campaign) -> bool:
        if may_see_leaderboard(campaign=obj, role=access(request).role(obj.id)):
            return True
        self.message = _LEAD_ONLY % {"campaign": repr(obj.slug), "what": _("see its leaderboard")}
        return False


class IsCampaignLead(BasePermission):
    """Object permission for objects that belong to a campaign (systems; campaigns themselves)."""

    message = gettext_lazy("Only a lead of this campaign can see or change this.")

    def has_object_permission(self, request: Request, view: APIView, obj: Campaign | System) -> bool:
        campaign_id = obj.id if isinstance(obj, Campaign) else obj.campaign_id
        return access(request).is_lead(campaign_id)
