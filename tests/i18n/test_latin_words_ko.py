"""No English on Korean pages: the pages a lead and an annotator read most, rendered in Korean, hold no
Latin-script word beyond what stays as written in every language (system names, qids and docids, measure
names, file formats, keys, and what users typed or imported)."""

import re
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import translation

from judging import selectors
from judging.models import Pair
from judging.scoring import trust
from judging.services import (
    campaign_create,
    documents_import,
    judgment_record,
    membership_add,
    queries_import,
    run_import,
)

# Words that stay as they are in Korean text: measure names (as trec_eval and the API write them), file formats
# and encodings, the field names of the file formats, keys, units, tests and the authors cited for a method,
# and the language switcher's "English" (each language named in itself).
ALLOWED = {
    *("nDCG", "MAP", "MRR", "bpref", "P", "R", "F1", "Hit", "Judged", "ILD", "Coverage", "AP", "RR", "DCG"),
    *("API", "CSV", "JSON", "JSONL", "TSV", "TREC", "SVG", "qrels", "Qrels", "trec_eval", "HTML", "URL", "Markdown"),
    *("UTF-8", "BOM", "ASCII", "UTC", "qid", "docid", "Q0", "ID", "PPI", "mtc", "RelJudge"),
    *("Enter", "Esc", "Tab", "Shift", "Space", "Ctrl", "Alt", "Backspace"),
    *("ms", "min", "GB", "MB", "KB"),
    *("Holm", "Tukey", "HSD", "Carterette", "Losada", "MM-NS", "Allan", "Sitaraman", "Aslam", "Pavlu", "Yilmaz"),
    "English",
}
# What this campaign's users typed or imported: names, ids, file names, and the systems' names.
USER_DATA = {"kolead", "koann", "kdemo", "bm25", "dense", "q1", "q2", "d1", "d2", "d3", "d4", "bm25.run", "dense.run"}
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:[@.\-][A-Za-z0-9_]+)*")


class _Text(HTMLParser):
    """The text a reader sees: element text and the title, placeholder, aria-label and alt attributes; not
    scripts, styles, code or keyboard keys."""

    SKIP = {"script", "style", "code", "kbd", "pre"}

    def __init__(self):
        super().__init__()
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skipping += 1
        for name, value in attrs:
            if name in ("title", "placeholder", "aria-label", "alt") and value:
                self.parts.append(value)

    def handle_endtag(self, tag):
        if tag in self.SKIP and self.skipping:
            self.skipping -= 1

    def handle_data(self, data):
        if not self.skipping:
            self.parts.append(data)


def latin_words(html: str) -> set[str]:
    """The Latin-script words of the page's visible text that are not allowed on a Korean page."""
    parser = _Text()
    parser.feed(html)
    text = " ".join(parser.parts)
    text = re.sub(r"https?://\S+|/[\w/.\-?=&]+", " ", text)  # links and paths
    found = set()
    for word in WORD.findall(text):
        # a single letter is a key (g), a command-line flag (-q) or a test's name (t-test)
        if word in ALLOWED or word in USER_DATA or "@" in word or len(word) == 1:
            continue
        found.add(word)
    return found


@pytest.fixture
def korean_campaign(make_user):
    trust.caches_clear()
    lead, annotator = make_user("kolead"), make_user("koann")
    with translation.override("ko"):
        campaign = campaign_create(slug="kdemo", name="한국어 캠페인", lead=lead)
    membership_add(campaign=campaign, user=annotator, role="annotator")
    queries_import(campaign=campaign, data="q1\t겨울 스웨터\nq2\t방수 재킷\n".encode(), filename="t.tsv")
    docs = "".join(f'{{"docid": "d{i}", "title": "문서 {i}", "text": "본문 {i}"}}\n' for i in range(1, 5))
    documents_import(campaign=campaign, data=docs.encode(), filename="d.jsonl")
    run_import(
        campaign=campaign, data=b"q1 Q0 d1 1 3 bm25\nq1 Q0 d2 2 2 bm25\nq2 Q0 d3 1 1 bm25\n", filename="bm25.run"
    )
    run_import(
        campaign=campaign, data=b"q1 Q0 d2 1 3 dense\nq1 Q0 d1 2 2 dense\nq2 Q0 d4 1 1 dense\n", filename="dense.run"
    )
    for user in (lead, annotator):
        for docid, grade in (("d1", 2), ("d2", 0)):
            judgment_record(
                pair=Pair.objects.get(campaign=campaign, document__docid=docid), annotator=user, grade=grade
            )
    judgment_record(
        pair=Pair.objects.get(campaign=campaign, document__docid="d3"),
        annotator=annotator,
        unsure=True,
        tentative_grade=1,
    )
    yield campaign, lead, annotator
    trust.caches_clear()


def korean_page(user, name, *args, method="get", data=None):
    client = Client()
    client.force_login(user)
    url = reverse(f"judging:{name}", args=["kdemo", *args])
    response = getattr(client, method)(
        url, data or {}, HTTP_ACCEPT_LANGUAGE="ko", HTTP_HX_REQUEST="true" if method == "post" else ""
    )
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


@pytest.mark.parametrize("name", ["campaign_detail", "leaderboard", "campaign_settings", "campaign_progress", "review"])
def test_lead_pages_in_korean_hold_no_english_words(korean_campaign, name):
    _, lead, _ = korean_campaign
    assert latin_words(korean_page(lead, name)) == set()


def test_judging_page_in_korean_holds_no_english_words(korean_campaign):
    _, _, annotator = korean_campaign
    html = korean_page(annotator, "judge")
    assert latin_words(html) == set()
    assert "(잠정)" in html  # the unsure mode's word, from the page, not from CSS


def test_review_decision_names_the_grade_in_korean(korean_campaign):
    campaign, lead, _ = korean_campaign
    pair = Pair.objects.get(campaign=campaign, document__docid="d3")
    html = korean_page(lead, "review_decide", pair.id, method="post", data={"grade": 1})
    assert "레이블은 이제 <strong>1 – 부분 적합</strong>" in html
    assert latin_words(html) == set()


def test_settings_of_a_campaign_created_in_korean_show_the_default_grades_in_korean(korean_campaign):
    campaign, lead, _ = korean_campaign
    html = korean_page(lead, "campaign_settings")
    assert 'value="부적합"' in html and "Not relevant" not in html
    # saving the rows as shown keeps the default scale, read in every reader's language
    with translation.override("ko"):
        shown = selectors.scale_rows(campaign=campaign, shown=True)
        assert shown[0]["name"] == "부적합"
        assert selectors.scale_stored(shown) == selectors.scale_rows(campaign=campaign)


def test_no_stylesheet_writes_words():
    from pathlib import Path

    for sheet in Path("static/judging").glob("*.css"):
        for content in re.findall(r"content:\s*\"([^\"]*)\"", sheet.read_text()):
            assert not re.search(r"[A-Za-z]", content), f"{sheet}: content: {content!r} is text no catalog translates"


def test_short_korean_dates_are_zero_padded():
    from datetime import datetime

    from django.utils import formats

    with translation.override("ko"):
        moment = datetime(2026, 12, 6, 9, 5)
        assert formats.date_format(moment, "SHORT_DATETIME_FORMAT") == "2026-12-06 09:05"
        assert formats.date_format(moment, "SHORT_DATE_FORMAT") == "2026-12-06"
