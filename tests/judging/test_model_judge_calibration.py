"""Calibration that tells the truth (the kappa verdict, tau_AP and the top-5 overlap, per-system bias,
self-consistency, the query-word-stuffing canary) and judges a lead configures (versioned prompt templates,
a model's own scale mapped onto the campaign's grades), against a local OpenAI-compatible server."""

import io
import json
import logging
import random
import re
from itertools import count

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

import metrics
from judging.models import (
    CanaryProbe,
    Document,
    JudgeTemplate,
    Judgment,
    ModelConsistency,
    Pair,
)
from judging.scoring import leaderboard_data
from judging.selectors.calibration import judge_calibration
from judging.services import judgment_record, qrels_import
from judging.services.judge_templates import ScaleMapping, judge_template_current, mapping_check
from judging.services.model_canary import query_words, stuffed_text
from judging.services.model_judge import model_judge_get_or_create, read_answer
from tests.fake_model import FakeModel
from tests.oracle import oracle, random_campaign


@pytest.fixture
def fake_model():
    fake = FakeModel()
    yield fake
    fake.close()


def _reply(content: str) -> tuple[int, str, float]:
    return (200, content, 0.0)


def _document(body: dict) -> str:
    """The document's text as the prompt shows it (after the Title line)."""
    user = body["messages"][-1]["content"]
    return user.split("\nDocument ", 1)[1]


def _query(body: dict) -> str:
    return re.search(r"^Query: (.*)$", body["messages"][-1]["content"], re.M).group(1)


# --------------------------------------------------------------------------- calibration against oracles


def _model_campaign(make_user, *, seed=3, skip_queries=("q1",)):
    """A random campaign (pytrec_eval's oracle knows its runs), and a lenient model judge that labels every
    human-labelled pair except those of ``skip_queries``."""
    campaign, runs, human_qrels = random_campaign(make_user, seed=seed)
    rng = random.Random(seed + 1)
    model_qrels: dict[str, dict[str, int]] = {}
    lines = []
    for q, ds in sorted(human_qrels.items()):
        if q in skip_queries:
            continue
        for d, label in sorted(ds.items()):
            grade = min(2, label + (rng.random() < 0.4)) if rng.random() < 0.85 else rng.choice([0, 1, 2])
            model_qrels.setdefault(q, {})[d] = grade
            lines.append(f"{q} 0 {d} {grade}\n")
    judge = model_judge_get_or_create(name="bot", campaign=campaign)
    qrels_import(campaign=campaign, data="".join(lines).encode(), filename="m.qrels", annotator=judge)
    return campaign, runs, human_qrels, model_qrels


def test_calibration_verdict_tau_ap_top5_and_bias_against_trec_eval(make_user, client):
    campaign, runs, human_qrels, model_qrels = _model_campaign(make_user)
    data = judge_calibration(campaign=campaign, name="bot", n_resamples=300)
    kappa = data["agreement"]["kappa"]
    expected = metrics.kappa_verdict(kappa["value"], *kappa["ci"])
    assert data["verdict"]["band"] == expected.band and data["verdict"]["at_least"] == expected.at_least
    words = {"chance": "no better than chance", "almost_perfect": "almost perfect"}.get(expected.band, expected.band)
    assert data["verdict"]["text"] == ("at least " if expected.at_least else "") + words

    # the ranking, from trec_eval's own per-query nDCG@10 under each label source
    human = oracle(runs, human_qrels, 10, 1)
    model = oracle(runs, model_qrels, 10, 1)
    names = [s["name"] for s in data["ranking"]["systems"]]
    h_means = np.array([np.mean([human[s][q]["nDCG@10"] for q in human_qrels]) for s in names])
    m_means = np.array([np.mean([model[s][q]["nDCG@10"] for q in model_qrels]) for s in names])
    assert [s["humans"] for s in data["ranking"]["systems"]] == pytest.approx(h_means.tolist(), abs=1e-9)
    assert data["ranking"]["tau_ap"] == pytest.approx(metrics.tau_ap(m_means, h_means), abs=1e-12)
    top = data["ranking"]["top"]
    assert top["k"] == 3 and top["overlap"] == 3  # three systems: the top 5 is everyone
    assert sorted(top["humans"]) == sorted(names)
    per = {m["measure"]: m for m in data["ranking"]["per_measure"]}
    assert per["nDCG@10"]["tau_ap"] == data["ranking"]["tau_ap"]

    # bias: only the queries both label sources scored (q1 has no model label)
    shared = sorted(set(human_qrels) & set(model_qrels))
    assert "q1" not in shared and data["bias"]["queries"] == len(shared)
    for row in data["bias"]["systems"]:
        diffs = [model[row["name"]][q]["nDCG@10"] - human[row["name"]][q]["nDCG@10"] for q in shared]
        assert row["bias"] == pytest.approx(np.mean(diffs), abs=1e-9)
        from scipy import stats

        ci = stats.ttest_1samp(diffs, 0).confidence_interval(0.95)
        assert row["ci"] == pytest.approx([ci.low, ci.high], abs=1e-9)
        assert row["humans"] == pytest.approx(np.mean([human[row["name"]][q]["nDCG@10"] for q in shared]), abs=1e-9)
    assert set(data["bias"]["per_measure"]) >= {"nDCG@10", "P@10", "MAP"}

    # the page says it in words, and the API carries it
    lead = make_user("boss", is_superuser=True)
    client.force_login(lead)
    html = client.get(f"/campaigns/{campaign.slug}/judges/bot/calibration/").content.decode()
    assert f"Agreement with the people: {data['verdict']['text']}." in html
    assert "Landis &amp; Koch" in html and "τ<sub>AP</sub>" in html and "Bias per system" in html
    assert "top 3: 3 of 3 systems the same" in html
    assert "Not measured yet" in html and "Not run yet" in html  # no --repeat, no --canary so far
    api = APIClient()
    api.force_authenticate(lead)
    body = api.get(f"/api/campaigns/{campaign.slug}/judges/bot/calibration/").json()
    assert body["verdict"]["band"] == expected.band and body["ranking"]["tau_ap"] == data["ranking"]["tau_ap"]
    assert body["self_consistency"] is None and body["canary"] is None
    ko = Client(HTTP_ACCEPT_LANGUAGE="ko")
    ko.force_login(lead)
    html = ko.get(f"/campaigns/{campaign.slug}/judges/bot/calibration/").content.decode()
    assert "사람과의 일치도" in html and "시스템별 편향" in html


def test_calibration_verdict_says_chance_for_a_random_judge(make_user):
    campaign, runs, human_qrels = random_campaign(make_user, seed=11)
    rng = random.Random(2)
    lines = [f"{q} 0 {d} {rng.choice([0, 1, 2])}\n" for q, ds in sorted(human_qrels.items()) for d in sorted(ds)]
    judge = model_judge_get_or_create(name="coin", campaign=campaign)
    qrels_import(campaign=campaign, data="".join(lines).encode(), filename="m.qrels", annotator=judge)
    data = judge_calibration(campaign=campaign, name="coin", n_resamples=300)
    assert data["agreement"]["kappa"]["ci"][0] <= 0
    assert data["verdict"] == {
        "band": "chance",
        "at_least": False,
        "point_band": metrics.kappa_band(data["agreement"]["kappa"]["value"]),
        "text": "no better than chance",
    }


# --------------------------------------------------------------------------- self-consistency


def test_repeat_stores_answers_and_reports_self_consistency(judged, fake_model, lead):
    """d1 always gets 2; d2 (pooled for both queries) cycles 0, 1, 2 call by call, so each of its pairs
    hears three different grades; d3 and d4 always 1. Three of five pairs are unanimous."""
    cycle = count()

    def responder(body):
        if "Document d2\n" in body["messages"][-1]["content"]:
            return _reply(json.dumps({"grade": next(cycle) % 3, "reason": "unsure"}))
        if "Document d1\n" in body["messages"][-1]["content"]:
            return _reply('{"grade": 2, "reason": "exact"}')
        return _reply('{"grade": 1, "reason": "near"}')

    fake_model.responder = responder
    out = io.StringIO()
    call_command(
        "judge_with_model", "demo", "--endpoint", fake_model.url, "--model", "tiny", "--pairs", "all",
        "--repeat", "3", "--temperature", "0.7", "--concurrency", "1", stdout=out,
    )  # fmt: skip
    assert "each pair asked 3 times" in out.getvalue()
    assert len(fake_model.calls) == 15 and {c["temperature"] for c in fake_model.calls} == {0.7}
    rows = {
        (r.pair.query.qid, r.pair.document.docid): r
        for r in ModelConsistency.objects.select_related("pair__query", "pair__document")
    }
    assert len(rows) == 5
    assert rows[("q1", "d1")].answers == [2, 2, 2] and rows[("q1", "d1")].agreement == 1.0
    assert rows[("q1", "d1")].unanimous and rows[("q1", "d1")].temperature == 0.7
    for q in ("q1", "q2"):
        assert sorted(rows[(q, "d2")].answers) == [0, 1, 2]
        assert rows[(q, "d2")].agreement == 0.0 and not rows[(q, "d2")].unanimous
    # the judgment is the majority grade: a three-way tie goes to the lowest grade
    d2 = Judgment.objects.filter(annotator__username="tiny", pair__document__docid="d2")
    assert {j.grade.value for j in d2} == {0}
    data = judge_calibration(campaign=judged, name="tiny", n_resamples=50)
    sc = data["self_consistency"]
    assert (sc["pairs"], sc["repeats"], sc["temperatures"]) == (5, [3], [0.7])
    assert sc["unanimous"] == pytest.approx(3 / 5) and sc["pairwise"] == pytest.approx(3 / 5)
    client = Client()
    client.force_login(lead)
    html = client.get("/campaigns/demo/judges/tiny/calibration/").content.decode()
    assert "every answer the same on 60% of pairs" in html
    # a new run without --repeat leaves the stored answers alone; a bad --repeat is refused
    with pytest.raises(CommandError, match="--repeat must be from 1 to 20"):
        call_command("judge_with_model", "demo", "--endpoint", fake_model.url, "--model", "tiny", "--repeat", "0")


def test_repeat_with_one_failed_call_leaves_the_pair_unjudged(judged, fake_model):
    calls = count()

    def responder(body):
        if "Document d1\n" in body["messages"][-1]["content"] and next(calls) == 1:
            return (400, "bad request", 0.0)  # the second of d1's three calls fails for good
        return _reply('{"grade": 1}')

    fake_model.responder = responder
    out = io.StringIO()
    call_command(
        "judge_with_model", "demo", "--endpoint", fake_model.url, "--model", "tiny", "--pairs", "all",
        "--repeat", "3", "--concurrency", "1", "--retries", "0", stdout=out,
    )  # fmt: skip
    assert "1 failed" in out.getvalue()
    assert not Judgment.objects.filter(annotator__username="tiny", pair__document__docid="d1").exists()
    assert not ModelConsistency.objects.filter(pair__document__docid="d1").exists()
    assert ModelConsistency.objects.count() == 4


# --------------------------------------------------------------------------- the canary


def _fooled(body):
    """A judge fooled by query-word stuffing: relevant when the query's words appear twice or more."""
    words = query_words(_query(body))
    return _reply(json.dumps({"grade": 2 if _document(body).count(words) >= 2 else 0}))


def test_canary_reports_grades_that_rise_and_never_touches_pool_or_leaderboard(judged, fake_model, lead):
    fake_model.responder = _fooled
    docs = Document.objects.count()
    pairs = list(Pair.objects.filter(campaign=judged).order_by("id").values_list("id", "pooled", "label"))
    board = leaderboard_data(campaign=judged, k=2)
    out = io.StringIO()
    call_command(
        "judge_with_model", "demo", "--endpoint", fake_model.url, "--model", "tiny", "--pairs", "none",
        "--canary", "5", stdout=out,
    )  # fmt: skip
    # the two pairs people graded 0 (d2 for q1 and q2), each asked as it is and stuffed
    assert "canary: the grade rose on 2 of 2 non-relevant documents" in out.getvalue()
    assert len(fake_model.calls) == 4
    stuffed = [c for c in fake_model.calls if _document(c).count(query_words(_query(c))) >= 2]
    assert len(stuffed) == 2 and all("Document d2\n" in c["messages"][-1]["content"] for c in stuffed)
    probes = CanaryProbe.objects.order_by("pair__query__qid")
    assert [(p.original_grade, p.stuffed_grade) for p in probes] == [(0, 2), (0, 2)]
    assert Document.objects.count() == docs
    assert list(Pair.objects.filter(campaign=judged).order_by("id").values_list("id", "pooled", "label")) == pairs
    assert not Judgment.objects.filter(annotator__username="tiny").exists()  # --pairs none: no judgments
    assert leaderboard_data(campaign=judged, k=2)["systems"] == board["systems"]
    data = judge_calibration(campaign=judged, name="tiny", n_resamples=50)
    assert data["canary"]["rose"] == 2 and data["canary"]["compared"] == 2 and data["canary"]["share_rose"] == 1.0
    assert data["ranking"]["tau_ap"] is None and data["ranking"]["kendall_tau"] is None  # no model label yet
    client = Client()
    client.force_login(lead)
    html = client.get("/campaigns/demo/judges/tiny/calibration/").content.decode()
    assert "The grade rose on 2 of 2 documents people graded not relevant" in html
    from judging.models import Job

    job = Job.objects.get()
    page = client.get(f"/campaigns/demo/jobs/{job.pk}/").content.decode()
    assert "canary: the grade rose on 2 of 2 non-relevant documents stuffed with the query's words" in page
    # a judge that is not fooled: nothing rises (and the new run replaces the probes)
    fake_model.responder = lambda body: _reply('{"grade": 0}')
    call_command(
        "judge_with_model", "demo", "--endpoint", fake_model.url, "--model", "tiny", "--pairs", "none",
        "--canary", stdout=io.StringIO(),
    )  # fmt: skip
    assert judge_calibration(campaign=judged, name="tiny", n_resamples=50)["canary"]["rose"] == 0
    assert CanaryProbe.objects.count() == 2
    with pytest.raises(CommandError, match="--pairs none judges nothing: add --canary N"):
        call_command("judge_with_model", "demo", "--endpoint", fake_model.url, "--model", "tiny", "--pairs", "none")


def test_canary_counts_only_documents_whose_grade_could_rise(judged, fake_model, lead):
    """'rose on 0 of 5' where the model had already given those pairs the top grade (issue 42): a grade at the
    top cannot rise, so those documents are said apart and not counted."""
    fake_model.responder = lambda body: _reply('{"grade": 2}')  # the top grade, stuffed or not
    out = io.StringIO()
    call_command(
        "judge_with_model", "demo", "--endpoint", fake_model.url, "--model", "tiny", "--pairs", "none",
        "--canary", "5", stdout=out,
    )  # fmt: skip
    assert "canary: the grade rose on 0 of 0 non-relevant documents stuffed with the query's words (2 already " in (
        out.getvalue()
    )
    canary = judge_calibration(campaign=judged, name="tiny", n_resamples=50)["canary"]
    assert (canary["compared"], canary["could_rise"], canary["at_top"], canary["rose"]) == (2, 0, 2, 0)
    assert canary["share_rose"] is None
    client = Client()
    client.force_login(lead)
    html = client.get("/campaigns/demo/judges/tiny/calibration/").content.decode()
    assert "The grade rose on" not in html
    assert "2 documents already had the top grade from the model as they were: they could not rise" in html
    client.defaults["HTTP_ACCEPT_LANGUAGE"] = "ko"
    html = client.get("/campaigns/demo/judges/tiny/calibration/").content.decode()
    assert "문서 2개는 원래 상태에서 이미 모델에게 최고 등급을 받아 더 오를 수 없으므로 세지 않습니다." in html


def test_stuffed_text_puts_the_query_words_inside_what_the_prompt_shows():
    text = "word " * 3000
    out = stuffed_text(text, "wool knit sweater")
    assert out.count("wool knit sweater") == 3
    assert out[:6000].count("wool knit sweater") == 3  # all three within DOC_CHARS
    assert query_words("wool wool knit, sweater?") == "wool knit sweater"


# --------------------------------------------------------------------------- templates and mappings


def test_scale_mapping_and_its_errors():
    m = ScaleMapping(0, 100, (34.0, 67.0), (0, 1, 2))
    assert [m.grade(x) for x in (0, 33.9, 34, 66, 67, 100)] == [0, 0, 1, 1, 2, 2]
    assert m.grade(101) is None and m.grade(-1) is None
    assert read_answer('{"grade": 150}', [0, 1, 2], m).off_scale
    assert read_answer('{"grade": 72.5, "reason": "ok"}', [0, 1, 2], m).grade == 2
    assert read_answer("no idea", [0, 1, 2], m) == read_answer("no idea", [0, 1, 2], None)
    from django.core.exceptions import ValidationError

    for kwargs, field in [
        ({"low": 0, "high": None, "thresholds": []}, "scale_high"),
        ({"low": 5, "high": 5, "thresholds": [1, 2]}, "scale_high"),
        ({"low": 0, "high": 100, "thresholds": [50]}, "thresholds"),
        ({"low": 0, "high": 100, "thresholds": [60, 50]}, "thresholds"),
        ({"low": 0, "high": 100, "thresholds": [0, 50]}, "thresholds"),
        ({"low": None, "high": None, "thresholds": [1, 2]}, "thresholds"),
    ]:
        with pytest.raises(ValidationError) as exc:
            mapping_check(grades=[0, 1, 2], **kwargs)
        assert list(exc.value.message_dict) == [field], kwargs


def test_template_built_from_guidelines_scale_and_noted_human_judgments(judged, annotator, lead, fake_model):
    pair = Pair.objects.get(campaign=judged, query__qid="q1", document__docid="d1")
    judgment_record(pair=pair, annotator=annotator, grade=2, note="Exactly a wool sweater.")
    judge = model_judge_get_or_create(name="tiny", campaign=judged)
    client = Client()
    client.force_login(lead)
    page = client.get("/campaigns/demo/judges/tiny/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Draft of the first prompt" in html and "Judge the product, not the brand." in html
    assert "2 = Highly relevant" in html and "Exactly a wool sweater." in html
    assert "People&#x27;s grade: 2 (Highly relevant)" in html
    assert not JudgeTemplate.objects.filter(judge=judge).exists()  # a GET writes nothing: the draft is shown
    # the first run saves the draft as version 1; judgments record the version; the example pair is left out
    # of the calibration
    call_command(
        "judge_with_model", "demo", "--endpoint", fake_model.url, "--model", "tiny", "--pairs", "all",
        stdout=io.StringIO(),
    )  # fmt: skip
    template = JudgeTemplate.objects.get(judge=judge)
    assert template.version == 1 and template.example_pairs == [pair.id]
    assert "Exactly a wool sweater." in fake_model.calls[0]["messages"][0]["content"]
    assert set(Judgment.objects.filter(annotator=judge).values_list("template__version", flat=True)) == {1}
    data = judge_calibration(campaign=judged, name="tiny", n_resamples=50)
    assert data["examples_left_out"] == 1 and data["compared"] == 4 and data["template_version"] == 1


def test_lead_edits_the_template_in_the_browser_with_csrf(judged, lead, annotator, fake_model):
    judge = model_judge_get_or_create(name="tiny", campaign=judged)
    client = Client(enforce_csrf_checks=True)
    client.force_login(lead)
    page = client.get("/campaigns/demo/judges/tiny/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    form = {"text": "Grade strictly.\nGrades: 0, 1, 2.", "scale_low": "", "scale_high": "", "thresholds": ""}
    assert client.post("/campaigns/demo/judges/tiny/template/", form).status_code == 403  # no CSRF token
    r = client.post("/campaigns/demo/judges/tiny/template/", {**form, "csrfmiddlewaretoken": token})
    assert r.status_code == 302 and r["Location"] == "/campaigns/demo/judges/tiny/"
    current = judge_template_current(campaign=judged, judge=judge)
    # the page showed a draft (nothing saved on a GET): the lead's save is version 1
    assert (current.version, current.text, current.created_by) == (1, "Grade strictly.\nGrades: 0, 1, 2.\n", lead)
    # the same again saves nothing new
    client.post("/campaigns/demo/judges/tiny/template/", {**form, "csrfmiddlewaretoken": token})
    assert JudgeTemplate.objects.filter(judge=judge).count() == 1
    # a bad mapping: 400, the field named, what was typed kept
    bad = {**form, "scale_low": "0", "scale_high": "100", "thresholds": "50", "csrfmiddlewaretoken": token}
    r = client.post("/campaigns/demo/judges/tiny/template/", bad)
    html = r.content.decode()
    assert r.status_code == 400 and 'id="id_thresholds-errors"' in html
    assert "Give 2 thresholds, one for each campaign grade above the lowest" in html and "Grade strictly." in html
    r = client.post("/campaigns/demo/judges/tiny/template/", {**bad, "thresholds": "40, ２"})
    assert r.status_code == 400 and "is not a number" in r.content.decode()
    assert JudgeTemplate.objects.filter(judge=judge).count() == 1
    # the run sends the new text, then the code's answer line
    call_command(
        "judge_with_model", "demo", "--endpoint", fake_model.url, "--model", "tiny", "--pairs", "sample:1",
        stdout=io.StringIO(),
    )  # fmt: skip
    assert fake_model.calls[0]["messages"][0]["content"] == (
        'Grade strictly.\nGrades: 0, 1, 2.\nAnswer with JSON only: {"grade": <one of the grades>, '
        '"reason": "<one short sentence>"}'
    )
    # annotators may not see or change it; an unknown judge is 404
    other = Client()
    other.force_login(annotator)
    assert other.get("/campaigns/demo/judges/tiny/").status_code == 403
    assert other.post("/campaigns/demo/judges/tiny/template/", form).status_code == 403
    assert client.get("/campaigns/demo/judges/nobody/").status_code == 404
    ko = Client(HTTP_ACCEPT_LANGUAGE="ko")
    ko.force_login(lead)
    assert "새 버전으로 저장" in ko.get("/campaigns/demo/judges/tiny/").content.decode()


def test_api_template_and_a_model_on_a_0_to_100_scale(judged, lead, fake_model, caplog):
    judge = model_judge_get_or_create(name="tiny", campaign=judged)
    api = APIClient()
    api.force_authenticate(lead)
    got = api.get("/api/campaigns/demo/judges/tiny/template/").json()
    # nothing saved yet: no version, and the draft the first one will be (a GET writes nothing)
    assert got["judge"] == "tiny" and got["versions"] == [] and got["draft"]["version"] == 1
    assert got["draft"]["scale"] is None and "Grades" in got["draft"]["text"]
    assert not JudgeTemplate.objects.filter(judge=judge).exists()
    bad = api.post("/api/campaigns/demo/judges/tiny/template/", {"scale_low": 0, "thresholds": [50]}, format="json")
    assert bad.status_code == 400 and list(bad.json()) == ["scale_high"]
    bad = api.post(
        "/api/campaigns/demo/judges/tiny/template/",
        {"scale_low": 0, "scale_high": 100, "thresholds": [67, 34]},
        format="json",
    )
    assert bad.status_code == 400 and "rise strictly" in bad.json()["thresholds"][0]
    bad = api.post("/api/campaigns/demo/judges/tiny/template/", {"scale_low": "x"}, format="json")
    assert bad.status_code == 400 and "scale_low" in bad.json()
    r = api.post(
        "/api/campaigns/demo/judges/tiny/template/",
        {"rebuild": True, "scale_low": 0, "scale_high": 100, "thresholds": [34, 67]},
        format="json",
    )
    assert r.status_code == 201 and r.json()["version"] == 1
    assert "Answer with a number from 0 (not relevant at all) to 100" in r.json()["versions"][0]["text"]
    assert api.get("/api/campaigns/demo/judges/nobody/template/").status_code == 404

    answers = {"d1": 90, "d3": 50, "d2": 10, "d4": 150}

    def responder(body):
        docid = re.search(r"^Document (\S+)$", body["messages"][-1]["content"], re.M).group(1)
        return _reply(json.dumps({"grade": answers[docid], "reason": "scored"}))

    fake_model.responder = responder
    out = io.StringIO()
    with caplog.at_level(logging.WARNING, logger="judging.jobs.model_judge"):
        call_command(
            "judge_with_model", "demo", "--endpoint", fake_model.url, "--model", "tiny", "--pairs", "all",
            stdout=out,
        )  # fmt: skip
    assert '"grade": <a number from 0 to 100>' in fake_model.calls[0]["messages"][0]["content"]
    grades = dict(
        Judgment.objects.filter(annotator=judge).values_list("pair__document__docid", "grade__value").distinct()
    )
    assert grades == {"d1": 2, "d3": 1, "d2": 0}  # d4's 150 is off the scale: no judgment
    assert "1 answers off the model's scale: those pairs were left unjudged" in out.getvalue()
    assert "qid q2 docid d4 got no judgment: answer 150 is off the model's scale 0-100" in caplog.text
    assert set(Judgment.objects.filter(annotator=judge).values_list("template__version", flat=True)) == {1}
    versions = api.get("/api/campaigns/demo/judges/tiny/template/").json()["versions"]
    assert [(v["version"], v["judgments"]) for v in versions] == [(1, 4)]
    assert versions[0]["scale"] == {"low": 0, "high": 100, "thresholds": [34.0, 67.0]}


def test_template_api_is_for_leads_only(judged, annotator):
    model_judge_get_or_create(name="tiny", campaign=judged)
    api = APIClient()
    api.force_authenticate(annotator)
    assert api.get("/api/campaigns/demo/judges/tiny/template/").status_code == 403
    assert api.post("/api/campaigns/demo/judges/tiny/template/", {"text": "x"}, format="json").status_code == 403


def test_api_and_web_start_runs_with_repeat_and_canary(judged, lead, fake_model, monkeypatch):
    from judging.jobs import job_run
    from judging.models import Job

    monkeypatch.setenv("RELJUDGE_MODEL_ENDPOINT", fake_model.url)
    api = APIClient()
    api.force_authenticate(lead)
    bad = api.post("/api/campaigns/demo/judges/run/", {"model": "tiny", "repeat": 0}, format="json")
    assert bad.status_code == 400 and list(bad.json()) == ["repeat"]
    bad = api.post("/api/campaigns/demo/judges/run/", {"model": "tiny", "pairs": "none"}, format="json")
    assert bad.status_code == 400 and "add --canary N" in bad.json()["pairs"][0]
    r = api.post(
        "/api/campaigns/demo/judges/run/",
        {"model": "tiny", "pairs": "sample:2", "repeat": 2, "temperature": 0.5, "canary": 1},
        format="json",
    )
    assert r.status_code == 202
    job = Job.objects.get()
    assert (job.options["repeat"], job.options["temperature"], job.options["canary"]) == (2, 0.5, 1)
    assert job_run(job_id=job.pk)["status"] == "done"
    assert ModelConsistency.objects.count() == 2 and CanaryProbe.objects.count() == 1
    assert len(fake_model.calls) == 2 * 2 + 2
    client = Client()
    client.force_login(lead)
    r = client.post("/campaigns/demo/judges/run/", {"model": "tiny", "pairs": "all", "repeat": "3", "canary": "0"})
    assert r.status_code == 302
    assert Job.objects.order_by("-pk").first().options["repeat"] == 3


def test_command_sets_the_models_scale_before_the_run(judged, fake_model):
    fake_model.responder = lambda body: _reply('{"grade": 3, "reason": "fits"}')
    with pytest.raises(CommandError, match="--thresholds: Give 2 thresholds"):
        call_command(
            "judge_with_model", "demo", "--endpoint", fake_model.url, "--model", "tiny", "--scale", "0-3",
            "--thresholds", "2",
        )  # fmt: skip
    with pytest.raises(CommandError, match="--scale must be LOW-HIGH"):
        call_command("judge_with_model", "demo", "--endpoint", fake_model.url, "--model", "tiny", "--scale", "0..3")
    assert not fake_model.calls
    out = io.StringIO()
    call_command(
        "judge_with_model", "demo", "--endpoint", fake_model.url, "--model", "tiny", "--pairs", "all",
        "--scale", "0-3", "--thresholds", "1,3", stdout=out,
    )  # fmt: skip
    assert "tiny: prompt template version 2, scale 0-3" in out.getvalue()
    system = fake_model.calls[0]["messages"][0]["content"]
    assert "Answer with a number from 0 (not relevant at all) to 3" in system
    assert system.endswith('{"grade": <a number from 0 to 3>, "reason": "<one short sentence>"}')
    assert set(Judgment.objects.filter(annotator__username="tiny").values_list("grade__value", flat=True)) == {2}


def test_template_versions_show_their_date_as_the_other_pages_do(judged, lead):
    """The versions table shows "2026-12-06 19:15" (SHORT_DATETIME_FORMAT) in a <time>, not the raw ISO text
    "2026-12-06T19:15" (issue 42)."""
    judge = model_judge_get_or_create(name="tiny", campaign=judged)
    client = Client()
    client.force_login(lead)
    form = {"text": "Grade strictly.\nGrades: 0, 1, 2.", "scale_low": "", "scale_high": "", "thresholds": ""}
    assert client.post("/campaigns/demo/judges/tiny/template/", form).status_code == 302
    saved = JudgeTemplate.objects.filter(judge=judge).update(created_at="2026-12-06T19:15:42+00:00")
    assert saved == 1
    for language in ("en", "ko"):
        reader = Client(HTTP_ACCEPT_LANGUAGE=language)
        reader.force_login(lead)
        html = reader.get("/campaigns/demo/judges/tiny/").content.decode()
        assert '<time datetime="2026-12-06T19:15:42+00:00">2026-12-06 19:15</time>' in html, language
        assert "2026-12-06T19:15<" not in html
