"""Numbers and columns read as trec_eval reads them: ASCII digits only, columns split on ASCII whitespace,
and an error that names the column really at fault."""

from __future__ import annotations

import pytest

from judging.imports.parse import FormatError, parse_qrels, parse_run, parse_topics

NBSP, IDEOGRAPHIC = "\u00a0", "\u3000"

CASES = [
    # loose numbers int()/float() accept and trec_eval does not
    (parse_run, "r.run", "q1 Q0 d1 1_000 2.0 bm25\n", "line 1, field 'rank': not an integer: '1_000'"),
    (
        parse_run,
        "r.run",
        "q1 Q0 d1 1 2.0 bm25\nq1 Q0 d2 １０ 1.0 bm25\n",
        "line 2, field 'rank': not an integer: '１０'",
    ),
    (parse_run, "r.run", "q1 Q0 d1 1 ٣.٥ bm25\n", "line 1, field 'score': not a number: '٣.٥'"),
    (parse_run, "r.run", "q1 Q0 d1 1 0_1 bm25\n", "line 1, field 'score': not a number: '0_1'"),
    (parse_run, "r.tsv", "q1\td1\t1_0\n", "line 1, field 'rank': not an integer: '1_0'"),
    (parse_run, "r.tsv", "q1\td1\t1\t２.５\n", "line 1, field 'score': not a number: '２.５'"),
    (parse_qrels, "a.qrels", "q1 0 d1 1\nq1 0 d2 ２\n", "line 2, field 'label': not an integer: '２'"),
    (parse_qrels, "a.qrels", "q1 0 d1 0_1\n", "line 1, field 'label': not an integer: '0_1'"),
    (parse_qrels, "a.qrels", "q1 0 d1 ١\n", "line 1, field 'label': not an integer: '١'"),
    # Unicode spaces are no column separators: the column that holds one is named
    (
        parse_run,
        "r.run",
        f"q1 Q0 D{NBSP}1 1 2.0 bm25\n",
        f"line 1, field 'docid': contains whitespace: {f'D{NBSP}1'!r}",
    ),
    (
        parse_run,
        "r.run",
        f"q1 Q0 d1 1 2.0 bm{IDEOGRAPHIC}25\n",
        f"line 1, field 'tag': contains whitespace: {f'bm{IDEOGRAPHIC}25'!r}",
    ),
    (parse_run, "r.run", "q1 Q0 d\x1f1 1 2.0 bm25\n", "line 1, field 'docid': contains whitespace: 'd\\x1f1'"),
    (
        parse_run,
        "r.run",
        f"q1 Q0 d1 1 2.0{NBSP} bm25\n",
        f"line 1, field 'score': contains whitespace: {f'2.0{NBSP}'!r}",
    ),
    (parse_run, "r.tsv", f"q1\td1{NBSP}\t1\n", f"line 1, field 'docid': contains whitespace: {f'd1{NBSP}'!r}"),
    (parse_run, "r.tsv", f"q1\td1\t1{NBSP}\n", f"line 1, field 'rank': not an integer: {f'1{NBSP}'!r}"),
    (
        parse_qrels,
        "a.qrels",
        f"q1 0 D{NBSP}1 1\n",
        f"line 1, field 'docid': contains whitespace: {f'D{NBSP}1'!r}",
    ),
    (parse_topics, "t.tsv", f"q1{NBSP}\ttext\n", f"line 1, field 'qid': contains whitespace: {f'q1{NBSP}'!r}"),
]


@pytest.mark.parametrize(("parse", "name", "content", "where"), CASES, ids=[c[3] for c in CASES])
def test_parse_accepts_ascii_numbers_and_ascii_whitespace_only(parse, name, content, where):
    with pytest.raises(FormatError) as exc:
        parse(content.encode("utf-8"), filename=name)
    assert str(exc.value) == f"{name}, {where}"


def test_parse_run_unicode_space_in_an_ignored_extra_column_is_no_error():
    # extra trailing columns are ignored, whatever they hold; the columns before them are still checked
    data = f"q1 Q0 d1 1 2.0 bm25 note{NBSP}x\nq1 Q0 d2 2 １ bm25\n".encode()
    with pytest.raises(FormatError) as exc:
        parse_run(data, filename="r.run")
    assert str(exc.value) == "r.run, line 2, field 'score': not a number: '１'"
