"""The caller's error apart from ours (issue 39): a request's own parameters answer 400 naming the parameter; a
failure inside the computation is a 500, logged with the campaign, the parameters and the stack."""

from __future__ import annotations

import logging

import pytest

from judging.scoring import cache, process_caches_clear
from tests.data import client_for


@pytest.mark.parametrize(
    "query, field",
    [
        ("k=0", "k"),
        ("k=1001", "k"),
        ("top_k=0", "top_k"),
        ("top_k=101", "top_k"),
        ("threshold=-1", "threshold"),
        ("measure=nDCG@5", "measure"),  # a cutoff other than k
        ("measure=ERR", "measure"),
        ("segment=nobody-has-it", "segment"),
        ("labels=model:nobody", "labels"),
        ("labels=oracle", "labels"),
        ("per_query=maybe", "per_query"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(tiny, lead, query, field):
    response = client_for(lead).get(f"/api/campaigns/tiny/leaderboard/?{query}")
    assert response.status_code == 400, response.content[:300]
    assert field in response.json(), response.json()


@pytest.mark.parametrize("query", ["k=1", "k=1000", "top_k=1", "top_k=100", "threshold=0", "measure=MAP"])
def test_values_inside_the_range_answer_200(tiny, lead, query):
    assert client_for(lead).get(f"/api/campaigns/tiny/leaderboard/?{query}").status_code == 200


def test_a_failure_inside_the_scoring_is_a_500_with_its_context_in_the_log(tiny, lead, monkeypatch, caplog):
    """Before, every ValueError from the scoring code became a 400 that blamed the caller."""

    def broken(*args, **kwargs):
        raise ValueError("an invariant of the score table broke")

    monkeypatch.setattr(cache, "_score", broken, raising=True)
    process_caches_clear()
    client = client_for(lead)
    client.raise_request_exception = False
    with caplog.at_level(logging.ERROR, logger="judging.internal"):
        response = client.get("/api/campaigns/tiny/leaderboard/?k=5&gain=exponential")
    assert response.status_code == 500
    (record,) = [r for r in caplog.records if r.name == "judging.internal"]
    message = record.getMessage()
    assert "campaign tiny" in message and "k=5&gain=exponential" in message and f"user {lead.pk}" in message
    assert "an invariant of the score table broke" in message and record.exc_info is not None


def test_a_failure_inside_a_page_is_a_500_too(tiny, lead, client, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise ValueError("broken inside")

    monkeypatch.setattr(cache, "_score", broken, raising=True)
    process_caches_clear()
    client.force_login(lead)
    client.raise_request_exception = False
    with caplog.at_level(logging.ERROR, logger="judging.internal"):
        response = client.get("/campaigns/tiny/leaderboard/")
    assert response.status_code == 500
    assert any("campaign tiny" in r.getMessage() for r in caplog.records if r.name == "judging.internal")
