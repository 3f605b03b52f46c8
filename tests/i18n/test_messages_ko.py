"""Messages written in Python (import errors, service rules, forms, the API's details) in Korean: they still
name the file, line and field exactly, and none of them breaks when its placeholders are filled in."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import translation
from rest_framework.test import APIClient

from judging.imports import parse
from judging.models import Judgment, Membership, Pair, Query, System
from judging.services import ImportRefused, membership_remove, queries_import, run_import
from tests.data import DOCS, RUN_BM25, TOPICS


@pytest.fixture(autouse=True)
def korean(settings):
    """Korean for requests (the default language and the browser's Accept-Language) and for code under
    translation.override("ko")."""
    settings.LANGUAGE_CODE = "ko"


def login(user) -> Client:
    client = Client(HTTP_ACCEPT_LANGUAGE="ko")
    client.force_login(user)
    return client


def api_as(user) -> APIClient:
    client = APIClient(HTTP_ACCEPT_LANGUAGE="ko")
    client.force_authenticate(user)
    return client


def page_upload(client, campaign, kind, name, content):
    data = {"kind": kind, f"{kind}-kind": kind, f"{kind}-file": SimpleUploadedFile(name, content)}
    return client.post(reverse("judging:campaign_upload", args=[campaign.slug]), data)


def text_of(response) -> str:
    return response.content.decode().replace("&#x27;", "'").replace("&quot;", '"')


# --------------------------------------------------------------------------- import errors


@pytest.mark.parametrize(
    ("kind", "name", "content", "message"),
    [
        (
            "run",
            "bad.run",
            b"q1 Q0 d1 1 2.0 bm25\nq1 Q0 d2 two 1.0 bm25\n",
            "bad.run, 2행, 필드 'rank': 정수가 아닙니다: 'two'",
        ),
        ("qrels", "bad.qrels", b"q1 0 d1 1\nq1 0 d2 high\n", "bad.qrels, 2행, 필드 'label': 정수가 아닙니다: 'high'"),
        (
            "run",
            "short.run",
            b"q1 Q0 d1 1 2.0\n",
            "short.run, 1행: 열이 6개(qid Q0 docid rank score tag) 있어야 하는데 5개입니다",
        ),
        (
            "qrels",
            "q.qrels",
            b"q1 0 d1 1\nq1 0 d2 5\n",
            "q.qrels, 2행, 필드 'label': 레이블 5은(는) 캠페인 'demo'의 척도(0, 1, 2)에 없습니다",
        ),
    ],
)
def test_upload_page_says_what_is_wrong_in_korean_naming_file_line_field(campaign, lead, kind, name, content, message):
    response = page_upload(login(lead), campaign, kind, name, content)
    assert response.status_code == 422
    html = text_of(response)
    assert message in html
    assert "아무것도 가져오지 않았습니다" in html
    assert not Query.objects.exists() and not System.objects.exists() and not Judgment.objects.exists()


def test_upload_page_summary_in_korean(campaign, lead):
    client = login(lead)
    assert page_upload(client, campaign, "topics", "t.tsv", TOPICS.encode()).status_code == 302
    assert page_upload(client, campaign, "docs", "d.jsonl", DOCS.encode()).status_code == 302
    response = page_upload(client, campaign, "run", "bm25.run", RUN_BM25.encode())
    page = text_of(client.get(response["Location"]))
    assert "bm25.run: 순위 목록 2건 추가, 0건 갱신, 0건 변경 없음" in page
    assert "쌍 4개를 풀에 추가했습니다" in page


def test_api_upload_error_detail_in_korean_keeps_file_line_field(pooled, lead):
    content = SimpleUploadedFile("bad.run", b"q1 Q0 d1 1 2.0 bm25\nq1 Q0 d2 2 inf bm25\n")
    response = api_as(lead).post(f"/api/campaigns/{pooled.slug}/upload/run/", {"file": content}, format="multipart")
    assert response.status_code == 400
    assert response.json() == {
        "detail": "bad.run, 2행, 필드 'score': 유한한 숫자가 아닙니다: 'inf'",
        "file": "bad.run",
        "line": 2,
        "field": "score",
    }


def test_import_errors_in_korean_name_the_json_type_found():
    data = b'{"qid": "q1", "text": "a"}\n{"qid": ["q2"], "text": "b"}\n'
    with translation.override("ko"), pytest.raises(parse.FormatError) as caught:
        parse.parse_topics(data, filename="t.jsonl")
    assert str(caught.value) == "t.jsonl, 2행, 필드 'qid': 문자열이나 정수여야 하는데 배열입니다"
    assert (caught.value.filename, caught.value.line, caught.value.field) == ("t.jsonl", 2, "qid")


def test_import_refused_for_a_campaign_in_korean_without_line(pooled):
    with translation.override("ko"), pytest.raises(ImportRefused) as caught:
        run_import(campaign=pooled, data=b"q1 Q0 d9 1 3.0 bm25\n", filename="bm25-v2.run")
    assert str(caught.value) == "bm25-v2.run: 시스템 'bm25'에는 캠페인 'demo'에 이미 다른 런이 있습니다"
    # what to do about it, in the words of the interface: the upload page's checkbox, a flag, a request field
    with translation.override("ko"):
        form = caught.value.explained("form")
        assert form.endswith("; 덮어쓰려면 “같은 시스템의 다른 런을 교체”에 체크하고 파일을 다시 올리세요")
        assert caught.value.explained("command").endswith("; 덮어쓰려면 --replace를 주세요")
        assert caught.value.explained("api").endswith("; 덮어쓰려면 파일과 함께 replace=true를 보내세요")


def test_the_same_error_stays_english_without_a_language(campaign):
    with translation.override("en"), pytest.raises(ImportRefused) as caught:
        queries_import(campaign=campaign, data=b"q1\n", filename="t.tsv")
    assert str(caught.value) == (
        "t.tsv, line 1: expected 2 to 4 tab-separated columns (qid, text[, description[, tags]]), found 1"
    )


# --------------------------------------------------------------------------- the last lead


LAST_LEAD_KO = "캠페인에는 리드가 한 명 이상 있어야 합니다. 먼저 다른 리드를 추가하세요."


def test_removing_the_last_lead_is_refused_in_korean(campaign, lead):
    with translation.override("ko"), pytest.raises(ValidationError) as caught:
        membership_remove(campaign=campaign, user=lead)
    assert caught.value.messages == [LAST_LEAD_KO]
    assert Membership.objects.filter(campaign=campaign, user=lead, role="lead").exists()


def test_members_page_refuses_to_remove_the_last_lead_in_korean(campaign, lead):
    url = reverse("judging:campaign_members", args=[campaign.slug])
    response = login(lead).post(url, {"action": "remove", "user": lead.id, "confirm": "1"}, follow=True)
    assert LAST_LEAD_KO in text_of(response)
    assert Membership.objects.filter(campaign=campaign, user=lead, role="lead").exists()


def test_api_refuses_to_remove_the_last_lead_in_korean(campaign, lead):
    response = api_as(lead).delete(f"/api/campaigns/{campaign.slug}/members/{lead.username}/")
    assert response.status_code == 400
    assert response.json() == {"non_field_errors": [LAST_LEAD_KO]}


# --------------------------------------------------------------------------- forms and other messages


def test_members_form_error_in_korean(campaign, lead):
    url = reverse("judging:campaign_members", args=[campaign.slug])
    response = login(lead).post(url, {"action": "bulk", "people": "", "role": "annotator"})
    assert response.status_code == 422
    html = text_of(response)
    assert "사용자 이름을 하나 이상 붙여 넣거나 CSV 파일을 고르세요." in html
    assert "사람 목록(한 줄에 한 명)" in html  # the form's own labels too


def test_members_bulk_list_error_names_the_line_in_korean(campaign, lead):
    url = reverse("judging:campaign_members", args=[campaign.slug])
    response = login(lead).post(url, {"action": "bulk", "people": "dave\ndave", "role": "annotator"})
    assert response.status_code == 422
    assert "목록, 2행: 'dave'이(가) 두 번 나옵니다(1행에도 있음)" in text_of(response)


def test_role_change_message_names_the_role_in_korean(campaign, lead, annotator):
    url = reverse("judging:campaign_members", args=[campaign.slug])
    response = login(lead).post(url, {"action": "role", "user": annotator.id, "role": "lead"}, follow=True)
    assert "ann 님의 역할이 이제 리드입니다." in text_of(response)


def test_api_judgment_errors_in_korean(pooled, annotator):
    pair = Pair.objects.filter(campaign=pooled, pooled=True).first()
    response = api_as(annotator).post("/api/judgments/", {"pair": pair.public_id, "grade": 7}, format="json")
    assert response.status_code == 400
    assert response.json() == {"grade": ["7은(는) 이 캠페인의 척도(0, 1, 2)에 없습니다"]}
    response = api_as(annotator).post(
        "/api/judgments/", {"campaign": "demo", "qid": "q1", "docid": "nope", "grade": 1}, format="json"
    )
    assert response.json() == {"docid": ["캠페인 'demo'에 문서 'nope'이(가) 없습니다."]}


def test_api_lead_only_action_refused_in_korean(pooled, annotator):
    response = api_as(annotator).get(f"/api/campaigns/{pooled.slug}/qrels/")
    assert response.status_code == 403
    assert response.json() == {"detail": "캠페인 'demo'의 리드만 할 수 있는 작업입니다: 레이블 내보내기."}


@pytest.mark.parametrize(
    ("url", "detail"),
    [
        ("/api/campaigns/nope/", "캠페인을(를) 찾을 수 없습니다."),
        ("/api/queries/999999/", "질의을(를) 찾을 수 없습니다."),
        ("/api/documents/999999/", "문서을(를) 찾을 수 없습니다."),
        ("/api/judgments/999999/", "판정을(를) 찾을 수 없습니다."),
    ],
)
def test_api_not_found_in_korean(pooled, lead, url, detail):
    response = api_as(lead).get(url)
    assert response.status_code == 404
    assert response.json() == {"detail": detail}


def test_api_not_found_in_english(pooled, lead, settings):
    settings.LANGUAGE_CODE = "en"
    client = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    client.force_authenticate(lead)
    assert client.get("/api/queries/999999/").json() == {"detail": "No such query."}
    assert client.get("/api/campaigns/nope/").json() == {"detail": "No such campaign."}
    assert client.get("/api/campaigns/nope/qrels/").json() == {"detail": "No such campaign."}


def test_members_page_asks_before_removing_in_korean(campaign, lead, annotator):
    url = reverse("judging:campaign_members", args=[campaign.slug])
    html = text_of(login(lead).post(url, {"action": "remove", "user": annotator.id}))
    assert "ann 님을 이 캠페인에서 제거할까요?" in html and "판정은 그대로 남고" in html
    assert Membership.objects.filter(campaign=campaign, user=annotator).exists()
