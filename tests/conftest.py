"""Fixtures shared by the test suite: users, a small campaign (bare, pooled, or judged: the API tests' world)."""

from __future__ import annotations

import runpy
from dataclasses import dataclass
from pathlib import Path

import pytest

from judging.models import Document, Judgment, Pair, Query, System
from judging.services import (
    campaign_create,
    documents_import,
    judgment_record,
    membership_add,
    qrels_import,
    queries_import,
    run_import,
)
from tests.data import DOCS, RUN_BM25, RUN_DENSE, TINY_DOCS, TINY_QRELS, TINY_RUNS, TINY_TOPICS, TOPICS

TESTS = Path(__file__).resolve().parent

# The slow lane (`pytest -m "not slow"` leaves it out; CI runs everything): what starts a browser or real
# servers, the schemathesis run over the whole API, and single tests measured above 5 s (--durations).
SLOW_DIRECTORIES = {"browser", "serving"}
SLOW_MODULES = {"judging/test_api_schema.py"}
SLOW_TESTS = {
    "i18n/test_korean_demo.py::test_korean_demo_leaves_the_english_demo_alone",  # loads both demos
    # every URL of the resolver, four label sources, on each of 13 degenerate campaigns: ~10 s a campaign
    "judging/test_degenerate.py::test_every_url_answers_a_degenerate_campaign",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(item.path).resolve()
        if not path.is_relative_to(TESTS):
            continue
        relative = path.relative_to(TESTS)
        if (
            relative.parts[0] in SLOW_DIRECTORIES
            or relative.as_posix() in SLOW_MODULES
            or f"{relative.as_posix()}::{item.originalname}" in SLOW_TESTS
            or item.get_closest_marker("browser")
        ):
            item.add_marker(pytest.mark.slow)


def pytest_sessionstart(session):
    # The translations are compiled by scripts/setup.sh; a test run without it (or after a .po changed)
    # compiles the stale ones here, so that pages are tested in Korean with the catalog as it is now.
    script = Path(__file__).resolve().parent.parent / "scripts" / "compile_messages.py"
    runpy.run_path(str(script))["compile_all"]()


@pytest.fixture(autouse=True, scope="session")
def _cube_dir(tmp_path_factory):
    """The shared run-cube files of this test session go to a folder of its own (the servers some tests start
    inherit it through the environment), never to the checkout's var/cubes."""
    import os

    from django.conf import settings

    folder = str(tmp_path_factory.mktemp("cubes"))
    os.environ["RELJUDGE_CUBE_DIR"] = folder
    settings.RELJUDGE_CUBE_DIR = folder
    # No background warm-up threads in this process's tests (they would outlive a test's database); the test of
    # the warm-up turns it on, and the servers some tests start keep it on.
    settings.RELJUDGE_TRUST_WARMUP = False
    # Work left for after the answer (judging.runtime.later: shared-cache writes, queue lists, trust parts, score
    # files) runs in the request here, so that a test sees its effect at once and no thread outlives its database;
    # a test of the threads themselves turns it off.
    settings.RELJUDGE_BACKGROUND_INLINE = True
    return folder


@pytest.fixture(autouse=True)
def _settings_language():
    """Each test starts in the settings' language. A request in Korean leaves Korean active in the thread that
    served it (the test's own, with Django's test client), so without this a message checked in English fails
    or passes by the order the tests ran in."""
    from django.utils import translation

    translation.deactivate()
    yield
    translation.deactivate()


@pytest.fixture
def make_user(db):
    from django.contrib.auth import get_user_model

    def make(username: str, **extra):
        return get_user_model().objects.create_user(username=username, password="pw-" + username, **extra)

    return make


@pytest.fixture
def lead(make_user):
    return make_user("lead")


@pytest.fixture
def annotator(make_user):
    return make_user("ann")


@pytest.fixture
def campaign(db, lead, annotator):
    from judging.services import campaign_create, membership_add

    c = campaign_create(slug="demo", name="Demo", pool_depth=2, queue_mode="shuffled")
    membership_add(campaign=c, user=lead, role="lead")
    membership_add(campaign=c, user=annotator, role="annotator")
    return c


@pytest.fixture
def tiny(db, lead, annotator, make_user):
    """Campaign "tiny" (pool depth 3): alpha, beta and <em>gamma</em> over q1-q4, q1-q3 labelled by a third
    member, "assessor" (tests/data.py TINY_*); lead and annotator are members."""
    c = campaign_create(slug="tiny", name="Tiny", pool_depth=3)
    membership_add(campaign=c, user=lead, role="lead")
    membership_add(campaign=c, user=annotator, role="annotator")
    assessor = make_user("assessor")
    membership_add(campaign=c, user=assessor, role="annotator")
    queries_import(campaign=c, data=TINY_TOPICS.encode(), filename="t.tsv")
    documents_import(campaign=c, data=TINY_DOCS.encode(), filename="d.jsonl")
    run_import(campaign=c, data=TINY_RUNS.encode(), filename="runs.trec")
    qrels_import(campaign=c, data=TINY_QRELS.encode(), filename="q.qrels", annotator=assessor)
    return c


@pytest.fixture
def as_lead(client, lead):
    """The test client, logged in as the lead."""
    client.force_login(lead)
    return client


@pytest.fixture
def as_annotator(client, annotator):
    """The test client, logged in as the annotator."""
    client.force_login(annotator)
    return client


@pytest.fixture
def pooled(campaign):
    """The campaign with topics, documents and both runs: 5 pooled pairs (q1: d1 d2 d3; q2: d2 d4)."""
    from judging.services import documents_import, queries_import, run_import

    queries_import(campaign=campaign, data=TOPICS.encode(), filename="t.tsv")
    documents_import(campaign=campaign, data=DOCS.encode(), filename="d.jsonl")
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    run_import(campaign=campaign, data=RUN_DENSE.encode(), filename="dense.run")
    return campaign


@pytest.fixture
def write(tmp_path):
    """Write text (or bytes) to a file in tmp_path and return its path as a string."""

    def _write(name: str, content: str | bytes) -> str:
        p = tmp_path / name
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
        return str(p)

    return _write


@dataclass
class World:
    """The judged demo campaign (pool depth 2) and a second campaign with its own annotator."""

    campaign: object
    lead: object
    annotator: object
    annotator2: object
    stranger: object
    query: Query
    document: Document
    system: System
    pair: Pair
    judgment: Judgment  # the annotator's
    judgment2: Judgment  # the second annotator's
    unpooled_pair: Pair | None = None

    def pair_of(self, qid: str, docid: str) -> Pair:
        return Pair.objects.get(campaign=self.campaign, query__qid=qid, document__docid=docid)


@pytest.fixture
def world(campaign, lead, annotator, make_user) -> World:
    queries_import(campaign=campaign, data=TOPICS.encode(), filename="topics.tsv")
    documents_import(campaign=campaign, data=DOCS.encode(), filename="docs.jsonl")
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    run_import(campaign=campaign, data=RUN_DENSE.encode(), filename="dense.run")
    annotator2 = make_user("ann2")
    membership_add(campaign=campaign, user=annotator2, role="annotator")
    stranger = make_user("stranger")
    other = campaign_create(slug="other", name="Other")
    membership_add(campaign=other, user=stranger, role="annotator")

    def pair(qid, docid):
        return Pair.objects.get(campaign=campaign, query__qid=qid, document__docid=docid)

    # Pool at depth 2: q1 -> d1, d3, d2; q2 -> d4, d2.
    j1, _ = judgment_record(pair=pair("q1", "d1"), annotator=annotator, grade=2, note="spot on")
    judgment_record(pair=pair("q1", "d3"), annotator=annotator, grade=1)
    judgment_record(pair=pair("q2", "d4"), annotator=annotator, unsure=True, tentative_grade=1, note="unsure?")
    j2, _ = judgment_record(pair=pair("q1", "d1"), annotator=annotator2, grade=1)
    judgment_record(pair=pair("q2", "d2"), annotator=annotator2, grade=0)
    judgment_record(pair=pair("q2", "d4"), annotator=annotator2, grade=2)
    return World(
        campaign=campaign,
        lead=lead,
        annotator=annotator,
        annotator2=annotator2,
        stranger=stranger,
        query=Query.objects.get(campaign=campaign, qid="q1"),
        document=Document.objects.get(campaign=campaign, docid="d1"),
        system=System.objects.get(campaign=campaign, name="bm25"),
        pair=pair("q1", "d1"),
        judgment=j1,
        judgment2=j2,
    )
