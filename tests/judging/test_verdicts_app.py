"""The final-order verdicts through the app: the stop signal and its top_k, ties named as ties, the JSON
fields the judging-effort simulator reads, and soundness against the pool judged to the end."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.utils import translation
from rest_framework.test import APIClient

from bench import synthetic
from judging.models import Pair
from judging.scoring import leaderboard_data, stop_sentence
from judging.scoring.trust import stop_signal
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
    assert set(body["stop"]) == {
        "top_k",
        "confidence",
        "reached",
        "judgments_left_estimate",
        "settled",
        "judgments_to_settle",
    }
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
    assert body["stop"]["settled"] == all(e["verdict"] in ("settled", "tied") for e in head)
    # what stands between the lead and the stop: nothing once reached, else the estimate of judgments_to_stop
    if body["stop"]["reached"]:
        assert body["stop"]["judgments_left_estimate"] == 0
    else:
        pool = Pair.objects.filter(campaign=campaign, pooled=True).count()
        assert 0 < body["stop"]["judgments_left_estimate"] <= pool


# --------------------------------------------------------------------------- the stop signal in words


def test_stop_reached_leaves_no_judgments_before_the_stop_and_says_what_more_would_buy():
    """The demo's case (issue 42): 3 systems, both orders likely at 99%: the lead may stop; the 666 judgments
    left would settle the order for certain, and are not an estimate of what stands before the stop."""
    stop = stop_signal(np.array([0.99, 0.99]), 3, 666)
    assert stop["reached"] and not stop["settled"]
    assert stop["judgments_left_estimate"] == 0 and stop["judgments_to_settle"] == 666
    text = stop_sentence(stop, 0, 3)
    assert text == (
        "There are 3 systems, no more than the top 3 you chose. You may stop judging: the order of all 3 holds "
        "with 95% confidence, though it is not settled for certain. About 666 more judgments would settle it for "
        "certain."
    )
    assert "settle the rest" not in text


def test_stop_sentence_says_settled_only_of_orders_settled_for_certain():
    likely = stop_sentence(stop_signal(np.array([0.99, 0.99, 0.4]), 2, 40), 0, 4)
    assert likely.startswith("You may stop judging for the top 2: their order holds with 95% confidence, though")
    assert " is settled" not in likely
    certain = stop_sentence(stop_signal(np.array([1.0, 1.0, 0.4]), 2, 0, certain=True), 0, 4)
    assert certain == "You may stop judging for the top 2: their order is settled, no judgment left can change it."
    open_ = stop_signal(np.array([0.7, 1.0, 0.4]), 1, 12, to_stop=30)
    assert open_["judgments_left_estimate"] == 30 and open_["judgments_to_settle"] == 12 and not open_["reached"]
    assert stop_sentence(open_, 0, 4) == (
        "Keep judging for the top 1 system: its place does not hold with 95% confidence yet. About 30 more judgments "
        "should bring 95% confidence, as the order moves with the new labels; settling today's order for certain would "
        "take about 12."
    )


def test_stop_sentence_in_korean():
    with translation.override("ko"):
        text = stop_sentence(stop_signal(np.array([0.99, 0.99]), 3, 666), 0, 3)
    assert text.startswith("시스템은 3개로, 고른 상위 3개보다 많지 않습니다. 판정을 멈춰도 됩니다.")
    assert "판정을 약 666건 더 하면 확실히 확정됩니다." in text


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


def test_the_stop_estimate_of_an_mtc_campaign_follows_its_queues_order(make_user, monkeypatch):
    """In queue mode mtc the stop's estimate is given the queue's schedule: the pending pairs' queries in MTC's
    order (metrics.selection.mtc_schedule), the very pairs the queue serves; in shuffled, and past
    STOP_SCHEDULE_ENTRIES, none (the even pace)."""
    import metrics.final_order
    from judging.models import Campaign
    from judging.scoring import selection
    from judging.scoring.cube import run_cube

    bounds = sys.modules["judging.scoring.trust.bounds"]  # the package's name `bounds` is its function

    campaign, _, _ = random_campaign(make_user, seed=21)
    client = _client(campaign, make_user)
    given: list[dict] = []
    real = metrics.final_order.judgments_to_stop

    def spy(*args, **kwargs):
        given.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(metrics.final_order, "judgments_to_stop", spy)

    def estimate(mode: str, top_k: int = 2) -> int:
        Campaign.objects.filter(pk=campaign.pk).update(queue_mode=mode)
        campaign.refresh_from_db()
        body = client.get(f"/api/campaigns/{campaign.slug}/leaderboard/?per_query=false&top_k={top_k}&labels=humans")
        assert body.status_code == 200, body.content
        return int(body.json()["stop"]["judgments_left_estimate"])

    shuffled = estimate("shuffled")
    assert given and given[-1]["queue"] is None
    assert estimate("mtc") > 0 and given[-1]["queue"] is not None
    queue = np.asarray(given[-1]["queue"])
    served = selection.mtc_pairs(campaign)
    positions = {int(q): i for i, q in enumerate(run_cube(campaign).query_ids)}
    of_pair = dict(Pair.objects.filter(id__in=served.tolist()).values_list("id", "query_id"))
    assert sorted(queue.tolist()) == sorted(positions[of_pair[int(p)]] for p in served)
    assert np.asarray(given[-1]["queue_weights"]).shape == queue.shape
    assert shuffled > 0
    monkeypatch.setattr(bounds, "STOP_SCHEDULE_ENTRIES", 0)  # a campaign past it: the even pace
    given.clear()
    estimate("mtc", top_k=3)  # another top_k: computed afresh
    assert given and given[-1]["queue"] is None
    # sized from the cube: a large campaign's arrays are not built for it (at 100M entries, 11 s of a cold start)
    from judging.scoring.cache import Params, leaderboard

    def built(*_args):
        raise AssertionError("the campaign's arrays built for a schedule past the bound")

    monkeypatch.setattr(bounds, "campaign_arrays", built)
    assert bounds._mtc_schedule(leaderboard(campaign, Params(k=10)), np.array([0]), np.array([1])) is None
