"""The leaderboard bridge: imported runs and labels scored exactly as trec_eval, cached per query."""

import io
import json
import logging
import re

import numpy as np
import pytest
from django.core.management import call_command
from django.utils import translation

from judging import scoring
from judging.models import Pair
from judging.scoring import Params, leaderboard, leaderboard_data
from judging.services import campaign_create, judgment_record, membership_add, qrels_import, run_import
from metrics.measures import BASES
from tests.oracle import oracle, random_campaign


@pytest.mark.parametrize(
    ("k", "threshold", "gain", "judged_only"),
    [
        (10, 1, "linear", False),
        (5, 2, "linear", False),
        (3, 1, "exponential", False),
        (10, 1, "linear", True),
    ],
)
def test_scores_match_pytrec_eval_every_query(make_user, k, threshold, gain, judged_only):
    campaign, runs, qrels = random_campaign(make_user)
    data = leaderboard_data(campaign=campaign, k=k, gain=gain, threshold=threshold, judged_only=judged_only)
    expected = oracle(runs, qrels, k, threshold, gain=gain, judged_only=judged_only)
    assert data["queries"] == len(qrels) == 7
    for system in data["systems"]:
        per = expected[system["name"]]
        assert set(system["per_query"]) == set(qrels)
        for q, values in per.items():
            for m, v in values.items():
                assert system["per_query"][q][m] == pytest.approx(v, abs=1e-9), (system["name"], q, m)
        for m in per["q0"]:
            assert system["measures"][m] == pytest.approx(np.mean([per[q][m] for q in per]), abs=1e-9)
    gamma = next(s for s in data["systems"] if s["name"] == "gamma")
    assert all(v == 0 for m, v in gamma["per_query"]["q0"].items())


def test_scores_command_json_shape_and_table(make_user):
    campaign, runs, qrels = random_campaign(make_user)
    out = io.StringIO()
    call_command("scores", campaign.slug, "--json", "--per-query", "--k", "5", stdout=out)
    data = json.loads(out.getvalue())
    assert set(data) >= {"campaign", "k", "gain", "threshold", "queries", "systems"}
    assert data["k"] == 5 and data["systems"][0]["measures"].keys() == {
        "P@5",
        "R@5",
        "F1@5",
        "Hit@5",
        "MRR",
        "MAP",
        "nDCG@5",
        "bpref",
        "Judged@5",
    }
    expected = oracle(runs, qrels, 5, 1)
    for system in data["systems"]:
        for q, values in expected[system["name"]].items():
            for m, v in values.items():
                assert system["per_query"][q][m] == pytest.approx(v, abs=1e-9)
    table = io.StringIO()
    call_command("scores", campaign.slug, stdout=table)
    lines = table.getvalue().splitlines()
    assert "7 queries with labels" in lines[0]
    assert lines[1].split()[:3] == ["system", "P@10", "R@10"]
    assert {line.split()[0] for line in lines[2:5]} == {"alpha", "beta", "gamma"}


def test_judged_at_k_counts_labelled_share(make_user):
    campaign = campaign_create(slug="j", pool_depth=3)
    run_import(campaign=campaign, data=b"q1 Q0 a 1 3 s\nq1 Q0 b 2 2 s\nq1 Q0 c 3 1 s\nq1 Q0 d 4 0.5 s\n", filename="r")
    user = make_user("u")
    membership_add(campaign=campaign, user=user, role="annotator")
    qrels_import(campaign=campaign, data=b"q1 0 a 1\nq1 0 c 0\n", filename="q", annotator=user)
    data = leaderboard_data(campaign=campaign, k=3)
    assert data["systems"][0]["measures"]["Judged@3"] == pytest.approx(2 / 3)
    assert data["systems"][0]["measures"]["P@3"] == pytest.approx(1 / 3)


def test_cache_rescores_only_the_query_whose_label_changed(make_user):
    campaign, runs, qrels = random_campaign(make_user)
    user = campaign.memberships.get().user
    lb1 = leaderboard(campaign)
    before = lb1.table.scores.copy()
    assert lb1.rescored == 8
    assert leaderboard(campaign).rescored == 0
    # a new label on an unjudged pooled pair of q3
    pair = Pair.objects.filter(campaign=campaign, query__qid="q3", label__isnull=True, pooled=True).first()
    judgment_record(pair=pair, annotator=user, grade=2)
    lb2 = leaderboard(campaign)
    assert lb2.rescored == 1
    q3 = lb2.cube.qids.index("q3")
    others = [i for i in range(len(lb2.cube.qids)) if i != q3]
    np.testing.assert_allclose(lb2.table.scores[:, :, others], before[:, :, others], atol=1e-12)
    assert not np.allclose(lb2.table.scores[:, :, q3], before[:, :, q3])
    # and the result equals a cold computation
    scoring.process_caches_clear()
    from django.core.cache import cache

    cache.clear()
    cold = leaderboard(campaign)
    np.testing.assert_allclose(cold.table.scores, lb2.table.scores, atol=1e-12)


def test_cold_leaderboard_computations_are_logged(make_user, caplog):
    campaign, _, _ = random_campaign(make_user)
    caplog.set_level(logging.DEBUG, logger="judging.scoring")
    leaderboard(campaign)
    leaderboard(campaign)  # warm: nothing rescored, nothing logged
    cold = [r for r in caplog.records if r.name == "judging.scoring.cache"]
    assert len(cold) == 1 and cold[0].levelno == logging.INFO
    assert re.fullmatch(
        r"leaderboard of \S+ \(k=10, gain=linear, threshold=1, condensed=False, policy=median\): "
        r"rescored 8 of 8 queries for \d+ systems in \d+\.\d\d s",
        cold[0].getMessage(),
    )


def test_unsure_judgment_leaves_scores_unchanged(make_user):
    campaign, runs, qrels = random_campaign(make_user)
    user = campaign.memberships.get().user
    before = leaderboard(campaign).means()
    pair = Pair.objects.filter(campaign=campaign, query__qid="q2", label__isnull=True, pooled=True).first()
    judgment_record(pair=pair, annotator=user, unsure=True, tentative_grade=2, note="can't tell")
    np.testing.assert_allclose(leaderboard(campaign).means(), before, atol=1e-12)


def test_changed_judgment_changes_scores(make_user):
    campaign, runs, qrels = random_campaign(make_user)
    user = campaign.memberships.get().user
    pair = Pair.objects.filter(campaign=campaign, query__qid="q1", label=0).first()
    before = leaderboard(campaign).means()
    judgment_record(pair=pair, annotator=user, grade=2)
    after = leaderboard(campaign).means()
    assert not np.allclose(before, after)
    judgment_record(pair=pair, annotator=user, grade=0)
    np.testing.assert_allclose(leaderboard(campaign).means(), before, atol=1e-15)


def test_shared_cache_serves_another_process(make_user):
    campaign, runs, qrels = random_campaign(make_user)
    first = leaderboard(campaign)
    scoring.process_caches_clear()  # a second server process: empty memory, same database cache
    second = leaderboard(campaign)
    assert second.rescored == 0
    np.testing.assert_array_equal(second.table.scores, first.table.scores)


def test_policy_switch_uses_other_aggregation(make_user):
    campaign = campaign_create(slug="pol", pool_depth=2)
    run_import(campaign=campaign, data=b"q1 Q0 a 1 2 s\nq1 Q0 b 2 1 s\n", filename="r")
    users = [make_user(n) for n in ("u1", "u2")]
    for u in users:
        membership_add(campaign=campaign, user=u, role="annotator")
    pair = Pair.objects.get(document__docid="a")
    judgment_record(pair=pair, annotator=users[0], grade=0)
    judgment_record(pair=pair, annotator=users[1], grade=2)
    judgment_record(pair=Pair.objects.get(document__docid="b"), annotator=users[0], grade=2)
    median = leaderboard(campaign, Params(k=1)).means()
    maximum = leaderboard(campaign, Params(k=1, policy="max")).means()
    assert median[0, 0] == 0.0  # P@1: a's median of (0, 2) ties to the lower grade 0
    assert maximum[0, 0] == 1.0


@pytest.mark.parametrize("bad", [Params(k=0), Params(gain="log"), Params(threshold=-1), Params(policy="vote")])
def test_params_validation(bad):
    with pytest.raises(ValueError):
        bad.validate()


def test_systems_imported_out_of_name_order_keep_their_own_scores(make_user):
    campaign = campaign_create(slug="order", pool_depth=1)
    run_import(campaign=campaign, data=b"q1 Q0 good 1 1 zeta\n", filename="z")  # imported first, sorts last
    run_import(campaign=campaign, data=b"q1 Q0 bad 1 1 alpha\n", filename="a")
    user = make_user("u")
    membership_add(campaign=campaign, user=user, role="annotator")
    qrels_import(campaign=campaign, data=b"q1 0 good 2\nq1 0 bad 0\n", filename="q", annotator=user)
    data = leaderboard_data(campaign=campaign, k=1)
    assert {s["name"]: s["measures"]["P@1"] for s in data["systems"]} == {"alpha": 0.0, "zeta": 1.0}


@pytest.mark.parametrize("options", [[], ["--k", "3", "--attribute", "brand", "--micro"], ["--gain", "exponential"]])
def test_scores_command_json_is_what_the_json_module_writes(make_user, options):
    """`scores --json` writes each per-query object by a format string: the text of json.dumps(indent=1)."""
    campaign, runs, qrels = random_campaign(make_user, seed=12)
    from judging.models import Document

    docs = list(Document.objects.filter(campaign=campaign).order_by("id"))
    for i, doc in enumerate(docs):
        doc.attributes = {"brand": f"b{i % 3}"}
    Document.objects.bulk_update(docs, ["attributes"])
    out = io.StringIO()
    call_command("scores", campaign.slug, "--json", "--per-query", *options, stdout=out)
    data = json.loads(out.getvalue())
    assert data["systems"][0]["per_query"]
    assert out.getvalue() == json.dumps(data, indent=1) + "\n"


@pytest.mark.django_db(transaction=True)
def test_score_blocks_are_written_once_committed_and_leave_the_connection_durable(make_user):
    """After a judgment the judged query's block reaches the shared cache, committed (another process reads it),
    and the write's relaxed durability (PostgreSQL: synchronous_commit off, for that transaction only: a lost
    block is scored again) does not stay on the connection for the judgments that follow."""
    from django.db import connection

    campaign, runs, qrels = random_campaign(make_user)
    leaderboard(campaign)
    user = make_user("blocks")
    membership_add(campaign=campaign, user=user, role="annotator")
    pair = Pair.objects.filter(campaign=campaign, pooled=True, label__isnull=True).select_related("campaign").first()
    judgment_record(pair=pair, annotator=user, grade=2)
    after = leaderboard(campaign)
    assert after.rescored == 1
    scoring.process_caches_clear()  # another server process: it finds the new block in the shared cache
    other = leaderboard(campaign)
    assert other.rescored == 0
    np.testing.assert_array_equal(other.table.scores, after.table.scores)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone()[0] == "on"


@pytest.mark.parametrize("odd", [float("nan"), float("inf"), True, 1])
def test_scores_json_shortcut_falls_back_to_the_json_module_for_a_value_it_cannot_write(odd):
    """The per-query text shortcut writes finite floats only; a NaN, an infinity, a bool or an int in any system's
    values sends the whole document through json.dumps, which writes each as the json module does."""
    from judging.management.commands.scores import scores_dumps

    data = {
        "campaign": "c",
        "systems": [
            {"name": "a", "per_query": {"q1": {"P@10": 0.5, "R@10": 0.25}, "q2": {"P@10": 0.1, "R@10": 1.0}}},
            {"name": "b", "per_query": {"q1": {"P@10": 0.5, "R@10": odd}, "q2": {"P@10": 0.0, "R@10": 0.0}}},
        ],
    }
    assert scores_dumps(data) == json.dumps(data, indent=1)
    fine = json.loads(json.dumps(data).replace("NaN", "0.5").replace("Infinity", "0.5"))
    fine["systems"][1]["per_query"]["q1"]["R@10"] = 0.75
    assert scores_dumps(fine) == json.dumps(fine, indent=1)


def test_scores_json_carries_per_query_values_on_request_only(make_user):
    """Issue 45 (SPEC 4): ``scores --json`` gives the means; ``--per-query`` adds each system's per_query object,
    and without --json prints trec_eval -q's lines (measure, qid, value per system)."""
    campaign, _runs, _qrels = random_campaign(make_user)
    out = io.StringIO()
    call_command("scores", campaign.slug, "--json", stdout=out)
    assert all("per_query" not in s for s in json.loads(out.getvalue())["systems"])
    out = io.StringIO()
    call_command("scores", campaign.slug, "--json", "--per-query", stdout=out)
    data = json.loads(out.getvalue())
    assert all(s["per_query"] for s in data["systems"])
    text = io.StringIO()
    call_command("scores", campaign.slug, "--per-query", stdout=text)
    lines = text.getvalue().splitlines()
    for system in data["systems"]:
        assert f"runid\tall\t{system['name']}" in lines
        qid, values = next(iter(system["per_query"].items()))
        assert f"nDCG@10\t{qid}\t{values['nDCG@10']:.4f}" in lines


def test_measure_titles_label_every_measure_of_the_registry_in_both_languages():
    assert set(scoring.MEASURE_TITLES) == set(BASES)
    english = {base: scoring.measure_title(f"{base}@10") for base in BASES}
    with translation.override("ko"):
        korean = {base: scoring.measure_title(f"{base}@10") for base in BASES}
    assert all(english[base] and korean[base] != english[base] for base in BASES)
