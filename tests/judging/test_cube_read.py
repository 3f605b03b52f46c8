"""The run cube read from the database: each ranking in its (system, query) cell, padded with -1 to the depth; on
PostgreSQL the rows come through binary COPY (judging.scoring.cube.cursor_rows)."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from judging.models import Document, Pair, Query, Ranking, System
from judging.scoring.cube import copy_types, cube_read, cursor_rows, systems_key
from judging.services import judgment_record, run_import

pytestmark = pytest.mark.django_db

needs_postgres = pytest.mark.skipif(connection.vendor != "postgresql", reason="binary COPY is PostgreSQL's")


def test_each_ranking_lands_in_its_cell_and_short_or_missing_ones_are_padded(pooled):
    # a third system that ranks one document for q1 and nothing for q2; a fourth that ranks q2 only
    run_import(campaign=pooled, data=b"q1 Q0 d4 1 1.0 sparse\n", filename="sparse.run")
    run_import(campaign=pooled, data=b"q2 Q0 d1 1 2.0 q2only\nq2 Q0 d3 2 1.0 q2only\n", filename="q2only.run")
    cube = cube_read(pooled, systems_key(pooled))
    doc = dict(Document.objects.filter(campaign=pooled).values_list("docid", "id"))
    d1, d2, d3, d4 = doc["d1"], doc["d2"], doc["d3"], doc["d4"]
    assert cube.system_names == ["bm25", "dense", "q2only", "sparse"]
    assert cube.qids == ["q1", "q2"]
    expected = np.array(
        [
            [[d1, d3, d2], [d4, d2, -1]],  # bm25
            [[d3, d2, d1], [d2, d4, -1]],  # dense
            [[-1, -1, -1], [d1, d3, -1]],  # q2only: no q1 ranking at all
            [[d4, -1, -1], [-1, -1, -1]],  # sparse
        ],
        dtype=np.int64,
    )
    np.testing.assert_array_equal(cube.doc_ids, expected)
    np.testing.assert_array_equal(
        cube.query_ids, list(Query.objects.filter(campaign=pooled).order_by("id").values_list("id", flat=True))
    )


@needs_postgres
def test_rows_come_through_binary_copy_as_the_orm_reads_them(pooled, annotator):
    rankings = Ranking.objects.filter(system__campaign=pooled).order_by()
    qs = rankings.values_list("system_id", "query_id", "length", "doc_ids")
    with CaptureQueriesContext(connection) as queries:
        rows = cursor_rows(qs)
    assert [q["sql"][:6] for q in queries.captured_queries] == ["COPY ("]  # logged as Django logs a statement
    assert sorted(rows) == sorted((s, q, n, bytes(d)) for s, q, n, d in qs)
    assert {type(r[3]) for r in rows} == {bytes}
    # NULLs (pairs not judged yet) come back as None; a judged pair's label as its number
    judged = Pair.objects.filter(campaign=pooled).order_by("id").first()
    judgment_record(pair=judged, annotator=annotator, grade=2)
    labels = Pair.objects.filter(campaign=pooled).order_by().values_list("id", "label")
    with CaptureQueriesContext(connection) as queries:
        got = cursor_rows(labels)
    assert queries.captured_queries[0]["sql"].startswith("COPY (")
    assert sorted(got) == sorted(labels) and (judged.pk, 2) in got and None in {label for _, label in got}


@needs_postgres
def test_a_column_without_a_binary_copy_type_is_read_as_text(pooled):
    # whole numbers and text have COPY types; a computed column (no type of its own here) does not
    qs = Query.objects.filter(campaign=pooled).order_by("id").values_list("id", "qid")
    compiler = qs.query.get_compiler(using=qs.db)
    compiler.as_sql()
    assert copy_types(compiler) == ["int8", "text"]
    uuid_like = Query.objects.filter(campaign=pooled).order_by("id").extra(select={"x": "gen_random_uuid()"})
    compiler = uuid_like.values_list("id", "x").query.get_compiler(using="default")
    compiler.as_sql()
    assert copy_types(compiler) is None
    assert len(cursor_rows(uuid_like.values_list("id", "x"))) == 2
    # timestamps and JSON have binary COPY types, but Django loads their text: read as text, as the ORM gives them
    for model, columns in ((System, ("id", "imported_at")), (Document, ("id", "attributes"))):
        qs = model.objects.filter(campaign=pooled).order_by("id").values_list(*columns)
        compiler = qs.query.get_compiler(using=qs.db)
        compiler.as_sql()
        assert copy_types(compiler) is None, columns
        sql, params = compiler.as_sql()
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            assert cursor_rows(qs) == cursor.fetchall()
