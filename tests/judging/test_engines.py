"""Systems made of live search engines: templates, the three kinds against local servers that speak their
protocols (tests/fake_engine.py, BM25-ranked), fetches as jobs, snapshots, and every way an engine can fail."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from judging.engine_models import Engine, EngineSnapshot, EngineSystem
from judging.jobs import engine_fetch_job_start, job_run
from judging.models import Document, Job, Pair, Query, Ranking, System
from judging.selectors.engines import snapshot_changes
from judging.services import queries_import, run_import
from judging.services.engine_client import (
    EngineClient,
    TemplateError,
    engine_fetch_queries,
    target_check,
    template_parse,
)
from judging.services.engines import engine_preview, engine_system_save
from tests.fake_engine import BM25, INDEX, FakeEngine

SECRET = "s3cr3t-token-0123456789"
SECRET_ENV = "RELJUDGE_ENGINE_TEST_CREDENTIALS"

DOCS = {
    "p01": {"title": "Red running shoes", "text": "Light red shoes for running on roads."},
    "p02": {"title": "Trail running shoes", "text": "Grippy shoes for trail running."},
    "p03": {"title": "Leather boots", "text": "Brown leather boots for winter."},
    "p04": {"title": "Wireless headphones", "text": "Noise cancelling wireless headphones."},
    "p05": {"title": "Wired earbuds", "text": "Cheap wired earbuds with a microphone."},
    "p06": {"title": "Burr coffee grinder", "text": "A burr grinder for coffee beans."},
    "p07": {"title": "Espresso machine", "text": "Espresso coffee machine with a milk frother."},
    "p08": {"title": "Running socks", "text": "Cushioned socks for running."},
    "p09": {"title": "Red wool scarf", "text": "A red scarf knitted from wool."},
    "p10": {"title": "Bluetooth speaker", "text": "A wireless speaker, bluetooth, waterproof."},
}
TOPICS = "q1\tred running shoes\tShoes to run in.\nq2\twireless headphones\t\nq3\tcoffee grinder\t\n"
ES_TEMPLATE = '{\n  "query": {"multi_match": {"query": "{{query}}", "fields": ["title", "text"]}}\n}'


@pytest.fixture
def engine_server():
    server = FakeEngine(DOCS)
    yield server
    server.close()


@pytest.fixture
def shop(campaign):
    """The conftest campaign (pool depth 2) with three topics."""
    queries_import(campaign=campaign, data=TOPICS.encode(), filename="t.tsv")
    return campaign


def _engine(server: FakeEngine, kind: str = "elasticsearch", **kw) -> Engine:
    base = server.url + ("/solr" if kind == "solr" else "")
    values = {"name": kind, "kind": kind, "base_url": base, "timeout": 2.0, "concurrency": 4, **kw}
    return Engine.objects.create(**values)


def _es_system(campaign, server, *, name="es", depth=5, engine_kw=None, **kw) -> EngineSystem:
    engine = _engine(server, **(engine_kw or {}))
    values = {"target": INDEX, "template": ES_TEMPLATE, "title_field": "title", "text_field": "text", **kw}
    return engine_system_save(campaign=campaign, user=None, engine=engine, name=name, depth=depth, **values)


def _fetch(campaign, system) -> Job:
    job = engine_fetch_job_start(campaign=campaign, user=None, system=system, enqueue=False)
    job_run(job_id=job.pk)
    job.refresh_from_db()
    return job


def _ranking(system_name: str, qid: str) -> list[str]:
    r = Ranking.objects.get(system__name=system_name, query__qid=qid)
    ids = np.frombuffer(bytes(r.doc_ids), dtype=np.int64).tolist()
    docids = dict(Document.objects.filter(pk__in=ids).values_list("id", "docid"))
    return [docids[i] for i in ids]


def _bm25(text: str, k: int) -> list[str]:
    return [d for d, _s in BM25(DOCS).search(text)[:k]]


# --------------------------------------------------------------------------- templates


@pytest.mark.parametrize(
    ("text", "line", "column", "words"),
    [
        ('{\n  "query": {"match": {"title": "{{query}}"}\n', 3, 1, "not valid JSON"),
        ('{"query":\n  {"match": {"title": "{{query}}",}}}', 2, 35, "not valid JSON"),
        ('{\n  "query": {"match_all": {}}\n}', 3, 2, "no {{query}}"),
        ('{"q": "{{query}}",\n "x": "{{secret}}"}', 2, 8, "unknown placeholder {{secret}}"),
    ],
)
def test_template_parse_names_the_line_and_column(text, line, column, words):
    with pytest.raises(TemplateError) as caught:
        template_parse(text)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert words in caught.value.message
    assert str(caught.value).startswith(f"line {line}, column {column}: ")


def test_template_fill_escapes_the_query_as_a_json_string(db, engine_server, campaign):
    system = _es_system(campaign, engine_server)
    nasty = 'shoes", "size": 9999, "x": "\\ \n</script>'
    _params, body = EngineClient(system).request({"query": nasty, "qid": "q1", "description": ""})
    sent = json.loads(body)
    assert sent["query"]["multi_match"]["query"] == nasty  # the whole text, as one string value
    assert sent["size"] == 5 and set(sent) == {"query", "size"}


@pytest.mark.parametrize("target", ["../_all", "a/b", "x?y=1", "", "http://evil", ".."])
def test_target_check_keeps_an_index_under_the_base_url(target):
    with pytest.raises(ValueError):
        target_check("elasticsearch", target)


@pytest.mark.parametrize("target", ["../admin", "a/../b", "a?b", "//evil.example", "a#b"])
def test_target_check_keeps_an_http_path_under_the_base_url(target):
    with pytest.raises(ValueError):
        target_check("http", target)


def test_engine_system_save_refuses_a_bad_template_naming_line_and_column(db, engine_server, campaign):
    with pytest.raises(ValidationError) as caught:
        _es_system(campaign, engine_server, template='{"query": "{{query}}"')
    assert caught.value.message_dict["template"][0].startswith("line 1, column 22: not valid JSON")
    assert not EngineSystem.objects.exists()


def test_engine_system_save_bumps_the_version_only_when_the_request_changes(db, engine_server, campaign):
    system = _es_system(campaign, engine_server)
    same = engine_system_save(
        campaign=campaign,
        user=None,
        engine=system.engine,
        name="es",
        template=ES_TEMPLATE,
        target=INDEX,
        title_field="title",
        text_field="text",
        depth=5,
    )
    assert (same.pk, same.version) == (system.pk, 1)
    changed = engine_system_save(
        campaign=campaign, user=None, engine=system.engine, name="es", template=ES_TEMPLATE, target=INDEX, depth=3
    )
    assert (changed.pk, changed.version, changed.depth) == (system.pk, 2, 3)


# --------------------------------------------------------------------------- the three kinds


def test_elasticsearch_fetch_stores_the_engines_ranking_documents_and_pool(db, engine_server, shop):
    system = _es_system(shop, engine_server)
    job = _fetch(shop, system)
    assert job.status == Job.Status.DONE, job.error
    r = job.result
    assert (r["run"], r["queries"], r["ok"], r["failed"], r["failures"]) == ("es@1", 3, 3, 0, [])
    for qid, text in Query.objects.filter(campaign=shop).values_list("qid", "text"):
        assert _ranking("es@1", qid) == _bm25(text, 5)
    # the documents the campaign lacked, with the fields the engine gave
    assert Document.objects.get(campaign=shop, docid="p04").title == "Wireless headphones"
    assert not Document.objects.filter(campaign=shop, is_stub=True).exists()
    # the pool: the top 2 (the campaign's depth) of each query
    pooled = set(Pair.objects.filter(campaign=shop, pooled=True).values_list("query__qid", "document__docid"))
    expected = {(q, d) for q, t in Query.objects.filter(campaign=shop).values_list("qid", "text") for d in _bm25(t, 2)}
    assert pooled == expected and r["pairs_added"] == len(expected)
    snap = EngineSnapshot.objects.get()
    assert (snap.number, snap.template_version, snap.queries_ok, snap.system.name) == (1, 1, 3, "es@1")
    assert snap.answer_ms is not None and snap.answer_ms > 0
    # what went over the wire: the Search API, with the template filled
    method, path, _headers, body = engine_server.requests[-1]
    assert (method, path) == ("POST", f"/{INDEX}/_search")
    assert json.loads(body)["size"] == 5


def test_second_snapshot_is_a_system_of_its_own_and_grows_the_pool_incrementally(db, engine_server, shop):
    system = _es_system(shop, engine_server)
    assert _fetch(shop, system).status == Job.Status.DONE
    pairs = Pair.objects.filter(campaign=shop).count()
    # the engine changes (a document gets better) and the system's depth too
    engine_server.ranker = BM25({**DOCS, "p11": {"title": "Red running shoes, red", "text": "Red running shoes."}})
    job = _fetch(shop, system)
    assert job.status == Job.Status.DONE and job.result["run"] == "es@2"
    assert set(System.objects.filter(campaign=shop).values_list("name", flat=True)) == {"es@1", "es@2"}
    assert _ranking("es@2", "q1")[0] == "p11"
    assert job.result["pairs_added"] == Pair.objects.filter(campaign=shop).count() - pairs == 1
    assert Pair.objects.filter(campaign=shop, document__docid="p11").count() == 1
    changes = snapshot_changes(old=EngineSnapshot.objects.get(number=1), new=EngineSnapshot.objects.get(number=2), k=3)
    (q1,) = changes.queries
    assert q1.qid == "q1" and q1.entered == [("p11", 1, None)] and q1.unjudged == 1
    old_top = _bm25("red running shoes", 3)
    assert q1.left == [(old_top[2], 3)]
    assert q1.moved == [(old_top[0], 1, 2), (old_top[1], 2, 3)]
    assert changes.unchanged == 2


def test_solr_fetch_reads_response_docs_and_sends_select_parameters(db, engine_server, shop):
    engine = _engine(engine_server, "solr")
    system = engine_system_save(
        campaign=shop,
        user=None,
        engine=engine,
        name="solr",
        target=INDEX,
        template='{"q": "title:({{query}})", "fl": "id,title,text", "defType": "lucene"}',
        title_field="title",
        text_field="text",
        depth=4,
    )
    job = _fetch(shop, system)
    assert job.status == Job.Status.DONE, job.error
    assert _ranking("solr@1", "q2") == _bm25("wireless headphones", 4)
    # a multivalued field is read by its first value
    assert Document.objects.get(campaign=shop, docid="p04").title == "Wireless headphones"
    method, path, _headers, _body = engine_server.requests[-1]
    assert method == "GET" and path.startswith(f"/solr/{INDEX}/select?") and "rows=4" in path and "wt=json" in path


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_http_fetch_picks_hits_and_fields_by_jsonpath(db, engine_server, shop, method):
    engine = _engine(engine_server, "http")
    template = '{"text": "{{query}}", "limit": "3"}' if method == "GET" else '{"text": "{{query}}", "limit": 3}'
    system = engine_system_save(
        campaign=shop,
        user=None,
        engine=engine,
        name="api",
        target="api/v1/search",
        method=method,
        template=template,
        hits_path="$.data.results[*]",
        id_field="$.doc.key",
        title_field="doc.name",
        text_field="$.doc.body",
        depth=3,
    )
    job = _fetch(shop, system)
    assert job.status == Job.Status.DONE, job.error
    assert _ranking("api@1", "q3") == _bm25("coffee grinder", 3)
    assert Document.objects.get(campaign=shop, docid="p06").text == "A burr grinder for coffee beans."
    assert engine_server.requests[-1][0] == method


def test_fewer_hits_than_asked_are_stored_as_they_are(db, engine_server, shop):
    engine_server.script["coffee grinder"] = "few"
    job = _fetch(shop, _es_system(shop, engine_server))
    assert job.status == Job.Status.DONE and job.result["failed"] == 0
    assert _ranking("es@1", "q3") == _bm25("coffee grinder", 1)


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("500", "HTTP 500"),
        ("403", "HTTP 403"),
        ("nonjson", "the answer is not JSON: <html>"),
        ("redirect", "HTTP 302: a redirect (to http://127.0.0.1:9/elsewhere), which is not followed"),
        ("noid", "hit 2 has no id (_id)"),
        ("dupid", "comes twice (hits 1 and 3)"),
        ("slow", "no whole answer within 1 s"),
        ("drip", "no whole answer within 1 s"),
        ("dripheaders", "no whole answer within 1 s"),
        ("huge", "larger than 1048576 bytes"),
        ("close", "could not be reached"),
    ],
)
def test_a_failing_query_is_listed_with_its_reason_and_the_others_are_stored(db, engine_server, shop, mode, reason):
    engine_server.script["wireless headphones"] = mode
    system = _es_system(shop, engine_server, engine_kw={"timeout": 1.0, "max_answer_bytes": 1 << 20})
    started = time.monotonic()
    job = _fetch(shop, system)
    assert time.monotonic() - started < 6  # a dripping or slow engine is cut off at the deadline
    assert job.status == Job.Status.DONE, job.error
    assert (job.result["ok"], job.result["failed"]) == (2, 1)
    (failure,) = job.result["failures"]
    assert failure["qid"] == "q2" and reason in failure["reason"], failure
    snap = EngineSnapshot.objects.get()
    assert (snap.queries_ok, snap.queries_failed, snap.failures) == (2, 1, [failure])
    assert not Ranking.objects.filter(system__name="es@1", query__qid="q2").exists()
    assert not Pair.objects.filter(campaign=shop, query__qid="q2").exists()


def test_credentials_are_sent_but_an_answer_echoing_them_is_redacted(db, engine_server, shop, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, f"Bearer {SECRET}")
    engine_server.script["coffee grinder"] = "echo"
    system = _es_system(shop, engine_server, engine_kw={"secret_env": SECRET_ENV})
    job = _fetch(shop, system)
    assert job.status == Job.Status.DONE
    assert {h.get("Authorization") for _m, _p, h, _b in engine_server.requests} == {f"Bearer {SECRET}"}
    (failure,) = job.result["failures"]
    assert "HTTP 401" in failure["reason"] and "[redacted]" in failure["reason"]
    assert SECRET not in json.dumps(job.result) and SECRET not in json.dumps(EngineSnapshot.objects.get().failures)


def test_an_unreachable_engine_fails_every_query_and_stores_no_run(db, shop):
    engine = Engine.objects.create(name="gone", kind="elasticsearch", base_url="http://127.0.0.1:9", timeout=1)
    system = engine_system_save(
        campaign=shop, user=None, engine=engine, name="gone", target=INDEX, template=ES_TEMPLATE
    )
    job = _fetch(shop, system)
    assert job.status == Job.Status.DONE and job.result["failed"] == 3
    assert all("could not be reached" in f["reason"] for f in job.result["failures"])
    snap = EngineSnapshot.objects.get()
    assert snap.system is None and snap.queries_ok == 0
    assert not System.objects.filter(campaign=shop).exists() and not Pair.objects.filter(campaign=shop).exists()


def test_an_unknown_index_is_the_engines_404_for_each_query(db, engine_server, shop):
    job = _fetch(shop, _es_system(shop, engine_server, target="missing"))
    assert job.result["failed"] == 3
    assert "index_not_found_exception" in job.result["failures"][0]["reason"]


def test_nothing_half_written_when_the_run_cannot_be_stored(db, engine_server, shop):
    """A system named like the snapshot with another run: the run write is refused, and the documents the
    fetch had added before it are rolled back with it."""
    run_import(campaign=shop, data=b"q1 Q0 zz 1 1 x\n", filename="x.run", system_name="es@1")
    before = (Document.objects.count(), Pair.objects.count())
    job = _fetch(shop, _es_system(shop, engine_server))
    assert job.status == Job.Status.FAILED
    assert "already has a different run" in job.error["detail"] and "nothing was changed" in job.error["detail"]
    assert (Document.objects.count(), Pair.objects.count()) == before
    assert not EngineSnapshot.objects.exists()


def test_concurrency_and_rate_limit_are_honoured(db, engine_server, campaign):
    topics = "".join(f"q{i}\trunning shoes {i}\t\n" for i in range(12))
    queries_import(campaign=campaign, data=topics.encode(), filename="t.tsv")
    system = _es_system(campaign, engine_server, engine_kw={"concurrency": 2, "rate_limit": 20.0})
    queries = list(Query.objects.filter(campaign=campaign).values_list("qid", "text", "description"))
    started = time.monotonic()
    fetched = engine_fetch_queries(system=system, queries=queries)
    assert time.monotonic() - started >= 11 / 20 - 0.05  # 12 calls at 20 a second: 11 intervals
    assert len(fetched.hits) == 12 and engine_server.peak <= 2


# --------------------------------------------------------------------------- preview, command, API


def test_preview_shows_the_first_querys_hits_and_the_request_with_credentials_masked(
    db, engine_server, shop, monkeypatch
):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    system = _es_system(shop, engine_server, engine_kw={"secret_env": SECRET_ENV})
    preview = engine_preview(system=system)
    assert preview.qid == "q1" and not preview.error
    assert [h.docid for h in preview.answer.hits] == _bm25("red running shoes", 5)
    assert preview.sent.headers["Authorization"] == "[redacted]"
    assert '"query": "red running shoes"' in preview.sent.body
    assert preview.sent.url == f"{engine_server.url}/{INDEX}/_search"


def test_fetch_run_command_prints_the_snapshot_and_its_failures(db, engine_server, shop, capsys):
    engine_server.script["coffee grinder"] = "500"
    _es_system(shop, engine_server)
    call_command("fetch_run", "demo", "--system", "es", verbosity=0)
    out = capsys.readouterr().out
    assert "snapshot es@1: 2 of 3 queries answered, 1 failed" in out and "failed q3: HTTP 500" in out
    with pytest.raises(CommandError, match="no engine system 'nope'"):
        call_command("fetch_run", "demo", "--system", "nope")


def test_fetch_api_answers_202_with_a_job_for_leads_only(db, engine_server, shop, lead, annotator, make_user):
    _es_system(shop, engine_server)
    api = APIClient()
    api.force_authenticate(annotator)
    assert api.post("/api/campaigns/demo/systems/es/fetch/").status_code == 403
    api.force_authenticate(make_user("stranger"))
    assert api.post("/api/campaigns/demo/systems/es/fetch/").status_code == 404
    api.force_authenticate(lead)
    assert api.post("/api/campaigns/demo/systems/nope/fetch/").status_code == 404
    started = api.post("/api/campaigns/demo/systems/es/fetch/")
    assert started.status_code == 202, started.content
    url = started["Location"]
    assert api.get(url).json()["kind"] == "engine_fetch"
    assert job_run(job_id=int(url.rstrip("/").rsplit("/", 1)[1]))["status"] == "done"
    body = api.get(url).json()
    assert body["status"] == "done" and body["result"]["run"] == "es@1" and body["result"]["ok"] == 3


def test_engine_system_api_refuses_a_bad_template_with_400_naming_line_and_column(db, engine_server, shop, lead):
    engine = _engine(engine_server)
    api = APIClient()
    api.force_authenticate(lead)
    payload = {"name": "es", "engine": engine.name, "target": INDEX, "template": '{\n "q": "{{query}}",\n}'}
    answer = api.post("/api/campaigns/demo/engine-systems/", payload, format="json")
    assert answer.status_code == 400
    body = answer.json()
    assert (body["field"], body["line"], body["column"]) == ("template", 3, 1)
    assert "not valid JSON" in body["detail"]
    payload["template"] = ES_TEMPLATE
    created = api.post("/api/campaigns/demo/engine-systems/", payload, format="json")
    assert created.status_code == 201 and created.json()["version"] == 1
    payload["engine"] = "nope"
    assert api.post("/api/campaigns/demo/engine-systems/", payload, format="json").status_code == 400


def test_engine_system_save_refuses_a_bad_jsonpath(db, engine_server, campaign):
    engine = _engine(engine_server, "http")
    with pytest.raises(ValidationError) as caught:
        engine_system_save(
            campaign=campaign, user=None, engine=engine, name="api", template='{"q": "{{query}}"}', hits_path="$.[["
        )
    assert "JSONPath" in caught.value.message_dict["hits_path"][0]


def test_a_failed_fetch_can_be_retried_and_then_writes_its_snapshot(db, engine_server, shop):
    from judging.jobs import job_can_retry, job_retry

    run_import(campaign=shop, data=b"q1 Q0 zz 1 1 x\n", filename="x.run", system_name="es@1")
    job = _fetch(shop, _es_system(shop, engine_server))
    assert job.status == Job.Status.FAILED and job_can_retry(job)
    System.objects.filter(name="es@1").delete()
    job_retry(job=job)
    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.DONE and job.result["run"] == "es@1" and job.result["ok"] == 3


def test_engine_systems_api_lists_each_system_with_its_snapshots(db, engine_server, shop, lead, annotator):
    engine_server.script["coffee grinder"] = "500"
    _fetch(shop, _es_system(shop, engine_server))
    api = APIClient()
    api.force_authenticate(annotator)
    assert api.get("/api/campaigns/demo/engine-systems/").status_code == 403
    api.force_authenticate(lead)
    (listed,) = api.get("/api/campaigns/demo/engine-systems/").json()
    assert (listed["name"], listed["engine"], listed["kind"], listed["version"]) == (
        "es",
        "elasticsearch",
        "elasticsearch",
        1,
    )
    (snap,) = listed["snapshots"]
    assert (snap["number"], snap["run"], snap["queries_ok"], snap["queries_failed"]) == (1, "es@1", 2, 1)
    assert snap["failures"][0]["qid"] == "q3" and "HTTP 500" in snap["failures"][0]["reason"]


@pytest.mark.parametrize("name", ["DATABASE_URL", "DJANGO_SECRET_KEY", "RELJUDGE_SECRET_KEY", "RELJUDGE_ENGINE_"])
def test_an_engine_may_only_name_a_credentials_variable_made_for_engines(db, engine_server, shop, monkeypatch, name):
    """A staff member allowed to add engines must not make the server send its own secrets to an address."""
    monkeypatch.setenv(name, SECRET)
    engine = Engine(name="x", kind="elasticsearch", base_url=engine_server.url, secret_env=name)
    with pytest.raises(ValidationError):
        engine.full_clean()
    engine.save()  # stored around the admin's checks: still never read
    system = engine_system_save(campaign=shop, user=None, engine=engine, name="x", target=INDEX, template=ES_TEMPLATE)
    assert _fetch(shop, system).status == Job.Status.DONE
    assert all("Authorization" not in h for _m, _p, h, _b in engine_server.requests)


def test_a_nul_in_a_title_is_stored_replaced_and_a_control_character_in_an_id_fails_the_query(db, engine_server, shop):
    engine_server.ranker = BM25(
        {
            **DOCS,
            "p04": {"title": "Wireless\x00headphones", "text": "Noise cancelling wireless headphones."},
            "p06\x01": {"title": "Coffee grinder", "text": "A coffee grinder."},
        }
    )
    job = _fetch(shop, _es_system(shop, engine_server))
    assert job.status == Job.Status.DONE, job.error
    assert Document.objects.get(campaign=shop, docid="p04").title == "Wireless\ufffdheadphones"
    (failure,) = job.result["failures"]
    assert failure["qid"] == "q3" and "holds white space" in failure["reason"]


def test_fetch_api_is_limited_like_every_job_starting_endpoint(db, engine_server, shop, lead, settings):
    settings.RELJUDGE_JOBS_QUEUED_PER_USER = 1
    _es_system(shop, engine_server)
    api = APIClient()
    api.force_authenticate(lead)
    assert api.post("/api/campaigns/demo/systems/es/fetch/").status_code == 202
    refused = api.post("/api/campaigns/demo/systems/es/fetch/")
    assert refused.status_code == 429 and "RELJUDGE_JOBS_QUEUED_PER_USER" in refused.json()["detail"]
    assert Job.objects.filter(kind="engine_fetch").count() == 1
