"""The engine pages through the test client: the list, the form with its preview, Fetch, the job's page and
what changed between two snapshots, for leads only, in English and Korean."""

from __future__ import annotations

import pytest
from django.test import Client

from judging.engine_models import Engine, EngineSystem
from judging.jobs import job_run
from judging.models import Document, Job, Judgment, Pair, QueryAssignment
from judging.services import queries_import
from tests.fake_engine import BM25, INDEX, FakeEngine

DOCS = {
    "p01": {"title": "Red running shoes", "text": "Light red shoes for running."},
    "p02": {"title": "Trail running shoes", "text": "Shoes for trail running."},
    "p03": {"title": "Running socks", "text": "Socks for running."},
    "p04": {"title": "Wireless headphones", "text": "Wireless headphones."},
}
TEMPLATE = '{"query": {"match": {"title": "{{query}}"}}}'
SECRET = "pw-0123456789abcdef"


@pytest.fixture
def server():
    s = FakeEngine(DOCS)
    yield s
    s.close()


@pytest.fixture
def engine(campaign, server, monkeypatch):
    monkeypatch.setenv("RELJUDGE_ENGINE_TEST_PAGE", SECRET)
    queries_import(campaign=campaign, data=b"q1\trunning shoes\t\nq2\twireless headphones\t\n", filename="t.tsv")
    return Engine.objects.create(
        name="shop-es", kind="elasticsearch", base_url=server.url, secret_env="RELJUDGE_ENGINE_TEST_PAGE"
    )


def _form(**kw):
    return {
        "name": "es",
        "engine": "shop-es",
        "target": INDEX,
        "method": "POST",
        "template": TEMPLATE,
        "depth": "3",
    } | kw


def _fetch(client) -> Job:
    answer = client.post("/campaigns/demo/engines/systems/es/fetch/")
    assert answer.status_code == 302
    job = Job.objects.latest("id")
    assert answer["Location"] == f"/campaigns/demo/jobs/{job.pk}/"
    job_run(job_id=job.pk)
    job.refresh_from_db()
    return job


def test_engine_pages_are_for_leads_only(as_annotator, engine):
    for url in ["/campaigns/demo/engines/", "/campaigns/demo/engines/new/"]:
        assert as_annotator.get(url).status_code == 403
    assert as_annotator.post("/campaigns/demo/engines/new/", _form()).status_code == 403
    assert as_annotator.post("/campaigns/demo/engines/systems/es/fetch/").status_code == 403
    assert not EngineSystem.objects.exists()


def test_the_form_refuses_a_bad_template_naming_line_and_column(as_lead, engine):
    page = as_lead.post("/campaigns/demo/engines/new/", _form(template='{\n  "q": "{{query}}"\n  "x": 1}'))
    assert page.status_code == 400
    assert "line 3, column 3: not valid JSON" in page.content.decode()
    page = as_lead.post("/campaigns/demo/engines/new/", _form(template='{"q": "text"}'))
    assert page.status_code == 400 and "no {{query}} placeholder" in page.content.decode()
    assert not EngineSystem.objects.exists()


def test_an_engine_nobody_configured_cannot_be_chosen(as_lead, engine):
    page = as_lead.post("/campaigns/demo/engines/new/", _form(engine="http://evil.example"))
    assert page.status_code == 400 and not EngineSystem.objects.exists()


def test_preview_shows_the_request_masked_and_the_hits_without_saving(as_lead, engine, server):
    page = as_lead.post("/campaigns/demo/engines/new/", _form(preview="1"))
    html = page.content.decode()
    assert page.status_code == 200
    assert f"POST {server.url}/{INDEX}/_search" in html and "Authorization: [redacted]" in html
    assert SECRET not in html
    ranked = [d for d, _s in BM25(DOCS).search("running shoes")[:3]]
    assert [html.index(f'<td class="mono">{d}</td>') for d in ranked] == sorted(
        html.index(f'<td class="mono">{d}</td>') for d in ranked
    )
    assert not EngineSystem.objects.exists()
    assert server.requests[-1][2]["Authorization"] == SECRET  # sent, never shown


def test_save_fetch_twice_and_read_what_changed(as_lead, engine, server):
    assert as_lead.post("/campaigns/demo/engines/new/", _form(save="1")).status_code == 302
    job = _fetch(as_lead)
    assert job.status == "done", job.error
    page = as_lead.get(f"/campaigns/demo/jobs/{job.pk}/").content.decode()
    assert "snapshot es@1, 2 of 2 queries answered" in page
    server.ranker = BM25({**DOCS, "p09": {"title": "Running shoes running shoes", "text": ""}})
    assert _fetch(as_lead).status == "done"
    listing = as_lead.get("/campaigns/demo/engines/").content.decode()
    assert "es@1" in listing and "es@2" in listing
    changes = as_lead.get("/campaigns/demo/engines/systems/es/snapshots/2/?k=3").content.decode()
    assert "p09" in changes and "unjudged" in changes
    assert "/leaderboard/compare/?a=es%401&amp;b=es%402" in changes
    # the queries whose new documents wait for a label go to an annotator through the Assignments form
    assert '<input type="hidden" name="qids" value="q1">' in changes
    given = as_lead.post("/campaigns/demo/assignments/", {"batch": "qids", "qids": "q1", "annotator": "ann"})
    assert given.status_code == 302
    assert list(QueryAssignment.objects.values_list("query__qid", "annotator__username")) == [("q1", "ann")]
    board = as_lead.get("/campaigns/demo/leaderboard/").content.decode()
    assert "es@1" in board and "es@2" in board
    # a third snapshot with the same answers: the page says nothing changed, not an empty table
    assert _fetch(as_lead).status == "done"
    same = as_lead.get("/campaigns/demo/engines/systems/es/snapshots/3/?k=3").content.decode()
    assert "No query's top k changed." in same and "engine-changes" not in same


def test_the_pages_in_korean(as_lead, engine):
    assert as_lead.post("/campaigns/demo/engines/new/", _form(save="1")).status_code == 302
    listing = as_lead.get("/campaigns/demo/engines/", HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    assert "스냅샷" in listing and "Fetch a snapshot" not in listing
    form = as_lead.get("/campaigns/demo/engines/new/", HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    assert "요청 템플릿" in form


def test_try_a_query_shows_each_systems_hits_beside_their_labels(as_lead, engine, server, lead, annotator):
    from django.test import Client

    from judging.models import Pair
    from judging.services import judgment_record

    assert as_lead.post("/campaigns/demo/engines/new/", _form(save="1")).status_code == 302
    _fetch(as_lead)
    top = BM25(DOCS).search("running shoes")[0][0]
    pair = Pair.objects.get(query__qid="q1", document__docid=top)
    judgment_record(pair=pair, annotator=lead, grade=2)
    page = as_lead.get("/campaigns/demo/engines/try/?qid=q1").content.decode()
    assert "Labels of the campaign query q1." in page
    assert "Highly relevant (2)" in page and "unjudged" in page and "not in the pool" in page
    typed = as_lead.get("/campaigns/demo/engines/try/?q=wireless").content.decode()
    assert "p04" in typed and "Not a query of the campaign" in typed and "not in the pool" not in typed
    other = Client()
    other.force_login(annotator)
    assert other.get("/campaigns/demo/engines/try/?q=wireless").status_code == 403


def _try_page(client, **headers) -> str:
    return client.get("/campaigns/demo/engines/try/?qid=q1", **headers).content.decode()


def test_try_a_query_lets_the_lead_grade_a_pooled_hit_in_place(as_lead, engine, lead):
    assert as_lead.post("/campaigns/demo/engines/new/", _form(save="1")).status_code == 302
    _fetch(as_lead)
    ranked = [d for d, _s in BM25(DOCS).search("running shoes")[:3]]
    pooled = Pair.objects.get(query__qid="q1", document__docid=ranked[0])
    unpooled = Pair.objects.filter(query__qid="q1", document__docid=ranked[2]).first()
    assert unpooled is None or not unpooled.pooled  # the campaign pools the top 2 of each run
    page = _try_page(as_lead)
    assert f'class="try-p{pooled.public_id}"' in page and 'name="grade" value="2"' in page
    assert "Only pairs in the pool can be judged" in page  # the hit outside the pool says why it has no buttons
    answer = as_lead.post(
        "/campaigns/demo/engines/try/judge/",
        {"pair": pooled.public_id, "grade": "2", "qid": "q1"},
        HTTP_HX_REQUEST="true",
    )
    body = answer.content.decode()
    assert answer.status_code == 200 and f'hx-swap-oob="innerHTML:.try-p{pooled.public_id}"' in body
    assert "Highly relevant (2)" in body and 'aria-pressed="true"' in body
    judgment = Judgment.objects.get(pair=pooled)  # through the one service that records judgments: the lead's own
    assert judgment.annotator == lead and judgment.grade.value == 2
    pooled.refresh_from_db()
    assert pooled.label == 2 and pooled.judgment_count == 1
    # a second grade changes the lead's judgment (a revision), never a second one
    as_lead.post("/campaigns/demo/engines/try/judge/", {"pair": pooled.public_id, "grade": "0"}, HTTP_HX_REQUEST="true")
    assert Judgment.objects.filter(pair=pooled).count() == 1 and Judgment.objects.get(pair=pooled).grade.value == 0
    # without htmx: back to the page with a message
    plain = as_lead.post(
        "/campaigns/demo/engines/try/judge/", {"pair": pooled.public_id, "grade": "1", "q": "", "qid": "q1"}
    )
    assert plain.status_code == 302 and plain["Location"] == "/campaigns/demo/engines/try/?q=&qid=q1"
    assert f"Judged q1 / {ranked[0]}." in as_lead.get(plain["Location"]).content.decode()


def test_try_a_query_refuses_a_bad_grade_and_an_unpooled_pair_in_both_languages(as_lead, engine, annotator):
    assert as_lead.post("/campaigns/demo/engines/new/", _form(save="1")).status_code == 302
    _fetch(as_lead)
    pooled = Pair.objects.filter(query__qid="q1", pooled=True).first()
    for grade, words in (("7", "is not on this campaign"), ("x", "Choose a grade")):
        answer = as_lead.post(
            "/campaigns/demo/engines/try/judge/", {"pair": pooled.public_id, "grade": grade}, HTTP_HX_REQUEST="true"
        )
        assert answer.status_code == 422 and 'role="alert"' in answer.content.decode()
        assert words in answer.content.decode()
    korean = as_lead.post(
        "/campaigns/demo/engines/try/judge/",
        {"pair": pooled.public_id, "grade": "x"},
        HTTP_HX_REQUEST="true",
        HTTP_ACCEPT_LANGUAGE="ko",
    )
    assert korean.status_code == 422 and "척도" in korean.content.decode()
    assert not Judgment.objects.exists()
    stray = Pair.objects.create(
        campaign=pooled.campaign, query=pooled.query, document=Document.objects.get(docid="p04"), pooled=False
    )
    answer = as_lead.post(
        "/campaigns/demo/engines/try/judge/", {"pair": stray.public_id, "grade": "1"}, HTTP_HX_REQUEST="true"
    )
    assert answer.status_code == 422 and "only pairs in the pool can be judged" in answer.content.decode()
    answer = as_lead.post(
        "/campaigns/demo/engines/try/judge/",
        {"pair": stray.public_id, "grade": "1"},
        HTTP_HX_REQUEST="true",
        HTTP_ACCEPT_LANGUAGE="ko",
    )
    assert "풀에 있는 쌍만" in answer.content.decode()
    assert as_lead.post("/campaigns/demo/engines/try/judge/", {"pair": "99999999"}).status_code == 404
    other = Client()
    other.force_login(annotator)
    assert other.post("/campaigns/demo/engines/try/judge/", {"pair": pooled.public_id, "grade": "1"}).status_code == 403
    assert not Judgment.objects.exists()
