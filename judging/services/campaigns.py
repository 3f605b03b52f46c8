"""Campaigns, their grading scale, settings and members: creating, changing and the rules that guard them."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _

from judging.access import lead_required
from judging.imports.service import pool_build
from judging.labels import labels_refresh
from judging.models import (
    DEFAULT_SCALE,
    Account,
    Adjudication,
    AnnotatorProfile,
    Campaign,
    Grade,
    Judgment,
    Membership,
    Pair,
    QueryAssignment,
    User,
)

logger = logging.getLogger(__name__)


def _values_check(values: Sequence[int]) -> None:
    if not values:
        raise ValidationError(_("a grading scale needs at least one grade"))
    if len(set(values)) != len(values):
        raise ValidationError(_("each grade value may appear only once"))
    if any(v < 0 or v > 100 for v in values):
        raise ValidationError(_("grades must be whole numbers from 0 to 100"))


def scale_check(scale: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The one check of a grading scale, whoever sends it (the settings page's formset, the API's serializer,
    the services): at least one grade, each value once, values 0 to 100. Returns it sorted by value."""
    _values_check([int(g["value"]) for g in scale])
    return sorted(scale, key=lambda g: int(g["value"]))


def scale_from_values(values: Sequence[int]) -> list[dict[str, Any]]:
    """A scale for the given grade values, named like the default 0/1/2 scale where it can be."""
    values = sorted({int(v) for v in values})
    _values_check(values)
    if values == [0, 1, 2]:
        return [dict(g) for g in DEFAULT_SCALE]
    top = values[-1]
    scale: list[dict[str, Any]] = []
    for v in values:
        if v == 0:
            name = "Not relevant"
        elif v == top:
            name = "Highly relevant"
        else:
            name = f"Relevant (level {v})"
        scale.append({"value": v, "name": name, "description": ""})
    return scale


@transaction.atomic
def campaign_create(
    *,
    slug: str,
    name: str = "",
    scale: Sequence[dict[str, Any]] | None = None,
    pool_depth: int = 10,
    guidelines: str = "",
    description: str = "",
    redundancy: int = 1,
    lead: Account | None = None,
    **settings: Any,
) -> Campaign:
    """Create a campaign with its grading scale (the default 0/1/2 unless ``scale``).

    ``lead``, when given, becomes its first lead and is recorded as its creator (the web page, the API and
    the command all create a campaign this way); ``settings`` are the other CAMPAIGN_SETTINGS.
    """
    if Campaign.objects.filter(slug=slug).exists():
        raise ValidationError(_("a campaign with slug %(slug)s already exists") % {"slug": repr(slug)})
    campaign = Campaign(
        slug=slug,
        name=name or slug,
        pool_depth=pool_depth,
        guidelines=guidelines,
        description=description,
        redundancy=redundancy,
        created_by=lead,
    )
    campaign.full_clean()
    campaign.save()
    grades = [
        Grade(
            campaign=campaign,
            value=g["value"],
            name=g["name"],
            description=g.get("description", ""),
            examples=g.get("examples", ""),
        )
        for g in (scale_check(scale) if scale is not None else DEFAULT_SCALE)
    ]
    Grade.objects.bulk_create(grades)
    if settings:
        campaign_settings_update(campaign=campaign, **settings)
    if lead is not None:
        membership_add(campaign=campaign, user=lead, role=Membership.Role.LEAD)
    logger.info("campaign %s created by %s", slug, getattr(lead, "username", "a script"))
    return campaign


def campaign_has_judgments(*, campaign: Campaign) -> bool:
    return Judgment.objects.filter(pair__campaign=campaign).exists()


@transaction.atomic
def campaign_scale_set(*, campaign: Campaign, scale: Sequence[dict[str, Any]]) -> None:
    """Replace the grading scale; refused once judging has started (labels would change meaning)."""
    scale = scale_check(scale)
    new_values = [int(g["value"]) for g in scale]
    old_values = list(campaign.grades.values_list("value", flat=True))
    if new_values != sorted(old_values) and campaign_has_judgments(campaign=campaign):
        raise ValidationError(
            _("the grading scale is fixed once judging has started; names and descriptions can change")
        )
    existing = {g.value: g for g in campaign.grades.all()}
    for g in scale:
        obj = existing.pop(int(g["value"]), None) or Grade(campaign=campaign, value=int(g["value"]))
        obj.name = g["name"]
        obj.description = g.get("description", "")
        obj.examples = g.get("examples", "")
        obj.save()
    for obj in existing.values():
        obj.delete()
    logger.info("campaign %s grading scale set: %s", campaign.slug, ", ".join(str(g["value"]) for g in scale))


def last_lead() -> str:
    """The rule that keeps a campaign led, in the reader's language."""
    return _("A campaign needs at least one lead: add another lead first.")


def not_a_person(user: User) -> bool:
    """A model judge or a source of imported labels (e.g. trec-2019): an account nobody may log in as."""
    profile = getattr(user, "annotator_profile", None)
    return hasattr(user, "label_source") or (profile is not None and profile.kind == AnnotatorProfile.Kind.MODEL)


def _lead_stays(*, campaign: Campaign, user: User) -> None:
    """Refuse to take away the campaign's last lead (the campaign would be orphaned). A model judge or a
    label source is never counted as a lead: nobody can log in as it to lead.

    The campaign's memberships are locked first, so two leads demoting each other at once cannot both win."""
    leads = list(
        Membership.objects.select_for_update()
        .filter(campaign=campaign, role=Membership.Role.LEAD)
        .values_list("user_id", flat=True)
    )
    people = set(
        get_user_model()
        .objects.filter(pk__in=leads, label_source__isnull=True)
        .exclude(annotator_profile__kind=AnnotatorProfile.Kind.MODEL)
        .values_list("pk", flat=True)
    )
    if user.pk in people and people == {user.pk}:
        raise ValidationError(last_lead())


@transaction.atomic
def membership_add(*, campaign: Campaign, user: Account, role: str) -> Membership:
    """Make ``user`` a member with ``role``, or change their role; a campaign keeps at least one lead.
    A model judge or a label source is only ever an annotator."""
    if role not in Membership.Role.values:
        raise ValidationError(_("unknown role %(role)s; expected annotator or lead") % {"role": repr(role)})
    if role != Membership.Role.ANNOTATOR and not_a_person(user):
        raise ValidationError(
            _("%(username)s is a model judge or a source of imported labels: it can only be an annotator")
            % {"username": user.username}
        )
    membership, created = Membership.objects.get_or_create(campaign=campaign, user=user, defaults={"role": role})
    if created:
        logger.info("%s joined campaign %s as %s", user.username, campaign.slug, role)
    elif membership.role != role:
        if membership.role == Membership.Role.LEAD:
            _lead_stays(campaign=campaign, user=user)
        logger.info("%s's role in campaign %s: %s -> %s", user.username, campaign.slug, membership.role, role)
        membership.role = role
        membership.save(update_fields=["role"])
        if role == Membership.Role.LEAD:
            # A lead is not given queries to judge blind (services.assignments): theirs go back to the team.
            QueryAssignment.objects.filter(campaign=campaign, annotator=user).delete()
    return membership


@transaction.atomic
def membership_remove(*, campaign: Campaign, user: Account) -> None:
    """Take a user off a campaign, never its last lead. Their judgments stay: they are part of the labels
    and the history."""
    _lead_stays(campaign=campaign, user=user)
    deleted, _per_model = Membership.objects.filter(campaign=campaign, user=user).delete()
    # The queries given to them go back to the shared queue (nobody keeps a slot for them any more).
    QueryAssignment.objects.filter(campaign=campaign, annotator=user).delete()
    if deleted:
        logger.info("%s left campaign %s", user.username, campaign.slug)


def no_user(username: str) -> str:
    """Why a username cannot be added, and the three ways to create the account."""
    return _(
        "no user named %(username)s; a lead creates the account on the campaign's Members page (tick 'Create "
        "the account'), with add_member SLUG USERNAME --role annotator --create, or through the API with "
        '"create": true; each gives a one-time set-password link'
    ) % {"username": repr(username)}


def user_get(*, username: str) -> Account:
    User = get_user_model()
    try:
        return User.objects.get(username=username)
    except User.DoesNotExist:
        raise ValidationError(no_user(username)) from None


CAMPAIGN_SETTINGS = (
    "name",
    "description",
    "guidelines",
    "pool_depth",
    "redundancy",
    "aggregation",
    "queue_mode",
    "leaderboard_visible_to_annotators",
)


@transaction.atomic
def campaign_settings_update(*, campaign: Campaign, **values: Any) -> int:
    """Change a campaign's settings (a lead's edit page); returns how many pairs joined the pool.

    A deeper pool adds the runs' next documents to it; a shallower one keeps the pairs already pooled,
    since they may have judgments. A new aggregation policy recomputes every label.
    """
    unknown = set(values) - set(CAMPAIGN_SETTINGS)
    if unknown:
        raise ValidationError(_("unknown campaign settings: %(names)s") % {"names": ", ".join(sorted(unknown))})
    if values.get("queue_mode") == Campaign.QueueMode.HYBRID and campaign.queue_mode != Campaign.QueueMode.HYBRID:
        _hybrid_check(campaign)
    old_depth, old_policy = campaign.pool_depth, campaign.aggregation
    # the names only: a description or guidelines may quote anything, an endpoint's credentials included
    changed = sorted(name for name, value in values.items() if getattr(campaign, name) != value)
    for name, value in values.items():
        setattr(campaign, name, value)
    campaign.full_clean()
    campaign.save()
    added = pool_build(campaign=campaign) if campaign.pool_depth > old_depth else 0
    if changed:
        logger.info(
            "campaign %s settings changed: %s (%d pairs joined the pool)", campaign.slug, ", ".join(changed), added
        )
    if campaign.aggregation != old_policy:
        _labels_reaggregate(campaign=campaign, old_policy=old_policy, by=None)
    return added


def has_model_judge(campaign: Campaign) -> bool:
    """Whether a model judge is a member of the campaign (queue mode ``hybrid`` needs one)."""
    return Membership.objects.filter(
        campaign=campaign, user__annotator_profile__kind=AnnotatorProfile.Kind.MODEL
    ).exists()


def _hybrid_check(campaign: Campaign) -> None:
    """Queue mode ``hybrid`` serves people the pairs where a model judge's labels leave most doubt: without a model
    judge on the campaign there is nothing to be hybrid with."""
    if not has_model_judge(campaign):
        raise ValidationError(
            {
                "queue_mode": _(
                    "The hybrid queue needs a model judge on this campaign: run one on the Model judges page "
                    "(or judge_with_model), or import a model's labels (import_qrels --model), then choose it."
                )
            }
        )


def _labels_reaggregate(
    *, campaign: Campaign, old_policy: str, by: Account | None, progress: Callable[[int], object] | None = None
) -> int:
    """Recompute every judged pair's label under the campaign's new policy; how many labels changed.

    Every judged pair's lock is taken first, as judgment_record takes it, before any judgment is read: a
    judgment being recorded now finishes first and is aggregated here, and one recorded later waits and
    then reads the new policy (labels_refresh reads it from the database). So the leaderboard never
    scores a mix of two policies."""
    judged = list(
        Pair.objects.select_for_update()
        .filter(campaign=campaign, judgment_count__gt=0)
        .order_by("id")
        .values_list("id", flat=True)
    )
    changed = 0
    # In chunks, so that a background job can report how far it is (labels_refresh reads 5,000 at a time too).
    for start in range(0, len(judged), POLICY_CHUNK):
        chunk = judged[start : start + POLICY_CHUNK]
        changed += labels_refresh(campaign=campaign, pair_ids=chunk)
        if progress:
            progress(len(chunk))
    who = f" by {by.username}" if by is not None else ""
    logger.info(
        "campaign %s: policy %s -> %s%s, %d labels changed",
        campaign.slug,
        old_policy,
        campaign.aggregation,
        who,
        changed,
    )
    return changed


@transaction.atomic
def campaign_update(*, campaign: Campaign, scale: Sequence[dict[str, Any]] | None = None, **settings: Any) -> int:
    """Change settings and, optionally, the grading scale in one transaction; returns pairs added to the pool.

    The scale's values are fixed once anything refers to its grades (a judgment or an adjudication);
    names and descriptions can always change."""
    added = campaign_settings_update(campaign=campaign, **settings) if settings else 0
    if scale is not None:
        old_values = sorted(campaign.grades.values_list("value", flat=True))
        new_values = sorted(int(g["value"]) for g in scale)
        if new_values != old_values and Adjudication.objects.filter(pair__campaign=campaign).exists():
            raise ValidationError({"scale": _("the grading scale is fixed once pairs have been adjudicated")})
        try:
            campaign_scale_set(campaign=campaign, scale=scale)
        except ValidationError as exc:
            raise ValidationError({"scale": exc.messages}) from None
    return added


POLICY_CHUNK = 5000


def campaign_judged_pairs(*, campaign: Campaign) -> int:
    """How many pairs a policy switch relabels (those with a judgment)."""
    return Pair.objects.filter(campaign=campaign, judgment_count__gt=0).count()


def policy_switch_needs_job(*, campaign: Campaign) -> bool:
    """Whether switching this campaign's aggregation policy goes to a background job (above
    RELJUDGE_POLICY_JOB_PAIRS judged pairs) rather than running in the request."""
    return campaign_judged_pairs(campaign=campaign) > django_settings.RELJUDGE_POLICY_JOB_PAIRS


@transaction.atomic
def campaign_policy_set(
    *, campaign: Campaign, lead: Account, policy: str, progress: Callable[[int], object] | None = None
) -> int:
    """Switch the campaign's aggregation policy and recompute every judged pair's label under it, in one
    transaction (the leaderboard never scores a mix of policies). Returns how many labels changed."""
    lead_required(campaign=campaign, user=lead, what=_("change the aggregation policy"))
    if policy not in Campaign.Aggregation.values:
        raise ValidationError(
            {
                "policy": _("unknown aggregation policy %(policy)s; expected one of %(names)s")
                % {"policy": repr(policy), "names": ", ".join(Campaign.Aggregation.values)}
            }
        )
    # Lock the campaign row: two leads switching at once are applied one after the other.
    locked = Campaign.objects.select_for_update().only("id", "aggregation").get(id=campaign.id)
    campaign.aggregation = policy
    if locked.aggregation == policy:
        return 0
    Campaign.objects.filter(id=campaign.id).update(aggregation=policy)
    return _labels_reaggregate(campaign=campaign, old_policy=locked.aggregation, by=lead, progress=progress)
