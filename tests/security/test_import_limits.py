"""Imports refuse values their database column cannot hold (too long, NUL, lone surrogate) and JSON that
Python's parser cannot read, with the usual file/line/field error on every route and on every database."""

from __future__ import annotations

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from judging import formats
from judging.imports import parse
from judging.models import Document, Judgment, Query, System

DEEP = "[" * 100_000 + "]" * 100_000
BIG_INT = "1" * 5_000

# (parser, file name, content, expected str(FormatError))
CASES = [
    # topics
    (
        "topics",
        "t.tsv",
        "q1\tok\n" + "q" * 101 + "\ttext\n",
        "t.tsv, line 2, field 'qid': too long: 101 characters (at most 100)",
    ),
    (
        "topics",
        "t.jsonl",
        '{"qid": "' + "q" * 101 + '", "text": "x"}\n',
        "t.jsonl, line 1, field 'qid': too long: 101 characters (at most 100)",
    ),
    (
        "topics",
        "t.jsonl",
        '{"qid": ' + BIG_INT + ', "text": "x"}\n',
        "t.jsonl, line 1, field 'qid': too long: 5,000 characters (at most 100)",
    ),
    (
        "topics",
        "t.jsonl",
        '{"qid": ' + DEEP + ', "text": "x"}\n',
        "t.jsonl, line 1, field 'qid': invalid JSON: nested too deeply",
    ),
    (
        "topics",
        "t.jsonl",
        '{"qid": "q1", "text": "x", "description": ' + DEEP + "}\n",
        "t.jsonl, line 1, field 'description': invalid JSON: nested too deeply",
    ),
    (
        "topics",
        "t.jsonl",
        '{"qid": "q1", "text": "bad \\ud800 half"}\n',
        "t.jsonl, line 1, field 'text': contains a lone surrogate (U+D800), which is not valid Unicode",
    ),
    (
        "topics",
        "t.jsonl",
        '{"qid": "q\\u0000", "text": "x"}\n',
        "t.jsonl, line 1, field 'qid': contains a NUL character (U+0000)",
    ),
    ("topics", "t.tsv", "q1\tte\x00xt\n", "t.tsv, line 1, field 'text': contains a NUL character (U+0000)"),
    (
        "topics",
        "t.tsv",
        "q1\ttext\tdescri\x00ption\n",
        "t.tsv, line 1, field 'description': contains a NUL character (U+0000)",
    ),
    (
        "topics",
        "t.jsonl",
        '{"qid": "q1", "text": "x", "tags": [' + BIG_INT + "]}\n",
        "t.jsonl, line 1, field 'tags': invalid JSON: an integer of more than 4,300 digits",
    ),
    ("topics", "t.jsonl", DEEP + "\n", "t.jsonl, line 1: invalid JSON: nested too deeply"),
    # documents
    (
        "docs",
        "d.jsonl",
        '{"docid": "d1", "text": "x"}\n{"docid": "' + "d" * 10_240 + '", "text": "x"}\n',
        "d.jsonl, line 2, field 'docid': too long: 10,240 characters (at most 200)",
    ),
    (
        "docs",
        "d.jsonl",
        '{"docid": "d1", "text": "x", "url": "https://e.org/' + "a" * 2_986 + '"}\n',
        "d.jsonl, line 1, field 'url': too long: 3,000 characters (at most 2,000)",
    ),
    (
        "docs",
        "d.jsonl",
        '{"docid": "d1", "title": "a\\u0000b", "text": "x"}\n',
        "d.jsonl, line 1, field 'title': contains a NUL character (U+0000)",
    ),
    (
        "docs",
        "d.jsonl",
        '{"docid": "d1", "text": "\\udfff"}\n',
        "d.jsonl, line 1, field 'text': contains a lone surrogate (U+DFFF), which is not valid Unicode",
    ),
    (
        "docs",
        "d.tsv",
        "d" * 201 + "\ttitle\ttext\n",
        "d.tsv, line 1, field 'docid': too long: 201 characters (at most 200)",
    ),
    ("docs", "d.tsv", "d1\ttitle\tte\x00xt\n", "d.tsv, line 1, field 'text': contains a NUL character (U+0000)"),
    # runs
    (
        "run",
        "r.run",
        "q1 Q0 d1 1 2.0 bm25\nq1 Q0 " + "d" * 10_240 + " 2 1.0 bm25\n",
        "r.run, line 2, field 'docid': too long: 10,240 characters (at most 200)",
    ),
    (
        "run",
        "r.run",
        "q1 Q0 d1 1 2.0 " + "t" * 200 + "\n",
        "r.run, line 1, field 'tag': too long: 200 characters (at most 100)",
    ),
    (
        "run",
        "r.run",
        "q" * 101 + " Q0 d1 1 2.0 bm25\n",
        "r.run, line 1, field 'qid': too long: 101 characters (at most 100)",
    ),
    (
        "run",
        "r.run",
        "q1 Q0 d1 1 2.0 bm25\nq1 Q0 d\x002 2 1.0 bm25\n",
        "r.run, line 2, field 'docid': contains a NUL character (U+0000)",
    ),
    (
        "run",
        "r.tsv",
        "q1\t" + "d" * 201 + "\t1\n",
        "r.tsv, line 1, field 'docid': too long: 201 characters (at most 200)",
    ),
    ("run", "r.tsv", "q1\td\x001\t1\n", "r.tsv, line 1, field 'docid': contains a NUL character (U+0000)"),
    (
        "run",
        "r.jsonl",
        '{"qid": "q1", "docid": "d1", "rank": 1, "tag": "' + "t" * 200 + '"}\n',
        "r.jsonl, line 1, field 'tag': too long: 200 characters (at most 100)",
    ),
    (
        "run",
        "r.jsonl",
        '{"qid": "q1", "docid": "d\\u0000", "rank": 1}\n',
        "r.jsonl, line 1, field 'docid': contains a NUL character (U+0000)",
    ),
    (
        "run",
        "r.jsonl",
        '{"qid": "q1", "docid": "d1", "rank": ' + BIG_INT + "}\n",
        "r.jsonl, line 1, field 'rank': integer too long: 5,000 digits",
    ),
    # qrels
    (
        "qrels",
        "a.qrels",
        "q1 0 d1 1\nq1 0 " + "d" * 10_240 + " 1\n",
        "a.qrels, line 2, field 'docid': too long: 10,240 characters (at most 200)",
    ),
    (
        "qrels",
        "a.qrels",
        "q" * 101 + " 0 d1 1\n",
        "a.qrels, line 1, field 'qid': too long: 101 characters (at most 100)",
    ),
    ("qrels", "a.qrels", "q1 0 d\x001 1\n", "a.qrels, line 1, field 'docid': contains a NUL character (U+0000)"),
]
PARSERS = {
    "topics": parse.parse_topics,
    "docs": parse.parse_docs,
    "run": parse.parse_run,
    "qrels": parse.parse_qrels,
}


@pytest.mark.parametrize(("kind", "name", "content", "message"), CASES, ids=[c[3][:60] for c in CASES])
def test_parse_refuses_values_the_database_cannot_hold(kind, name, content, message):
    with pytest.raises(parse.FormatError) as exc:
        PARSERS[kind](content.encode("utf-8"), filename=name)
    assert str(exc.value) == message


def test_limits_have_one_home_the_model_fields():
    assert Query._meta.get_field("qid").max_length == formats.QID_MAX_LENGTH
    assert Document._meta.get_field("docid").max_length == formats.DOCID_MAX_LENGTH
    assert Document._meta.get_field("url").max_length == formats.URL_MAX_LENGTH
    assert System._meta.get_field("name").max_length == formats.SYSTEM_NAME_MAX_LENGTH


def test_values_at_the_limits_are_kept_and_a_long_file_name_tag_is_cut(campaign):
    from judging.services import documents_import, run_import

    docid, tag, qid = "d" * 200, "t" * 100, "q" * 100
    url = "https://e.org/" + "a" * 1986
    documents_import(
        campaign=campaign, data=f'{{"docid": "{docid}", "text": "x", "url": "{url}"}}\n'.encode(), filename="d.jsonl"
    )
    run_import(campaign=campaign, data=f"{qid} Q0 {docid} 1 1.0 {tag}\n".encode(), filename="r.run")
    assert Document.objects.get(docid=docid).url == url
    assert Query.objects.get().qid == qid
    # a TSV run takes its tag from the file name, which may be longer than a system name
    run_import(campaign=campaign, data=b"q1\td1\t1\n", filename="x" * 150 + ".tsv")
    assert sorted(System.objects.values_list("name", flat=True)) == [tag, "x" * 100]


# --------------------------------------------------------------------------- the three routes, both databases

# one bad file per importer: (command, web kind, API kind, file name, content, expected error)
ROUTES = [
    (
        "import_topics",
        "topics",
        "topics",
        "t.jsonl",
        '{"qid": ' + BIG_INT + ', "text": "x"}\n',
        1,
        "qid",
        "too long: 5,000 characters (at most 100)",
    ),
    (
        "import_topics",
        "topics",
        "topics",
        "t.jsonl",
        '{"qid": "q1", "text": ' + DEEP + "}\n",
        1,
        "text",
        "invalid JSON: nested too deeply",
    ),
    (
        "import_topics",
        "topics",
        "topics",
        "t.jsonl",
        '{"qid": "q1", "text": "\\ud800"}\n',
        1,
        "text",
        "contains a lone surrogate (U+D800), which is not valid Unicode",
    ),
    (
        "import_docs",
        "docs",
        "documents",
        "d.jsonl",
        '{"docid": "d1", "text": "a"}\n{"docid": "' + "d" * 10_240 + '", "text": "x"}\n',
        2,
        "docid",
        "too long: 10,240 characters (at most 200)",
    ),
    (
        "import_docs",
        "docs",
        "documents",
        "d.jsonl",
        '{"docid": "d1", "text": "x", "url": "https://e.org/' + "a" * 2_986 + '"}\n',
        1,
        "url",
        "too long: 3,000 characters (at most 2,000)",
    ),
    (
        "import_run",
        "run",
        "run",
        "r.run",
        "q1 Q0 d1 1 2.0 " + "t" * 200 + "\n",
        1,
        "tag",
        "too long: 200 characters (at most 100)",
    ),
    (
        "import_run",
        "run",
        "run",
        "r.run",
        "q1 Q0 d1 1 2.0 bm25\nq1 Q0 d\x002 2 1.0 bm25\n",
        2,
        "docid",
        "contains a NUL character (U+0000)",
    ),
    (
        "import_qrels",
        "qrels",
        "qrels",
        "a.qrels",
        "q" * 101 + " 0 d1 1\n",
        1,
        "qid",
        "too long: 101 characters (at most 100)",
    ),
]
# JSON has no NaN or infinity; Python's reader takes NaN, Infinity and 1e999 (as infinity), and neither database's
# JSON column stores them: a document attribute holding one answered 500.
ROUTES += [
    (
        "import_docs",
        "docs",
        "documents",
        "d.jsonl",
        '{"docid": "d1", "text": "a"}\n{"docid": "d2", "text": "x", "attributes": {"price": ' + number + "}}\n",
        2,
        "attributes.price",
        f"not a finite number: {shown}",
    )
    for number, shown in (("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("1e999", "Infinity"))
]
ROUTE_IDS = [f"{r[0]}-{r[6]}-{r[7][:20]}-{r[4][-12:-3]}" for r in ROUTES]


def _nothing_written():
    assert not Query.objects.exists()
    assert not Document.objects.exists()
    assert not System.objects.exists()
    assert not Judgment.objects.exists()


@pytest.mark.parametrize(
    ("command", "kind", "api_kind", "name", "content", "line", "field", "detail"), ROUTES, ids=ROUTE_IDS
)
def test_command_prints_file_line_field(
    campaign, tmp_path, command, kind, api_kind, name, content, line, field, detail
):
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8", "surrogatepass"))
    extra = ["--annotator", "lead"] if command == "import_qrels" else []
    with pytest.raises(CommandError) as exc:
        call_command(command, campaign.slug, str(path), *extra, stdout=io.StringIO(), stderr=io.StringIO())
    assert str(exc.value) == f"{name}, line {line}, field '{field}': {detail} — nothing was imported"
    _nothing_written()


@pytest.mark.parametrize(
    ("command", "kind", "api_kind", "name", "content", "line", "field", "detail"), ROUTES, ids=ROUTE_IDS
)
def test_web_upload_shows_file_line_field(
    client, campaign, lead, command, kind, api_kind, name, content, line, field, detail
):
    client.force_login(lead)
    data = {"kind": kind, f"{kind}-kind": kind, f"{kind}-file": SimpleUploadedFile(name, content.encode())}
    response = client.post(reverse("judging:campaign_upload", args=[campaign.slug]), data)
    assert response.status_code == 422
    assert response.context["error"] == f"{name}, line {line}, field '{field}': {detail} — nothing was imported"
    _nothing_written()


@pytest.mark.parametrize(
    ("command", "kind", "api_kind", "name", "content", "line", "field", "detail"), ROUTES, ids=ROUTE_IDS
)
def test_api_upload_answers_400_with_file_line_field(
    campaign, lead, command, kind, api_kind, name, content, line, field, detail
):
    client = APIClient()
    client.force_authenticate(lead)
    upload = SimpleUploadedFile(name, content.encode())
    response = client.post(f"/api/campaigns/{campaign.slug}/upload/{api_kind}/", {"file": upload}, format="multipart")
    assert response.status_code == 400
    assert response.json() == {
        "detail": f"{name}, line {line}, field '{field}': {detail}",
        "file": name,
        "line": line,
        "field": field,
    }
    _nothing_written()


@pytest.mark.parametrize("number", ["NaN", "Infinity", "1e999"])
def test_a_documents_job_with_a_nonfinite_attribute_fails_naming_file_line_field(campaign, lead, number):
    """The background job's error is the parser's, not the database's text about its JSON column."""
    from judging.jobs import job_run, job_start
    from judging.models import Job

    data = ('{"docid": "d1", "text": "x", "attributes": {"stars": ' + number + "}}\n").encode()
    job = job_start(kind="docs", campaign=campaign, user=lead, data=data, filename="d.jsonl", options={})
    job_run(job_id=job.pk)
    job = Job.objects.get(pk=job.pk)
    assert job.status == "failed"
    assert {k: job.error[k] for k in ("file", "line", "field")} == {
        "file": "d.jsonl",
        "line": 1,
        "field": "attributes.stars",
    }
    assert "not a finite number" in job.error["detail"]
    _nothing_written()


def test_import_run_command_system_name_over_the_limit_names_the_option(campaign, tmp_path):
    path = tmp_path / "r.run"
    path.write_text("q1 Q0 d1 1 2.0 bm25\n")
    with pytest.raises(CommandError) as exc:
        call_command("import_run", campaign.slug, str(path), "--system", "s" * 200, stdout=io.StringIO())
    assert str(exc.value) == (
        "r.run, field 'system': system name too long: 200 characters (at most 100) — nothing was imported"
    )
    _nothing_written()


# --------------------------------------------------------------------------- query tags and online figures


@pytest.fixture
def with_run(campaign):
    from judging.services import run_import

    run_import(campaign=campaign, data=b"q1 Q0 d1 1 2.0 bm25\n", filename="bm25.run")
    return campaign


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ("q1\thead,t\x00il\n", "tags"),
        ("q1\thead\nq\x001\ttail\n", "qid"),
    ],
    ids=["tag", "qid"],
)
def test_import_query_tags_command_refuses_a_nul_naming_line_and_field(with_run, tmp_path, content, field):
    """A NUL in a tag was stored on SQLite and failed the import with a traceback on PostgreSQL."""
    path = tmp_path / "tags.tsv"
    path.write_bytes(content.encode())
    with pytest.raises(CommandError) as exc:
        call_command("import_query_tags", with_run.slug, str(path), stdout=io.StringIO(), stderr=io.StringIO())
    line = content.count("\n", 0, content.index("\x00")) + 1
    assert str(exc.value) == (
        f"tags.tsv, line {line}, field '{field}': contains a NUL character (U+0000) — nothing was imported"
    )
    assert not Query.objects.filter(tags__isnull=False).exists()


@pytest.mark.parametrize(
    ("content", "line", "field"),
    [
        ("bm25,ctr,0.5\nbm25,c\x00tr,0.4\n", 2, "metric"),
        ("bm25,ctr,0.5,q\x001\n", 1, "qid"),
        ("bm\x0025,ctr,0.5\n", 1, "system"),
    ],
    ids=["metric", "qid", "system"],
)
def test_online_upload_refuses_a_nul_naming_line_and_field(with_run, lead, content, line, field):
    """A NUL in a metric was stored on SQLite and answered 500 on PostgreSQL (in a qid too)."""
    from judging.models import OnlineMetric

    client = APIClient()
    client.force_authenticate(lead)
    upload = SimpleUploadedFile("o.csv", content.encode())
    response = client.post(f"/api/campaigns/{with_run.slug}/upload/online/", {"file": upload}, format="multipart")
    assert response.status_code == 400
    assert response.json() == {
        "detail": f"o.csv, line {line}, field '{field}': contains a NUL character (U+0000)",
        "file": "o.csv",
        "line": line,
        "field": field,
    }
    assert not OnlineMetric.objects.exists()


# --------------------------------------------------------------------------- people lists

LONG_EMAIL = "a@" + ".".join(["b" * 60] * 5) + ".com"  # a valid address of 310 characters; the column holds 254


@pytest.mark.parametrize("how", ["bulk", "add", "api"])
def test_member_email_longer_than_its_column_is_refused_naming_it(campaign, lead, how):
    """Django's validate_email takes up to 320 characters: a longer address than the column was a 500 on
    PostgreSQL (value too long for varchar(254)), on the Members page's list and form and in the API."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    expected = "at most 254 characters"
    if how == "api":
        client = APIClient()
        client.force_authenticate(lead)
        body = {"username": "dave", "email": LONG_EMAIL, "role": "annotator", "create": True}
        response = client.post(f"/api/campaigns/{campaign.slug}/members/", body, format="json")
        assert response.status_code == 400 and expected in str(response.json())
    else:
        client = Client()
        client.force_login(lead)
        url = reverse("judging:campaign_members", args=[campaign.slug])
        if how == "bulk":
            post = {"action": "bulk", "people": f"erin\ndave,{LONG_EMAIL}", "role": "annotator"}
        else:
            post = {"action": "add", "username": "dave", "email": LONG_EMAIL, "role": "annotator", "create": "on"}
        response = client.post(url, post)
        assert response.status_code == 422
        page = response.content.decode().replace("&#x27;", "'")
        assert expected in page and ("the list, line 2: e-mail 'a@bbb" in page or how == "add")
    assert not get_user_model().objects.filter(username__in=["dave", "erin"]).exists()
