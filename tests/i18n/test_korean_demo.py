"""The Korean demo: load_demo --lang ko builds the shopping-ko campaign through the importers, the same every time."""

import io
import re
import unicodedata
from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction
from django.test import Client

from judging import scoring
from judging.demo import catalogue, catalogue_ko
from judging.models import Adjudication, Campaign, Document, Judgment, JudgmentRevision, Membership, Pair, Query, System
from judging.scoring import leaderboard_data

HANGUL = re.compile("[가-힣]")


def load(*args) -> str:
    out = io.StringIO()
    call_command("load_demo", "--lang", "ko", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture(autouse=True)
def _fresh_score_caches():
    scoring.process_caches_clear()


@pytest.fixture(scope="module")
def demo_output(django_db_setup, django_db_blocker):
    """Load the Korean demo once for this module, in a transaction rolled back after its last test."""
    with django_db_blocker.unblock(), transaction.atomic():
        output = load()
        yield output
        transaction.set_rollback(True)


@pytest.fixture
def shop(demo_output, db) -> Campaign:
    return Campaign.objects.get(slug=catalogue_ko.SLUG)


def snapshot(campaign: Campaign) -> dict:
    """What load_demo writes for the campaign, with ids and timestamps."""
    judgments = Judgment.objects.filter(pair__campaign=campaign)
    return {
        "campaign": list(Campaign.objects.filter(id=campaign.id).values_list("slug", "name", "guidelines")),
        "grades": list(campaign.grades.values_list("value", "name", "description", "examples")),
        "queries": list(campaign.queries.order_by("qid").values_list("qid", "text", "description")),
        "tags": sorted(campaign.queries.values_list("qid", "tags__tag")),
        "documents": list(
            campaign.documents.order_by("docid").values_list("docid", "title", "text", "url", "attributes")
        ),
        "systems": list(System.objects.filter(campaign=campaign).values_list("name", "fingerprint", "entries")),
        "pairs": list(campaign.pairs.values_list("id", "label", "judgment_count", "adjudicated", "pooled")),
        "judgments": list(
            judgments.order_by("id").values_list(
                "id", "annotator__username", "grade__value", "unsure", "tentative_grade__value", "note", "updated_at"
            )
        ),
        "revisions": list(
            JudgmentRevision.objects.filter(judgment__pair__campaign=campaign).values_list("id", "changed_at")
        ),
        "online": list(campaign.online_metrics.order_by("id").values_list("system__name", "metric", "value")),
    }


def test_korean_demo_has_korean_queries_with_descriptions(shop):
    queries = Query.objects.filter(campaign=shop)
    assert queries.count() >= 20
    texts = set(queries.values_list("text", flat=True))
    assert {"야식 배달", "겨울 패딩", "무선 이어폰 노이즈 캔슬링"} <= texts
    for q in queries:
        assert HANGUL.search(q.text) and "적합" in q.description, q.qid
    tags = Counter(t for q in queries for t in q.tags.values_list("tag", flat=True))
    assert {"head", "tail", "패션", "디지털", "식품"} <= set(tags)
    assert HANGUL.search(shop.name) and shop.slug == "shopping-ko"


def test_korean_demo_documents_read_like_product_pages(shop):
    docs = Document.objects.filter(campaign=shop)
    assert docs.count() >= 200
    assert not docs.filter(is_stub=True).exists() and not docs.filter(title="").exists()
    for doc in docs:
        assert unicodedata.is_normalized("NFC", doc.title + doc.text), doc.docid  # the NFD listing too
        assert HANGUL.search(doc.text) and doc.title.startswith("["), doc.docid
    assert docs.filter(text__contains="<script>alert('xss')</script>").exists()  # raw; templates escape it
    titles = Counter(docs.values_list("title", flat=True))
    assert len(titles) >= 150  # generated from brands, categories and attributes, not a handful of templates
    sentences = [d.text.count(". ") + 1 for d in docs.exclude(text__startswith=catalogue_ko.IMPORTED_PREFIX)]
    assert min(sentences) >= 2 and max(sentences) <= 4
    attributes = docs.first().attributes
    assert set(attributes) == {"brand", "category", "colour", "audience"}


def test_korean_demo_leaderboard_orders_the_three_systems(shop):
    data = leaderboard_data(campaign=shop, k=10)
    ndcg = {s["name"]: s["measures"]["nDCG@10"] for s in data["systems"]}
    assert set(ndcg) == set(catalogue_ko.SYSTEMS)
    assert ndcg["hybrid-v3"] > ndcg["bm25-bigram"] > ndcg["keyword-match"]
    assert ndcg["hybrid-v3"] - ndcg["bm25-bigram"] > 0.05 and ndcg["bm25-bigram"] - ndcg["keyword-match"] > 0.05
    assert data["queries"] >= 10


def test_korean_demo_judgments_by_three_annotators_with_unsure_korean_notes(shop):
    judgments = Judgment.objects.filter(pair__campaign=shop)
    per_annotator = Counter(judgments.values_list("annotator__username", flat=True))
    minji, junho, seoyeon = catalogue_ko.ANNOTATORS
    assert per_annotator[minji] >= 100 and per_annotator[junho] >= 100 and per_annotator[seoyeon] >= 20
    unsure = judgments.filter(unsure=True)
    assert unsure.values("annotator").distinct().count() >= 2 and unsure.count() >= 3
    assert all(HANGUL.search(note) for note in unsure.values_list("note", flat=True))
    assert unsure.filter(tentative_grade__isnull=False).exists()
    adjudications = Adjudication.objects.filter(pair__campaign=shop)
    assert adjudications.count() == 2
    assert all(a.decided_by.username == catalogue_ko.LEAD and HANGUL.search(a.note) for a in adjudications)
    roles = dict(Membership.objects.filter(campaign=shop).values_list("user__username", "role"))
    assert roles == {
        "jiwoo": "lead",
        "minji": "annotator",
        "junho": "annotator",
        "seoyeon": "annotator",
        "term-overlap-ko": "annotator",  # the demo's model judge
    }
    model = judgments.filter(annotator__username="term-overlap-ko")
    assert model.count() == Pair.objects.filter(campaign=shop, pooled=True).count()
    assert shop.online_metrics.filter(query__isnull=True).count() == 6  # CTR and conversion per system
    from judging.selectors.online import offline_vs_online

    ndcg = {r["metric"]: r for r in offline_vs_online(campaign=shop)["agreement"] if r["measure"] == "nDCG@10"}
    assert ndcg["ctr"]["kendall_tau"] == 1  # CTR follows quality; on conversion bm25 beats hybrid, one discordance
    assert ndcg["conversion"]["discordant_pairs"] == [["bm25-bigram", "hybrid-v3"]]


def test_korean_demo_scale_and_guidelines_render_as_markdown_on_the_judging_page(shop):
    assert [g["name"] for g in catalogue_ko.SCALE] == ["부적합", "부분 적합", "적합"]
    assert list(shop.grades.order_by("value").values_list("name", flat=True)) == ["부적합", "부분 적합", "적합"]
    browser = Client()
    browser.force_login(shop.memberships.get(user__username="minji").user)
    page = browser.get("/campaigns/shopping-ko/judge/").content.decode()
    levels = {text: int(level) for level, text in re.findall(r"<h([1-6])>([^<]+)</h\1>", page)}
    # the guidelines' ## and ### headings, shifted below the page's own headings by the markdown filter
    section = levels["무엇을 판정하나요"]
    assert levels["등급 기준"] == levels["확신이 없을 때"] == section
    assert levels["2 적합"] == levels["1 부분 적합"] == levels["0 부적합"] == section + 1
    assert "<strong>확신 없음</strong>" in page
    assert "“겨울 패딩” → 구스다운을 넉넉히 넣은 헤비 패딩" in page  # an example of grade 2
    assert "## " not in page  # no raw Markdown left


def test_korean_demo_twice_changes_nothing(shop):
    before = snapshot(shop)
    output = load()
    assert "already exists" in output
    assert snapshot(shop) == before


def test_korean_demo_reset_rebuilds_the_same_campaign(shop):
    def content(campaign):  # what a rebuild must reproduce (ids and timestamps are new)
        snap = snapshot(campaign)
        snap["pairs"] = sorted(campaign.pairs.values_list("query__qid", "document__docid", "label", "pooled"))
        snap["judgments"] = sorted((r[1:6] for r in snap.pop("judgments")), key=lambda r: tuple(str(v) for v in r))
        snap.pop("revisions")
        snap["systems"] = [(name, entries) for name, _, entries in snap["systems"]]  # fingerprints are salted
        return snap

    before = content(shop)
    load("--reset")
    rebuilt = Campaign.objects.get(slug=catalogue_ko.SLUG)
    assert rebuilt.id != shop.id
    assert content(rebuilt) == before


def test_korean_demo_prints_the_korean_logins(demo_output, shop):
    for username, password in catalogue_ko.PASSWORDS.items():
        assert any(line.split()[:2] == [username, password] for line in demo_output.splitlines())
    assert catalogue_ko.NAME in demo_output
    assert "3 systems (bm25-bigram, hybrid-v3, keyword-match)" in demo_output


def test_korean_demo_leaves_the_english_demo_alone(shop):
    assert not Campaign.objects.filter(slug=catalogue.SLUG).exists()  # --lang ko loads only its campaign
    out = io.StringIO()
    call_command("load_demo", stdout=out, stderr=io.StringIO())  # the default is still English
    english = Campaign.objects.get(slug=catalogue.SLUG)
    assert english.name == catalogue.NAME and english.queries.filter(text="wool knit sweater").exists()
    assert Campaign.objects.get(slug=catalogue_ko.SLUG).id == shop.id


def test_load_demo_refuses_an_unknown_language(db):
    with pytest.raises(CommandError, match="invalid choice: 'fr'"):
        call_command("load_demo", "--lang", "fr", stdout=io.StringIO(), stderr=io.StringIO())


def test_josa_follows_the_final_consonant():
    assert catalogue_ko.josa("패딩", "을", "를") == "을"
    assert catalogue_ko.josa("피자", "을", "를") == "를"
    assert catalogue_ko.josa("적합", "으로", "로") == "으로"
    assert catalogue_ko.adjudication_note((), 2) == "검색어의 조건을 모두 충족: 질의 설명에 따라 적합으로 판정합니다."


def test_korean_demo_team_sees_korean_in_an_english_browser(shop):
    """The Korean team's accounts keep Korean as their language: minji logging in from a browser that asks for
    English still gets the judging page in Korean; the superuser's account follows the browser."""
    browser = Client(HTTP_ACCEPT_LANGUAGE="en-US,en;q=0.9")
    browser.force_login(shop.memberships.get(user__username="minji").user)
    page = browser.get("/campaigns/shopping-ko/judge/").content.decode()
    assert '<html lang="ko"' in page and "로그아웃" in page and "Log out" not in page
    admin = Client(HTTP_ACCEPT_LANGUAGE="en-US,en;q=0.9")
    admin.force_login(get_user_model().objects.get(username="admin"))
    home = admin.get("/").content.decode()
    assert '<html lang="en"' in home and "Log out" in home
