"""A lead's campaign pages: honest empty states, and downloads that are the API's own exports."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from django.test import Client
from django.urls import reverse

from judging.services import documents_import, judgment_record, queries_import, run_import
from tests.data import DOCS, RUN_BM25, RUN_DENSE, TOPICS


@pytest.fixture
def pooled(campaign):
    queries_import(campaign=campaign, data=TOPICS.encode(), filename="t.tsv")
    documents_import(campaign=campaign, data=DOCS.encode(), filename="d.jsonl")
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    run_import(campaign=campaign, data=RUN_DENSE.encode(), filename="dense.run")
    return campaign


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def judge(campaign, user, qid, docid, grade, **extra):
    pair = campaign.pairs.get(query__qid=qid, document__docid=docid)
    judgment_record(pair=pair, annotator=user, grade=grade, **extra)


def test_empty_campaign_says_what_to_do_next(campaign, lead, annotator):
    html = login(lead).get(reverse("judging:campaign_detail", args=[campaign.slug])).content.decode()
    assert "Campaign complete" not in html and "100%" not in html
    assert "Getting this campaign ready" in html
    for step in (
        "Import the queries",
        "Import the documents",
        "Import the systems",
        "Add annotators",
        "Judge the pool",
    ):
        assert step in html
    assert "Nothing to judge yet" in html
    html = login(annotator).get(reverse("judging:campaign_detail", args=[campaign.slug])).content.decode()
    assert "Nothing to judge yet" in html and "Start judging" not in html and "Getting this campaign" not in html


def test_checklist_disappears_once_everything_is_done(pooled, lead, annotator):
    url = reverse("judging:campaign_detail", args=[pooled.slug])
    html = login(lead).get(url).content.decode()
    assert "Getting this campaign ready" in html and "Campaign complete</dt><dd>0%" in html
    judge(pooled, annotator, "q1", "d1", 2)
    assert "Getting this campaign ready" not in login(lead).get(url).content.decode()


def test_judge_page_with_empty_pool_is_not_complete(campaign, annotator):
    html = login(annotator).get(reverse("judging:judge", args=[campaign.slug])).content.decode()
    assert "100% complete" not in html and "100%" not in html


def test_leaderboard_shows_no_best_with_one_scored_query(pooled, lead, annotator):
    judge(pooled, annotator, "q1", "d1", 2)
    client = login(lead)
    html = client.get(reverse("judging:leaderboard", args=[pooled.slug])).content.decode()
    assert "lb-badge best" not in html
    assert "need at least 2 queries with labels (1 so far)" in html
    sig = client.get(reverse("judging:leaderboard_significance", args=[pooled.slug])).content.decode()
    assert "Significance tests need at least two queries with labels" in sig
    judge(pooled, annotator, "q2", "d4", 1)
    html = client.get(reverse("judging:leaderboard", args=[pooled.slug])).content.decode()
    assert "lb-badge best" in html


def test_leaderboard_csv_is_the_json_as_a_table(pooled, lead, annotator):
    judge(pooled, annotator, "q1", "d1", 2)
    judge(pooled, annotator, "q2", "d2", 1)
    client = login(lead)
    url = reverse("api:campaign-leaderboard", args=[pooled.slug])
    data = client.get(url, {"k": 2, "gain": "exponential"}).json()
    response = client.get(url, {"k": 2, "gain": "exponential", "format": "csv"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert 'filename="demo-leaderboard-k2-exponential-t1.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["system"] for r in rows] == [s["name"] for s in data["systems"]]
    assert list(rows[0])[0] == "system" and "nDCG@2" in rows[0] and "MAP" in rows[0]
    for row, system in zip(rows, data["systems"], strict=True):
        for measure, value in system["measures"].items():
            assert float(row[measure]) == pytest.approx(value, abs=1e-15)
        assert row["queries"] == "2"


def test_per_query_csv_is_the_per_query_json_as_rows(pooled, lead, annotator):
    """Issue 45: ``?per_query=true&format=csv`` gives one row per system and scored query, in the JSON's orders,
    with the values the JSON carries (full precision); the download says what it is."""
    judge(pooled, annotator, "q1", "d1", 2)
    judge(pooled, annotator, "q2", "d2", 1)
    client = login(lead)
    url = reverse("api:campaign-leaderboard", args=[pooled.slug])
    data = client.get(url, {"k": 2, "per_query": "true"}).json()
    response = client.get(url, {"k": 2, "per_query": "true", "format": "csv"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert 'filename="demo-per-query-k2-linear-t1.csv"' in response["Content-Disposition"]
    text = b"".join(response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    expected = [(s["name"], qid, values) for s in data["systems"] for qid, values in s["per_query"].items()]
    assert [(r["system"], r["qid"]) for r in rows] == [(name, qid) for name, qid, _ in expected]
    assert list(rows[0]) == ["system", "qid", *data["systems"][0]["measures"]]
    for row, (_name, _qid, values) in zip(rows, expected, strict=True):
        assert {m: float(row[m]) for m in values} == values  # the same floats, not rounded
    bom = client.get(url, {"k": 2, "per_query": "true", "format": "csv", "bom": "1"})
    assert b"".join(bom.streaming_content).decode() == "\ufeff" + text
    # without per_query the CSV stays one row per system
    means = list(csv.DictReader(io.StringIO(client.get(url, {"k": 2, "format": "csv"}).content.decode())))
    assert [r["system"] for r in means] == [s["name"] for s in data["systems"]] and "qid" not in means[0]


def test_per_query_csv_of_prediction_powered_estimates_is_refused(pooled, lead):
    from judging.services.model_judge import model_judge_get_or_create

    model_judge_get_or_create(name="bot", campaign=pooled)
    url = reverse("api:campaign-leaderboard", args=[pooled.slug])
    response = login(lead).get(url, {"labels": "ppi:bot", "per_query": "true", "format": "csv"})
    assert response.status_code == 400 and "no per-query values" in response.json()["per_query"][0]


def test_leaderboard_csv_bad_parameter_is_a_json_error(pooled, lead):
    response = login(lead).get(reverse("api:campaign-leaderboard", args=[pooled.slug]), {"k": 0, "format": "csv"})
    assert response.status_code == 400 and "k" in response.json()


def test_leaderboard_csv_refused_to_annotators(pooled, annotator):
    url = reverse("api:campaign-leaderboard", args=[pooled.slug])
    assert login(annotator).get(url, {"format": "csv"}).status_code == 403


def test_campaign_page_downloads_every_export(pooled, lead, annotator):
    judge(pooled, annotator, "q1", "d1", 2)
    judgment_record(
        pair=pooled.pairs.get(query__qid="q1", document__docid="d2"),
        annotator=annotator,
        grade=None,
        unsure=True,
        tentative_grade=1,
        note="cotton, not wool?",
    )
    client = login(lead)
    html = client.get(reverse("judging:campaign_detail", args=[pooled.slug])).content.decode()
    links = dict.fromkeys(re.findall(r'href="(/api/[^"]+)"[^>]*download', html.replace("&amp;", "&")))
    # qrels, judgments CSV and JSONL, leaderboard CSV, per-query CSV, the three CSVs again for Excel (bom=1), two runs
    assert len(links) == 10
    bodies = {}
    for link in links:
        response = client.get(link)
        assert response.status_code == 200, link
        assert "attachment" in response["Content-Disposition"], link
        bodies[link] = b"".join(response.streaming_content if response.streaming else [response.content]).decode()
    qrels = next(b for link, b in bodies.items() if "/qrels/" in link)
    assert qrels == "q1 0 d1 2\n"
    jsonl = next(b for link, b in bodies.items() if "format=jsonl" in link)
    rows = [json.loads(line) for line in jsonl.splitlines()]
    assert {(r["docid"], r["unsure"], r["note"]) for r in rows} == {
        ("d1", False, ""),
        ("d2", True, "cotton, not wool?"),
    }
    judgments_csv = next(b for link, b in bodies.items() if "format=csv" in link and "judgments" in link)
    assert "cotton, not wool?" in judgments_csv and ",true," in judgments_csv
    per_query = next(b for link, b in bodies.items() if "per_query=true" in link and "bom" not in link)
    assert per_query.splitlines()[0].startswith("system,qid,P@10") and ",q1," in per_query
    runs = sorted(b for link, b in bodies.items() if "/systems/" in link)
    assert runs[0].startswith("q1 Q0 d1 1 9.5") or runs[1].startswith("q1 Q0 d1 1 9.5")


def test_leaderboard_page_offers_csv_with_its_settings(pooled, lead):
    html = login(lead).get(reverse("judging:leaderboard", args=[pooled.slug]), {"k": 5}).content.decode()
    assert re.search(r'href="/api/campaigns/demo/leaderboard/\?k=5&amp;format=csv"', html)
    assert "/api/systems/" in html and "/api/campaigns/demo/qrels/" in html


def test_review_decision_updates_the_queue_counters(pooled, lead, annotator):
    judgment_record(
        pair=pooled.pairs.get(query__qid="q1", document__docid="d2"), annotator=annotator, grade=None, unsure=True
    )
    client = login(lead)
    page = client.get(reverse("judging:review", args=[pooled.slug])).content.decode()
    assert re.search(r'id="rv-count-unsure">1<', page)
    pair = pooled.pairs.get(query__qid="q1", document__docid="d2")
    response = client.post(
        reverse("judging:review_decide", args=[pooled.slug, pair.id]), {"grade": 1}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert re.search(r'id="rv-count-unsure" hx-swap-oob="true">0<', html)
    assert re.search(r'id="rv-count-all" hx-swap-oob="true">0<', html)
    assert re.search(r'id="rv-count-decided" hx-swap-oob="true">1<', html)


@pytest.mark.parametrize(("done", "goal"), [(9, 9), (8, 9), (3, 9)])
def test_progress_chart_count_label_never_sits_on_the_target(done, goal):
    from datetime import UTC, datetime, timedelta

    from judging.charts import progress_chart

    start = datetime(2026, 1, 1, tzinfo=UTC)
    svg = str(progress_chart([start, start + timedelta(hours=1)], [1, done], goal=goal, bucket="hour"))
    target_y = float(re.search(r'y="([\d.]+)"[^>]*>target', svg).group(1))
    count_y = float(re.search(r'y="([\d.]+)"[^>]*>' + str(done) + " judgments", svg).group(1))
    assert abs(target_y - count_y) >= 14


@pytest.mark.parametrize(("people", "model", "goal"), [(520, 635, 1270), (516, 635, 1270), (600, 600, 610), (5, 0, 0)])
def test_progress_chart_labels_at_the_right_edge_never_overlap(people, model, goal):
    """People's count, the model judges' count and the target each keep 14 px from the others (the demo's 520
    people and 635 model judgments ended 11 px apart, and the model's label was moved onto the people's)."""
    from datetime import UTC, datetime, timedelta

    from judging.charts import progress_chart

    start = datetime(2026, 1, 1, tzinfo=UTC)
    times = [start, start + timedelta(hours=1)]
    svg = str(progress_chart(times, [1, people], model=[0, model] if model else None, goal=goal or None, bucket="hour"))
    baselines = [
        float(y)
        for y in re.findall(r'<text x="[\d.]+" y="([\d.]+)" text-anchor="end"[^>]*>[^<]*(?:judgment|target)', svg)
    ]
    assert len(baselines) == 1 + bool(model) + bool(goal), svg
    gaps = [abs(a - b) for i, a in enumerate(baselines) for b in baselines[i + 1 :]]
    assert all(gap >= 14 for gap in gaps), (baselines, svg)


def test_successful_upload_is_one_message(campaign, lead):
    from django.core.files.uploadedfile import SimpleUploadedFile

    url = reverse("judging:campaign_upload", args=[campaign.slug])
    upload = SimpleUploadedFile("bm25.run", RUN_BM25.encode())
    page = login(lead).post(url, {"kind": "run", "run-kind": "run", "run-file": upload}, follow=True)
    html = page.content.decode()
    assert html.count('class="message success"') == 1, html


def test_guidelines_grades_and_query_descriptions_render_markdown(pooled, lead, annotator):
    """Headings, lists, emphasis, links and quoted examples as HTML wherever an annotator reads them;
    raw HTML stays text."""
    pooled.guidelines = "# What counts\n\n- a **size** match\n\n<script>window.__x = 1</script>"
    pooled.save()
    pooled.grades.filter(value=2).update(description="*Exactly* what was asked", examples="> merino beanie -> 2")
    pooled.queries.update(description="Wool, see [the guide](https://example.org/wool)")
    judge_page = login(annotator).get(reverse("judging:judge", args=[pooled.slug])).content.decode()
    overview = login(lead).get(reverse("judging:campaign_detail", args=[pooled.slug])).content.decode()
    for html in (judge_page, overview):
        assert "<h3>What counts</h3>" in html and "<li>a <strong>size</strong> match</li>" in html
        assert "<em>Exactly</em> what was asked" in html and "<blockquote>" in html
        assert "<script>window.__x" not in html and "&lt;script&gt;window.__x = 1&lt;/script&gt;" in html
    assert '<a href="https://example.org/wool" rel="noopener noreferrer nofollow">the guide</a>' in judge_page


def test_imported_qrels_alone_neither_judge_the_pool_nor_complete_the_campaign(db, lead, make_user):
    """Right after a qrels import covering the whole pool (redundancy 1, no annotator yet), the checklist does
    not tick "Judge the pool", the campaign is 0% complete, and Progress shows the people's work and the
    imported labels apart, the source named as such (never "no longer a member")."""
    from judging.services import campaign_create, membership_add, qrels_import

    campaign = campaign_create(slug="trec", name="TREC", pool_depth=2, redundancy=1)
    membership_add(campaign=campaign, user=lead, role="lead")
    queries_import(campaign=campaign, data=TOPICS.encode(), filename="t.tsv")
    documents_import(campaign=campaign, data=DOCS.encode(), filename="d.jsonl")
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    pooled = list(campaign.pairs.filter(pooled=True).values_list("query__qid", "document__docid"))
    qrels = "".join(f"{q} 0 {d} 1\n" for q, d in pooled)
    qrels_import(campaign=campaign, data=qrels.encode(), filename="nist.qrels", annotator="nist", imported_by=lead)
    browser = login(lead)
    page = browser.get(reverse("judging:campaign_detail", args=[campaign.slug])).content.decode()
    step = re.search(r'<li class="(done)?">\s*<span class="check"[^>]*>(.)</span>\s*<a[^>]*>Judge the pool', page)
    assert step and step.group(2) == "○", page  # not ticked, still a link to the judging page
    assert "Campaign complete</dt><dd>0%" in page
    assert f"Pairs with imported labels</dt><dd>{len(pooled)}" in page
    progress = browser.get(reverse("judging:campaign_progress", args=[campaign.slug])).content.decode()
    assert "Judged by people</dt><dd>0<" in progress
    assert f"{len(pooled)} labels were imported from files (qrels)" in progress
    row = re.search(r"<td>nist</td>\s*<td>(.*?)</td>", progress).group(1)
    assert "imported labels (qrels)" in row and "no longer a member" not in progress

    # A person's first judgment: the pool is being judged now.
    person = make_user("pat")
    membership_add(campaign=campaign, user=person, role="annotator")
    judge(campaign, person, *pooled[0], 2)
    page = browser.get(reverse("judging:campaign_detail", args=[campaign.slug])).content.decode()
    assert "Getting this campaign ready" not in page  # every step done, "Judge the pool" by a person
    assert "Campaign complete</dt><dd>" in page and "Campaign complete</dt><dd>0%" not in page
    progress = browser.get(reverse("judging:campaign_progress", args=[campaign.slug])).content.decode()
    assert "Judged by people</dt><dd>1<" in progress


def test_judging_progress_draws_people_and_model_judges_apart_on_the_day_they_judged(pooled, lead, annotator):
    """Issue 42 item 3: a model judge's answers and imported labels are not people's judgments; the line of
    people's judgments rises on the day they were made, not on the empty day after the previous ones."""
    from datetime import UTC, datetime

    from judging.models import Judgment
    from judging.scoring import judging_timeline
    from judging.services import qrels_import
    from judging.services.model_judge import model_judge_get_or_create

    bot = model_judge_get_or_create(name="bot", campaign=pooled)
    judge(pooled, annotator, "q1", "d1", 2)
    for qid, docid, grade in (("q1", "d2", 0), ("q1", "d3", 1), ("q2", "d4", 2)):
        judge(pooled, bot, qid, docid, grade)
    qrels_import(campaign=pooled, data=b"q2 0 d2 1\nq2 0 d4 2\n", filename="old.qrels", annotator="trec-2019")
    Judgment.objects.filter(annotator=bot).update(created_at=datetime(2026, 3, 1, 10, tzinfo=UTC))
    Judgment.objects.filter(annotator=annotator).update(created_at=datetime(2026, 3, 5, 10, tzinfo=UTC))
    Judgment.objects.filter(annotator__username="trec-2019").update(created_at=datetime(2026, 3, 9, 10, tzinfo=UTC))

    timeline = judging_timeline(pooled)
    assert timeline.bucket == "day" and [t.day for t in timeline.times] == [1, 5]
    assert timeline.cumulative == [0, 1] and timeline.model_cumulative == [3, 3] and timeline.imported == 2

    html = login(lead).get(reverse("judging:leaderboard_pictures", args=[pooled.slug])).content.decode()
    assert "1 judgment by people" in html and "3 model judgments" in html
    assert "2 imported labels are not drawn" in html
    assert "6 judgments" not in html


def test_progress_line_rises_on_the_day_of_the_judgments():
    from datetime import UTC, datetime

    from judging.charts import progress_chart

    days = [datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 5, tzinfo=UTC)]
    svg = str(progress_chart(days, [1, 3], bucket="day"))
    line = re.search(r'<path d="([^"]+)" class="ch-line"/>', svg).group(1)
    # plot from x=56 to x=624 over five days: 3 March 5 starts at 56 + 568 * 4/5 = 510.4
    assert re.search(r"H510\.4V", line), line
    assert "H169.6V" not in line  # the end of 1 March: no judgment was made on 2 March
    assert "ch-model" not in svg  # no model judge: no second line
