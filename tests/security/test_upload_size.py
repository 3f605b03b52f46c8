"""Uploads have a ceiling (RELJUDGE_MAX_UPLOAD_MB), checked before the body is read: 413 naming the limit in the
reader's language, nothing written. Accepted files stream to disk and are parsed a line at a time."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile, TemporaryUploadedFile
from django.core.files.uploadhandler import StopUpload
from django.http import HttpResponse
from django.test import RequestFactory, override_settings
from django.urls import reverse
from django.utils import translation
from rest_framework.test import APIClient

from judging.models import Document, Query
from judging.services import IMPORTERS, documents_import
from judging.uploads import UploadLimitHandler, UploadLimitMiddleware

MB = 1024 * 1024
# 1.5 MB of topics: under Django's own limits and the job threshold, over a 1 MB upload limit.
TOPICS = "".join(f"q{i}\t{'wool sweater ' * 20}\n" for i in range(6_000)).encode()


def lead_api(lead) -> APIClient:
    client = APIClient()
    client.force_authenticate(lead)
    return client


@override_settings(RELJUDGE_MAX_UPLOAD_BYTES=MB)
def test_api_upload_over_the_limit_is_413_naming_the_limit_and_writes_nothing(campaign, lead):
    assert 1.4 * MB < len(TOPICS) < 1.6 * MB
    response = lead_api(lead).post(
        f"/api/campaigns/{campaign.slug}/upload/topics/", {"file": SimpleUploadedFile("t.tsv", TOPICS)}
    )
    assert response.status_code == 413
    body = response.json()
    assert body["limit_bytes"] == MB
    assert body["detail"] == "This upload is 1.5 MB; an upload may be at most 1 MB. Nothing was imported."
    assert not Query.objects.exists()


@override_settings(RELJUDGE_MAX_UPLOAD_BYTES=MB)
def test_web_upload_over_the_limit_is_a_413_page_in_the_readers_language(client, campaign, lead):
    client.force_login(lead)
    data = {"kind": "topics", "topics-kind": "topics", "topics-file": SimpleUploadedFile("t.tsv", TOPICS)}
    url = reverse("judging:campaign_upload", args=[campaign.slug])
    with translation.override("en"):  # put back afterwards whatever language the request activates
        response = client.post(url, data, HTTP_ACCEPT_LANGUAGE="ko")
    assert response.status_code == 413
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "이 업로드는 1.5 MB입니다. 업로드는 최대 1 MB까지 할 수 있습니다. 아무것도 가져오지 않았습니다." in page
    assert not Query.objects.exists()
    # and the same upload under the limit is imported
    with override_settings(RELJUDGE_MAX_UPLOAD_BYTES=2 * MB):
        data["topics-file"] = SimpleUploadedFile("t.tsv", TOPICS)
        assert client.post(url, data).status_code == 302
    assert Query.objects.count() == 6_000


def test_the_default_limit_comes_from_the_environment(settings):
    assert settings.RELJUDGE_MAX_UPLOAD_BYTES == 64 * MB


@override_settings(RELJUDGE_MAX_UPLOAD_BYTES=MB)
def test_a_body_of_undeclared_length_is_counted_as_it_streams():
    """Past the limit the handler stops reading the file and marks the request; the middleware then answers 413
    whatever the view made of a request without its file."""
    request = RequestFactory().post("/api/campaigns/demo/upload/topics/")
    handler = UploadLimitHandler(request)
    assert handler.receive_data_chunk(b"x" * (MB // 2), 0) == b"x" * (MB // 2)
    handler.receive_data_chunk(b"x" * (MB // 2), MB // 2)
    assert not getattr(request, "upload_too_large", False)
    with pytest.raises(StopUpload):
        handler.receive_data_chunk(b"x", MB)
    assert request.upload_too_large

    response = UploadLimitMiddleware(lambda r: HttpResponse(status=400))(request)
    assert response.status_code == 413
    assert json.loads(response.content)["detail"] == (
        "This upload is larger than 1 MB, the most an upload may be. Nothing was imported."
    )


def test_web_upload_reaches_the_importer_as_a_file_on_disk(client, campaign, lead, monkeypatch):
    seen = []
    real = IMPORTERS["topics"]

    def record(*, data, **kwargs):
        seen.append(data)
        return real(data=data, **kwargs)

    monkeypatch.setitem(IMPORTERS, "topics", record)
    client.force_login(lead)
    data = {"kind": "topics", "topics-kind": "topics", "topics-file": SimpleUploadedFile("t.tsv", b"q1\twool\n")}
    assert client.post(reverse("judging:campaign_upload", args=[campaign.slug]), data).status_code == 302
    assert isinstance(seen[0], TemporaryUploadedFile)
    assert list(Query.objects.values_list("qid", "text")) == [("q1", "wool")]


def test_a_documents_import_from_a_file_holds_a_batch_not_the_file(campaign, tmp_path):
    """12 MB of documents read from a file: the import's peak memory stays a small fraction of the file."""
    path = tmp_path / "docs.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for i in range(12_000):
            record = {"docid": f"d{i}", "title": f"item {i}", "text": f"lambswool {i} " * 80, "attributes": {"n": i}}
            out.write(json.dumps(record) + "\n")
    size = path.stat().st_size
    assert size > 12 * 10**6
    with path.open("rb") as data:
        tracemalloc.start()
        try:
            summary = documents_import(campaign=campaign, data=data, filename="docs.jsonl")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert summary.added == 12_000
    assert peak < size / 4, f"peak {peak:,} bytes for a {size:,}-byte file"
    assert Document.objects.get(docid="d11999").attributes == {"n": 11999}
