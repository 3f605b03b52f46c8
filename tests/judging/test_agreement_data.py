"""Agreement, review queue and annotator quality read from real judgments."""

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from judging.models import Pair
from judging.selectors.agreement import (
    annotator_quality,
    campaign_agreement,
    disputed_pair_ids,
    policy_stability,
    ratings_matrix,
    review_queue,
)
from judging.services import adjudication_set, campaign_create, judgment_record, membership_add, run_import
from tests.data import THREE_ANNOTATOR_GRADES


@pytest.fixture
def judged(make_user):
    campaign = campaign_create(slug="agree", pool_depth=8)
    run = "".join(f"q{i // 4} Q0 d{i} {i % 4 + 1} {10 - i % 4} sys\n" for i in range(8))
    run_import(campaign=campaign, data=run.encode(), filename="r")
    users = [make_user(n) for n in ("alice", "bob", "carol")]
    for u in users:
        membership_add(campaign=campaign, user=u, role="annotator")
    lead = make_user("boss")
    membership_add(campaign=campaign, user=lead, role="lead")
    pairs = {p.document.docid: p for p in Pair.objects.filter(campaign=campaign).select_related("document", "campaign")}
    for i, row in enumerate(THREE_ANNOTATOR_GRADES):
        for u, g in zip(users, row, strict=True):
            if g is not None:
                judgment_record(pair=pairs[f"d{i}"], annotator=u, grade=g, seconds_spent=5 + i)
    return campaign, users, lead, pairs


def test_ratings_matrix_layout(judged):
    campaign, _, _, pairs = judged
    r = ratings_matrix(campaign=campaign)
    assert r.usernames == ["alice", "bob", "carol"]
    # Rows in pair row-id order, which is not the run's order (pools are inserted shuffled).
    by_id = sorted(range(len(THREE_ANNOTATOR_GRADES)), key=lambda i: pairs[f"d{i}"].id)
    expected = np.array([[np.nan if g is None else g for g in THREE_ANNOTATOR_GRADES[i]] for i in by_id], dtype=float)
    np.testing.assert_array_equal(r.values, expected)


def test_campaign_agreement_matches_reference_implementations(judged):
    campaign, *_ = judged
    data = campaign_agreement(campaign=campaign, n_resamples=200)
    values = np.array([[np.nan if g is None else g for g in row] for row in THREE_ANNOTATOR_GRADES], dtype=float)
    ref_alpha = krippendorff.alpha(reliability_data=values.T, level_of_measurement="ordinal", value_domain=[0, 1, 2])
    assert data["overall"]["alpha"] == pytest.approx(ref_alpha, abs=1e-9)
    low, high = data["overall"]["alpha_ci"]
    assert low <= data["overall"]["alpha"] <= high
    ab = next(p for p in data["pairs"] if (p["a"], p["b"]) == ("alice", "bob"))
    a, b = values[:, 0], values[:, 1]
    assert ab["n"] == 8
    assert ab["kappa"] == pytest.approx(cohen_kappa_score(a, b, labels=[0, 1, 2]), abs=1e-9)
    assert ab["qwk"] == pytest.approx(cohen_kappa_score(a, b, labels=[0, 1, 2], weights="quadratic"), abs=1e-9)
    assert np.array(ab["confusion"]).sum() == 8 and np.trace(ab["confusion"]) == 4
    assert {q["qid"] for q in data["queries"]} == {"q0", "q1"}


def test_review_queue_lists_unsure_and_disputed(judged):
    campaign, users, lead, pairs = judged
    judgment_record(pair=pairs["d4"], annotator=users[2], unsure=True, note="can't tell")
    disputed = set(
        Pair.objects.filter(id__in=disputed_pair_ids(campaign=campaign)).values_list("document__docid", flat=True)
    )
    # d3 (2,0,1) and d5 (0,1,2) are two apart; d7 (1,0,1) has a majority and is one apart
    assert disputed == {"d3", "d5"}
    queue = {p.document.docid for p in review_queue(campaign=campaign)}
    assert queue == {"d3", "d4", "d5"}
    assert {p.document.docid for p in review_queue(campaign=campaign, kind="unsure")} == {"d4"}
    adjudication_set(pair=pairs["d3"], lead=lead, grade=1, note="partly about it")
    assert {p.document.docid for p in review_queue(campaign=campaign)} == {"d4", "d5"}


def test_annotator_quality_figures(judged):
    campaign, users, lead, pairs = judged
    adjudication_set(pair=pairs["d3"], lead=lead, grade=2)
    Pair.objects.filter(id=pairs["d0"].id).update(gold_label=2)
    Pair.objects.filter(id=pairs["d2"].id).update(gold_label=1)
    rows = {r["annotator"]: r for r in annotator_quality(campaign=campaign)}
    assert rows["alice"]["judgments"] == 8 and rows["carol"]["judgments"] == 5
    assert rows["alice"]["median_seconds"] == pytest.approx(np.median([5 + i for i in range(8)]))
    assert rows["alice"]["adjudicated_agreement"] == 1.0 and rows["bob"]["adjudicated_agreement"] == 0.0
    assert rows["alice"]["gold_n"] == 2 and rows["alice"]["gold_accuracy"] == 0.5


def test_policy_stability_current_policy_has_tau_one(judged):
    campaign, *_ = judged
    run_import(campaign=campaign, data=b"q0 Q0 d3 1 9 other\nq0 Q0 d0 2 8 other\nq1 Q0 d5 1 3 other\n", filename="o")
    rows = {r["policy"]: r for r in policy_stability(campaign=campaign, k=2)}
    assert set(rows) == {"median", "majority", "mean", "max", "min"}
    assert rows["median"]["current"] and rows["median"]["tau"] == pytest.approx(1.0)
