"""Korean content survives every export byte for byte, displays in NFC, truncates on syllables and sorts 가나다."""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata

import pytest
from django.test import Client

from judging import scoring
from judging.imports.parse import parse_docs, parse_topics
from judging.models import Document, Judgment, Pair, Query
from judging.services import documents_import, judgment_record, qrels_import, queries_import, run_import
from tests.data import body_of, client_for

BOM = "\ufeff".encode()
TOPICS = "야식-01\t야식 배달\t밤늦게 시켜 먹을 야식\n겨울-02\t겨울 패딩\t한겨울에 입을 따뜻한 패딩\n"
# Korean docids, one of them decomposed (NFD) as a Mac writes file names: identifiers stay byte for byte.
NFD_DOCID = unicodedata.normalize("NFD", "상품-다")
DOCS = "".join(
    json.dumps({"docid": docid, "title": title, "text": text}, ensure_ascii=False) + "\n"
    for docid, title, text in (
        ("상품-가", "[달빛치킨] 순살 후라이드 치킨", "밤 9시 전에 주문하면 오늘 밤 도착합니다."),
        ("상품-나", "[고향족발] 족발 세트", "냉동 택배로 1~2일 뒤 도착합니다."),
        (
            NFD_DOCID,
            *(unicodedata.normalize("NFD", t) for t in ("[노스힐] 구스다운 헤비 패딩", "영하 10도에도 든든합니다.")),
        ),
    )
)
# A Korean system name, in the tag column; scores as the export writes them (repr), so the bytes can match.
RUN = (
    "겨울-02 Q0 상품-가 1 0.5 형태소-bm25\n"
    f"겨울-02 Q0 {NFD_DOCID} 2 0.25 형태소-bm25\n"
    "야식-01 Q0 상품-가 1 2.75 형태소-bm25\n"
    "야식-01 Q0 상품-나 2 1.5 형태소-bm25\n"
)
QRELS = f"겨울-02 0 {NFD_DOCID} 2\n겨울-02 0 상품-가 0\n야식-01 0 상품-가 2\n야식-01 0 상품-나 1\n"
NOTES = {
    ("야식-01", "상품-가"): "=SUM(1+1) 수식처럼 보이는 메모",
    ("야식-01", "상품-나"): "택배라서 부분 적합 — 야식 배달로는 늦습니다.",
    ("겨울-02", NFD_DOCID): "헤비 패딩, 한겨울용 👍",
}


@pytest.fixture(autouse=True)
def _fresh_score_caches():
    scoring.process_caches_clear()


def browser_for(user) -> Client:
    """A logged-in browser session, for the web pages."""
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def korean(campaign, lead, annotator):
    queries_import(campaign=campaign, data=TOPICS.encode(), filename="topics.tsv")
    documents_import(campaign=campaign, data=DOCS.encode(), filename="docs.jsonl")
    run_import(campaign=campaign, data=RUN.encode(), filename="형태소.run")
    qrels_import(campaign=campaign, data=QRELS.encode(), filename="old.qrels", annotator="이전-판정")
    labels = {(q, d): int(label) for q, _, d, label in (line.split() for line in QRELS.splitlines())}
    for (qid, docid), note in NOTES.items():
        # the annotator agrees with the imported labels (or is unsure), so the qrels read back as imported
        pair = Pair.objects.get(campaign=campaign, query__qid=qid, document__docid=docid)
        unsure = docid == NFD_DOCID
        judgment_record(
            pair=pair,
            annotator=annotator,
            grade=None if unsure else labels[qid, docid],
            unsure=unsure,
            tentative_grade=2 if unsure else None,
            note=note,
        )
    return campaign


def test_korean_qrels_and_run_export_byte_exact(korean, lead):
    client = client_for(lead)
    assert body_of(client.get("/api/campaigns/demo/qrels/")) == QRELS.encode()
    system = korean.systems.get()
    assert system.name == "형태소-bm25"
    response = client.get(f"/api/systems/{system.id}/run/")
    assert body_of(response) == RUN.encode()
    # the download keeps the Korean name too (RFC 6266 filename*, which every current browser reads)
    assert response["Content-Disposition"] == "attachment; filename*=utf-8''demo-%ED%98%95%ED%83%9C%EC%86%8C-bm25.run"


def test_korean_judgments_csv_and_jsonl_keep_every_character(korean, lead):
    client = client_for(lead)
    params = {"campaign": "demo", "unsure": "include"}
    jsonl = body_of(client.get("/api/judgments/", {**params, "format": "jsonl"}))
    assert "택배라서 부분 적합".encode() in jsonl  # written as UTF-8, not as \\uXXXX escapes
    rows = [json.loads(line) for line in jsonl.decode().splitlines()]
    mine = {(r["qid"], r["docid"]): r for r in rows if r["annotator"] == "ann"}
    assert {key: r["note"] for key, r in mine.items()} == NOTES
    assert mine["겨울-02", NFD_DOCID]["unsure"] is True and mine["겨울-02", NFD_DOCID]["tentative_grade"] == 2

    plain = body_of(client.get("/api/judgments/", {**params, "format": "csv"}))
    assert not plain.startswith(BOM)
    table = list(csv.DictReader(io.StringIO(plain.decode(), newline="")))
    notes = {(r["qid"], r["docid"]): r["note"] for r in table if r["annotator"] == "ann"}
    # the formula guard still neutralizes a note that starts with "=", and only that one
    assert notes == {**NOTES, ("야식-01", "상품-가"): "'" + NOTES["야식-01", "상품-가"]}
    assert {r["docid"] for r in table} == {"상품-가", "상품-나", NFD_DOCID}  # the NFD docid kept as imported


@pytest.mark.parametrize("on", ["1", "true"])
def test_csv_exports_add_a_bom_only_when_asked(korean, lead, on):
    client = client_for(lead)
    plain = body_of(client.get("/api/judgments/", {"campaign": "demo", "format": "csv", "unsure": "include"}))
    excel = body_of(
        client.get("/api/judgments/", {"campaign": "demo", "format": "csv", "unsure": "include", "bom": on})
    )
    assert excel == BOM + plain
    board = client.get("/api/campaigns/demo/leaderboard/", {"format": "csv"})
    board_excel = client.get("/api/campaigns/demo/leaderboard/", {"format": "csv", "bom": on})
    assert not board.content.startswith(BOM) and board_excel.content == BOM + board.content
    assert "형태소-bm25,".encode() in board.content
    assert body_of(client.get("/api/judgments/", {"campaign": "demo", "format": "csv", "bom": "0"})) == body_of(
        client.get("/api/judgments/", {"campaign": "demo", "format": "csv"})
    )


def test_csv_bom_parameter_refuses_other_values(korean, lead):
    response = client_for(lead).get("/api/judgments/", {"campaign": "demo", "format": "csv", "bom": "maybe"})
    assert response.status_code == 400
    assert "bom" in response.json() and "'maybe'" in response.json()["bom"][0]
    response = client_for(lead).get("/api/campaigns/demo/leaderboard/", {"format": "csv", "bom": "2"})
    assert response.status_code == 400 and "bom" in response.json()


def test_exports_block_links_the_excel_csvs(korean, lead):
    page = browser_for(lead).get("/campaigns/demo/").content.decode()
    assert re.search(r'href="/api/judgments/\?campaign=demo&amp;format=csv&amp;unsure=include&amp;bom=1"', page)
    assert re.search(r'href="/api/campaigns/demo/leaderboard/\?format=csv&amp;bom=1"', page)
    board = browser_for(lead).get("/campaigns/demo/leaderboard/?k=5").content.decode()
    excel = re.search(r'href="(/api/campaigns/demo/leaderboard/\?[^"]*bom=1)"', board).group(1).replace("&amp;", "&")
    assert "k=5" in excel and browser_for(lead).get(excel).content.startswith(BOM)


def test_imported_nfd_text_is_stored_in_nfc_and_found_by_search(korean, lead, annotator):
    nfd_title = unicodedata.normalize("NFD", "[노스힐] 구스다운 헤비 패딩")
    assert nfd_title != "[노스힐] 구스다운 헤비 패딩" and nfd_title in DOCS  # the file really holds NFD
    doc = Document.objects.get(campaign=korean, docid=NFD_DOCID)
    assert doc.title == "[노스힐] 구스다운 헤비 패딩" and unicodedata.is_normalized("NFC", doc.text)
    # re-importing the same NFD file changes nothing
    again = documents_import(campaign=korean, data=DOCS.encode(), filename="docs.jsonl")
    assert "3 unchanged" in " ".join(again.lines())
    # the annotator searches their judgments with what a browser sends (NFC), or pastes NFD: both find it
    for typed in ("헤비 패딩", unicodedata.normalize("NFD", "헤비 패딩")):
        page = browser_for(annotator).get("/campaigns/demo/mine/", {"q": typed}).content.decode()
        assert "[노스힐] 구스다운 헤비 패딩" in page, typed


def test_parse_normalizes_text_but_not_identifiers():
    nfd = unicodedata.normalize("NFD", "겨울 패딩")
    [topic] = parse_topics(f"{unicodedata.normalize('NFD', '겨울')}\t{nfd}\t{nfd}\n".encode(), filename="t.tsv")
    assert (topic.text, topic.description) == ("겨울 패딩", "겨울 패딩")
    assert topic.qid == unicodedata.normalize("NFD", "겨울")
    [doc] = parse_docs(f"d\t{nfd}\t{nfd}\n".encode(), filename="d.tsv")
    assert (doc.title, doc.text) == ("겨울 패딩", "겨울 패딩")


def test_truncated_korean_titles_end_on_a_whole_syllable(campaign, annotator):
    """A long title imported in NFD is cut on the "my judgments" page (truncatechars:90) after whole syllables
    (stored NFC; Django's Truncator counts NFC characters too, so a title stored otherwise would be cut the same)."""
    title = "[노스힐] 여성 구스다운 헤비 롱기장 후드 패딩 " + "한겨울 출퇴근길에도 든든한 따뜻함 " * 5
    docs = json.dumps({"docid": "d1", "title": unicodedata.normalize("NFD", title), "text": "본문"}, ensure_ascii=False)
    queries_import(campaign=campaign, data="q1\t겨울 패딩\n".encode(), filename="t.tsv")
    documents_import(campaign=campaign, data=(docs + "\n").encode(), filename="d.jsonl")
    run_import(campaign=campaign, data=b"q1 Q0 d1 1 1.0 r\n", filename="r.run")
    judgment_record(pair=Pair.objects.get(campaign=campaign), annotator=annotator, grade=2)
    page = browser_for(annotator).get("/campaigns/demo/mine/").content.decode()
    shown = re.search(r"(\[노스힐\][^<]*…)", page).group(1)
    assert shown == title[:89] + "…"
    assert not re.search("[\u1100-\u11ff]", page)  # no lone jamo anywhere: nothing was cut inside a syllable


def test_korean_qids_sort_in_dictionary_order(campaign, lead, annotator):
    """Precomposed Hangul in code point order is 가나다 order: the per-query leaderboard lists qids that way."""
    qids = ["하늘", "가방", "다리", "나무", "마을"]
    queries_import(campaign=campaign, data="".join(f"{q}\t{q} 검색\n" for q in qids).encode(), filename="t.tsv")
    run = "".join(f"{q} Q0 d{i} 1 1.0 r\n" for i, q in enumerate(qids))
    run_import(campaign=campaign, data=run.encode(), filename="r.run")
    for pair in Pair.objects.filter(campaign=campaign):
        judgment_record(pair=pair, annotator=annotator, grade=1)
    page = browser_for(lead).get("/campaigns/demo/leaderboard/queries/").content.decode()
    shown = [q for q in re.findall("|".join(qids), page) if q in qids]
    first_seen = list(dict.fromkeys(shown))
    assert first_seen == ["가방", "나무", "다리", "마을", "하늘"]
    assert list(Query.objects.filter(campaign=campaign).order_by("qid").values_list("qid", flat=True)) == first_seen
    assert Judgment.objects.filter(pair__campaign=campaign).count() == 5
