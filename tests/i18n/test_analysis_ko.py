"""The analysis pages in Korean: leaderboard, trust, agreement, offline vs online and a chart, with measure values
still printed as trec_eval prints them (a dot and fixed digits).

They read the catalog the app ships (locale/ko/LC_MESSAGES, compiled at setup), not one area's part of it. The
requests both activate Korean and send ``Accept-Language: ko`` (what LocaleMiddleware reads).
"""

import re

import pytest
from django.urls import reverse
from django.utils import translation

from judging.models import Pair
from judging.scoring import leaderboard_data, trust
from judging.services import judgment_record
from judging.services.online import online_import


@pytest.fixture
def korean(settings):
    """Korean active."""
    trust.caches_clear()
    with translation.override("ko"):
        yield
    trust.caches_clear()


@pytest.fixture
def campaign(tiny, annotator, lead):
    """tiny (query q4 still unlabelled) with two people grading q1's documents and online figures of its systems."""
    grades = {"d1": 2, "d2": 0, "d3": 1}
    for user in (annotator, lead):
        for docid, grade in grades.items():
            pair = Pair.objects.get(campaign=tiny, query__qid="q1", document__docid=docid)
            judgment_record(pair=pair, annotator=user, grade=grade)
    online_import(
        campaign=tiny,
        data=b"system,metric,value\nalpha,ctr,0.31\nbeta,ctr,0.29\n<em>gamma</em>,ctr,0.12\n",
        filename="online.csv",
    )
    return tiny


def page(client, name, *args, **query):
    from urllib.parse import urlencode

    url = reverse(f"judging:{name}", args=["tiny", *args])
    response = client.get(f"{url}?{urlencode(query)}" if query else url, HTTP_ACCEPT_LANGUAGE="ko")
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


def assert_no_english(html, *sentences):
    for sentence in sentences:
        assert sentence not in html, sentence


def test_leaderboard_in_korean_keeps_trec_eval_numbers(as_lead, campaign, korean):
    html = page(as_lead, "leaderboard", measure="P", k=3)
    assert "<h1>리더보드</h1>" in html
    assert re.search(r"남은 미판정 쌍 <strong>\d+</strong>개가 P@3 순위를 아직 바꿀 수 있습니다", html)
    assert "그때 점수가 매겨질 질의 3개에 대한 것입니다" in html
    assert re.search(r"시스템은 3개로, 고른 상위 3개보다 많지 않습니다\. 판정을 (멈춰도 됩니다|계속하세요)\.", html)
    assert "어떤 차이가 진짜인가?" in html and "판정 진행 상황" in html
    assert re.search(r'<span class="lb-badge (settled|open|likely|even)"[^>]*>(확정|미정|유력|동률)', html)
    # abbreviations stay, their long names are Korean
    assert 'title="P@3: 정밀도: 상위 3개 중 적합 문서의 비율">P@3</th>' in html
    assert 'title="MRR: 평균 역순위 (MRR): 첫 적합 문서 순위의 역수 평균">MRR</th>' in html
    assert_no_english(
        html,
        "unjudged pairs left can still change the ranking",
        "Which differences are real?",
        "Updates every 5 s",
        "queries have labels and are scored",
        "Judging progress",
    )
    # every measure value as trec_eval prints it: dot decimal, four digits
    data = leaderboard_data(campaign=campaign, k=3)
    for system in data["systems"]:
        for name in ("P@3", "MAP", "nDCG@3"):
            assert f">{system['measures'][name]:.4f}<" in html, (system["name"], name)


def test_trust_page_in_korean(as_lead, campaign, korean):
    html = page(as_lead, "leaderboard_trust", measure="P", k=3)
    texts = ("판정을 멈춰도 될까?", "풀 편향", "모든 측정의 범위", "매크로 P@3", "매크로 평균은 모든 질의에")
    for text in texts:
        assert text in html, text
    assert_no_english(html, "Can we stop judging?", "Pool bias", "Macro averages give every query the same weight")
    assert re.search(r'<td class="num"><strong>0\.\d{4}</strong></td>', html)


def test_agreement_page_in_korean(as_lead, campaign, korean):
    html = page(as_lead, "agreement")
    for text in ("<h1>일치도</h1>", "단순 일치율", "판정자 두 명 사이", "집계 정책", "같은 등급"):
        assert text in html, text
    assert_no_english(html, "Raw agreement", "Between two annotators", "Switch the policy")


def test_online_page_in_korean(as_lead, campaign, korean):
    html = page(as_lead, "online")
    assert "<h1>오프라인 대 온라인</h1>" in html and "요약" in html
    # the verdict on which measure predicts the online metric, and the caveat of three systems
    verdict = r"<li>[^<]+: ctr 지표와 (가장 잘 일치하는 측정|시스템 순서가 정확히 일치) \(켄달 타우 [+-]\d\.\d\d"
    assert re.search(verdict, html)
    assert "시스템이 적습니다." in html
    assert_no_english(html, "agrees best with", "orders the systems exactly as", "Few systems.")


def test_chart_in_korean(as_lead, campaign, korean):
    svg = page(as_lead, "leaderboard_chart", "bars", measure="P", k=3)
    assert "<title>시스템별 P@3</title>" in svg and "질의 평균" in svg
    assert_no_english(svg, "per system", "mean over queries")
    alpha = next(s for s in leaderboard_data(campaign=campaign, k=3)["systems"] if s["name"] == "alpha")
    assert f"alpha: P@3 = {alpha['measures']['P@3']:.4f}" in svg
    progress = page(as_lead, "leaderboard_chart", "progress")
    assert "판정 진행 상황" in progress and "Judging progress" not in progress


def test_unknown_measure_refused_in_korean(as_lead, campaign, korean):
    response = as_lead.get(
        reverse("judging:leaderboard", args=["tiny"]), {"measure": "NDCG"}, HTTP_ACCEPT_LANGUAGE="ko"
    )
    html = response.content.decode()
    assert response.status_code == 400 and "알 수 없는 측정" in html
    assert_no_english(html, "unknown measure")
