"""Degenerate campaigns everywhere: every page and API endpoint, every queue mode, on campaigns with nothing, or
almost nothing, in them answers without a server error, and a GET writes nothing.

The list of URLs comes from the URL resolver, so a new page or endpoint is walked without editing this file: each
pattern's arguments are filled from the campaign (its slug, a pair, a system, a job, the model judge "bot", a qid).
Campaign-level URLs (those that take the slug and nothing the campaign may lack) must answer 200 or 204 (405 for
a POST-only endpoint); URLs that name an object the campaign does not have answer 404. A 5xx anywhere fails.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from django.db import models as dj_models
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from judging.engine_models import EngineSystem
from judging.models import Campaign, Job, Judgment, Pair, Query, System
from judging.services import (
    campaign_create,
    documents_import,
    membership_add,
    qrels_import,
    queries_import,
    run_import,
)
from judging.services.audit import audit_draw
from judging.services.model_judge import model_judge_get_or_create
from tests.data import TINY_DOCS, TINY_QRELS, TINY_RUNS, TINY_TOPICS, client_for

QUEUE_MODES = [m.value for m in Campaign.QueueMode]

# A mean of nothing or a 0 / 0 on the way is how a NaN reaches a page: here it fails the test where it happens.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

TOPICS = TINY_TOPICS.encode()
DOCS = TINY_DOCS.encode()


def _import(c: Campaign, *, topics: bool = True, docs: bool = True, runs: str | None = TINY_RUNS) -> None:
    if topics:
        queries_import(campaign=c, data=TOPICS, filename="t.tsv")
    if docs:
        documents_import(campaign=c, data=DOCS, filename="d.jsonl")
    if runs:
        run_import(campaign=c, data=runs.encode(), filename="runs.trec")


def _labels(c: Campaign, qrels: str, who) -> None:
    qrels_import(campaign=c, data=qrels.encode(), filename="q.qrels", annotator=who)


def _every_pair_labelled(grade: int) -> Callable[[Campaign, object], None]:
    def build(c: Campaign, assessor) -> None:
        _import(c)
        pairs = Pair.objects.filter(campaign=c).select_related("query", "document")
        _labels(c, "".join(f"{p.query.qid} 0 {p.document.docid} {grade}\n" for p in pairs), assessor)

    return build


def _model_labels(c: Campaign, bot, share: int = 2) -> None:
    """The model judge labels every ``share``-th pooled pair (grade by position)."""
    pairs = list(Pair.objects.filter(campaign=c).select_related("query", "document").order_by("id"))
    lines = "".join(f"{p.query.qid} 0 {p.document.docid} {i % 3}\n" for i, p in enumerate(pairs) if i % share == 0)
    if lines:
        _labels(c, lines, bot)


def _nothing(c, assessor):
    pass


def _topics_only(c, assessor):
    _import(c, docs=False, runs=None)


def _runs_no_labels(c, assessor):
    _import(c)


def _one_system(c, assessor):
    _import(c, runs="".join(line + "\n" for line in TINY_RUNS.splitlines() if line.endswith(" alpha")))
    _labels(c, TINY_QRELS, assessor)


def _one_query(c, assessor):
    _import(c, runs="".join(line + "\n" for line in TINY_RUNS.splitlines() if line.startswith("q1 ")))
    _labels(c, "q1 0 d1 2\nq1 0 d2 0\n", assessor)


def _missing_queries(c, assessor):
    # beta and gamma return nothing for q2 and q3 (gamma never did); q4 has no run at all
    runs = "".join(
        line + "\n" for line in TINY_RUNS.splitlines() if not (line.endswith(" beta") and line.startswith("q2 "))
    )
    _import(c, runs=runs)
    _labels(c, TINY_QRELS, assessor)


def _tied_scores(c, assessor):
    runs = "".join(" ".join(line.split()[:4] + ["1.0"] + line.split()[5:]) + "\n" for line in TINY_RUNS.splitlines())
    _import(c, runs=runs)
    _labels(c, TINY_QRELS, assessor)


def _qrels_only(c, assessor):
    _import(c, runs=None)
    _labels(c, TINY_QRELS, assessor)


def _model_no_labels(c, assessor):
    _import(c)
    _labels(c, TINY_QRELS, assessor)


def _audit_nothing_drawn(c, assessor):
    _import(c)
    Campaign.objects.filter(pk=c.pk).update(queue_mode="audit")


def _audit_drawn_unjudged(c, assessor):
    _import(c)
    Campaign.objects.filter(pk=c.pk).update(queue_mode="audit")
    audit_draw(campaign=Campaign.objects.get(pk=c.pk), size=2, user=None, seed=3)


@dataclass(frozen=True)
class State:
    build: Callable[[Campaign, object], None]
    model_labels: bool = False  # the model judge "bot" labels half the pool (else it exists with no label)


STATES: dict[str, State] = {
    "nothing": State(_nothing),
    "topics_only": State(_topics_only),
    "runs_no_labels": State(_runs_no_labels),
    "one_system": State(_one_system, model_labels=True),
    "one_query": State(_one_query, model_labels=True),
    "missing_queries": State(_missing_queries, model_labels=True),
    "all_zero": State(_every_pair_labelled(0), model_labels=True),
    "all_top": State(_every_pair_labelled(2), model_labels=True),
    "tied_scores": State(_tied_scores, model_labels=True),
    "qrels_only": State(_qrels_only),
    "model_no_labels": State(_model_no_labels),
    "audit_nothing_drawn": State(_audit_nothing_drawn),
    "audit_drawn_unjudged": State(_audit_drawn_unjudged, model_labels=True),
}


@pytest.fixture
def degenerate(request, db, lead, annotator, make_user):
    """The campaign "deg" in the state named by the test's parameter, with a model judge "bot"."""
    state = STATES[request.param]
    c = campaign_create(slug="deg", name="Degenerate", pool_depth=3)
    membership_add(campaign=c, user=lead, role="lead")
    membership_add(campaign=c, user=annotator, role="annotator")
    assessor = make_user("assessor")
    membership_add(campaign=c, user=assessor, role="annotator")
    state.build(c, assessor)
    bot = model_judge_get_or_create(name="bot", campaign=c)
    if state.model_labels:
        _model_labels(c, bot)
    return Campaign.objects.get(pk=c.pk)


# --------------------------------------------------------------------------- the URLs, from the resolver


def _walk(patterns, prefix: str = "", namespace: str = "") -> Iterator[tuple[str, set[str]]]:
    for p in patterns:
        if isinstance(p, URLResolver):
            ns = f"{namespace}{p.namespace}:" if p.namespace else namespace
            yield from ((name, args) for name, args in _walk(p.url_patterns, prefix, ns))
            continue
        assert isinstance(p, URLPattern)
        if not p.name:
            continue
        yield f"{namespace}{p.name}", _arguments(p)


def _arguments(p: URLPattern) -> set[str]:
    pattern = p.pattern
    if hasattr(pattern, "converters") and pattern.converters:
        return set(pattern.converters)
    regex = getattr(pattern, "regex", None)
    return set(regex.groupindex) if regex is not None else set()


def _url_names() -> list[tuple[str, frozenset[str]]]:
    seen: dict[str, frozenset[str]] = {}
    for name, args in _walk(get_resolver().url_patterns):
        if "format" in args or name.startswith("admin:"):
            continue  # DRF's format-suffix twin of a route walked without it; Django's admin (staff only)
        seen.setdefault(name, frozenset(args))
    return sorted(seen.items())


# Not about a campaign, or not meant for a GET of a signed-in lead: walked all the same (no 5xx), status free.
FREE = {"uidb64", "token", "language", "version"}


def _values(c: Campaign, name: str) -> dict[str, object]:
    """Argument values for a URL of campaign ``c``: the objects it has (None where it has none)."""
    pair = Pair.objects.filter(campaign=c).order_by("id").first()
    job = Job.objects.filter(campaign=c).order_by("id").first()
    system = System.objects.filter(campaign=c).order_by("id").first()
    judgment = Judgment.objects.filter(pair__campaign=c).order_by("id").first()
    query = Query.objects.filter(campaign=c).order_by("qid").first()
    pk = None
    if name.startswith("api:system"):
        pk = system.pk if system else None
    elif name.startswith("api:job"):
        pk = job.pk if job else None
    elif name.startswith("api:judgment"):
        pk = judgment.pk if judgment else None
    elif name.startswith("api:pair"):
        pk = pair.pk if pair else None
    # the engine pages name an engine system of the campaign (none in these campaigns), the others a model judge
    engine = EngineSystem.objects.filter(campaign=c).order_by("id").first()
    judge = (engine.name if engine else None) if name.startswith("judging:engine") else "bot"
    return {
        "slug": c.slug,
        "pk": pk,
        "public_id": pair.public_id if pair else None,
        "pair_id": pair.pk if pair else None,
        "job_id": job.pk if job else None,
        "name": judge,
        "qid": query.qid if query else None,
        "kind": "bars",
        "uidb64": "MQ",
        "token": "bogus-token",
        "language": "ko",
        "version": "1",
    }


MISSING = 987654  # an id no object of these tiny campaigns has


def _requests(c: Campaign) -> Iterator[tuple[str, str, bool]]:
    """(name, url, campaign_level): every named URL with its arguments filled; ``campaign_level`` when it takes
    the campaign's slug and every other argument names something the campaign has."""
    for name, args in _url_names():
        values = _values(c, name)
        kwargs = {}
        complete = "slug" in args
        for arg in args:
            value = values.get(arg)
            if value is None:
                value = MISSING if arg in ("pk", "public_id", "pair_id", "job_id", "number") else "nothing"
                complete = False
            kwargs[arg] = value
        if args & FREE:
            complete = False
        yield name, reverse(name, kwargs=kwargs), complete


def _row_counts() -> dict[str, int]:
    from django.apps import apps

    counts = {}
    for model in apps.get_app_config("judging").get_models():
        if model.__name__ in ("Hold", "Session") or not issubclass(model, dj_models.Model):
            continue
        counts[model.__name__] = model.objects.count()
    return counts


def _finite_numbers(value: object, where: str) -> None:
    if isinstance(value, float):
        assert math.isfinite(value), where
    elif isinstance(value, dict):
        for key, item in value.items():
            _finite_numbers(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _finite_numbers(item, f"{where}[{i}]")


# GETs that write by design: the next pair is held for the script that asked (SPEC: "held for the caller").
WRITING_GETS = {"api:campaign-next-pair"}

# Campaign-level GETs whose right answer is not 200/204 for a reason of their own, with the reason.
NOT_200 = {
    "api:campaign-upload": 405,  # the upload endpoints only take POST
}


@pytest.mark.parametrize("degenerate", list(STATES), indirect=True)
def test_every_url_answers_a_degenerate_campaign(degenerate, client, lead):
    client.force_login(lead)
    api = client_for(lead)
    before = _row_counts()
    problems = []
    holds_taken = False
    for name, url, campaign_level in _requests(degenerate):
        for source in ("", "?labels=model:bot", "?labels=hybrid:bot", "?labels=ppi:bot"):
            if source and "leaderboard" not in name and "calibration" not in name:
                continue
            caller = api if name.startswith("api:") else client
            response = caller.get(url + source)
            status = response.status_code
            if name in WRITING_GETS:
                holds_taken = True
            if status >= 500:
                problems.append(f"{url}{source}: {status}")
            elif campaign_level and not source and status not in (200, 204, 405):
                problems.append(f"{url}: {status} (a campaign-level URL)")
            if status == 200 and response.get("Content-Type", "").startswith("application/json"):
                _finite_numbers(json.loads(response.content), url + source)
    assert not problems, "\n".join(problems)
    after = _row_counts()
    if holds_taken:  # the next pair held for the lead's script (WRITING_GETS) is the one write a GET may make
        after["Assignment"] = before["Assignment"]
    assert after == before, {k: (before[k], after[k]) for k in after if after[k] != before[k]}


@pytest.mark.parametrize("degenerate", list(STATES), indirect=True)
def test_every_queue_mode_serves_a_degenerate_campaign(degenerate, client, annotator):
    """The next pair (API) and the judging page, in every queue mode: 200 with a pair, or 204 / a page that says
    nothing is left; never a 5xx."""
    api = client_for(annotator)
    client.force_login(annotator)
    for mode in QUEUE_MODES:
        Campaign.objects.filter(pk=degenerate.pk).update(queue_mode=mode)
        response = api.get(f"/api/campaigns/{degenerate.slug}/next/")
        assert response.status_code in (200, 204), (mode, response.status_code, response.content[:300])
        if response.status_code == 200:
            assert response.json()["pair"]
        page = client.get(f"/campaigns/{degenerate.slug}/judge/")
        assert page.status_code == 200, (mode, page.status_code)
