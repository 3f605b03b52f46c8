"""The final-order verdicts through the app: the stop signal and its top_k, ties named as ties, the JSON
fields the judging-effort simulator reads, and soundness against the pool judged to the end."""

from __future__ import annotations

import io

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from bench import synthetic
from judging.models import Pair
from judging.scoring import leaderboard_data
from judging.services import (
    campaign_create,
    judgment_record,
    membership_add,
    qrels_import,
    run_import,
    scale_from_values,
)
from tests.oracle import random_campaign


def _client(campaign, make_user):
    lead = make_user("verdictlead")
    membership_add(campaign=campaign, user=lead, role="lead")
    client = APIClient()
    client.force_authenticate(lead)
    return client


def test_the_leaderboard_json_carries_verdicts_p_holds_stop_and_the_queries_covered(make_user):
    campaign, _, _ = random_campaign(make_user, seed=21)
    client = _client(campaign, make_user)
    body = client.get(f"/api/campaigns/{campaign.slug}/leaderboard/?per_query=false&top_k=2").json()
    assert set(body["stop"]) == {"top_k", "confidence", "reached", "judgments_left_estimate"}
    assert body["stop"]["top_k"] == 2 and body["stop"]["confidence"] == 0.95
    assert body["queries_without_labels"] == 1 and body["verdict_queries"] == 8  # q7: pooled pairs, no label
    for entry in body["settled"]:
        assert entry["verdict"] in ("settled", "tied", "likely", "open")
        assert 0.0 <= entry["p_holds"] <= 1.0
        assert (entry["verdict"] == "likely") == (not entry["settled"] and 0.95 <= entry["p_holds"] < 1.0 + 1e-12)
        assert entry["settled"] == (entry["verdict"] == "settled")
    # the stop signal: Bonferroni over the top 2 comparisons
    head = body["settled"][:2]
    assert body["stop"]["reached"] == (sum(1 - e["p_holds"] for e in head) <= 0.05 + 1e-9)


@pytest.mark.parametrize("raw", ["0", "101", "three"])
def test_a_bad_top_k_is_a_400_naming_the_field(make_user, raw):
    campaign, _, _ = random_campaign(make_user, seed=22)
    client = _client(campaign, make_user)
    response = client.get(f"/api/campaigns/{campaign.slug}/leaderboard/?top_k={raw}")
    assert response.status_code == 400
    assert "top_k" in response.json()
    with pytest.raises(CommandError, match="--top-k"):
        call_command("scores", campaign.slug, "--top-k", raw, stdout=io.StringIO())


def _twins(make_user):
    """Systems twin1 and twin2 return the same ranking (tied whatever is judged); other differs."""
    campaign = campaign_create(slug="twins", pool_depth=5)
    lines = []
    for q in range(3):
        for name, docs in (("twin1", range(5)), ("twin2", range(5)), ("other", range(3, 8))):
            lines += [f"q{q} Q0 d{d} {r + 1} {10 - r} {name}\n" for r, d in enumerate(docs)]
    run_import(campaign=campaign, data="".join(lines).encode(), filename="runs.trec")
    user = make_user("twinjudge")
    membership_add(campaign=campaign, user=user, role="annotator")
    qrels_import(campaign=campaign, data=b"q0 0 d0 2\nq0 0 d1 0\nq1 0 d3 1\n", filename="q.qrels", annotator=user)
    return campaign, user


def test_identical_systems_are_tied_not_open(make_user):
    campaign, _ = _twins(make_user)
    data = leaderboard_data(campaign=campaign, k=5, per_query=False)
    ranked = [tuple(entry["systems"]) for entry in data["settled"]]
    twins = next(entry for entry in data["settled"] if set(entry["systems"]) == {"twin1", "twin2"})
    assert twins["verdict"] == "tied" and twins["p_holds"] == 1.0 and not twins["settled"], ranked
    out = io.StringIO()
    call_command("scores", campaign.slug, "--k", "5", stdout=out)
    assert "twin1 above twin2: tied (no judgment left can part them)" in out.getvalue()


def _realistic_campaign(make_user, seed: int):
    """bench/synthetic.py's realistic preset (12 systems in families, near ties, grades 0-3) over 8 queries,
    pooled to depth 10, 80% of the pool labelled with its true grade."""
    coll = synthetic.generate("realistic", systems=12, queries=8, depth=30, seed=seed)
    campaign = campaign_create(slug=f"real{seed}", pool_depth=10, scale=scale_from_values(coll.scale))
    runs = "".join(coll.run_text(s) for s in range(len(coll.systems)))
    run_import(campaign=campaign, data=runs.encode(), filename="runs.trec")
    user = make_user(f"assessor{seed}")
    membership_add(campaign=campaign, user=user, role="annotator")
    rng = np.random.default_rng(seed)
    pooled = coll.pool(10) & (rng.random(coll.grades.shape) < 0.8)
    q, d = np.nonzero(pooled)
    lines = "".join(f"{coll.qid(a)} 0 {coll.docid(a, b)} {coll.grades[a, b]}\n" for a, b in zip(q, d, strict=True))
    qrels_import(campaign=campaign, data=lines.encode(), filename="q.qrels", annotator=user)
    return campaign, coll.scale[-1]


@pytest.mark.parametrize("preset", ["random", "realistic"])
def test_settled_orders_hold_and_likely_ones_mostly_do_once_the_pool_is_judged(make_user, preset):
    """Judge the rest of the pool at random: every order called settled holds (the property test in
    tests/metrics/test_verdicts.py covers every measure and grading; this is the app's wiring)."""
    if preset == "realistic":
        campaign, top = _realistic_campaign(make_user, seed=23)
    else:
        campaign, _, _ = random_campaign(make_user, seed=23)
        top = 2
    rng = np.random.default_rng(23)
    before = leaderboard_data(campaign=campaign, k=5, measure="P", per_query=False)
    user = make_user("finisher")
    membership_add(campaign=campaign, user=user, role="annotator")
    for pair in Pair.objects.filter(campaign=campaign, pooled=True, label__isnull=True).select_related("campaign"):
        judgment_record(pair=pair, annotator=user, grade=int(rng.integers(0, top + 1)))
    after = leaderboard_data(campaign=campaign, k=5, measure="P", per_query=False)
    means = {s["name"]: s["measures"]["P@5"] for s in after["systems"]}
    assert after["queries_without_labels"] == 0
    if preset == "realistic":  # 80% judged: some order is settled already, and is checked below
        assert any(e["verdict"] == "settled" for e in before["settled"])
    for entry in before["settled"]:
        a, b = entry["systems"]
        if entry["verdict"] == "settled":
            assert means[a] > means[b]
        if entry["verdict"] == "tied":
            assert means[a] == pytest.approx(means[b])
    assert all(e["verdict"] in ("settled", "tied") for e in after["settled"])
