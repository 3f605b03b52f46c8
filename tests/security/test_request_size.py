"""JSON and form bodies of the API are refused over 1 MiB before they are parsed (413), uploads excepted."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from judging.api.parsers import BODY_MAX_BYTES
from judging.models import Judgment, Query
from judging.services import run_import
from tests.data import RUN_BM25


@pytest.fixture
def pooled(campaign):
    run_import(campaign=campaign, data=RUN_BM25.encode(), filename="bm25.run")
    return campaign


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_judgment_post_of_60_mb_is_413_before_parsing(pooled, annotator):
    body = json.dumps({"campaign": "demo", "qid": "q1", "docid": "d1", "grade": 1, "note": "x" * (60 * 1024 * 1024)})
    response = api(annotator).post("/api/judgments/", body, content_type="application/json")
    assert response.status_code == 413
    assert response.json() == {
        "detail": f"The request body is {len(body):,} bytes; a JSON or form body may be at most 1,048,576 bytes. "
        "Send files to the upload endpoints (multipart/form-data)."
    }
    assert not Judgment.objects.exists()


def test_judgment_post_just_under_the_limit_is_parsed(pooled, annotator):
    # the body is parsed (the serializer then names the note as too long): the limit is on bytes, not fields
    padding = BODY_MAX_BYTES - 200
    body = json.dumps({"campaign": "demo", "qid": "q1", "docid": "d1", "grade": 1, "note": "x" * padding})
    response = api(annotator).post("/api/judgments/", body, content_type="application/json")
    assert response.status_code == 400 and list(response.json()) == ["note"]
    # and a body one byte over is not
    body = json.dumps({"campaign": "demo", "qid": "q1", "docid": "d1", "grade": 1, "note": "x"})
    body = body[:-1] + " " * (BODY_MAX_BYTES + 1 - len(body)) + "}"
    assert len(body) == BODY_MAX_BYTES + 1
    assert api(annotator).post("/api/judgments/", body, content_type="application/json").status_code == 413


def test_form_body_over_the_limit_is_413_while_file_uploads_keep_their_own_limit(pooled, annotator, lead):
    response = api(annotator).post(
        "/api/judgments/",
        f"campaign=demo&qid=q1&docid=d1&grade=1&note={'x' * (2 * BODY_MAX_BYTES)}",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 413
    assert not Judgment.objects.exists()
    # a 2 MiB topics file is over the body limit but a normal multipart upload
    topics = "".join(f"q{i}\t{'wool sweater ' * 20}\n" for i in range(8_000)).encode()
    assert len(topics) > 2 * BODY_MAX_BYTES
    response = api(lead).post(
        "/api/campaigns/demo/upload/topics/", {"file": SimpleUploadedFile("t.tsv", topics)}, format="multipart"
    )
    assert response.status_code == 200
    assert Query.objects.filter(is_stub=False).count() == 8_000
