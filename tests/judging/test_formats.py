"""Tests of judging.imports.parse and judging.formats: parsing and writing runs, qrels, topics and documents."""

import gc
import pickle

import numpy as np
import pytest
import pytrec_eval

from judging.formats import RankedList, format_qrels, format_run
from judging.imports.parse import (
    Doc,
    FormatError,
    Qrel,
    Topic,
    decode_lines,
    parse_docs,
    parse_qrels,
    parse_run,
    parse_topics,
)

param = pytest.param


def error_of(parse, data: bytes, filename: str) -> str:
    with pytest.raises(FormatError) as info:
        parse(data, filename=filename)
    return str(info.value)


def ranking(qid: str, docids: str, scores: list[float]) -> RankedList:
    return RankedList(qid, docids.split(), np.array(scores, dtype=np.float64))


# --------------------------------------------------------------------------- FormatError


@pytest.mark.parametrize(
    ("line", "field", "expected"),
    [
        (12, "score", "runs.txt, line 12, field 'score': not a number: 'abc'"),
        (12, None, "runs.txt, line 12: not a number: 'abc'"),
        (None, "score", "runs.txt, field 'score': not a number: 'abc'"),
        (None, None, "runs.txt: not a number: 'abc'"),
    ],
)
def test_format_error_str_names_file_line_and_field(line, field, expected):
    error = FormatError("not a number: 'abc'", filename="runs.txt", line=line, field=field)

    assert str(error) == expected
    assert (error.message, error.filename, error.line, error.field) == (
        "not a number: 'abc'",
        "runs.txt",
        line,
        field,
    )
    assert isinstance(error, ValueError)


def test_format_error_survives_pickling():
    error = FormatError("duplicate", filename="q.txt", line=3, field="docid")

    copy = pickle.loads(pickle.dumps(error))

    assert (str(copy), copy.line, copy.field) == ("q.txt, line 3, field 'docid': duplicate", 3, "docid")


# --------------------------------------------------------------------------- decode_lines


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        param(b"a\nb\n", ["a", "b"], id="lf"),
        param(b"a\nb", ["a", "b"], id="no-final-newline"),
        param(b"\xef\xbb\xbfa\nb\n", ["a", "b"], id="bom"),
        param(b"a\r\nb\r\n", ["a", "b"], id="crlf"),
        param(b"a\rb\r", ["a", "b"], id="cr"),
        param(b"a\n\n  \nb\n", ["a", "", "  ", "b"], id="blank-lines-kept"),
        param("caf\u00e9\n".encode(), ["caf\u00e9"], id="utf8"),
        param(b"", [], id="empty"),
    ],
)
def test_decode_lines_splits_lines(data, expected):
    assert decode_lines(data, filename="f.txt") == expected


@pytest.mark.parametrize(
    "data",
    [
        param(b"a\nb\nc\xffd\n", id="lf"),
        param(b"a\r\nb\r\nc\xffd\r\n", id="crlf"),
        param(b"a\rb\rc\xffd\r", id="cr"),
        param(b"\xef\xbb\xbfa\nb\n\xff\n", id="bom"),
        param(b"a\nb\n\xe2\x82\n", id="truncated-sequence"),
    ],
)
def test_decode_lines_names_line_of_undecodable_bytes(data):
    assert error_of(decode_lines, data, "f.txt").startswith("f.txt, line 3: not valid UTF-8 (bad bytes ")


def test_decode_lines_shows_bad_bytes():
    assert error_of(decode_lines, b"ok\n\xff\n", "f.txt") == "f.txt, line 2: not valid UTF-8 (bad bytes 0xff)"


def test_decode_lines_names_utf16():
    data = "1\tq\n".encode("utf-16")

    assert error_of(decode_lines, data, "t.tsv") == "t.tsv: the file is UTF-16; save it as UTF-8"


# --------------------------------------------------------------------------- topics

TOPICS_TSV = b"301\tcheap flights\n302\tlate-night snack\tfood one can eat after 10 pm\n"
TOPICS_JSONL = (
    b'{"qid": "301", "text": "cheap flights"}\n'
    b'{"qid": 302, "text": "late-night snack", "description": "food one can eat after 10 pm"}\n'
)


@pytest.mark.parametrize(
    ("data", "filename"),
    [
        param(TOPICS_TSV, "topics.tsv", id="tsv"),
        param(b"qid\ttext\tdescription\n" + TOPICS_TSV, "topics.tsv", id="tsv-header"),
        param(TOPICS_TSV.replace(b"\n", b"\r\n"), "topics.tsv", id="tsv-crlf"),
        param(TOPICS_JSONL, "topics.jsonl", id="jsonl"),
        param(b"\n  \n" + TOPICS_JSONL, "topics.txt", id="jsonl-by-content"),
        param(b"\xef\xbb\xbf" + TOPICS_JSONL.replace(b"\n", b"\r\n"), "topics.json", id="jsonl-bom-crlf"),
        param(
            b'{"qid": " 301 ", "text": " cheap flights ", "description": null, "extra": 1}\n'
            b'{"qid": "302", "text": "late-night snack", "description": "food one can eat after 10 pm"}\n',
            "topics.jsonl",
            id="jsonl-null-description-extra-key",
        ),
    ],
)
def test_parse_topics_reads_each_format(data, filename):
    assert parse_topics(data, filename=filename) == [
        Topic("301", "cheap flights"),
        Topic("302", "late-night snack", "food one can eat after 10 pm"),
    ]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        param(
            b"301\tq\n302\n",
            "t.tsv, line 2: expected 2 to 4 tab-separated columns (qid, text[, description[, tags]]), found 1",
            id="one-column",
        ),
        param(
            b"301\tq\td\tx\ty\n",
            "t.tsv, line 1: expected 2 to 4 tab-separated columns (qid, text[, description[, tags]]), found 5",
            id="five-columns",
        ),
        param(b"301\tq\n\t q\n", "t.tsv, line 2, field 'qid': empty", id="empty-qid"),
        param(b"301\t \n", "t.tsv, line 1, field 'text': empty", id="empty-text"),
        param(b"30 1\tq\n", "t.tsv, line 1, field 'qid': contains whitespace: '30 1'", id="qid-whitespace"),
        param(
            b"301\tq\n\n301\tr\n",
            "t.tsv, line 3, field 'qid': duplicate qid '301' (first on line 1)",
            id="duplicate-qid",
        ),
        param(
            b'{"qid": "1", "text": "q"}\n{"qid": "2", "text": "q"\n',
            "t.tsv, line 2: invalid JSON: Expecting ',' delimiter (column 25)",
            id="bad-json",
        ),
        param(
            b'{"qid": "1", "text": "q"}\n["2", "q"]\n',
            "t.tsv, line 2: expected JSON Lines (one object per line), found a JSON array",
            id="json-array",
        ),
        param(
            b'{"qid": "1", "text": "q"}\n"q"\n',
            "t.tsv, line 2: expected a JSON object, found a string",
            id="json-scalar",
        ),
        param(b'{"qid": "1"}\n', "t.tsv, line 1, field 'text': missing key", id="missing-text"),
        param(b'{"text": "q"}\n', "t.tsv, line 1, field 'qid': missing key", id="missing-qid"),
        param(
            b'{"qid": "1", "text": 7}\n',
            "t.tsv, line 1, field 'text': expected a string, found a number",
            id="text-number",
        ),
        param(
            b'{"qid": "1", "text": null}\n',
            "t.tsv, line 1, field 'text': expected a string, found null",
            id="text-null",
        ),
        param(b'{"qid": "1", "text": ""}\n', "t.tsv, line 1, field 'text': empty", id="text-empty"),
        param(
            b'{"qid": 1.5, "text": "q"}\n',
            "t.tsv, line 1, field 'qid': expected a string or an integer, found 1.5",
            id="qid-float",
        ),
        param(
            b'{"qid": true, "text": "q"}\n',
            "t.tsv, line 1, field 'qid': expected a string or an integer, found a boolean",
            id="qid-bool",
        ),
        param(
            b'{"qid": "1", "text": "q", "description": ["d"]}\n',
            "t.tsv, line 1, field 'description': expected a string, found an array",
            id="description-array",
        ),
        param(
            b'{"qid": 1, "text": "q"}\n{"qid": "1", "text": "r"}\n',
            "t.tsv, line 2, field 'qid': duplicate qid '1' (first on line 1)",
            id="duplicate-int-qid",
        ),
        param(
            b"301\tq\n302\tr\n303\t\xff\n",
            "t.tsv, line 3: not valid UTF-8 (bad bytes 0xff)",
            id="undecodable",
        ),
        param(b"", "t.tsv: empty file", id="empty"),
        param(b"\n  \r\n\t\n", "t.tsv: empty file", id="blank-only"),
        param(b"qid\ttext\n", "t.tsv: empty file", id="header-only"),
    ],
)
def test_parse_topics_rejects_bad_input(data, expected):
    assert error_of(parse_topics, data, "t.tsv") == expected


# --------------------------------------------------------------------------- documents


@pytest.mark.parametrize(
    ("data", "filename", "expected"),
    [
        param(
            b'{"docid": "d1", "title": "Ramen", "text": "<b>Hot</b> noodles", "url": "https://x.org/1"}\n'
            b'{"docid": 2, "text": "Cold rice"}\n',
            "docs.jsonl",
            [Doc("d1", "<b>Hot</b> noodles", title="Ramen", url="https://x.org/1"), Doc("2", "Cold rice")],
            id="jsonl",
        ),
        param(
            b"d1\tRamen\t<b>Hot</b> noodles\nd2\t\tCold rice\n",
            "docs.tsv",
            [Doc("d1", "<b>Hot</b> noodles", title="Ramen"), Doc("d2", "Cold rice")],
            id="tsv",
        ),
        param(
            b"\xef\xbb\xbfdocid\ttitle\ttext\r\nd1\tRamen\tHot noodles\r\n",
            "docs.tsv",
            [Doc("d1", "Hot noodles", title="Ramen")],
            id="tsv-bom-header-crlf",
        ),
        param(
            b"d1\tHot noodles\nd2\tCold rice\n",
            "collection.tsv",
            [Doc("d1", "Hot noodles"), Doc("d2", "Cold rice")],
            id="tsv-two-columns",
        ),
    ],
)
def test_parse_docs_reads_each_format(data, filename, expected):
    assert parse_docs(data, filename=filename) == expected


DOC_COLUMNS = "expected 3 tab-separated columns (docid, title, text) or 2 (docid, text)"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        param(b"d1\tt\tx\ty\n", f"d.tsv, line 1: {DOC_COLUMNS}, found 4", id="four-columns"),
        param(b"d1\n", f"d.tsv, line 1: {DOC_COLUMNS}, found 1", id="one-column"),
        param(b"d1\tt\t\n", "d.tsv, line 1, field 'text': empty", id="empty-text"),
        param(
            b"d1\tt\tx\nd1\tu\ty\n",
            "d.tsv, line 2, field 'docid': duplicate docid 'd1' (first on line 1)",
            id="duplicate-tsv",
        ),
        param(
            b'{"docid": "d1", "text": "x"}\n{"docid": "d1", "text": "y"}\n',
            "d.tsv, line 2, field 'docid': duplicate docid 'd1' (first on line 1)",
            id="duplicate-jsonl",
        ),
        param(b'{"text": "x"}\n', "d.tsv, line 1, field 'docid': missing key", id="missing-docid"),
        param(b'{"docid": "d1"}\n', "d.tsv, line 1, field 'text': missing key", id="missing-text"),
        param(
            b'{"docid": "d1", "text": "x", "url": 3}\n',
            "d.tsv, line 1, field 'url': expected a string, found a number",
            id="url-number",
        ),
        param(
            b'{"docid": "d1", "text": "x", "title": {}}\n',
            "d.tsv, line 1, field 'title': expected a string, found an object",
            id="title-object",
        ),
        param(
            b'{"docid": "d 1", "text": "x"}\n',
            "d.tsv, line 1, field 'docid': contains whitespace: 'd 1'",
            id="docid-whitespace",
        ),
        param(
            b'{"docid": "d1", "text": "x"}\n{"docid": "d2", text: "y"}\n',
            "d.tsv, line 2: invalid JSON: Expecting property name enclosed in double quotes (column 17)",
            id="bad-json",
        ),
        param(b"d1\tt\tx\n\xc3\n", "d.tsv, line 2: not valid UTF-8 (bad bytes 0xc3)", id="undecodable"),
        param(b"", "d.tsv: empty file", id="empty"),
    ],
)
def test_parse_docs_rejects_bad_input(data, expected):
    assert error_of(parse_docs, data, "d.tsv") == expected


# --------------------------------------------------------------------------- runs


def test_parse_run_reads_trec_with_several_tags_and_queries():
    data = (
        b"1 Q0 a 1 3.0 bm25\n"
        b"1 Q0 b 2 2.5 bm25 extra columns\n"
        b"\n"
        b"2 Q0 c 1 1 bm25\n"
        b"1\tQ0\tb\t1\t9\tsplade\n"
        b"1 Q0 a 2 -1e-3 splade\n"
    )

    runs = parse_run(data, filename="run.txt")

    assert runs == {
        "bm25": [ranking("1", "a b", [3.0, 2.5]), ranking("2", "c", [1.0])],
        "splade": [ranking("1", "b a", [9.0, -0.001])],
    }
    assert list(runs) == ["bm25", "splade"]
    assert runs["bm25"][0].scores.dtype == np.float64


def test_parse_run_orders_by_score_and_ignores_rank():
    data = b"1 Q0 low 1 0.5 t\n1 Q0 high 2 7.25 t\n1 Q0 mid 3 2 t\n"

    assert parse_run(data, filename="run.txt") == {"t": [ranking("1", "high mid low", [7.25, 2.0, 0.5])]}


@pytest.mark.parametrize(
    ("docids", "expected"),
    [
        ("d10 d9 D1", "d9 d10 D1"),
        ("D1 d10 d9", "d9 d10 D1"),
        ("z \u00e9 Z", "\u00e9 z Z"),  # in UTF-8 bytes 0xc3 0xa9 > 'z' > 'Z'
        ("a ab b", "b ab a"),
    ],
)
def test_parse_run_breaks_score_ties_by_docid_descending(docids, expected):
    data = "".join(f"7 Q0 {docid} {rank} 1.5 t\n" for rank, docid in enumerate(docids.split(), 1)).encode()

    (run,) = parse_run(data, filename="run.txt")["t"]

    assert run.docids == expected.split()


def test_parse_run_breaks_only_exact_ties_by_docid():
    data = b"1 Q0 a 1 2 t\n1 Q0 z 2 1 t\n1 Q0 m 3 1 t\n1 Q0 b 4 2 t\n1 Q0 c 5 0.5 t\n2 Q0 x 1 1 t\n2 Q0 y 2 1 t\n"

    assert parse_run(data, filename="run.txt") == {
        "t": [ranking("1", "b a z m c", [2, 2, 1, 1, 0.5]), ranking("2", "y x", [1, 1])]
    }


@pytest.mark.parametrize("relevant", ["d10", "d9", "D1"])
def test_parse_run_tie_order_matches_trec_eval(relevant):
    evaluator = pytrec_eval.RelevanceEvaluator({"1": {relevant: 1}}, {"recip_rank"})

    (run,) = parse_run(b"1 Q0 d10 1 1 t\n1 Q0 d9 2 1 t\n1 Q0 D1 3 1 t\n", filename="run.txt")["t"]
    trec_eval_rr = evaluator.evaluate({"1": {"d10": 1.0, "d9": 1.0, "D1": 1.0}})["1"]["recip_rank"]

    assert trec_eval_rr == pytest.approx(1 / (run.docids.index(relevant) + 1))


@pytest.mark.parametrize(
    ("data", "filename", "expected"),
    [
        param(
            b"1\tb\t2\n1\ta\t1\n2\tc\t1\n",
            "runs/bm25.tsv",
            {"bm25": [ranking("1", "a b", [-1, -2]), ranking("2", "c", [-1])]},
            id="tsv-rank-only",
        ),
        param(
            b"qid\tdocid\trank\n1\tb\t2\n1\ta\t1\n2\tc\t1\n",
            "C:\\runs\\bm25.tsv",
            {"bm25": [ranking("1", "a b", [-1, -2]), ranking("2", "c", [-1])]},
            id="tsv-header-windows-path",
        ),
        param(
            b"1\tb\t1\t0.5\n1\ta\t2\t0.9\n",
            "my run.tsv",
            {"my_run": [ranking("1", "a b", [0.9, 0.5])]},
            id="tsv-scores-ignore-rank",
        ),
        param(
            b"1\tc\t1\n1\ta\t1\n1\tb\t0\n",
            "tied.tsv",
            {"tied": [ranking("1", "b c a", [0, -1, -1])]},
            id="tsv-rank-ties-by-docid-descending",
        ),
        param(
            b'{"qid": 1, "docid": "b", "rank": 2}\n{"qid": "1", "docid": "a", "rank": 1}\n',
            "dense.jsonl",
            {"dense": [ranking("1", "a b", [-1, -2])]},
            id="jsonl-rank-only",
        ),
        param(
            b'{"qid": "1", "docid": "b", "score": 1}\n'
            b'{"qid": "1", "docid": "a", "score": 2.5, "rank": 9}\n'
            b'{"qid": "1", "docid": "c", "score": 0, "tag": "other"}\n',
            "dense.jsonl",
            {"dense": [ranking("1", "a b", [2.5, 1])], "other": [ranking("1", "c", [0])]},
            id="jsonl-scores-tags",
        ),
    ],
)
def test_parse_run_reads_tsv_and_jsonl(data, filename, expected):
    assert parse_run(data, filename=filename) == expected


def test_parse_run_accepts_bom_and_crlf():
    data = b"\xef\xbb\xbf1 Q0 a 1 2 t\r\n\r\n1 Q0 b 2 1 t\r\n"

    assert parse_run(data, filename="run.txt") == {"t": [ranking("1", "a b", [2, 1])]}


def test_parse_run_allows_same_docid_in_other_queries_and_tags():
    data = b"1 Q0 a 1 1 t\n2 Q0 a 1 1 t\n1 Q0 a 1 1 u\n"

    runs = parse_run(data, filename="run.txt")

    assert [(tag, r.qid, r.docids) for tag, rs in runs.items() for r in rs] == [
        ("t", "1", ["a"]),
        ("t", "2", ["a"]),
        ("u", "1", ["a"]),
    ]


RUN_COLUMNS = "expected 6 columns (qid Q0 docid rank score tag)"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        param(b"1 Q0 a 1 1 t\n1 Q0 b 2 1\n", f"run.txt, line 2: {RUN_COLUMNS}, found 5", id="trec-five-columns"),
        param(b"1 Q0 a 1 1 t\n\n1 Q0 b 2\n", f"run.txt, line 3: {RUN_COLUMNS}, found 4", id="trec-four-columns"),
        param(b"1 Q0 a x 1 t\n", "run.txt, line 1, field 'rank': not an integer: 'x'", id="trec-rank-word"),
        param(
            b"1 Q0 a 1 1 t\n\n1 Q0 b 1.5 1 t\n",
            "run.txt, line 3, field 'rank': not an integer: '1.5'",
            id="trec-rank-float",
        ),
        param(
            b"1 Q0 a 1 1 t\n1 Q0 b 2 abc t\n",
            "run.txt, line 2, field 'score': not a number: 'abc'",
            id="trec-score-word",
        ),
        param(b"1 Q0 a 1 nan t\n", "run.txt, line 1, field 'score': not a finite number: 'nan'", id="trec-nan"),
        param(
            b"1 Q0 a 1 1 t\n1 Q0 b 2 inf t\n",
            "run.txt, line 2, field 'score': not a finite number: 'inf'",
            id="trec-inf",
        ),
        param(
            b"1 Q0 a 1 -Infinity t\n",
            "run.txt, line 1, field 'score': not a finite number: '-Infinity'",
            id="trec-minus-infinity",
        ),
        param(
            b"1 Q0 a 1 1 t\n1 Q0 b 2 x t\n1 Q0 c x 3 t\n",
            "run.txt, line 2, field 'score': not a number: 'x'",
            id="trec-first-bad-line-wins",
        ),
        param(
            b"1 Q0 a 1 1 t\n\n1 Q0 b 2 1 t\n2 Q0 a 1 1 t\n1 Q0 a 3 0 t\n",
            "run.txt, line 5, field 'docid': duplicate docid 'a' for qid '1' (first on line 1)",
            id="trec-duplicate-docid",
        ),
        param(
            b"1\ta\t1\n1\tb\n",
            "run.txt, line 2: expected 3 tab-separated columns (qid, docid, rank) like the first line, found 2",
            id="tsv-two-columns",
        ),
        param(
            b"1\ta\t1\t1\n1\tb\t2\n",
            "run.txt, line 2: expected 4 tab-separated columns (qid, docid, rank, score) like the first line, found 3",
            id="tsv-score-missing",
        ),
        param(b"1\ta\tfirst\n", "run.txt, line 1, field 'rank': not an integer: 'first'", id="tsv-rank-word"),
        param(b"1\ta\t1\tNaN\n", "run.txt, line 1, field 'score': not a finite number: 'NaN'", id="tsv-nan"),
        param(
            b"1\ta\t1\n1\ta\t2\n",
            "run.txt, line 2, field 'docid': duplicate docid 'a' for qid '1' (first on line 1)",
            id="tsv-duplicate-docid",
        ),
        param(b"1\t\t1\n", "run.txt, line 1, field 'docid': empty", id="tsv-empty-docid"),
        param(
            b'{"qid": "1", "docid": "a", "score": 1}\n{"qid": "1", "docid": "a", "score": 2}\n',
            "run.txt, line 2, field 'docid': duplicate docid 'a' for qid '1' (first on line 1)",
            id="jsonl-duplicate-docid",
        ),
        param(
            b'{"qid": "1", "docid": "a", "score": 1}\n{"qid": "1", "docid": "b", "score": 2\n',
            "run.txt, line 2: invalid JSON: Expecting ',' delimiter (column 38)",
            id="jsonl-bad-json",
        ),
        param(
            b'{"docid": "a", "score": 1}\n',
            "run.txt, line 1, field 'qid': missing key",
            id="jsonl-missing-qid",
        ),
        param(
            b'{"qid": "1", "docid": "a"}\n',
            "run.txt, line 1: missing key: give a 'rank', a 'score' or both",
            id="jsonl-no-rank-or-score",
        ),
        param(
            b'{"qid": "1", "docid": "a", "rank": "1"}\n',
            "run.txt, line 1, field 'rank': not an integer: \"1\"",
            id="jsonl-rank-string",
        ),
        param(
            b'{"qid": "1", "docid": "a", "score": true}\n',
            "run.txt, line 1, field 'score': not a number: true",
            id="jsonl-score-bool",
        ),
        param(
            b'{"qid": "1", "docid": "a", "score": NaN}\n',
            "run.txt, line 1, field 'score': not a finite number: nan",
            id="jsonl-nan",
        ),
        param(
            b'{"qid": "1", "docid": "a", "score": 1}\n{"qid": "1", "docid": "b", "rank": 2}\n',
            "run.txt, line 2, field 'score': missing key; the first record has a score, so every record needs one",
            id="jsonl-score-dropped",
        ),
        param(
            b'{"qid": "1", "docid": "a", "rank": 1}\n{"qid": "1", "docid": "b", "rank": 2, "score": 3}\n',
            "run.txt, line 2, field 'score': unexpected key; the first record has no score, so no record may have one",
            id="jsonl-score-added",
        ),
        param(
            b'{"qid": "1", "docid": "a", "score": 1, "tag": 5}\n',
            "run.txt, line 1, field 'tag': expected a string, found a number",
            id="jsonl-tag-number",
        ),
        param(
            b"1 Q0 a 1 1 t\n1 Q0 b 2 1 t\n1 Q0 \xff 3 1 t\n",
            "run.txt, line 3: not valid UTF-8 (bad bytes 0xff)",
            id="undecodable",
        ),
        param(b"", "run.txt: empty file", id="empty"),
        param(b"\n \n\r\n", "run.txt: empty file", id="blank-only"),
    ],
)
def test_parse_run_rejects_bad_input(data, expected):
    assert error_of(parse_run, data, "run.txt") == expected


def test_parse_run_leaves_garbage_collector_as_it_was():
    assert gc.isenabled()

    parse_run(b"1 Q0 a 1 1 t\n", filename="run.txt")
    error_of(parse_run, b"1 Q0 a\n", "run.txt")

    assert gc.isenabled()


# --------------------------------------------------------------------------- qrels


def test_parse_qrels_reads_trec_qrels():
    data = b"# judged in 2024\n301 0 d1 2\n\n301\t1\td2\t0\r\n  # a comment\n302 Q0 d1 -1\n"

    assert parse_qrels(data, filename="qrels.txt") == [
        Qrel("301", "d1", 2),
        Qrel("301", "d2", 0),
        Qrel("302", "d1", -1),
    ]


QRELS_COLUMNS = "expected 4 columns (qid iteration docid label)"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        param(b"301 0 d1 1\n301 0 d2\n", f"q.txt, line 2: {QRELS_COLUMNS}, found 3", id="three-columns"),
        param(b"301 0 d1 1 0.5\n", f"q.txt, line 1: {QRELS_COLUMNS}, found 5", id="five-columns"),
        param(b"# c\n\n301 0 d1 x\n", "q.txt, line 3, field 'label': not an integer: 'x'", id="label-word"),
        param(b"301 0 d1 1.5\n", "q.txt, line 1, field 'label': not an integer: '1.5'", id="label-float"),
        param(
            b"301 0 d1 1\n# c\n301 1 d1 2\n",
            "q.txt, line 3, field 'docid': duplicate judgment of docid 'd1' for qid '301' (first on line 1)",
            id="duplicate-pair",
        ),
        param(
            b"301 0 d1 1\n301 0 d2 1\n\xfe\n",
            "q.txt, line 3: not valid UTF-8 (bad bytes 0xfe)",
            id="undecodable",
        ),
        param(b"", "q.txt: empty file", id="empty"),
        param(b"# only a comment\n\n", "q.txt: empty file", id="comments-only"),
    ],
)
def test_parse_qrels_rejects_bad_input(data, expected):
    assert error_of(parse_qrels, data, "q.txt") == expected


# --------------------------------------------------------------------------- writing


def test_format_qrels_writes_trec_lines():
    rows = [("301", "d1", 2), ("302", "d2", np.int64(0))]

    assert list(format_qrels(rows)) == ["301 0 d1 2\n", "302 0 d2 0\n"]


def test_format_qrels_round_trips_through_parse_qrels():
    qrels = [Qrel("301", "d1", 2), Qrel("301", "d\u00e9", 0), Qrel("7", "d1", -1)]

    text = "".join(format_qrels((q.qid, q.docid, q.label) for q in qrels))

    assert parse_qrels(text.encode(), filename="qrels.txt") == qrels


@pytest.mark.parametrize(
    ("row", "error"),
    [
        param(("3 01", "d1", 1), ValueError, id="qid-whitespace"),
        param(("301", "", 1), ValueError, id="empty-docid"),
        param(("301", "d1", 1.5), TypeError, id="float-label"),
    ],
)
def test_format_qrels_rejects_unwritable_rows(row, error):
    with pytest.raises(error):
        list(format_qrels([row]))


def test_format_run_writes_ranks_from_one():
    rankings = [ranking("1", "b a", [2.5, 0.1 + 0.2]), ranking("2", "c", [-3])]

    assert list(format_run("bm25", rankings)) == [
        "1 Q0 b 1 2.5 bm25\n",
        "1 Q0 a 2 0.30000000000000004 bm25\n",
        "2 Q0 c 1 -3.0 bm25\n",
    ]


@pytest.mark.parametrize(
    "data",
    [
        param(
            b"1 Q0 d10 1 1 t\n1 Q0 d9 2 1 t\n1 Q0 D1 3 1 t\n1 Q0 x 4 1e-300 t\n2 Q0 y 1 0.30000000000000004 t\n",
            id="trec-ties",
        ),
        param(b"1\td10\t1\n1\td9\t1\n1\tx\t3\n2\ty\t5\n", id="rank-only"),
        param(
            b'{"qid": "1", "docid": "a", "score": 123456789.123456789}\n{"qid": "1", "docid": "b", "score": -0.5}\n',
            id="jsonl",
        ),
    ],
)
def test_format_run_round_trips_through_parse_run(data):
    ((tag, rankings),) = parse_run(data, filename="t.tsv").items()

    text = "".join(format_run(tag, rankings))

    assert parse_run(text.encode(), filename="other.txt") == {tag: rankings}


@pytest.mark.parametrize(
    ("tag", "rankings"),
    [
        param("my run", [ranking("1", "a", [1])], id="tag-whitespace"),
        param("t", [RankedList("1 2", ["a"], np.array([1.0]))], id="qid-whitespace"),
        param("t", [ranking("1", "a", [np.nan])], id="nan-score"),
    ],
)
def test_format_run_rejects_unwritable_rankings(tag, rankings):
    with pytest.raises(ValueError):
        list(format_run(tag, rankings))


def test_ranking_coerces_scores_and_checks_length():
    assert RankedList("1", ["a", "b"], [2, 1]).scores.dtype == np.float64
    with pytest.raises(ValueError):
        RankedList("1", ["a", "b"], [1.0])


def test_ranking_compares_docids_and_scores():
    assert ranking("1", "a b", [2, 1]) == ranking("1", "a b", [2, 1])
    assert ranking("1", "a b", [2, 1]) != ranking("1", "a b", [2, 0.5])
    assert ranking("1", "a b", [2, 1]) != ranking("1", "b a", [2, 1])


def test_parse_run_scores_tie_as_trec_eval_float32():
    # 0.30000001 and 0.30000002 are the same C float: trec_eval ties them and orders by docid descending
    data = b"q1 Q0 a 1 0.30000002 t\nq1 Q0 b 2 0.30000001 t\nq1 Q0 c 3 0.2 t\n"
    (ranking,) = parse_run(data, filename="r")["t"]
    assert ranking.docids == ["b", "a", "c"]
