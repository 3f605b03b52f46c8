"""A user's role in a campaign, read from their membership: below the selectors, which filter by it, and below
``judging.access``, which decides with it who may do what.

Superusers are leads of every campaign, member or not; everyone else has the role of their membership, or none.
"""

from __future__ import annotations

from collections.abc import Mapping

from judging.models import Campaign, Membership, User

LEAD = Membership.Role.LEAD
ANNOTATOR = Membership.Role.ANNOTATOR


def leads_everywhere(user: User) -> bool:
    """Superusers are leads of every campaign, member or not."""
    return bool(user.is_authenticated and user.is_superuser)


def role_of(user: User, membership: str | None) -> str | None:
    """The user's role in a campaign where their membership (if any) has the role ``membership``."""
    return LEAD if leads_everywhere(user) else membership


def membership_role(*, campaign: Campaign | int, user: User, roles: Mapping[int, str] | None = None) -> str | None:
    """'lead', 'annotator' or None (not a member, or not logged in). Superusers are leads everywhere.

    ``roles``: the user's roles by campaign id, already read (``selectors.membership_roles``: the API reads
    them once per request); without it, one query."""
    if not user.is_authenticated:
        return None
    if leads_everywhere(user):
        return LEAD
    campaign_id = campaign if isinstance(campaign, int) else campaign.pk
    if roles is not None:
        return roles.get(campaign_id)
    return Membership.objects.filter(campaign_id=campaign_id, user=user).values_list("role", flat=True).first()
