"""Giving queries to particular annotators (QueryAssignment) and taking them back.

The rules, for the page and the API alike (only a campaign's leads call these; access.py decides who):
- the assignee is a person who judges blind: an annotator of the campaign. A lead sees which system found
  each document (the leaderboard, the per-query pages), and a model judge runs as a job, not from the queue,
  so neither is given queries;
- a batch is a list of qids, a tag, or a range of qids (inclusive, compared as numbers when both ends are);
  an unknown qid or tag is refused, naming it, and nothing is written;
- a query takes at most ``redundancy`` assignees: each assignee keeps one of a pair's judgment slots, and
  more assignees than slots would promise work that cannot exist.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from judging.models import Account, AnnotatorProfile, Campaign, Membership, Query, QueryAssignment, QueryTag
from judging.usernames import account_name_resolve

logger = logging.getLogger(__name__)

# At most this many qids named in one refusal (the rest are counted).
_NAMED = 5


@dataclass(frozen=True)
class AssignmentsAdded:
    annotator: str
    added: int  # queries newly given to the annotator
    already: int  # queries they had been given before
    given: tuple[str, ...] = ()  # the qids of the former, in the batch's order
    had: tuple[str, ...] = ()  # the qids of the latter

    def summary(self) -> str:
        """What the lead's "Assign" did, in the reader's language: which queries went to whom, and which
        they already had (at most _NAMED qids named, the rest counted)."""
        if not self.added:
            return ngettext(
                "Nothing new given: %(name)s already had this query: %(qids)s.",
                "Nothing new given: %(name)s already had these %(n)d queries: %(qids)s.",
                self.already,
            ) % {"name": self.annotator, "n": self.already, "qids": _names(self.had)}
        said = ngettext(
            "%(n)d query given to %(name)s: %(qids)s.", "%(n)d queries given to %(name)s: %(qids)s.", self.added
        ) % {"n": self.added, "name": self.annotator, "qids": _names(self.given)}
        if self.already:
            said += " " + ngettext(
                "They already had %(n)d of them: %(qids)s.", "They already had %(n)d of them: %(qids)s.", self.already
            ) % {"n": self.already, "qids": _names(self.had)}
        return said


def _names(values: Sequence[str]) -> str:
    shown = ", ".join(values[:_NAMED])
    more = len(values) - _NAMED
    if more > 0:
        shown += " " + ngettext("and %(n)d more", "and %(n)d more", more) % {"n": more}
    return shown


def _account(username: str) -> Account:
    """The account ``username`` names as logins name it (``ALICE`` is alice; usernames.account_name_resolve), or
    a ValidationError on ``annotator``: no such user, or a name that only looks like one (saying which)."""
    found = None
    if username:
        username, found = account_name_resolve(username, error=lambda m: ValidationError({"annotator": m}))
    if found is None:
        raise ValidationError({"annotator": _("there is no user %(name)s") % {"name": repr(username)}})
    return found


def assignee_get(*, campaign: Campaign, username: str) -> Account:
    """The annotator ``username`` of ``campaign``, or a ValidationError on ``annotator`` saying why not."""
    user = _account(username)
    username = user.get_username()
    role = Membership.objects.filter(campaign=campaign, user=user).values_list("role", flat=True).first()
    if role is None:
        raise ValidationError({"annotator": _("%(name)s is not a member of this campaign") % {"name": repr(username)}})
    if AnnotatorProfile.objects.filter(user=user, kind=AnnotatorProfile.Kind.MODEL).exists():
        raise ValidationError(
            {
                "annotator": _("%(name)s is a model judge: run it from the Judges page instead")
                % {"name": repr(username)}
            }
        )
    if role == Membership.Role.LEAD:
        raise ValidationError(
            {
                "annotator": _(
                    "%(name)s is a lead of this campaign: leads see which system found each document, so they "
                    "are not given queries to judge blind"
                )
                % {"name": repr(username)}
            }
        )
    return user


def _qid_key(qids: np.ndarray) -> np.ndarray:
    """The qids as numbers when every one is a whole number; else an empty array (compare them as text)."""
    digits = np.char.isdigit(qids) & (np.char.str_len(qids) <= 18)
    if qids.size and digits.all() and "".join(qids.tolist()).isascii():
        return qids.astype(np.int64)
    return np.zeros(0)


def queries_of_batch(
    *,
    campaign: Campaign,
    qids: Sequence[str] | None = None,
    tag: str | None = None,
    qid_from: str | None = None,
    qid_to: str | None = None,
) -> dict[int, str]:
    """The queries (id -> qid) a batch names: a list of qids, a tag, or an inclusive range of qids (given
    both ends). Exactly one kind; an unknown qid or tag is a ValidationError naming it."""
    kinds = [qids is not None, tag is not None, qid_from is not None or qid_to is not None]
    if sum(kinds) != 1:
        raise ValidationError(_("name the queries with one of: qids (a list), tag, or from and to (a range of qids)"))
    if qids is not None:
        wanted = list(dict.fromkeys(str(q) for q in qids))
        if not wanted:
            raise ValidationError({"qids": _("name at least one qid")})
        found = dict(Query.objects.filter(campaign=campaign, qid__in=wanted).values_list("qid", "id"))
        unknown = [q for q in wanted if q not in found]
        if unknown:
            raise ValidationError(
                {
                    "qids": ngettext(
                        "no query %(qids)s in this campaign", "no queries %(qids)s in this campaign", len(unknown)
                    )
                    % {"qids": _names(unknown)}
                }
            )
        return {found[q]: q for q in wanted}
    if tag is not None:
        rows = dict(QueryTag.objects.filter(query__campaign=campaign, tag=tag).values_list("query_id", "query__qid"))
        if not rows:
            raise ValidationError({"tag": _("no query of this campaign carries the tag %(tag)s") % {"tag": repr(tag)}})
        return rows
    if qid_from is None or qid_to is None:
        raise ValidationError({"from" if qid_from is None else "to": _("a range needs both ends: from and to")})
    every = list(Query.objects.filter(campaign=campaign).values_list("id", "qid"))
    ids = np.array([r[0] for r in every], dtype=np.int64)
    names = np.array([r[1] for r in every], dtype=str)
    known = {r[1] for r in every}
    for field, end in (("from", qid_from), ("to", qid_to)):
        if end not in known:
            raise ValidationError({field: _("no query %(qid)s in this campaign") % {"qid": repr(end)}})
    keys = _qid_key(names)
    if keys.size:
        inside = (keys >= int(qid_from)) & (keys <= int(qid_to))
    else:
        inside = np.greater_equal(names, qid_from) & np.less_equal(names, qid_to)
    if not inside.any():
        raise ValidationError({"to": _("the range from %(a)s to %(b)s holds no query") % {"a": qid_from, "b": qid_to}})
    return dict(zip(ids[inside].tolist(), names[inside].tolist(), strict=True))


def assignments_add(*, campaign: Campaign, by: Account, annotator: str, queries: dict[int, str]) -> AssignmentsAdded:
    """Give ``queries`` (id -> qid, as queries_of_batch returns them) to ``annotator``. Refused whole, with
    a ValidationError naming the field, when the annotator may not be given queries or a query already has
    as many assignees as the campaign's redundancy."""
    user = assignee_get(campaign=campaign, username=annotator)
    with transaction.atomic():
        # The campaign's row lock orders concurrent assignment requests: the redundancy check below holds.
        Campaign.objects.select_for_update().filter(pk=campaign.pk).values_list("pk").first()
        ids = list(queries)
        taken = dict(
            QueryAssignment.objects.filter(query_id__in=ids)
            .exclude(annotator=user)
            .order_by()
            .values("query_id")
            .annotate(n=Count("id"))
            .values_list("query_id", "n")
        )
        full = [queries[q] for q in ids if taken.get(q, 0) >= campaign.redundancy]
        if full:
            raise ValidationError(
                {
                    "qids": ngettext(
                        "query %(qids)s already has %(n)d assignee, as many as the campaign's redundancy",
                        "queries %(qids)s already have %(n)d assignees, as many as the campaign's redundancy",
                        len(full),
                    )
                    % {"qids": _names(full), "n": campaign.redundancy}
                }
            )
        mine = set(QueryAssignment.objects.filter(query_id__in=ids, annotator=user).values_list("query_id", flat=True))
        new = [
            QueryAssignment(campaign=campaign, query_id=q, annotator=user, assigned_by=by) for q in ids if q not in mine
        ]
        QueryAssignment.objects.bulk_create(new)
    logger.info(
        "assignments added: campaign=%s annotator=%s by=%s queries=%d", campaign.slug, annotator, by.pk, len(new)
    )
    return AssignmentsAdded(
        annotator=user.get_username(),
        added=len(new),
        already=len(mine),
        given=tuple(queries[q] for q in ids if q not in mine),
        had=tuple(queries[q] for q in ids if q in mine),
    )


def assignments_remove(
    *,
    campaign: Campaign,
    ids: Sequence[int] | None = None,
    annotator: str | None = None,
    queries: dict[int, str] | None = None,
) -> int:
    """Take assignments back: by their ids, or an annotator's (all of them, or those of ``queries``). How
    many were taken back; the queries go back to the shared queue (judgments already made stay)."""
    qs = QueryAssignment.objects.filter(campaign=campaign)
    if ids is not None:
        qs = qs.filter(id__in=list(ids))
    elif annotator is not None:
        qs = qs.filter(annotator=_account(annotator))
        if queries is not None:
            qs = qs.filter(query_id__in=list(queries))
    else:
        raise ValidationError(_("name the assignments to take back: ids, or an annotator (and their queries)"))
    removed, _by_model = qs.delete()
    logger.info("assignments removed: campaign=%s count=%d", campaign.slug, removed)
    return int(removed)
