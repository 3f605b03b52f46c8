"""The audit of a prediction-powered leaderboard: a lead draws queries at random for people to judge completely."""

from __future__ import annotations

import logging
import secrets

import numpy as np
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _

from judging.models import AuditDraw, AuditQuery, Campaign, Query, User

logger = logging.getLogger(__name__)

SEED_MAX = 2**63 - 1


def audit_draw(*, campaign: Campaign, size: int, user: User | None, seed: int | None = None) -> AuditDraw:
    """Draw ``size`` more queries of ``campaign`` uniformly at random, without replacement, among those no
    earlier draw took, and record the draw (who, when, the seed, the queries in their drawn order).

    Sampling in steps keeps the union a uniform random sample of the queries, so a lead may audit a few
    queries first and draw more later. ``seed`` (0 .. 2^63 - 1, default a fresh random one) makes the draw
    repeatable. ValidationError (translated) for a size below 1 or above the queries left to draw."""
    if seed is None:
        seed = secrets.randbelow(SEED_MAX)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValidationError(_("draw at least one query"))
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise ValidationError(_("the seed must be a whole number from 0 to %(max)d") % {"max": SEED_MAX})
    with transaction.atomic():
        # one draw at a time per campaign: two leads drawing at once must not take the same query twice
        Campaign.objects.select_for_update().filter(pk=campaign.pk).values_list("pk").first()
        left = np.array(
            Query.objects.filter(campaign=campaign, audit__isnull=True).order_by("id").values_list("id", flat=True),
            dtype=np.int64,
        )
        if size > left.size:
            raise ValidationError(
                _("only %(n)d queries of this campaign are left to draw; you asked for %(size)d")
                % {"n": left.size, "size": size}
            )
        picked = left[np.random.default_rng(seed).choice(left.size, size=size, replace=False)]
        user_id = getattr(user, "pk", None)
        draw = AuditDraw.objects.create(campaign=campaign, drawn_by_id=user_id, seed=seed, size=size)
        start = AuditQuery.objects.filter(draw__campaign=campaign).count()
        AuditQuery.objects.bulk_create(
            [AuditQuery(draw=draw, query_id=q, position=start + i) for i, q in enumerate(picked.tolist())]
        )
    logger.info(
        "audit draw on campaign %s by user %s: %d queries (seed %d), %d left",
        campaign.slug,
        user_id,
        size,
        seed,
        left.size - size,
    )
    return draw
