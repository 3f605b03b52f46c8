"""Model judges: the chat-completions client against a local server, storing their grades apart from the
humans', label sources on the leaderboard, and calibration against the people."""

import io
import json
import re
import time
from html.parser import HTMLParser

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from sklearn.metrics import cohen_kappa_score

from judging.models import AnnotatorProfile, Document, Judgment, Pair, Query
from judging.scoring import leaderboard_data
from judging.selectors.agreement import review_queue
from judging.selectors.calibration import judge_calibration
from judging.services import judgment_record, membership_add, qrels_import
from judging.services.model_client import ChatClient, Endpoint, ModelCallError
from judging.services.model_judge import (
    model_judge_get_or_create,
    parse_answer,
)
from tests.fake_model import FakeModel
from tests.oracle import oracle, random_campaign


@pytest.fixture
def fake_model():
    fake = FakeModel()
    yield fake
    fake.close()


def _endpoint(fake, **kw):
    return Endpoint.configured(url=fake.url, model="tiny", **{"timeout": 2.0, "retries": 2, **kw})


# --------------------------------------------------------------------------- the answer parser


@pytest.mark.parametrize(
    ("answer", "grade", "note"),
    [
        ('{"grade": 2, "reason": "exactly the item"}', 2, "exactly the item"),
        ('```json\n{"grade": "1"}\n```', 1, ""),
        ("0", 0, ""),
        ("Grade: 2 — it matches", 2, ""),
        ('{"grade": 7}', None, 'model answer could not be read as a grade: {"grade": 7}'),
        ("I cannot decide", None, "model answer could not be read as a grade: I cannot decide"),
        ('{"grade": true}', None, 'model answer could not be read as a grade: {"grade": true}'),
        ("", None, "model answer could not be read as a grade: "),
    ],
)
def test_parse_answer(answer, grade, note):
    assert parse_answer(answer, [0, 1, 2]) == (grade, note)


# --------------------------------------------------------------------------- the client


def test_client_sends_prompt_with_guidelines_query_and_document(judged, fake_model, monkeypatch):
    monkeypatch.setenv("RELJUDGE_MODEL_API_KEY", "sk-test")
    fake_model.script["d1"] = [(200, '{"grade": 2, "reason": "merino wool sweater"}', 0)]
    out = io.StringIO()
    call_command(
        "judge_with_model", "demo", "--endpoint", fake_model.url, "--model", "tiny", "--pairs", "all", stdout=out
    )
    assert "tiny: 5 pairs" in out.getvalue() and "5 graded" in out.getvalue()
    assert fake_model.url.endswith("/v1")
    call = next(c for c in fake_model.calls if "Document d1\n" in c["messages"][1]["content"])
    assert call["model"] == "tiny" and call["temperature"] == 0
    assert "Judge the product, not the brand." in call["messages"][0]["content"]
    assert "2 = Highly relevant" in call["messages"][0]["content"]
    user = call["messages"][1]["content"]
    assert "Query: wool knit sweater" in user and "A warm sweater knitted from wool." in user
    assert "Merino wool sweater" in user and "Soft merino knit." in user
    assert all(h["Authorization"] == "Bearer sk-test" for h in fake_model.headers)
    j = Judgment.objects.get(annotator__username="tiny", pair__document__docid="d1")
    assert (j.grade.value, j.unsure, j.note) == (2, False, "merino wool sweater")
    # the model is a user-like annotator that cannot log in
    user = j.annotator
    assert user.annotator_profile.kind == "model" and not user.has_usable_password() and not user.is_active
    assert user.memberships.get(campaign=judged).role == "annotator"


def test_client_retries_429_and_5xx_then_succeeds(judged, fake_model):
    fake_model.script["d1"] = [(429, "slow down", 0), (503, "busy", 0), (200, '{"grade": 0}', 0)]
    client = ChatClient(_endpoint(fake_model, backoff=0.01))
    assert client.complete([{"role": "user", "content": "x\nDocument d1\ny"}]) == '{"grade": 0}'
    assert len(fake_model.calls) == 3
    fake_model.script["d9"] = [(500, "down", 0)]
    with pytest.raises(ModelCallError, match=r"gave up after 3 attempts \(HTTP 500\)"):
        client.complete([{"role": "user", "content": "Document d9\n"}])
    fake_model.script["d8"] = [(400, "bad request: no such model", 0)]
    with pytest.raises(ModelCallError, match="HTTP 400"):
        client.complete([{"role": "user", "content": "Document d8\n"}])


def test_client_times_out_then_retries(judged, fake_model):
    fake_model.script["d1"] = [(200, '{"grade": 2}', 1.5), (200, '{"grade": 1}', 0)]
    client = ChatClient(_endpoint(fake_model, timeout=0.5, backoff=0.01))
    started = time.perf_counter()
    assert client.complete([{"role": "user", "content": "Document d1\n"}]) == '{"grade": 1}'
    assert time.perf_counter() - started < 1.5


def test_run_records_unsure_for_malformed_and_skips_failures(judged, fake_model):
    fake_model.script["d2"] = [(200, "It is hard to say, maybe relevant?", 0)]
    fake_model.script["d4"] = [(503, "overloaded", 0)]
    out = io.StringIO()
    call_command(
        "judge_with_model", "demo", "--endpoint", fake_model.url, "--model", "tiny", "--retries", "1", stdout=out
    )
    text = out.getvalue()
    assert "unreadable answers stored as unsure" in text and "1 failed" in text
    assert "qid q2 docid d4: gave up after 2 attempts (HTTP 503)" in text
    unsure = Judgment.objects.filter(annotator__username="tiny", unsure=True)
    assert [(j.pair.document.docid, j.note) for j in unsure] == [
        ("d2", "model answer could not be read as a grade: It is hard to say, maybe relevant?"),
        ("d2", "model answer could not be read as a grade: It is hard to say, maybe relevant?"),
    ]
    assert not Judgment.objects.filter(annotator__username="tiny", pair__document__docid="d4").exists()
    # unjudged (the default) retries only the failed pair
    fake_model.calls.clear()
    fake_model.script["d4"] = [(200, '{"grade": 2}', 0)]
    call_command("judge_with_model", "demo", "--endpoint", fake_model.url, "--model", "tiny", stdout=io.StringIO())
    assert len(fake_model.calls) == 1
    # a model's unreadable answer does not put the pair into the people's review queue
    assert not review_queue(campaign=judged, kind="unsure").exists()


def test_command_calls_nothing_unless_configured(judged, monkeypatch):
    monkeypatch.delenv("RELJUDGE_MODEL_ENDPOINT", raising=False)
    with pytest.raises(CommandError, match="no model endpoint: pass --endpoint URL or set RELJUDGE_MODEL_ENDPOINT"):
        call_command("judge_with_model", "demo", "--model", "tiny")
    with pytest.raises(CommandError, match="--pairs must be one of unjudged, all, sample:N"):
        call_command("judge_with_model", "demo", "--endpoint", "http://127.0.0.1:8211", "--model", "m", "--pairs", "x")
    with pytest.raises(CommandError, match="is a person's account or a label source, not a model judge"):
        call_command("judge_with_model", "demo", "--endpoint", "http://127.0.0.1:8211", "--model", "ann")


def test_sample_pairs_and_env_endpoint(judged, fake_model, monkeypatch):
    monkeypatch.setenv("RELJUDGE_MODEL_ENDPOINT", fake_model.url + "/chat/completions")
    call_command("judge_with_model", "demo", "--model", "tiny", "--pairs", "sample:3", stdout=io.StringIO())
    assert Judgment.objects.filter(annotator__username="tiny").count() == 3 == len(fake_model.calls)


# --------------------------------------------------------------------------- labels stay human


def test_model_judgments_never_change_human_labels(judged, annotator, lead, write):
    before = dict(Pair.objects.filter(campaign=judged).values_list("id", "label"))
    counts = dict(Pair.objects.filter(campaign=judged).values_list("id", "judgment_count"))
    path = write("m.qrels", "q1 0 d1 0\nq1 0 d3 2\nq1 0 d2 2\nq2 0 d4 0\nq2 0 d2 2\n")
    out = io.StringIO()
    call_command("import_qrels", "demo", path, "--annotator", "overlap", "--model", stdout=out)
    assert "5 judgments added" in out.getvalue()
    assert dict(Pair.objects.filter(campaign=judged).values_list("id", "label")) == before
    assert dict(Pair.objects.filter(campaign=judged).values_list("id", "judgment_count")) == counts
    humans = leaderboard_data(campaign=judged, k=2)
    assert humans["labels"] == "humans"
    model = leaderboard_data(campaign=judged, k=2, labels="model:overlap")
    assert model["labels"] == "model:overlap"
    assert humans["systems"] != model["systems"]
    # another policy aggregates the judgments afresh: still without the model
    assert leaderboard_data(campaign=judged, k=2, policy="max")["systems"] == humans["systems"]
    # a person grading afterwards moves the human label, never the model's
    pair = Pair.objects.get(campaign=judged, query__qid="q1", document__docid="d2")
    judgment_record(pair=pair, annotator=annotator, grade=1)
    pair.refresh_from_db()
    assert pair.label == 1
    with pytest.raises(CommandError, match="'ann' is a person's account or a label source, not a model judge"):
        call_command("import_qrels", "demo", path, "--annotator", "ann", "--model")
    # a bad file names no model judge into existence
    with pytest.raises(CommandError, match="nothing was imported"):
        call_command("import_qrels", "demo", write("bad.qrels", "q1 0 d1 x\n"), "--annotator", "newbot", "--model")
    assert not AnnotatorProfile.objects.filter(user__username="newbot").exists()
    with pytest.raises(ValueError, match="no model judge named 'ghost'"):
        leaderboard_data(campaign=judged, labels="model:ghost")
    with pytest.raises(ValueError, match="labels must be one of humans, model:NAME, hybrid:NAME"):
        leaderboard_data(campaign=judged, labels="robots")


def test_hybrid_leaderboard_is_trec_eval_in_expectation_over_the_calibrated_completions(make_user):
    """Random runs; humans label some pairs, a model others (and some of the same). ``model:bot`` is exactly
    trec_eval on the model's labels and ``humans`` on the people's; ``hybrid:bot`` is each query's mean of
    trec_eval (pytrec_eval, the oracle) over the completions the app draws: the human label where there is one,
    elsewhere a grade drawn from the pair's calibrated distribution (issue 40: not the model's grade as certain)."""
    import random

    from judging.scoring import cube as cube_module
    from judging.scoring.hybrid import draws_for, hybrid_fit
    from metrics.hybrid import sample_grades

    campaign, runs, human_qrels = random_campaign(make_user, seed=5)
    rng = random.Random(9)
    model_qrels: dict[str, dict[str, int]] = {}
    lines = []
    for q in [f"q{i}" for i in range(8)]:
        docs = {d for run in runs.values() for d in run.get(q, {})}
        for d in sorted(docs):
            if rng.random() < 0.6:
                label = rng.choice([0, 1, 2])
                model_qrels.setdefault(q, {})[d] = label
                lines.append(f"{q} 0 {d} {label}\n")
    judge = model_judge_get_or_create(name="bot", campaign=campaign)
    qrels_import(campaign=campaign, data="".join(lines).encode(), filename="m.qrels", annotator=judge)
    hybrid_queries = set(model_qrels) | set(human_qrels)
    for k, threshold in ((10, 1), (5, 2)):
        for source, qrels in (("model:bot", model_qrels), ("humans", human_qrels)):
            data = leaderboard_data(campaign=campaign, k=k, threshold=threshold, labels=source)
            expected = oracle(runs, qrels, k, threshold)
            assert data["queries"] == len(qrels), source
            for system in data["systems"]:
                for q, values in expected[system["name"]].items():
                    for m, v in values.items():
                        assert system["per_query"][q][m] == pytest.approx(v, abs=1e-9), (source, system["name"], q, m)
        data = leaderboard_data(campaign=campaign, k=k, threshold=threshold, labels="hybrid:bot")
        assert data["queries"] == len(hybrid_queries)
        # the app's draws, replayed: the fit's distributions of the model-answered pairs nobody judged
        cube = cube_module.run_cube(campaign)
        versions = np.array(
            Query.objects.filter(campaign=campaign).order_by("id").values_list("labels_version", flat=True)
        )
        fit = hybrid_fit(campaign, cube, "bot", versions)
        open_ = ~fit.human
        draws = sample_grades(fit.dist[open_], fit.keys[open_], draws_for(int(cube.doc_ids.size)), seed=fit.seed)
        qid_of = dict(Query.objects.filter(campaign=campaign).values_list("id", "qid"))
        docid_of = dict(Document.objects.filter(campaign=campaign).values_list("id", "docid"))
        pairs = [(qid_of[int(key >> 32)], docid_of[int(key & 0xFFFFFFFF)]) for key in fit.keys[open_].tolist()]
        totals: dict[tuple[str, str, str], float] = {}
        for t in range(draws.shape[1]):
            completion = {q: dict(ds) for q, ds in human_qrels.items()}
            for (q, d), grade in zip(pairs, draws[:, t].tolist(), strict=True):
                completion.setdefault(q, {})[d] = grade
            for name, per in oracle(runs, completion, k, threshold).items():
                for q, values in per.items():
                    for m, v in values.items():
                        totals[(name, q, m)] = totals.get((name, q, m), 0.0) + v / draws.shape[1]
        checked = 0
        for system in data["systems"]:
            for q, values in system["per_query"].items():
                for m, v in values.items():
                    if (system["name"], q, m) in totals:  # the oracle's measures (bpref is checked elsewhere)
                        assert v == pytest.approx(totals[(system["name"], q, m)], abs=1e-9), (system["name"], q, m)
                        checked += 1
        assert checked >= 3 * len(hybrid_queries) * 6


def test_label_source_cache_follows_new_model_judgments(judged):
    judge = model_judge_get_or_create(name="bot", campaign=judged)
    qrels_import(campaign=judged, data=b"q1 0 d1 0\n", filename="m.qrels", annotator=judge)
    first = leaderboard_data(campaign=judged, k=2, labels="model:bot")
    qrels_import(campaign=judged, data=b"q1 0 d1 2\nq1 0 d3 2\n", filename="m.qrels", annotator=judge)
    second = leaderboard_data(campaign=judged, k=2, labels="model:bot")
    assert first["systems"] != second["systems"]


class _Text(HTMLParser):
    """A page's prose: its text, without attributes (links, option values), scripts and <code> (the API and
    command examples, where the API's syntax belongs)."""

    def __init__(self):
        super().__init__()
        self.words: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self._skip += tag in ("script", "style", "code")

    def handle_endtag(self, tag):
        self._skip -= tag in ("script", "style", "code")

    def handle_data(self, data):
        if not self._skip:
            self.words.append(data)


def _page_text(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    return " ".join(" ".join(parser.words).split())


@pytest.mark.parametrize(
    ("language", "policy", "source"), [("en", "Aggregation policy", "Label source"), ("ko", "집계 정책", "레이블 출처")]
)
def test_leaderboard_controls_name_policy_and_source_apart_without_api_syntax(judged, lead, language, policy, source):
    """The two selects read "Aggregation policy" (as on the Agreement page) and "Label source", not "Labels
    from" beside "Label source"; no page shows the API's hybrid:NAME, model:NAME or ppi:NAME as text (the
    values stay in links and options) (issue 42)."""
    judge = model_judge_get_or_create(name="bot", campaign=judged)
    qrels_import(campaign=judged, data=b"q1 0 d1 0\nq2 0 d2 2\n", filename="m.qrels", annotator=judge)
    client = Client(HTTP_ACCEPT_LANGUAGE=language)
    client.force_login(lead)
    html = client.get("/campaigns/demo/leaderboard/").content.decode()
    assert f"<label>{policy}" in html and f"<label>{source}" in html and "Labels from" not in html
    assert 'value="hybrid:bot"' in html  # the API's values are unchanged
    for url in (
        "/campaigns/demo/leaderboard/",
        "/campaigns/demo/leaderboard/?labels=ppi:bot",
        "/campaigns/demo/audit/",
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        text = _page_text(response.content.decode())
        assert not re.search(r"\b(hybrid|model|ppi):", text), (
            url,
            re.findall(r".{60}\b(?:hybrid|model|ppi):.{20}", text),
        )


def test_leaderboard_page_and_api_name_the_label_source(client, judged, lead):
    judge = model_judge_get_or_create(name="bot", campaign=judged)
    qrels_import(campaign=judged, data=b"q1 0 d1 0\nq2 0 d2 2\n", filename="m.qrels", annotator=judge)
    client.force_login(lead)
    html = client.get("/campaigns/demo/leaderboard/?labels=hybrid:bot").content.decode()
    assert "Label source: humans, else model bot." in html
    # a campaign with a model judge shows the hybrid leaderboard first (issue 40); people alone on request, and the
    # page's links and its API link keep the source chosen
    html = client.get("/campaigns/demo/leaderboard/").content.decode()
    assert "Label source: humans, else model bot." in html and "leaderboard/?labels=hybrid%3Abot" in html
    html = client.get("/campaigns/demo/leaderboard/?labels=humans").content.decode()
    assert "Label source: human judgments only" in html and "labels=humans" in html
    assert client.get("/campaigns/demo/leaderboard/?labels=model:nobody").status_code == 400
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=lead).key)
    data = api.get("/api/campaigns/demo/leaderboard/?labels=model:bot").json()
    assert data["labels"] == "model:bot"
    bad = api.get("/api/campaigns/demo/leaderboard/?labels=model:nobody")
    assert bad.status_code == 400 and "no model judge named 'nobody'" in json.dumps(bad.json())


def test_api_qrels_upload_as_model_judge(judged, lead):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=lead).key)
    f = io.BytesIO(b"q1 0 d1 1\n")
    f.name = "m.qrels"
    r = api.post(
        "/api/campaigns/demo/upload/qrels/",
        {"file": f, "annotator": "gpt-x", "model": "true", "description": "gpt-x, zero-shot"},
        format="multipart",
    )
    assert r.status_code == 200, r.content
    profile = AnnotatorProfile.objects.get(user__username="gpt-x")
    assert (profile.kind, profile.description) == ("model", "gpt-x, zero-shot")
    f = io.BytesIO(b"q1 0 d1 1\n")
    r = api.post(
        "/api/campaigns/demo/upload/qrels/", {"file": f, "annotator": "ann", "model": "true"}, format="multipart"
    )
    assert r.status_code == 400
    assert r.json()["field"] == "annotator" and "is a person's account" in r.json()["detail"]


# --------------------------------------------------------------------------- calibration


def test_calibration_kappa_matches_sklearn_and_page_links_review(client, make_user):
    import random

    campaign, runs, human_qrels = random_campaign(make_user, seed=3)
    rng = random.Random(4)
    lines, human, model = [], [], []
    for q, ds in sorted(human_qrels.items()):
        for d, label in sorted(ds.items()):
            # a lenient model: mostly the human grade, sometimes one up
            grade = min(2, label + (rng.random() < 0.3)) if rng.random() < 0.9 else rng.choice([0, 1, 2])
            lines.append(f"{q} 0 {d} {grade}\n")
            human.append(label)
            model.append(grade)
    judge = model_judge_get_or_create(name="bot", campaign=campaign)
    qrels_import(campaign=campaign, data="".join(lines).encode(), filename="m.qrels", annotator=judge)
    data = judge_calibration(campaign=campaign, name="bot", n_resamples=200)
    assert data["compared"] == len(human)
    assert data["agreement"]["kappa"]["value"] == pytest.approx(cohen_kappa_score(human, model), abs=1e-12)
    assert data["agreement"]["kappa_quadratic"]["value"] == pytest.approx(
        cohen_kappa_score(human, model, weights="quadratic"), abs=1e-12
    )
    low, high = data["agreement"]["kappa"]["ci"]
    assert low < data["agreement"]["kappa"]["value"] < high
    diffs = [m - h for h, m in zip(human, model, strict=True)]
    assert data["leniency"]["mean_difference"] == pytest.approx(sum(diffs) / len(diffs))
    assert data["leniency"]["share_over"] == pytest.approx(sum(d > 0 for d in diffs) / len(diffs))
    assert data["leniency"]["mean_difference"] > 0
    assert sum(map(sum, data["confusion"])) == len(human)
    assert data["disagreements"][0]["difference"] != 0
    assert abs(data["disagreements"][0]["difference"]) == max(abs(d) for d in diffs)
    assert data["ranking"]["measure"] == "nDCG@10" and len(data["ranking"]["systems"]) == 3
    # the page, and its review links, which list exactly these pairs
    lead = make_user("boss", is_superuser=True)
    client.force_login(lead)
    page = client.get(f"/campaigns/{campaign.slug}/judges/bot/calibration/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Quadratic-weighted κ" in html and "Biggest disagreements" in html and "<svg" in html
    first = data["disagreements"][0]
    assert f"/campaigns/{campaign.slug}/review/?kind=model&amp;q={first['qid']}" in html
    queue = review_queue(campaign=campaign, kind="model")
    assert first["pair"] in set(queue.values_list("id", flat=True))
    assert queue.count() == sum(d != 0 for d in diffs)
    review = client.get(f"/campaigns/{campaign.slug}/review/?kind=model&q={first['qid']}")
    assert review.status_code == 200 and "Model judge disagrees" in review.content.decode()
    assert client.get(f"/campaigns/{campaign.slug}/judges/nobody/calibration/").status_code == 404
    listing = client.get(f"/campaigns/{campaign.slug}/judges/").content.decode()
    assert "bot" in listing and "Calibration" in listing
    api = APIClient()
    api.force_authenticate(lead)
    r = api.get(f"/api/campaigns/{campaign.slug}/judges/bot/calibration/")
    assert r.status_code == 200 and r.json()["compared"] == len(human)
    assert api.get(f"/api/campaigns/{campaign.slug}/judges/nobody/calibration/").status_code == 404


def test_calibration_is_for_leads_only(client, judged, annotator):
    model_judge_get_or_create(name="bot", campaign=judged)
    client.force_login(annotator)
    assert client.get("/campaigns/demo/judges/bot/calibration/").status_code == 403
    api = APIClient()
    api.force_authenticate(annotator)
    assert api.get("/api/campaigns/demo/judges/bot/calibration/").status_code == 403


def test_model_judge_not_in_human_agreement(judged, annotator, make_user):
    from judging.selectors.agreement import ratings_matrix

    judge = model_judge_get_or_create(name="bot", campaign=judged)
    qrels_import(campaign=judged, data=b"q1 0 d1 0\n", filename="m.qrels", annotator=judge)
    other = make_user("ann2")
    membership_add(campaign=judged, user=other, role="annotator")
    assert ratings_matrix(campaign=judged).usernames == ["ann"]


def test_web_upload_of_model_qrels_keeps_human_labels(client, judged, lead):
    before = dict(Pair.objects.filter(campaign=judged).values_list("id", "label"))
    client.force_login(lead)
    f = io.BytesIO(b"q1 0 d1 0\nq1 0 d3 2\n")
    f.name = "m.qrels"
    form = {"kind": "qrels", "qrels-kind": "qrels", "qrels-file": f, "qrels-annotator": "webbot", "qrels-model": "on"}
    assert client.post("/campaigns/demo/upload/", form).status_code == 302
    assert AnnotatorProfile.objects.get(user__username="webbot").kind == "model"
    assert Judgment.objects.filter(annotator__username="webbot").count() == 2
    assert dict(Pair.objects.filter(campaign=judged).values_list("id", "label")) == before
    f = io.BytesIO(b"q1 0 d1 0\n")
    f.name = "m.qrels"
    form = {"kind": "qrels", "qrels-kind": "qrels", "qrels-file": f, "qrels-annotator": "ann", "qrels-model": "on"}
    page = client.post("/campaigns/demo/upload/", form)
    assert page.status_code == 422 and "not a model judge" in page.content.decode()


# --------------------------------------------------------------------------- as a background job


def _pool_docids(campaign) -> list[str]:
    """The pooled pairs' docids in the order a run sends them (by pair id)."""
    return list(
        Pair.objects.filter(campaign=campaign, pooled=True).order_by("id").values_list("document__docid", flat=True)
    )


def test_model_judge_job_from_the_api_runs_with_progress_and_outcome(judged, fake_model, lead, monkeypatch):
    from judging.jobs import job_run

    monkeypatch.setenv("RELJUDGE_MODEL_ENDPOINT", fake_model.url)
    fake_model.script["d2"] = [(200, "no idea", 0)]
    api = APIClient()
    api.force_authenticate(lead)
    started = api.post("/api/campaigns/demo/judges/run/", {"model": "tiny", "pairs": "all"}, format="json")
    assert started.status_code == 202, started.content
    url = started["Location"]
    assert started.json() == {"job": url, "status": "queued"}
    assert api.get(url).json()["progress"] == {"done": 0, "total": 5, "per_second": None}
    assert not fake_model.calls  # nothing is called in the request: the worker does it

    ticks: list[int] = []
    assert job_run(job_id=int(url.rstrip("/").rsplit("/", 1)[1]), progress=ticks.append)["status"] == "done"
    assert sum(ticks) == 5  # progress is told of every pair as its call ends
    body = api.get(url).json()
    assert (
        body["status"] == "done"
        and body["progress"] == {"done": 5, "total": 5, "per_second": None}
        and body["error"] == {}
    )
    r = body["result"]
    # d2 is pooled for both queries: two malformed answers, stored as unsure with the raw answer
    assert (r["judge"], r["pairs"], r["graded"], r["unsure"], r["failed"]) == ("tiny", 5, 3, 2, 0)
    unsure = Judgment.objects.filter(annotator__username="tiny", unsure=True)
    assert {j.note for j in unsure} == {"model answer could not be read as a grade: no idea"}
    assert Judgment.objects.filter(annotator__username="tiny").count() == 5


def test_model_judge_job_failing_endpoint_keeps_whole_batches_and_retry_judges_the_rest(
    judged, fake_model, lead, annotator, monkeypatch
):
    """Decision: the pairs judged before the endpoint failed stay (each batch commits whole: judgment,
    history and labels together); the job ends failed saying so, and Retry sends only the pairs left."""
    from judging import jobs
    from judging.models import Job, JudgmentRevision

    monkeypatch.setattr(jobs.model_judge, "GIVE_UP_AFTER", 2)
    order = _pool_docids(judged)
    for i, docid in enumerate(order):  # the first batch (2 pairs) answers, every later call fails
        reply = (200, '{"grade": 2, "reason": "fits"}', 0) if i < 2 else (500, "model crashed", 0)
        fake_model.script.setdefault(docid, []).append(reply)
    for replies in fake_model.script.values():
        replies.append((500, "model crashed", 0))
    human = dict(Pair.objects.filter(campaign=judged).values_list("id", "label"))

    job = jobs.model_judge_job_start(
        campaign=judged, user=lead, model="tiny", pairs="all", endpoint=fake_model.url,
        concurrency=1, retries=0, timeout=2, batch=2, enqueue=False,
    )  # fmt: skip
    assert jobs.job_run(job_id=job.pk)["status"] == "failed"
    job = Job.objects.get(pk=job.pk)
    assert job.status == "failed" and job.error["line"] is None
    assert "HTTP 500" in job.error["detail"]
    assert "2 of 5 pairs were judged and are kept; Retry judges the 3 left" in job.error["detail"]
    assert (job.done, job.total) == (2, 5) and job.result["graded"] == 2
    kept = Judgment.objects.filter(annotator__username="tiny")
    assert sorted(kept.values_list("pair__document__docid", flat=True)) == sorted(order[:2])
    assert JudgmentRevision.objects.filter(judgment__in=kept).count() == 2  # nothing half-written
    assert dict(Pair.objects.filter(campaign=judged).values_list("id", "label")) == human
    # the page says what happened and offers Retry
    client = APIClient()
    client.force_authenticate(lead)
    page = Client()
    page.force_login(lead)
    html = page.get(f"/campaigns/demo/jobs/{job.pk}/").content.decode()
    assert "The job failed." in html and "Retry judges the 3 left" in html and ">Retry</button>" in html

    fake_model.script.clear()
    fake_model.calls.clear()
    assert client.post(f"/api/jobs/{job.pk}/retry/").status_code == 202
    assert client.get(f"/api/jobs/{job.pk}/").json()["progress"] == {
        "done": 2,
        "total": 5,
        "per_second": None,
    }  # resumes
    assert jobs.job_run(job_id=job.pk)["status"] == "done"
    assert len(fake_model.calls) == 3  # only the pairs left
    body = client.get(f"/api/jobs/{job.pk}/").json()
    assert body["status"] == "done" and body["progress"] == {"done": 5, "total": 5, "per_second": None}
    assert (body["result"]["graded"], body["result"]["failed"]) == (5, 0)
    assert kept.count() == 5
    # an annotator sees none of it
    other = APIClient()
    other.force_authenticate(annotator)
    assert other.get(f"/api/jobs/{job.pk}/").status_code == 404


def test_model_judge_job_unreachable_endpoint_fails_clearly(judged, lead, monkeypatch):
    from judging import jobs
    from judging.models import Job

    monkeypatch.setattr(jobs.model_judge, "GIVE_UP_AFTER", 3)
    job = jobs.model_judge_job_start(
        campaign=judged, user=lead, model="tiny", pairs="all", endpoint="http://127.0.0.1:9/v1",
        concurrency=1, retries=0, timeout=1, enqueue=False,
    )  # fmt: skip
    jobs.job_run(job_id=job.pk)
    job = Job.objects.get(pk=job.pk)
    assert job.status == "failed" and "Connection refused" in job.error["detail"]
    assert "0 of 5 pairs were judged and are kept" in job.error["detail"]
    assert not Judgment.objects.filter(annotator__username="tiny").exists()


def test_model_judge_job_without_endpoint_in_the_worker_fails_naming_the_setting(judged, lead, monkeypatch):
    from judging import jobs
    from judging.models import Job

    monkeypatch.setenv("RELJUDGE_MODEL_ENDPOINT", "http://127.0.0.1:9/v1")
    job = jobs.model_judge_job_start(campaign=judged, user=lead, model="tiny", enqueue=False)
    monkeypatch.delenv("RELJUDGE_MODEL_ENDPOINT")  # the worker's environment has none
    jobs.job_run(job_id=job.pk)
    job = Job.objects.get(pk=job.pk)
    assert job.status == "failed" and "set RELJUDGE_MODEL_ENDPOINT" in job.error["detail"]


def test_calibration_page_form_starts_a_job_and_the_job_page_shows_it(client, judged, fake_model, lead, monkeypatch):
    from judging.jobs import job_run
    from judging.models import Job

    client.force_login(lead)
    monkeypatch.delenv("RELJUDGE_MODEL_ENDPOINT", raising=False)
    html = client.get("/campaigns/demo/judges/").content.decode()
    assert "No model endpoint is configured on this server" in html and "<fieldset disabled>" in html
    assert 'name="endpoint"' not in html  # the URL is never typed into a page
    assert client.post("/campaigns/demo/judges/run/", {"model": "tiny", "pairs": "all"}).status_code == 302
    assert not Job.objects.exists()

    monkeypatch.setenv("RELJUDGE_MODEL_ENDPOINT", fake_model.url)
    html = client.get("/campaigns/demo/judges/").content.decode()
    assert "<fieldset disabled>" not in html and 'action="/campaigns/demo/judges/run/"' in html
    bad = client.post("/campaigns/demo/judges/run/", {"model": "tiny", "pairs": "sample"}, follow=True)
    assert "Give the number of pairs to sample." in bad.content.decode() and not Job.objects.exists()
    r = client.post("/campaigns/demo/judges/run/", {"model": "tiny", "pairs": "sample", "sample": "3"})
    job = Job.objects.get()
    assert r.status_code == 302 and r["Location"] == f"/campaigns/demo/jobs/{job.pk}/"
    assert (job.kind, job.total, job.options["endpoint"], job.started_by) == ("model_judge", 3, "", lead)
    page = client.get(r["Location"]).content.decode()
    assert "Model judge tiny" in page and 'hx-trigger="every 1s"' in page
    job_run(job_id=job.pk)
    done = client.get(r["Location"], headers={"HX-Request": "true"}).content.decode()
    assert "3 graded, 0 unreadable answers stored as unsure, 0 unchanged" in done
    assert 'hx-trigger="every 1s"' not in done and "/judges/tiny/calibration/" in done


def test_model_judge_run_is_for_leads_only(client, judged, annotator, fake_model, monkeypatch):
    from judging.models import Job

    monkeypatch.setenv("RELJUDGE_MODEL_ENDPOINT", fake_model.url)
    api = APIClient()
    api.force_authenticate(annotator)
    assert api.post("/api/campaigns/demo/judges/run/", {"model": "tiny"}, format="json").status_code == 403
    client.force_login(annotator)
    assert client.post("/campaigns/demo/judges/run/", {"model": "tiny", "pairs": "all"}).status_code == 403
    assert not Job.objects.exists() and not fake_model.calls


def test_model_judge_api_without_endpoint_answers_409(judged, lead, monkeypatch):
    from judging.models import Job

    monkeypatch.delenv("RELJUDGE_MODEL_ENDPOINT", raising=False)
    api = APIClient()
    api.force_authenticate(lead)
    r = api.post("/api/campaigns/demo/judges/run/", {"model": "tiny"}, format="json")
    assert r.status_code == 409 and "RELJUDGE_MODEL_ENDPOINT" in r.json()["detail"]
    bad = api.post("/api/campaigns/demo/judges/run/", {"model": "tiny", "pairs": "some"}, format="json")
    assert bad.status_code == 409  # nothing is checked further without an endpoint
    monkeypatch.setenv("RELJUDGE_MODEL_ENDPOINT", "http://127.0.0.1:9/v1")
    bad = api.post("/api/campaigns/demo/judges/run/", {"model": "tiny", "pairs": "some"}, format="json")
    assert bad.status_code == 400 and "--pairs must be one of" in bad.json()["pairs"][0]
    assert not Job.objects.exists()


def test_command_background_queues_the_job_for_the_worker(judged, fake_model, monkeypatch):
    from judging.models import Job

    monkeypatch.setenv("RELJUDGE_MODEL_ENDPOINT", fake_model.url)
    out = io.StringIO()
    call_command("judge_with_model", "demo", "--model", "tiny", "--background", stdout=out)
    job = Job.objects.get()
    assert (job.status, job.total, job.kind) == ("queued", 5, "model_judge") and job.task_id
    assert f"job {job.pk} queued: 5 pairs for tiny; follow it at /campaigns/demo/jobs/{job.pk}/" in out.getvalue()
    assert not fake_model.calls
    # The job carries the address this command saw (not a key): the worker calls it whatever its environment.
    assert job.options["endpoint"] == fake_model.url


@pytest.mark.parametrize(
    ("base", "link"),
    [
        ("https://judge.example.org/", "follow it at https://judge.example.org/campaigns/demo/jobs/{pk}/\n"),
        (None, "follow it at /campaigns/demo/jobs/{pk}/ (a path on this site: set RELJUDGE_BASE_URL for the "),
    ],
)
def test_command_prints_a_whole_link_when_the_site_address_is_known(judged, fake_model, monkeypatch, base, link):
    from judging.models import Job

    monkeypatch.setenv("RELJUDGE_MODEL_ENDPOINT", fake_model.url)
    if base is None:
        monkeypatch.delenv("RELJUDGE_BASE_URL", raising=False)
    else:
        monkeypatch.setenv("RELJUDGE_BASE_URL", base)
    out = io.StringIO()
    call_command("judge_with_model", "demo", "--model", "tiny", "--background", stdout=out)
    assert link.format(pk=Job.objects.get().pk) in out.getvalue()


def test_command_background_hands_the_endpoint_to_the_worker_or_refuses_at_once(judged, fake_model, monkeypatch):
    """The endpoint only in the command's environment (or in --endpoint) reaches the worker with the job; with
    no endpoint at all, or one whose address holds a key, the command refuses before queueing anything."""
    from judging import jobs
    from judging.models import Job

    monkeypatch.delenv("RELJUDGE_MODEL_ENDPOINT", raising=False)
    with pytest.raises(CommandError, match="no model endpoint to hand to the task worker. Pass --endpoint URL"):
        call_command("judge_with_model", "demo", "--model", "tiny", "--background")
    with pytest.raises(CommandError, match="carries credentials in its address"):
        call_command(
            "judge_with_model", "demo", "--model", "tiny", "--background", "--endpoint", fake_model.url + "?key=s3cret"
        )
    assert not Job.objects.exists()
    out = io.StringIO()
    monkeypatch.setenv("RELJUDGE_MODEL_API_KEY", "sk-command")
    call_command(
        "judge_with_model", "demo", "--model", "tiny", "--background", "--endpoint", fake_model.url, stdout=out
    )
    assert "never kept in a job" in out.getvalue()
    job = Job.objects.get()
    assert "sk-command" not in str(job.options)
    # The worker: none of the command's environment.
    monkeypatch.delenv("RELJUDGE_MODEL_API_KEY")
    assert jobs.job_run(job_id=job.pk)["status"] == "done"
    assert len(fake_model.calls) == 5


def test_an_address_with_a_key_is_used_in_the_command_but_never_kept_in_the_job(judged, fake_model, monkeypatch):
    from judging import jobs
    from judging.models import Job

    monkeypatch.delenv("RELJUDGE_MODEL_ENDPOINT", raising=False)
    url = fake_model.url + "/chat/completions?api-key=s3cret"
    call_command(
        "judge_with_model", "demo", "--endpoint", url, "--model", "tiny", "--retries", "0", stdout=io.StringIO()
    )
    job = Job.objects.get()
    assert job.status == "done" and job.result["graded"] == 5
    assert job.options["endpoint"] == "" and "s3cret" not in str(job.options)
    # Retried in a worker (another process: the address was only in the command's memory) without
    # RELJUDGE_MODEL_ENDPOINT, a run says what the worker needs, not "--endpoint".
    monkeypatch.setattr(jobs.model_judge, "_ENDPOINT_HERE", {})
    Job.objects.filter(pk=job.pk).update(status="queued", upload=jobs.model_judge.pack([]), done=0)
    jobs.job_run(job_id=job.pk)
    detail = Job.objects.get(pk=job.pk).error["detail"]
    assert "the task worker has no model endpoint: set RELJUDGE_MODEL_ENDPOINT" in detail
    assert "environment the worker starts in" in detail


def test_command_runs_the_job_now_and_it_shows_on_the_job_page(judged, fake_model):
    from judging.models import Job

    call_command("judge_with_model", "demo", "--endpoint", fake_model.url, "--model", "tiny", stdout=io.StringIO())
    job = Job.objects.get()
    assert (job.status, job.done, job.total, job.options["endpoint"]) == ("done", 5, 5, fake_model.url)
    assert job.result["graded"] == 5


def test_model_judge_job_whose_worker_died_is_reaped_and_retry_resumes(judged, fake_model, lead, settings):
    from datetime import timedelta

    from django.utils import timezone

    from judging import jobs
    from judging.models import Job

    settings.RELJUDGE_JOB_STALE_SECONDS = 30
    job = jobs.model_judge_job_start(
        campaign=judged, user=lead, model="tiny", pairs="all", endpoint=fake_model.url, batch=2, enqueue=False
    )
    # A worker judged the first batch (committed with the job's cursor), then died 31 s ago.
    jobs.job_run(job_id=job.pk)
    Job.objects.filter(pk=job.pk).update(
        status="running",
        options={**Job.objects.get(pk=job.pk).options, "cursor": 2, "failed": []},
        upload=jobs.model_judge.pack(
            list(Pair.objects.filter(campaign=judged, pooled=True).order_by("id").values_list("id", flat=True))
        ),
        heartbeat_at=timezone.now() - timedelta(seconds=31),
        done=2,
    )
    seen = jobs.job_get(job_id=job.pk, user=lead)
    assert seen.status == "failed" and "the pairs judged before it stopped are kept" in seen.error["detail"]
    assert jobs.job_can_retry(seen)
    jobs.job_retry(job=seen)
    fake_model.calls.clear()
    assert jobs.job_run(job_id=job.pk)["status"] == "done"
    assert len(fake_model.calls) == 3  # the two pairs of the committed batch are not sent again
    assert Job.objects.get(pk=job.pk).done == 5
