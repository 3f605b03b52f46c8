"""Systems made of live search engines: saving one (its template checked), previewing its first query, and
writing a fetch as a snapshot: the documents the campaign has not seen, the run of the system ``<name>@<n>``
and its pool pairs (through the run importer, so the pool is grown by the one pooling code), in one transaction.
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass, field
from typing import Any

import jsonpath
import numpy as np
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _

from judging.engine_models import DEPTH_MAX, Engine, EngineSnapshot, EngineSystem, QueueFocus
from judging.imports.service import run_import
from judging.models import Account, Campaign, Document, Judgment, Pair, Query, User
from judging.selectors.engines import snapshot_new_pairs
from judging.services.engine_client import (
    Answer,
    EngineClient,
    EngineError,
    Fetched,
    QueryFields,
    TemplateError,
    target_check,
    template_parse,
)

logger = logging.getLogger(__name__)

SNAPSHOT_SEPARATOR = "@"  # a snapshot's system is named <engine system>@<number>
DOCUMENT_BATCH = 1000


def snapshot_system_name(name: str, number: int) -> str:
    return f"{name}{SNAPSHOT_SEPARATOR}{number}"


def engine_system_save(
    *,
    campaign: Campaign,
    user: User | None,
    engine: Engine,
    name: str,
    template: str,
    target: str = "",
    method: str = "POST",
    hits_path: str = "",
    id_field: str = "",
    title_field: str = "",
    text_field: str = "",
    depth: int = 100,
) -> EngineSystem:
    """Create the engine system ``name`` of the campaign, or change it (a changed request is a new template
    version: snapshots name the version they were fetched with). ValidationError keyed by the field at fault;
    a template's names its line and column."""
    errors: dict[str, str] = {}
    if not engine.enabled:
        errors["engine"] = _("this engine is switched off by an administrator")
    try:
        template_parse(template)
    except TemplateError as exc:
        errors["template"] = str(exc)
    try:
        target = target_check(engine.kind, target)
    except ValueError as exc:
        errors["target"] = str(exc)
    for name_, path in (
        ("hits_path", hits_path),
        ("id_field", id_field),
        ("title_field", title_field),
        ("text_field", text_field),
    ):
        if path.strip().startswith("$"):
            try:
                jsonpath.compile(path.strip())
            except jsonpath.JSONPathError as exc:
                errors[name_] = _("a field's JSONPath: %(error)s") % {"error": exc}
    if method not in EngineSystem.Method.values:
        errors["method"] = _("GET or POST")
    if not 1 <= depth <= DEPTH_MAX:
        errors["depth"] = _("from 1 to %(n)s") % {"n": DEPTH_MAX}
    candidate = EngineSystem(campaign=campaign, engine=engine, name=name, template=template, depth=depth)
    try:
        candidate.clean_fields(exclude=["campaign", "engine", "template", "target", "method", "depth", "created_by"])
    except ValidationError as exc:
        errors.update({k: " ".join(v) for k, v in exc.message_dict.items() if k not in errors})
    if errors:
        raise ValidationError(errors)
    values: dict[str, Any] = {
        "engine": engine,
        "template": template,
        "target": target,
        "method": method,
        "hits_path": hits_path.strip(),
        "id_field": id_field.strip(),
        "title_field": title_field.strip(),
        "text_field": text_field.strip(),
        "depth": depth,
    }
    with transaction.atomic():
        system = EngineSystem.objects.select_for_update().filter(campaign=campaign, name=name).first()
        if system is None:
            account = user if isinstance(user, Account) else None
            system = EngineSystem.objects.create(campaign=campaign, name=name, created_by=account, **values)
            logger.info("engine system %s of %s created on %s", name, campaign.slug, engine.name)
            return system
        if any(getattr(system, k) != v for k, v in values.items()):
            for k, v in values.items():
                setattr(system, k, v)
            system.version += 1
            system.save()
            logger.info("engine system %s of %s: template version %d", name, campaign.slug, system.version)
    return system


def campaign_queries(*, campaign: Campaign) -> list[QueryFields]:
    """The queries a fetch asks, in qid order: every query of the campaign with its text (stubs have none)."""
    return list(
        Query.objects.filter(campaign=campaign, is_stub=False).order_by("qid").values_list("qid", "text", "description")
    )


@dataclass
class Preview:
    """The first query's request (credentials masked) and its hits, or why it failed."""

    qid: str = ""
    query: str = ""
    answer: Answer | None = None
    error: str = ""
    sent: Any = None
    known: set[str] = field(default_factory=set)  # docids of the hits the campaign already has


def engine_preview(*, system: EngineSystem) -> Preview:
    """Ask the engine the campaign's first query with ``system`` (saved or not), as the create page shows."""
    queries = campaign_queries(campaign=system.campaign)
    if not queries:
        return Preview(error=_("the campaign has no queries yet: upload its topics first"))
    qid, text, description = queries[0]
    fields = {"query": text, "qid": qid, "description": description}
    preview = Preview(qid=qid, query=text)
    try:
        with EngineClient(system) as client:
            preview.sent = client.sent(fields)
            preview.answer = client.search(fields, keep_raw=True)
    except (EngineError, TemplateError) as exc:
        preview.error = str(exc)
        return preview
    docids = [h.docid for h in preview.answer.hits]
    preview.known = set(
        Document.objects.filter(campaign=system.campaign, docid__in=docids).values_list("docid", flat=True)
    )
    return preview


def _documents_add(*, campaign: Campaign, fetched: Fetched) -> int:
    """The documents of the hits the campaign lacks, with the title and text the engine gave; stubs (made by a
    run or qrels import) get them too. Returns how many were added."""
    first = fetched.documents
    added = 0
    docids = sorted(first)
    for start in range(0, len(docids), DOCUMENT_BATCH):
        batch = docids[start : start + DOCUMENT_BATCH]
        have = dict(Document.objects.filter(campaign=campaign, docid__in=batch).values_list("docid", "is_stub"))
        new = [
            Document(campaign=campaign, docid=d, title=first[d][0], text=first[d][1]) for d in batch if d not in have
        ]
        Document.objects.bulk_create(new)
        added += len(new)
        stubs = [d for d in batch if have.get(d) and (first[d][0] or first[d][1])]
        for d in stubs:
            Document.objects.filter(campaign=campaign, docid=d, is_stub=True).update(
                title=first[d][0], text=first[d][1], is_stub=False
            )
    return added


def _run_text(fetched: Fetched, tag: str) -> bytes:
    """The hits as a TREC run: the engine's order kept exactly (scores strictly decreasing down each list)."""
    lines: list[str] = []
    for qid in sorted(fetched.hits):
        hits = fetched.hits[qid]
        n = len(hits)
        lines.extend(f"{qid} Q0 {d} {rank} {n - rank + 1} {tag}\n" for rank, d in enumerate(hits, start=1))
    return "".join(lines).encode()


def snapshot_write(*, system: EngineSystem, fetched: Fetched, seconds: float) -> EngineSnapshot:
    """Store a fetch as the next snapshot, in one transaction: documents, the run of ``<name>@<n>`` and its pool
    pairs (run_import), and the snapshot's row; an error writes none of them."""
    with transaction.atomic():
        locked = EngineSystem.objects.select_for_update().select_related("campaign").get(pk=system.pk)
        last = locked.snapshots.order_by("-number").values_list("number", flat=True).first() or 0
        number = last + 1
        name = snapshot_system_name(locked.name, number)
        documents = _documents_add(campaign=locked.campaign, fetched=fetched)
        data = _run_text(fetched, name)
        summary = None
        if data:
            summary = run_import(
                campaign=locked.campaign, data=data, filename=f"engine {locked.engine.name}: {name}", system_name=name
            )
        snapshot = EngineSnapshot.objects.create(
            engine_system=locked,
            number=number,
            system=locked.campaign.systems.filter(name=name).first() if summary else None,
            template_version=locked.version,
            template=locked.template,
            queries_ok=len(fetched.hits),
            queries_failed=len(fetched.failures),
            failures=fetched.failures,
            answer_ms=statistics.median(fetched.ms) if fetched.ms else None,
            seconds=seconds,
            pairs_added=summary.pairs_added if summary else 0,
            documents_added=documents,
        )
    logger.info(
        "snapshot %s of %s: %d queries answered, %d failed, %d pairs added",
        name,
        locked.campaign.slug,
        snapshot.queries_ok,
        snapshot.queries_failed,
        snapshot.pairs_added,
    )
    return snapshot


@dataclass
class TriedHit:
    """One hit of a Try: the campaign's label of it and whether the lead may judge it there."""

    docid: str
    title: str
    label: int | None  # the pair's label in the campaign (None: unjudged, or no pair)
    known: bool  # the campaign query has a pair of this document (pooled or labelled by imported qrels)
    pair: int | None = None  # the public id of its pooled pair: judged on the page (None: not in the pool)
    mine: int | None = None  # the caller's own grade of it


@dataclass
class Tried:
    """One engine system's answer to a query a lead typed: its hits with the campaign's label of each, or why
    it failed."""

    system: EngineSystem
    hits: list[TriedHit] = field(default_factory=list)
    error: str = ""
    ms: float | None = None


def engine_try(
    *, campaign: Campaign, text: str, qid: str = "", annotator_id: int | None = None
) -> tuple[Query | None, list[Tried]]:
    """Ask every engine system of the campaign ``text`` (the query ``qid``'s text when ``text`` is empty), as
    the Try page shows it; the labels are those of the campaign query of that qid, or of that very text, with
    the grade ``annotator_id`` gave each pooled pair."""
    query = None
    if qid:
        query = Query.objects.filter(campaign=campaign, qid=qid).first()
    if query is None and text:
        query = Query.objects.filter(campaign=campaign, text=text).order_by("qid").first()
    if not text and query is not None:
        text = query.text
    fields = {"query": text, "qid": query.qid if query else "", "description": query.description if query else ""}
    out: list[Tried] = []
    for system in EngineSystem.objects.filter(campaign=campaign, engine__enabled=True).select_related("engine"):
        tried = Tried(system=system)
        try:
            with EngineClient(system) as client:
                answer = client.search(fields)
        except (EngineError, TemplateError) as exc:
            tried.error = str(exc)
        else:
            pairs: dict[str, tuple[int, int | None, bool]] = {}
            mine: dict[int, int | None] = {}
            if query is not None:
                rows = Pair.objects.filter(query=query, document__docid__in=[h.docid for h in answer.hits])
                pairs = {
                    d: (p, label, pooled)
                    for d, p, label, pooled in rows.values_list("document__docid", "public_id", "label", "pooled")
                }
                if annotator_id is not None:
                    judged = Judgment.objects.filter(
                        annotator_id=annotator_id, pair__public_id__in=[p for p, _l, _o in pairs.values()]
                    )
                    mine = dict(judged.values_list("pair__public_id", "grade__value"))
            for h in answer.hits:
                public_id, label, pooled = pairs.get(h.docid, (None, None, False))
                hit = TriedHit(docid=h.docid, title=h.title, label=label, known=h.docid in pairs)
                if pooled and public_id is not None:
                    hit.pair, hit.mine = public_id, mine.get(public_id)
                tried.hits.append(hit)
            tried.ms = answer.ms
        out.append(tried)
    return query, out


def focus_start(
    *, campaign: Campaign, snapshot: EngineSnapshot, against: EngineSnapshot | None, k: int, user: User | None
) -> QueueFocus:
    """ "Judge what is new first": the judging queue serves, before any other pair, the pooled pairs waiting for a
    label that ``snapshot`` brought in its top ``k`` (not in the top ``k`` of ``against``, the snapshot before;
    None: all of its top k), to every annotator in every queue mode, until they are judged. Replaces the
    campaign's focus if it had one. ``k`` between 1 and DEPTH_MAX."""
    if not 1 <= k <= DEPTH_MAX:
        raise ValueError(_("k must be between 1 and %(most)s.") % {"most": DEPTH_MAX})
    ids = snapshot_new_pairs(old=against, new=snapshot, k=k)
    with transaction.atomic():
        locked = Campaign.objects.select_for_update().get(pk=campaign.pk)
        previous = locked.queue_focus_id
        focus = QueueFocus.objects.create(
            snapshot=snapshot,
            against=against,
            k=k,
            pair_ids=ids.astype(np.int64).tobytes(),
            pairs=int(ids.size),
            created_by=user if user is not None and user.is_authenticated else None,
        )
        Campaign.objects.filter(pk=campaign.pk).update(queue_focus=focus)
        if previous is not None:
            QueueFocus.objects.filter(pk=previous).delete()
    campaign.queue_focus = focus
    return focus


def focus_stop(*, campaign: Campaign) -> bool:
    """Turn the campaign's focus off: the queue goes back to its mode's order. Whether there was one."""
    with transaction.atomic():
        previous = Campaign.objects.select_for_update().filter(pk=campaign.pk).values_list("queue_focus_id", flat=True)
        focus_id = previous.first()
        Campaign.objects.filter(pk=campaign.pk).update(queue_focus=None)
        if focus_id is not None:
            QueueFocus.objects.filter(pk=focus_id).delete()
    campaign.queue_focus = None
    return focus_id is not None
