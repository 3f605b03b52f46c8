"""Numbers in requests are ASCII, as in imported files: Python's int() reads "２" (full-width) and "١٠"
(Arabic-Indic) as 2 and 10, so the API and the pages would take what no form or file may. And the leaderboard's
``labels=model:NAME`` answers alike for every name the caller may not see: a model judge of another campaign
is no different from a name nobody has."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from judging.models import Pair
from judging.services import campaign_create
from judging.services.model_judge import model_judge_get_or_create

pytestmark = pytest.mark.django_db
CAMPAIGN = "/api/campaigns/demo/"
LEADERBOARD = CAMPAIGN + "leaderboard/"
UNICODE_NUMBERS = ["２", "٢", "۲"]  # full-width, Arabic-Indic and Persian digits


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def web(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("grade", UNICODE_NUMBERS)
def test_judgment_api_refuses_a_grade_in_unicode_digits(board, annotator, grade):
    body = {"campaign": "demo", "qid": "q1", "docid": "d2", "grade": grade}
    response = api(annotator).post("/api/judgments/", body, format="json")
    assert response.status_code == 400 and "grade" in response.json()
    assert api(annotator).post("/api/judgments/", {**body, "grade": "2"}, format="json").status_code == 200


@pytest.mark.parametrize("value", ["１", "٢"])
def test_adjudication_and_judgment_filter_refuse_unicode_digits(board, lead, value):
    pair = Pair.objects.get(campaign=board, query__qid="q1", document__docid="d2")
    response = api(lead).post(f"/api/pairs/{pair.public_id}/adjudicate/", {"grade": value}, format="json")
    assert response.status_code == 400 and "grade" in response.json()
    response = api(lead).get("/api/judgments/", {"campaign": "demo", "grade": value})
    assert response.status_code == 400 and "grade" in response.json()


@pytest.mark.parametrize(
    ("params", "field"),
    [({"k": "١٠"}, "k"), ({"k": "１０"}, "k"), ({"threshold": "１"}, "threshold"), ({"threshold": "١"}, "threshold")],
)
@pytest.mark.parametrize("endpoint", ["", "significance/", "curves/", "segments/", "pool-bias/"])
def test_leaderboard_api_refuses_unicode_digits_naming_the_parameter(board, lead, params, field, endpoint):
    response = api(lead).get(LEADERBOARD + endpoint, params)
    assert response.status_code == 400, response.content
    assert field in response.json()
    ascii_params = {name: "10" if name == "k" else "1" for name in params}
    assert api(lead).get(LEADERBOARD + endpoint, ascii_params).status_code in (200, 202)


@pytest.mark.parametrize("params", [{"k": "١٠"}, {"threshold": "１"}, {"k_max": "٣"}])
def test_leaderboard_pages_refuse_unicode_digits(board, lead, params):
    response = web(lead).get(reverse("judging:leaderboard_curves", args=["demo"]), params)
    assert response.status_code == 400


def test_scores_command_refuses_unicode_digits(board):
    with pytest.raises(CommandError, match="--k: must be a whole number"):
        call_command("scores", "demo", "--k", "١٠", stdout=io.StringIO())
    with pytest.raises(CommandError, match="--threshold: must be a whole number"):
        call_command("scores", "demo", "--threshold", "１", stdout=io.StringIO())


@pytest.fixture
def other_judge(board, make_user):
    """A model judge of another campaign, which the demo campaign's members have no business knowing of."""
    other = campaign_create(slug="other", name="Other")
    model_judge_get_or_create(name="secret-gpt", campaign=other)
    return "secret-gpt"


@pytest.mark.parametrize("kind", ["model", "hybrid"])
@pytest.mark.parametrize("endpoint", ["leaderboard/", "leaderboard/significance/", "online/"])
def test_leaderboard_api_labels_answer_alike_for_judges_of_other_campaigns(
    board, annotator, lead, other_judge, kind, endpoint
):
    for user in (annotator, lead):
        hidden = api(user).get(CAMPAIGN + endpoint, {"labels": f"{kind}:{other_judge}"})
        unknown = api(user).get(CAMPAIGN + endpoint, {"labels": f"{kind}:nobody-at-all"})
        assert hidden.status_code == unknown.status_code == 400
        assert hidden.json() == {"labels": [f"no model judge named {other_judge!r}"]}
        assert unknown.json() == {"labels": ["no model judge named 'nobody-at-all'"]}


def test_leaderboard_page_labels_answer_alike_for_judges_of_other_campaigns(board, annotator, other_judge):
    url = reverse("judging:leaderboard", args=["demo"])
    hidden = web(annotator).get(url, {"labels": f"model:{other_judge}"})
    unknown = web(annotator).get(url, {"labels": "model:nobody-at-all"})
    assert hidden.status_code == unknown.status_code == 400
    assert "no model judge named" in hidden.content.decode()


def test_leaderboard_labels_of_the_campaigns_own_judge_still_work(board, lead):
    model_judge_get_or_create(name="bot", campaign=board)
    response = api(lead).get(LEADERBOARD, {"labels": "model:bot"})
    assert response.status_code == 200 and response.json()["labels"] == "model:bot"


def test_calibration_answers_alike_for_judges_of_other_campaigns(board, lead, other_judge):
    hidden = api(lead).get(f"{CAMPAIGN}judges/{other_judge}/calibration/")
    unknown = api(lead).get(f"{CAMPAIGN}judges/nobody-at-all/calibration/")
    assert hidden.status_code == unknown.status_code == 404
    assert web(lead).get(reverse("judging:calibration", args=["demo", other_judge])).status_code == 404


@pytest.mark.parametrize("name", ["segment", "labels", "measure", "attribute", "gain"])
def test_leaderboard_parameters_with_a_nul_byte_are_400_naming_them(board, lead, name):
    response = api(lead).get(LEADERBOARD, {name: "tail\x00"})
    assert response.status_code == 400 and name in response.json()


@pytest.mark.parametrize(
    ("url", "name"), [("/api/queries/", "page"), ("/api/queries/", "page_size"), ("/api/judgments/", "page_size")]
)
def test_list_pages_refuse_unicode_digits(board, lead, url, name):
    response = api(lead).get(url, {"campaign": "demo", name: "٢"})
    assert response.status_code == 400 and name in response.json()
    assert api(lead).get(url, {"campaign": "demo", name: "1"}).status_code == 200


@pytest.mark.parametrize("body", [{"pairs": "sample:２"}, {"pairs": "sample:٢"}, {"pairs": "sample:1", "seed": "１"}])
def test_model_judge_run_refuses_unicode_digits(board, lead, monkeypatch, body):
    monkeypatch.setenv("RELJUDGE_MODEL_ENDPOINT", "http://127.0.0.1:9/v1")
    response = api(lead).post("/api/campaigns/demo/judges/run/", {"model": "tiny", **body}, format="json")
    assert response.status_code == 400, response.content
    assert set(response.json()) & {"pairs", "seed"}
    from judging.models import Job

    assert not Job.objects.exists()  # nothing queued


@pytest.mark.parametrize(("raw", "number"), [("2", 2), ("٢", 1), ("２", 1), ("99", 10), ("x", 1)])
def test_list_pages_read_page_numbers_in_ascii_digits_only(rf, raw, number):
    from judging.views.paging import page_of

    assert page_of(rf.get("/", {"page": raw}), range(100), 10).number == number
