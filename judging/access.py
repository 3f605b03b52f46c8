"""Who may do what: a user's role in a campaign, and the one decorator every campaign page goes through.

The rules, used alike by the pages, the API's permission classes and the services:
- superusers are leads of every campaign; everyone else has the role of their membership, or none
  (``leads_everywhere``, ``role_of``: read in ``judging.roles``, below the selectors);
- a campaign is invisible to non-members: 404, never 403, so that they cannot tell it exists;
- an annotator asking for a lead's page gets 403;
- members see the pooled pairs of their campaigns; leads see every pair of theirs (``may_see_pair``);
- leads see the leaderboard; annotators only when the campaign's leads allow it (``may_see_leaderboard``);
- leads of any campaign (and users granted ``judging.add_campaign``) may create campaigns;
- a background job is read, retried and cancelled by the campaign's leads, and by an annotator who started
  it only while they may still do what it does (see ``job_access``): membership and role as they are now.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import wraps
from typing import Any, cast

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User as Account
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import CharField, OuterRef, QuerySet, Subquery
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from rest_framework.authtoken.models import Token

from judging.compiled import Slots, compiled_select, model_columns, model_from
from judging.models import Campaign, Grade, Job, Membership, Pair, User
from judging.roles import LEAD, role_of
from judging.roles import leads_everywhere as leads_everywhere
from judging.roles import membership_role as membership_role
from judging.selectors import pair_get
from judging.selectors.campaigns import grades_json, grades_parse
from judging.selectors.queue_rules import PAIR_COLUMNS, pair_from_row

# A Django view: a request (and the URL's arguments) in, a response out.
View = Callable[..., HttpResponseBase]

SESSION_EXPIRED = gettext_lazy("Your session has expired: log in again in another tab.")


def signed_in(user: User) -> Account:
    """The account of a user the login checks let through (login_required, campaign_view, the API's
    IsAuthenticated), for the services that act on an account: the type checker cannot see those checks. An
    anonymous user here would be a view that lost its check, a bug to fail on rather than serve."""
    if isinstance(user, Account):
        return user
    raise TypeError("an anonymous user reached a view that requires a login")


def may_see_pair(*, role: str | None, pooled: bool) -> bool:
    """Members see (and judge) the pool; a lead sees every pair of the campaign, pooled or only labelled."""
    return role is not None and (pooled or role == LEAD)


def may_see_leaderboard(*, campaign: Campaign, role: str | None) -> bool:
    """Knowing which system is winning biases judgments: annotators see it only when the leads allow."""
    return role == LEAD or (role is not None and campaign.leaderboard_visible_to_annotators)


def lead_required(*, campaign: Campaign, user: User, what: str) -> None:
    """Raise PermissionDenied unless the user leads the campaign; ``what`` completes "only a lead can ..."."""
    if membership_role(campaign=campaign, user=user) != LEAD:
        raise PermissionDenied(_("only a lead of this campaign can %(what)s") % {"what": what})


def can_create_campaigns(user: User, *, roles: Mapping[int, str] | None = None) -> bool:
    """Leads of any campaign, superusers and users granted judging.add_campaign create campaigns.
    ``roles`` as membership_role's."""
    if not user.is_authenticated:
        return False
    if leads_everywhere(user) or user.has_perm("judging.add_campaign"):
        return True
    if roles is not None:
        return LEAD in roles.values()
    return Membership.objects.filter(user=user, role=LEAD).exists()


def can_see_worker(user: User) -> bool:
    """Staff, superusers and leads of any campaign see what a worker keeps (the worker page): the caches' sizes tell
    nothing of any campaign's contents, and annotators have no use for them."""
    if not user.is_authenticated:
        return False
    if user.is_staff or leads_everywhere(user):
        return True
    return Membership.objects.filter(user=user, role=LEAD).exists()


@dataclass(frozen=True)
class Member:
    """A logged-in user's standing in one campaign, as a campaign page sees it."""

    campaign: Campaign
    role: str
    # The campaign's scale, lowest grade first, when the view asked for it (``campaign_view(grades=True)``):
    # loaded with the campaign in the same query.
    grades: list[Grade] | None = field(default=None, compare=False)

    @property
    def is_lead(self) -> bool:
        return self.role == LEAD

    @property
    def can_see_leaderboard(self) -> bool:
        return may_see_leaderboard(campaign=self.campaign, role=self.role)

    def context(self, **extra: Any) -> dict[str, Any]:
        """The template context every campaign page starts from."""
        return {
            "campaign": self.campaign,
            "role": self.role,
            "is_lead": self.is_lead,
            "can_see_leaderboard": self.can_see_leaderboard,
            **extra,
        }


def _campaign_member_query(*, superuser: bool, grades: bool) -> QuerySet[Any, Any]:
    args = Slots({"slug": CharField()})
    campaigns = Campaign.objects.filter(slug=args["slug"]).order_by("pk")  # as first() orders
    columns = model_columns(Campaign)
    if not superuser:
        role = Membership.objects.filter(campaign_id=OuterRef("pk"), user_id=args["user_id"]).values("role")[:1]
        campaigns = campaigns.annotate(member_role=Subquery(role))
        columns.append("member_role")
    if grades:
        campaigns = campaigns.annotate(scale_json=grades_json())
        columns.append("scale_json")
    return campaigns.values_list(*columns)[:1]


def campaign_member(request: HttpRequest, slug: str, *, lead: bool = False, grades: bool = False) -> Member:
    """The caller's Member for the campaign ``slug``: 404 for outsiders, 403 for annotators when ``lead``.

    One query (compiled once per process): the campaign with the caller's role (and, with ``grades``, its
    scale) beside it."""
    user = request.user
    shape = {"superuser": leads_everywhere(user), "grades": grades}
    query = compiled_select(("campaign_member", *shape.values()), lambda: _campaign_member_query(**shape))
    row = query.first({"slug": slug, "user_id": user.pk})
    if row is None:
        raise Http404(_("No such campaign."))
    found, at = model_from(Campaign, row)
    campaign = cast(Campaign, found)  # model_from builds an instance of the model it is given
    extra = row[at:]
    membership = None if shape["superuser"] else extra[0]  # the superusers' query reads no membership
    role = role_of(user, membership)
    if role is None:
        raise Http404(_("No such campaign."))
    if lead and role != LEAD:
        raise PermissionDenied(_("Only the campaign's leads can open this page."))
    return Member(campaign, role, grades_parse(campaign, extra[-1]) if grades else None)


def _refuse_anonymous(request: HttpRequest) -> HttpResponseBase | None:
    """Anonymous: an htmx request gets 401 (app.js says "log in again in another tab": swapping a login form
    into the page would throw away what the user typed), any other request the login redirect."""
    if request.user.is_authenticated:
        return None
    if getattr(request, "htmx", False):
        return HttpResponse(str(SESSION_EXPIRED), status=401)
    return redirect_to_login(request.get_full_path())


def campaign_view(view: View | None = None, *, lead: bool = False, grades: bool = False) -> Any:
    """Guard a campaign page ``view(request, member, *args)`` reached at a URL with ``<slug:slug>``.

    Anonymous callers are refused as ``_refuse_anonymous`` says.
    Non-members get 404; annotators get 403 when ``lead`` is set.
    """

    def decorate(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, slug: str, *args: Any, **kwargs: Any) -> HttpResponseBase:
            refused = _refuse_anonymous(request)
            if refused is not None:
                return refused
            return view(request, campaign_member(request, slug, lead=lead, grades=grades), *args, **kwargs)

        return wrapped

    return decorate(view) if view is not None else decorate


def logged_in(view: View) -> View:
    """Refuse anonymous callers as campaign_view does, for a view that resolves its Member itself
    (``campaign_member_pair``)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        refused = _refuse_anonymous(request)
        return refused if refused is not None else view(request, *args, **kwargs)

    return wrapped


def _member_pair_query(*, superuser: bool, lock: bool) -> QuerySet[Any, Any]:
    """campaign_member_pair's query, built with Slots (slug, public_id, user_id): the pair's PAIR_COLUMNS, its
    campaign's columns, the scale as JSON text and (not for superusers) the caller's role."""
    args = Slots({"slug": CharField()})
    pairs = (
        Pair.objects.filter(campaign__slug=args["slug"], public_id=args["public_id"], pooled=True)
        .annotate(scale_json=grades_json())  # grades_json names the joined "judging_campaign"
        .order_by()
    )
    columns = [*PAIR_COLUMNS, *model_columns(Campaign, "campaign__"), "scale_json"]
    if not superuser:
        role = Membership.objects.filter(campaign_id=OuterRef("campaign_id"), user_id=args["user_id"]).values("role")
        pairs = pairs.annotate(member_role=Subquery(role[:1]))
        columns.append("member_role")
    if lock:
        pairs = pairs.select_for_update(of=("self",))
    return pairs.values_list(*columns)[:1]


def campaign_member_pair(
    request: HttpRequest, slug: str, public_id: int | str | None, *, lock: bool = False
) -> tuple[Member, Pair]:
    """campaign_member(request, slug, grades=True) and campaign_pair(campaign, public_id, public=True) in one
    query (the judging page's hot path, compiled once per process: judging.compiled); ``lock`` as pair_get's.
    Answers outsiders and unknown pairs exactly as the two would."""
    number: int | None
    try:
        number = int(public_id)  # type: ignore[arg-type]  # None: TypeError, as for any id that is no number
    except (TypeError, ValueError, OverflowError):
        number = None
    user = request.user
    row = None
    if number is not None:
        shape = {"superuser": leads_everywhere(user), "lock": lock}
        query = compiled_select(("campaign_member_pair", *shape.values()), lambda: _member_pair_query(**shape))
        row = query.first({"slug": slug, "public_id": number, "user_id": user.pk})
    if row is None:
        campaign_member(request, slug)  # 404 for outsiders, as on every campaign page
        raise Http404(_("No such pair in this campaign."))
    pair, at = pair_from_row(row)
    found, at = model_from(Campaign, row, at)
    pair.campaign = cast(Campaign, found)
    membership = None if leads_everywhere(user) else row[at + 1]  # the superusers' query reads no membership
    role = role_of(user, membership)
    if role is None:
        raise Http404(_("No such campaign."))
    return Member(pair.campaign, role, grades_parse(pair.campaign, row[at])), pair


def _pair_member_query(*, superuser: bool) -> QuerySet[Any, Any]:
    """pair_member's query, built with Slots (public_id, user_id): the pair's PAIR_COLUMNS, its campaign's
    columns, the scale as JSON text and (not for superusers) the caller's role."""
    args = Slots()
    pairs = Pair.objects.filter(public_id=args["public_id"]).annotate(scale_json=grades_json()).order_by()
    columns = [*PAIR_COLUMNS, *model_columns(Campaign, "campaign__"), "scale_json"]
    if not superuser:
        role = Membership.objects.filter(campaign_id=OuterRef("campaign_id"), user_id=args["user_id"])
        pairs = pairs.annotate(member_role=Subquery(role.order_by().values("role")[:1]))
        columns.append("member_role")
    return pairs.values_list(*columns)[:1]


def pair_member(*, user: User, public_id: int) -> tuple[Member, Pair] | None:
    """The pair of this public id, pooled or not, in any campaign, with its query, document and campaign loaded,
    and the user's Member of its campaign (role and scale); None when there is no such pair or it is not theirs
    to see (may_see_pair). One query, compiled once per process (judging.compiled): the API's judgments name
    their pair this way, where the ORM built a query for the pair and another for the caller's roles."""
    if not user.is_authenticated:
        return None
    superuser = leads_everywhere(user)
    query = compiled_select(("pair_member", superuser), lambda: _pair_member_query(superuser=superuser))
    row = query.first({"public_id": public_id, "user_id": user.pk})
    if row is None:
        return None
    pair, at = pair_from_row(row)
    found, at = model_from(Campaign, row, at)
    pair.campaign = cast(Campaign, found)
    role = role_of(user, None if superuser else row[at + 1])
    if not may_see_pair(role=role, pooled=pair.pooled):
        return None
    return Member(pair.campaign, cast(str, role), grades_parse(pair.campaign, row[at])), pair


def token_owner(key: str) -> tuple[User, Token] | None:
    """The API token of this key and its user, or None. One query, compiled once per process (judging.compiled):
    every API call authenticates this way (api.authentication), where the ORM spent ~1 ms of CPU building it."""
    row = compiled_select(("token_owner",), _token_owner_query).first({"key": key})
    if row is None:
        return None
    token, at = model_from(Token, row)
    user, _end = model_from(get_user_model(), row, at)
    token = cast(Token, token)
    token.user = cast(User, user)
    return token.user, token


def _token_owner_query() -> QuerySet[Any, Any]:
    slots = Slots({"key": Token._meta.get_field("key")})
    return Token.objects.filter(key=slots["key"]).values_list(
        *model_columns(Token), *model_columns(get_user_model(), "user__")
    )


def campaign_pair(
    campaign: Campaign, pair_id: int | str, *, pooled_only: bool = True, public: bool = False, lock: bool = False
) -> Pair:
    """A pair of this campaign (pooled only, unless told otherwise), or 404: one query, its query and document
    loaded. Ids of another campaign's pairs are answered exactly like ids that do not exist. ``public``: the
    id is the pair's public id (annotators' pages), not its row id. ``lock``: see pair_get."""
    try:
        pair_id = int(pair_id)
    except (TypeError, ValueError, OverflowError):
        raise Http404(_("No such pair.")) from None
    key = {"public_id": pair_id} if public else {"pair_id": pair_id}
    pair = pair_get(campaign=campaign, pooled_only=pooled_only, lock=lock, **key)
    if pair is None:
        raise Http404(_("No such pair in this campaign."))
    pair.campaign = campaign  # already loaded: spares the services a query
    return pair


# --------------------------------------------------------------------------- background jobs

JOB_ACTIONS = ("read", "retry", "cancel")


def job_access(*, job: Job, user: User, action: str = "read") -> bool:
    """Whether ``user`` may ``action`` (read, retry or cancel) ``job``, decided on the membership and role
    the user has *now*, not the one they had when the job started:

    - the campaign's leads (superusers included) may, whoever started the job;
    - an annotator may only for a job they started themselves that annotators may start: a significance
      test, and only while the leads let annotators see the leaderboard (its result is the leaderboard's);
    - anyone else, a member who left the campaign included, may not (the pages and the API answer 404).
    """
    if action not in JOB_ACTIONS:
        raise ValueError(f"action must be one of {', '.join(JOB_ACTIONS)}, not {action!r}")
    role = membership_role(campaign=job.campaign_id, user=user)
    if role is None:
        return False
    if role == LEAD:
        return True
    return (
        job.started_by_id == user.pk
        and job.kind == Job.Kind.SIGNIFICANCE
        and Member(job.campaign, role).can_see_leaderboard
    )


# --------------------------------------------------------------------------- a lead's team


def may_manage_assignments(*, role: str | None) -> bool:
    """Leads give queries to annotators and take them back; an annotator sees only the queries given to
    them; jobs lists and the budget planner are the leads' (``campaign_view(lead=True)``)."""
    return role == LEAD
