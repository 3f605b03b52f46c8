"""Who may do what: a user's role in a campaign, and the one decorator every campaign page goes through.

The rules, used alike by the pages, the API's permission classes and the services:
- superusers are leads of every campaign; everyone else has the role of their membership, or none;
- a campaign is invisible to non-members: 404, never 403, so that they cannot tell it exists;
- an annotator asking for a lead's page gets 403;
- leads of any campaign (and users granted ``judging.add_campaign``) may create campaigns.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from judging.models import Campaign, Membership, Pair, User
from judging.selectors import pair_get

LEAD = Membership.Role.LEAD
ANNOTATOR = Membership.Role.ANNOTATOR
SESSION_EXPIRED = gettext_lazy("Your session has expired: log in again in another tab.")


def membership_role(*, campaign: Campaign | int, user: User) -> str | None:
    """'lead', 'annotator' or None (not a member, or not logged in). Superusers are leads everywhere."""
    if not user.is_authenticated:
        return None
    if user.is_superuser:
        return LEAD
    campaign_id = campaign if isinstance(campaign, int) else campaign.pk
    return Membership.objects.filter(campaign_id=campaign_id, user=user).values_list("role", flat=True).first()


def lead_required(*, campaign: Campaign, user: User, what: str) -> None:
    """Raise PermissionDenied unless the user leads the campaign; ``what`` completes "only a lead can ..."."""
    if membership_role(campaign=campaign, user=user) != LEAD:
        raise PermissionDenied(_("only a lead of this campaign can %(what)s") % {"what": what})


def can_create_campaigns(user: User) -> bool:
    """Leads of any campaign, superusers and users granted judging.add_campaign create campaigns."""
    if not user.is_authenticated:
        return False
    return (
        user.is_superuser
        or user.has_perm("judging.add_campaign")
        or Membership.objects.filter(user=user, role=LEAD).exists()
    )


@dataclass(frozen=True)
class Member:
    """A logged-in user's standing in one campaign, as a campaign page sees it."""

    campaign: Campaign
    role: str

    @property
    def is_lead(self) -> bool:
        return self.role == LEAD

    @property
    def can_see_leaderboard(self) -> bool:
        # Knowing which system is winning biases judgments: annotators see it only when the leads allow.
        return self.is_lead or self.campaign.leaderboard_visible_to_annotators

    def context(self, **extra) -> dict:
        """The template context every campaign page starts from."""
        return {
            "campaign": self.campaign,
            "role": self.role,
            "is_lead": self.is_lead,
            "can_see_leaderboard": self.can_see_leaderboard,
            **extra,
        }


def campaign_member(request, slug: str, *, lead: bool = False) -> Member:
    """The caller's Member for the campaign ``slug``: 404 for outsiders, 403 for annotators when ``lead``."""
    campaign = get_object_or_404(Campaign, slug=slug)
    role = membership_role(campaign=campaign, user=request.user)
    if role is None:
        raise Http404(_("No such campaign."))
    if lead and role != LEAD:
        raise PermissionDenied(_("Only the campaign's leads can open this page."))
    return Member(campaign, role)


def campaign_view(view=None, *, lead: bool = False):
    """Guard a campaign page ``view(request, member, *args)`` reached at a URL with ``<slug:slug>``.

    Anonymous: an htmx request gets 401 (app.js says "log in again in another tab": swapping a login form
    into the page would throw away what the user typed), any other request the login redirect.
    Non-members get 404; annotators get 403 when ``lead`` is set.
    """

    def decorate(view):
        @wraps(view)
        def wrapped(request, slug: str, *args, **kwargs):
            if not request.user.is_authenticated:
                if getattr(request, "htmx", False):
                    return HttpResponse(str(SESSION_EXPIRED), status=401)
                return redirect_to_login(request.get_full_path())
            return view(request, campaign_member(request, slug, lead=lead), *args, **kwargs)

        return wrapped

    return decorate(view) if view is not None else decorate


def campaign_pair(campaign: Campaign, pair_id, *, pooled_only: bool = True, public: bool = False) -> Pair:
    """A pair of this campaign (pooled only, unless told otherwise), or 404: one query, its query and document
    loaded. Ids of another campaign's pairs are answered exactly like ids that do not exist. ``public``: the
    id is the pair's public id (annotators' pages), not its row id."""
    try:
        pair_id = int(pair_id)
    except (TypeError, ValueError, OverflowError):
        raise Http404(_("No such pair.")) from None
    key = {"public_id": pair_id} if public else {"pair_id": pair_id}
    pair = pair_get(campaign=campaign, pooled_only=pooled_only, **key)
    if pair is None:
        raise Http404(_("No such pair in this campaign."))
    pair.campaign = campaign  # already loaded: spares the services a query
    return pair
