"""Queries compiled once and run as plain SQL (judging.compiled) answer exactly as the ORM query they came from."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from judging import selectors
from judging.compiled import Slots, Values, compiled_select
from judging.models import Assignment, Document, Pair
from judging.selectors.queue import QUEUE_FIELDS, _open_pairs_of, queue_values


def test_compiled_pair_next_loads_the_pair_query_and_document_as_the_orm_does(pooled, annotator):
    Document.objects.filter(campaign=pooled).update(attributes={"lang": "en", "n": [1, 2]})
    pair = selectors.pair_next(campaign=pooled, annotator=annotator).pair
    loaded = Pair.objects.select_related("query", "document").get(id=pair.id)
    for obj, orm in ((pair, loaded), (pair.query, loaded.query), (pair.document, loaded.document)):
        fields = [f.attname for f in type(obj)._meta.concrete_fields]
        assert [getattr(obj, f) for f in fields] == [getattr(orm, f) for f in fields]
    assert pair.document.attributes == {"lang": "en", "n": [1, 2]}  # JSON decoded, not text
    assert pair.created_at.tzinfo is not None  # a datetime, not the database's text


def test_compiled_lock_comes_with_progress_figures(pooled, annotator):
    with transaction.atomic():
        pair = selectors.pair_next(campaign=pooled, annotator=annotator, lock=True).pair
    total = Pair.objects.filter(query_id=pair.query_id, pooled=True).count()
    assert (pair.progress.query_done, pair.progress.query_total) == (0, total)


def _open_ids(campaign, annotator, *, exclude=(), now=None) -> tuple[set, set]:
    """The campaign's pairs open to ``annotator``: by the compiled template, asked pair by pair, and by the
    ORM query built from the same values."""
    values = queue_values(campaign=campaign, annotator_id=annotator.id, exclude=list(exclude), pair_id=0)
    if now is not None:
        values["now"] = now
    ids = Pair.objects.filter(campaign=campaign).values_list("id", flat=True)
    orm = _open_pairs_of(Values(QUEUE_FIELDS, **values), overlap=False, exclude=bool(exclude))
    orm = set(orm.filter(campaign=campaign).values_list("id", flat=True))

    def build():
        args = Slots(QUEUE_FIELDS)
        return _open_pairs_of(args, overlap=False, exclude=bool(exclude)).filter(id=args["pair_id"]).values("id")

    template = compiled_select(("test_open_pair", bool(exclude)), build)
    compiled = {pid for pid in ids if template.first({**values, "pair_id": pid}) is not None}
    return compiled, orm


def test_compiled_skips_and_holds_match_the_orm(pooled, annotator, make_user):
    pairs = list(Pair.objects.filter(campaign=pooled).order_by("id"))
    other = make_user("other")
    # Someone else holds one pair (redundancy 1: it is not open to anyone else while held).
    Assignment.objects.create(campaign=pooled, annotator=other, pair=pairs[0], expires_at=timezone.now() + timedelta(1))
    compiled, orm = _open_ids(pooled, annotator)
    assert compiled == orm == {p.id for p in pairs[1:]}
    # Skipped pairs (one parameter, whatever their number) are left out alike.
    skipped = [pairs[1].id, *range(10**6, 10**6 + 300)]
    compiled, orm = _open_ids(pooled, annotator, exclude=skipped)
    assert compiled == orm == {p.id for p in pairs[2:]}
    # Two days later the hold has lapsed: the time is a parameter, compared as the ORM compares it.
    compiled, orm = _open_ids(pooled, annotator, now=timezone.now() + timedelta(days=2))
    assert compiled == orm == {p.id for p in pairs}
