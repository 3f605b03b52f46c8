"""How far to trust the leaderboard, through the database and the API, against pytrec_eval where an oracle exists:
bpref, score bounds, curves, segments, pool bias, diversity, micro averages."""

import io
import re

import numpy as np
import pytest
import pytrec_eval
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from judging.api import leaderboard_text
from judging.models import Campaign
from judging.scoring import Params, leaderboard, leaderboard_data, trust
from judging.services import documents_import, membership_add
from tests.oracle import random_campaign

PYTREC = {"P@{k}": "P_{k}", "R@{k}": "recall_{k}", "Hit@{k}": "success_{k}", "MRR": "recip_rank", "MAP": "map"}


@pytest.fixture(autouse=True)
def _fresh_trust_caches():
    trust.caches_clear()
    yield


def trec_sorted(ranking: dict[str, float]) -> list[str]:
    """trec_eval's order: score descending, ties by docid descending."""
    return [d for d, _ in sorted(ranking.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]


def evaluate(qrels, run, k, *, threshold=1, queries=None):
    """Per-query P, R, Hit, RR, AP, nDCG (linear), bpref from pytrec_eval; 0 where the run has no entry."""
    names = {m.format(k=k): t.format(k=k) for m, t in PYTREC.items()}
    names["bpref"] = "bpref"
    rel = pytrec_eval.RelevanceEvaluator(qrels, set(names.values()), relevance_level=threshold)
    nd = pytrec_eval.RelevanceEvaluator(qrels, {f"ndcg_cut_{k}"})
    res, res_nd = rel.evaluate(run), nd.evaluate(run)
    out = {}
    for q in queries if queries is not None else qrels:
        vals = {m: res.get(q, {}).get(t, 0.0) for m, t in names.items()}
        vals[f"nDCG@{k}"] = res_nd.get(q, {}).get(f"ndcg_cut_{k}", 0.0)
        out[q] = vals
    return out


def api_client(campaign, make_user):
    lead = make_user("trustlead")
    membership_add(campaign=campaign, user=lead, role="lead")
    client = APIClient()
    client.force_authenticate(lead)
    return client


# --------------------------------------------------------------------------- bpref


@pytest.mark.parametrize("threshold", [1, 2])
def test_bpref_per_query_equals_pytrec_eval(make_user, threshold):
    campaign, runs, qrels = random_campaign(make_user, seed=11)
    data = leaderboard_data(campaign=campaign, k=10, threshold=threshold, bounds=False)
    for system in data["systems"]:
        expected = evaluate(qrels, runs[system["name"]], 10, threshold=threshold)
        for q, values in expected.items():
            assert system["per_query"][q]["bpref"] == pytest.approx(values["bpref"], abs=1e-9), (system["name"], q)
        assert system["measures"]["bpref"] == pytest.approx(np.mean([v["bpref"] for v in expected.values()]))


# --------------------------------------------------------------------------- bounds


@pytest.mark.parametrize("k", [3, 10])
def test_bounds_hold_every_final_value_and_the_own_documents_completion_is_the_top(make_user, k):
    """The oracle (pytrec_eval) on the pool's completions: a system's own unjudged pooled documents graded 2
    (within its top k for the @k measures), every other 0, is the high bound of P, Hit, RR and R; and whatever
    grades the pooled unjudged documents get, each system's final mean of every measure lies within its bounds
    (R, MAP and nDCG too, which the per-run completions of metrics.score_bounds let fall below: a document only
    another system found raises num_rel and the ideal)."""
    campaign, runs, qrels = random_campaign(make_user, seed=5)
    data = leaderboard_data(campaign=campaign, k=k)
    depth = campaign.pool_depth
    pooled = {q: {d for run in runs.values() for d in trec_sorted(run.get(q, {}))[:depth]} for q in qrels}
    rng = np.random.default_rng(k)
    gradings = []
    for _ in range(12):
        grading = {}
        for q, labels in qrels.items():
            left = sorted(pooled[q] - set(labels))
            grading[q] = {**labels, **dict(zip(left, rng.integers(0, 3, len(left)).tolist(), strict=True))}
        gradings.append(grading)
    for system in data["systems"]:
        run = runs[system["name"]]
        own_k, own_run = {}, {}
        for q, labels in qrels.items():
            left = pooled[q] - set(labels)
            top = set(trec_sorted(run.get(q, {}))[:k])
            own_k[q] = {**labels, **dict.fromkeys(left & top, 2)}
            own_run[q] = {**labels, **{d: 2 for d in left if d in run.get(q, {})}}
        high_k, high_run = evaluate(own_k, run, k), evaluate(own_run, run, k)
        for measure in (f"P@{k}", f"Hit@{k}", "MRR", f"R@{k}"):
            high = high_run if measure == "MRR" else high_k
            expected = np.mean([high[q][measure] for q in qrels])
            assert system["bounds"][measure][1] == pytest.approx(expected, abs=1e-9), (system["name"], measure)
        for grading in gradings:
            final = evaluate(grading, run, k)
            for measure in (f"P@{k}", f"R@{k}", f"Hit@{k}", f"nDCG@{k}", "MRR", "MAP", "bpref"):
                low_got, high_got = system["bounds"][measure]
                mean = np.mean([final[q][measure] for q in qrels])
                assert low_got - 1e-9 <= mean <= high_got + 1e-9, (system["name"], measure)
        for measure, (low_got, high_got) in system["bounds"].items():
            assert low_got <= system["measures"][measure] + 1e-12 <= high_got + 2e-12
        assert "Judged@{k}" not in system["bounds"]


def test_settled_lists_adjacent_systems_and_open_pairs(make_user):
    campaign, runs, qrels = random_campaign(make_user, seed=5)
    data = leaderboard_data(campaign=campaign, k=5, measure="P")
    ranked = sorted(data["systems"], key=lambda s: (-round(s["measures"]["P@5"], 12), s["name"]))
    assert data["ranked_by"] == "P@5"
    assert [entry["systems"] for entry in data["settled"]] == [
        [a["name"], b["name"]] for a, b in zip(ranked, ranked[1:], strict=False)
    ]
    # the verdicts cover every query the final means will hold: q7 has no label yet, but pooled pairs
    final = sorted({q for run in runs.values() for q in run} | set(qrels), key=lambda q: int(q[1:]))
    assert data["verdict_queries"] == len(final) and data["queries_without_labels"] == 1
    for entry, (a, b) in zip(data["settled"], zip(ranked, ranked[1:], strict=False), strict=True):
        # P@5 is a sum over documents: the worst case for a is its unjudged top 5 non-relevant and b's relevant
        def rel(name, q, worst):
            top = trec_sorted(runs[name].get(q, {}))[:5]
            labels = qrels.get(q, {})
            return sum(1 for d in top if labels.get(d, 0) >= 1 or (worst and d not in labels))

        worst = sum(rel(a["name"], q, False) - rel(b["name"], q, True) for q in final)
        disjoint = worst > 0
        assert entry["settled"] == disjoint
        assert entry["verdict"] in (("settled",) if disjoint else ("likely", "open", "tied"))
        # open: the distinct unjudged documents in either system's top 5, over the final queries
        unjudged = {
            (q, d)
            for name in (a["name"], b["name"])
            for q in final
            for d in trec_sorted(runs[name].get(q, {}))[:5]
            if d not in qrels.get(q, {})
        }
        assert entry["open_pairs"] == (0 if disjoint else len(unjudged))
        # ... and where they are: how many queries hold them, the busiest first (ties by query order)
        per_query = {q: sum(pq == q for pq, _ in unjudged) for q in final}
        busiest = sorted((q for q in final if per_query[q]), key=lambda q: (-per_query[q], int(q[1:])))[:5]
        assert entry["open_queries"] == (0 if disjoint else sum(n > 0 for n in per_query.values()))
        assert entry["top_queries"] == ([] if disjoint else [{"qid": q, "pairs": per_query[q]} for q in busiest])
    assert data["pairs_left"] > 0
    assert any(entry["top_queries"] for entry in data["settled"])  # some comparison really is open


def test_judging_every_pair_settles_the_ranking(make_user):
    """With every retrieved document labelled (q3's too, which had no label), the bounds collapse to the
    scores and nothing is open."""
    campaign, runs, qrels = random_campaign(make_user, seed=3, n_queries=4, n_docs=25)
    lines = "".join(f"q{q} 0 d{d} {d % 3}\n" for q in range(4) for d in range(25))
    user = make_user("complete")
    membership_add(campaign=campaign, user=user, role="annotator")
    from judging.services import qrels_import

    qrels_import(campaign=campaign, data=lines.encode(), filename="all.qrels", annotator=user)
    data = leaderboard_data(campaign=campaign, k=10, measure="P")
    assert data["pairs_left"] == 0
    for system in data["systems"]:
        low, high = system["bounds"]["P@10"]
        assert low == pytest.approx(high) == pytest.approx(system["measures"]["P@10"])
    assert all(entry["open_pairs"] == 0 for entry in data["settled"])
    assert all(entry["verdict"] in ("settled", "tied") for entry in data["settled"])
    assert data["queries_without_labels"] == 0 and data["stop"]["judgments_left_estimate"] == 0
    assert data["stop"]["reached"]


# --------------------------------------------------------------------------- curves


def test_curves_equal_the_leaderboard_at_every_k(make_user):
    campaign, runs, qrels = random_campaign(make_user, seed=9)
    client = api_client(campaign, make_user)
    for measure in ("nDCG", "P", "R", "F1", "Hit"):
        response = client.get(f"/api/campaigns/{campaign.slug}/leaderboard/curves/?measure={measure}&k_max=12")
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["measure"] == measure
        assert body["k"] == list(range(1, 13))
        for k in body["k"]:
            board = client.get(f"/api/campaigns/{campaign.slug}/leaderboard/?k={k}&per_query=false&bounds=false")
            means = {s["name"]: s["measures"][f"{measure}@{k}"] for s in board.json()["systems"]}
            for system in body["systems"]:
                assert system["values"][k - 1] == pytest.approx(means[system["name"]], abs=1e-12), (measure, k)


def test_curves_refuse_bad_parameters(make_user):
    campaign, _, _ = random_campaign(make_user, seed=9)
    client = api_client(campaign, make_user)
    bad = client.get(f"/api/campaigns/{campaign.slug}/leaderboard/curves/?measure=MAP")
    assert bad.status_code == 400
    assert "measure must be one of" in str(bad.json())
    assert client.get(f"/api/campaigns/{campaign.slug}/leaderboard/curves/?k_max=0").status_code == 400


# --------------------------------------------------------------------------- segments


def test_segments_equal_the_leaderboard_restricted_to_their_queries(make_user, tmp_path):
    campaign, runs, qrels = random_campaign(make_user, seed=13)
    tags = tmp_path / "tags.tsv"
    # q7 has no labels: "tail" has 4 queries of which 3 are scored
    tags.write_text("qid\ttags\nq0\thead\nq1\thead, brand\nq2\thead\nq4\ttail\nq5\ttail\nq6\ttail,brand\nq7\ttail\n")
    out = io.StringIO()
    call_command("import_query_tags", campaign.slug, str(tags), stdout=out)
    assert "7 updated" in out.getvalue()
    client = api_client(campaign, make_user)
    segments = client.get(f"/api/campaigns/{campaign.slug}/leaderboard/segments/?measure=nDCG&k=5").json()
    by_tag = {seg["tag"]: seg for seg in segments["segments"]}
    assert set(by_tag) == {"head", "tail", "brand"}
    assert (by_tag["tail"]["queries"], by_tag["tail"]["scored_queries"]) == (4, 3)
    assert all(seg["few_queries"] for seg in by_tag.values())  # fewer than 10 scored queries each
    members = {"head": ["q0", "q1", "q2"], "tail": ["q4", "q5", "q6"], "brand": ["q1", "q6"]}
    for tag, queries in members.items():
        board = client.get(f"/api/campaigns/{campaign.slug}/leaderboard/?k=5&segment={tag}&per_query=true").json()
        assert board["queries"] == len(queries)
        assert board["segment"] == tag
        subset = {q: qrels[q] for q in queries}
        for system in board["systems"]:
            expected = evaluate(subset, runs[system["name"]], 5)
            assert set(system["per_query"]) == set(queries)
            for measure in ("P@5", "R@5", "MRR", "MAP", "nDCG@5", "bpref"):
                mean = np.mean([expected[q][measure] for q in queries])
                assert system["measures"][measure] == pytest.approx(mean, abs=1e-9), (tag, system["name"], measure)
            seg_system = next(s for s in by_tag[tag]["systems"] if s["name"] == system["name"])
            assert seg_system["value"] == pytest.approx(system["measures"]["nDCG@5"], abs=1e-12)
            low, high = seg_system["ci"]
            assert low <= seg_system["value"] + 1e-12 and seg_system["value"] <= high + 1e-12
        best = [s for s in by_tag[tag]["systems"] if s["best"]]
        assert len(best) == 1 and best[0]["p_vs_best"] is None


def test_unknown_segment_is_a_clear_400(make_user):
    campaign, _, _ = random_campaign(make_user, seed=13)
    client = api_client(campaign, make_user)
    response = client.get(f"/api/campaigns/{campaign.slug}/leaderboard/?segment=nowhere")
    assert response.status_code == 400
    assert "no query of this campaign has the tag 'nowhere'" in str(response.json())


# --------------------------------------------------------------------------- pool bias


def unique_pairs(runs, name, depth):
    mine = {(q, d) for q, ranking in runs[name].items() for d in trec_sorted(ranking)[:depth]}
    others = {
        (q, d)
        for other in runs
        if other != name
        for q, ranking in runs[other].items()
        for d in trec_sorted(ranking)[:depth]
    }
    return mine - others


def test_pool_bias_equals_scoring_without_the_systems_unique_pairs(make_user):
    campaign, runs, qrels = random_campaign(make_user, seed=21)
    k = 5
    client = api_client(campaign, make_user)
    body = client.get(f"/api/campaigns/{campaign.slug}/leaderboard/pool-bias/?k={k}").json()
    assert body["pool_depth"] == campaign.pool_depth == 10
    real = {s["name"]: s for s in leaderboard_data(campaign=campaign, k=k)["systems"]}
    some_drop = False
    for system in body["systems"]:
        name = system["name"]
        unique = unique_pairs(runs, name, campaign.pool_depth)
        reduced = {q: {d: v for d, v in labels.items() if (q, d) not in unique} for q, labels in qrels.items()}
        # pytrec_eval skips a query without labels: the mean keeps it (with 0), as the campaign's query set does
        expected = evaluate({q: v for q, v in reduced.items() if v}, runs[name], k, queries=list(qrels))
        for measure in ("P@5", "R@5", "Hit@5", "MRR", "MAP", "nDCG@5", "bpref"):
            mean = np.mean([expected[q][measure] for q in qrels])
            assert system["measures"][measure] == pytest.approx(mean, abs=1e-9), (name, measure)
            assert system["drop"][measure] == pytest.approx(real[name]["measures"][measure] - mean, abs=1e-9)
            some_drop |= abs(system["drop"][measure]) > 1e-9
        top_k_unique = sum((q, d) in unique for q in qrels for d in trec_sorted(runs[name].get(q, {}))[:k])
        assert system["unique_in_top_k"] == top_k_unique
    assert some_drop  # the random runs do leave systems with unique judged pairs


# --------------------------------------------------------------------------- diversity and micro averages


def test_diversity_and_micro_averages_in_the_leaderboard_json(make_user):
    campaign, runs, qrels = random_campaign(make_user, seed=2, n_queries=3, n_docs=25)
    brands = {f"d{i}": ["acme", "bolt", "core"][i % 3] for i in range(25)}
    # d24 has no brand: it is left out of the pairs and the count
    docs = "".join(
        f'{{"docid": "{d}", "text": "t", "attributes": {{"brand": "{b}"}}}}\n'
        if d != "d24"
        else f'{{"docid": "{d}", "text": "t"}}\n'
        for d, b in brands.items()
    )
    documents_import(campaign=campaign, data=docs.encode(), filename="docs.jsonl")
    k = 4
    data = leaderboard_data(campaign=campaign, k=k, attribute="brand", micro=True)
    assert data["attribute"] == "brand"
    scored = list(qrels)
    for system in data["systems"]:
        ilds, covs = [], []
        for q in scored:
            top = [brands[d] for d in trec_sorted(runs[system["name"]].get(q, {}))[:k] if d != "d24"]
            n = len(top)
            pairs = n * (n - 1) / 2
            same = sum(top.count(v) * (top.count(v) - 1) / 2 for v in set(top))
            ild = (pairs - same) / pairs if pairs else 0.0
            ilds.append(ild)
            covs.append(len(set(top)))
            assert system["per_query"][q][f"ILD@{k}"] == pytest.approx(ild)
            assert system["per_query"][q][f"Coverage@{k}"] == len(set(top))
        assert system["measures"][f"ILD@{k}"] == pytest.approx(np.mean(ilds))
        assert system["measures"][f"Coverage@{k}"] == pytest.approx(np.mean(covs))
        # micro: relevant retrieved over retrieved (P) and over relevant (R), pooled over the queries
        run = runs[system["name"]]
        hits = sum(qrels[q].get(d, -1) >= 1 for q in scored for d in trec_sorted(run.get(q, {}))[:k])
        retrieved = sum(min(k, len(run.get(q, {}))) for q in scored)
        relevant = sum(v >= 1 for q in scored for v in qrels[q].values())
        assert system["micro"][f"P@{k}"] == pytest.approx(hits / retrieved if retrieved else 0.0)
        assert system["micro"][f"R@{k}"] == pytest.approx(hits / relevant)
    assert "weight" in data["micro_note"]


def test_unknown_attribute_is_a_clear_400(make_user):
    campaign, _, _ = random_campaign(make_user, seed=2, n_queries=3, n_docs=25)
    client = api_client(campaign, make_user)
    response = client.get(f"/api/campaigns/{campaign.slug}/leaderboard/?attribute=colour")
    assert response.status_code == 400
    assert "no document of this campaign has the attribute 'colour'" in str(response.json())
    response = client.get(f"/api/campaigns/{campaign.slug}/leaderboard/?attribute=a__b")
    assert response.status_code == 400


def test_scores_json_carries_bounds_and_settled(make_user):
    campaign, _, _ = random_campaign(make_user, seed=4)
    out = io.StringIO()
    call_command("scores", campaign.slug, "--json", "--per-query", stdout=out)
    import json

    data = json.loads(out.getvalue())
    assert {"bounds", "measures", "per_query"} <= set(data["systems"][0])
    assert "bpref" in data["systems"][0]["measures"]
    assert len(data["settled"]) == len(data["systems"]) - 1


def test_scores_command_segment_measure_micro_and_attribute(make_user, tmp_path):
    """`scores` takes the leaderboard's trust parameters: the same numbers as the API, and the settled lines."""
    campaign, runs, qrels = random_campaign(make_user, seed=13)
    tags = tmp_path / "tags.tsv"
    tags.write_text("q0\ttail\nq4\ttail\nq5\ttail\nq1\thead\n")
    call_command("import_query_tags", campaign.slug, str(tags), stdout=io.StringIO())
    docs = "".join(f'{{"docid": "d{i}", "text": "t", "attributes": {{"brand": "b{i % 3}"}}}}\n' for i in range(40))
    documents_import(campaign=campaign, data=docs.encode(), filename="docs.jsonl")
    args = ["--k", "5", "--segment", "tail", "--measure", "P", "--micro", "--attribute", "brand"]
    out = io.StringIO()
    call_command("scores", campaign.slug, "--json", "--per-query", *args, stdout=out)
    import json

    data = json.loads(out.getvalue())
    api = leaderboard_data(campaign=campaign, k=5, segment="tail", measure="P", micro=True, attribute="brand")
    assert data == json.loads(json.dumps(api))
    assert (data["segment"], data["queries"], data["ranked_by"]) == ("tail", 3, "P@5")
    for system in data["systems"]:
        expected = evaluate({q: qrels[q] for q in ("q0", "q4", "q5")}, runs[system["name"]], 5)
        mean = np.mean([v["P@5"] for v in expected.values()])
        assert system["measures"]["P@5"] == pytest.approx(mean, abs=1e-12)
        assert {"ILD@5", "Coverage@5"} <= set(system["measures"]) and set(system["micro"]) == {"P@5", "R@5"}
    table = io.StringIO()
    call_command("scores", campaign.slug, *args, stdout=table)
    lines = table.getvalue().splitlines()
    assert "3 queries with labels" in lines[0] and "segment=tail" in lines[0]
    assert lines[1].split()[-2:] == ["ILD@5", "Coverage@5"]
    ranked = sorted(data["systems"], key=lambda s: (-round(s["measures"]["P@5"], 12), s["name"]))
    assert [line.split()[0] for line in lines[2:5]] == [s["name"] for s in ranked]
    assert f"ranked by P@5: {data['pairs_left']} unjudged pairs left can still change the ranking" in lines
    for entry in data["settled"]:
        a, b = entry["systems"]
        verdict = (
            "settled (no judgment left can flip it)"
            if entry["settled"]
            else f"{entry['verdict']}, holds with probability {entry['p_holds']:.2f} "
            f"({entry['open_pairs']} unjudged pairs could change it)"
        )
        assert f"  {a} above {b}: {verdict}" in lines
    stop = data["stop"]
    assert stop["top_k"] == 3 and stop["confidence"] == 0.95
    assert any(re.match(r"stop: (you may stop|keep) judging for (the top 3|all \d+ systems)", line) for line in lines)
    with pytest.raises(CommandError, match="no query of this campaign has the tag 'nowhere'"):
        call_command("scores", campaign.slug, "--segment", "nowhere", stdout=io.StringIO())
    with pytest.raises(CommandError, match="unknown measure 'XYZ'"):
        call_command("scores", campaign.slug, "--measure", "XYZ", stdout=io.StringIO())


def test_bounds_are_recomputed_when_a_label_changes(make_user):
    campaign, runs, qrels = random_campaign(make_user, seed=6)
    before = leaderboard_data(campaign=campaign, k=10)
    from judging.models import Pair
    from judging.services import judgment_record

    user = make_user("late")
    membership_add(campaign=campaign, user=user, role="annotator")
    lb = leaderboard(campaign, Params(k=10))
    # an unjudged pair in some system's top 10: judging it shrinks that system's interval
    unjudged = Pair.objects.filter(campaign=campaign, pooled=True, label__isnull=True).first()
    judgment_record(pair=unjudged, annotator=user, grade=0)
    after = leaderboard_data(campaign=campaign, k=10)
    assert leaderboard(campaign, Params(k=10)).state != lb.state
    assert after["pairs_left"] <= before["pairs_left"]
    widths = [sum(h - lo for lo, h in s["bounds"].values()) for s in before["systems"]]
    widths_after = [sum(h - lo for lo, h in s["bounds"].values()) for s in after["systems"]]
    assert sum(widths_after) < sum(widths)
    assert Campaign.objects.get(pk=campaign.pk).queue_mode == "mtc"  # judging never changes the queue mode


def test_arrays_after_a_judgment_equal_a_fresh_build(make_user):
    """The arrays of the next labels state are the previous ones patched where labels moved: the same."""
    campaign, runs, qrels = random_campaign(make_user, seed=8)
    from judging.models import Pair
    from judging.services import judgment_record

    trust.trust_arrays(leaderboard(campaign, Params(k=10)))
    user = make_user("patcher")
    membership_add(campaign=campaign, user=user, role="annotator")
    # a new label on a query that had none (q7) widens nothing; on q0 it adds a qrels column
    for pair in Pair.objects.filter(campaign=campaign, pooled=True, label__isnull=True, query__qid__in=["q0", "q7"])[
        :6
    ]:
        judgment_record(pair=pair, annotator=user, grade=2)
    lb = leaderboard(campaign, Params(k=10))
    patched = trust.trust_arrays(lb)
    trust.caches_clear()
    fresh = trust.trust_arrays(lb)
    np.testing.assert_array_equal(patched.labels, fresh.labels)
    np.testing.assert_array_equal(
        np.sort(patched.qrels, axis=1)[:, ::-1][:, : fresh.qrels.shape[1]], np.sort(fresh.qrels, axis=1)[:, ::-1]
    )
    assert (patched.qrels[:, fresh.qrels.shape[1] :] == -1).all()
    np.testing.assert_array_equal(patched.positions, fresh.positions)


def test_leaderboard_after_judgments_equals_a_cold_one(make_user, monkeypatch):
    """Bounds and verdicts after judgments are the previous state's per-query parts with the judged queries
    recomputed: byte for byte the JSON a process computing everything from scratch writes."""
    import metrics
    from judging import scoring
    from judging.models import Pair
    from judging.services import judgment_record

    campaign, runs, qrels = random_campaign(make_user, seed=21, n_queries=10)
    user = make_user("incremental")
    membership_add(campaign=campaign, user=user, role="annotator")
    requests = [
        {"k": 10},  # the default request: bounds and verdicts by nDCG@10, every per-query value
        {"k": 5, "measure": "MAP", "per_query": False},  # a whole-run measure: every rank counts
        {"k": 3, "measure": "P", "per_query": False, "segment": "odd"},
    ]
    from judging.models import Query, QueryTag

    QueryTag.objects.bulk_create(
        QueryTag(query=q, tag="odd") for q in Query.objects.filter(campaign=campaign) if int(q.qid[1:]) % 2
    )

    def texts():
        return [
            leaderboard_text.leaderboard_json(campaign=campaign, **r) or str(leaderboard_data(campaign=campaign, **r))
            for r in requests
        ]

    texts()  # every part computed once, for the labels before the judgments
    bounded = []
    real_bounds = metrics.pool_bounds
    monkeypatch.setattr(
        metrics,
        "pool_bounds",
        lambda labels, *a, **kw: bounded.append(labels.shape[1]) or real_bounds(labels, *a, **kw),
    )
    unjudged = Pair.objects.filter(campaign=campaign, pooled=True, label__isnull=True).order_by("id")
    # three rounds of judgments on different queries: q9 had no label (it joins the means), q2's label
    # changes, several queries at once
    for qids, grade in ((["q9"], 2), (["q2", "q5"], 1), (["q2", "q0", "q7"], 0)):
        for qid in qids:
            judgment_record(pair=unjudged.filter(query__qid=qid).first(), annotator=user, grade=grade)
        bounded.clear()
        incremental = texts()
        # only the judged queries were bounded again
        assert bounded and set(bounded) == {len(set(qids))}, bounded
    trust.caches_clear()
    scoring.process_caches_clear()
    from django.core.cache import cache

    cache.clear()
    bounded.clear()
    cold = texts()
    assert bounded == [10] * len(requests)  # from scratch: every query at once, once per parameter set
    for got, expected in zip(incremental, cold, strict=True):
        assert got == expected
    data = leaderboard_data(campaign=campaign, k=10, per_query=False)
    assert any(not a["settled"] for a in data["settled"])  # open comparisons were counted, not all settled


def test_parts_built_a_few_queries_at_a_time_are_those_built_at_once(make_user, monkeypatch):
    """A whole build of the bounds and final parts goes through the campaign a block of queries at a time
    (bounded temporaries at 100M entries): every query's parts, and the JSON, are those of a build of every
    query at once."""
    import dataclasses

    from django.core.cache import cache

    import metrics
    from judging import scoring
    from judging.scoring.trust import final, store
    from judging.scoring.trust.bounds import query_bounds
    from metrics.final_order import QueryStack

    campaign, runs, qrels = random_campaign(make_user, seed=29, n_queries=10)
    requests = [{"k": 10}, {"k": 5, "measure": "MAP", "per_query": False}, {"k": 3, "measure": "P"}]

    def cold():
        trust.caches_clear()
        scoring.process_caches_clear()
        leaderboard_text.text_caches_clear()
        cache.clear()
        texts = [
            leaderboard_text.leaderboard_json(campaign=campaign, **r) or str(leaderboard_data(campaign=campaign, **r))
            for r in requests
        ]
        lb = leaderboard(campaign, Params(k=5))
        parts = {m: final.final_parts(lb, m) for m in ("MAP", "nDCG@5", "P@5")}
        return texts, parts, query_bounds(lb)

    def same(a, b):
        if isinstance(a, QueryStack):
            a, b = np.asarray(a), np.asarray(b)
        if a is None or b is None:
            assert a is None and b is None
        else:
            np.testing.assert_array_equal(a, b)

    whole_texts, whole_parts, whole_bounds = cold()
    bounded = []
    real_bounds = metrics.pool_bounds
    monkeypatch.setattr(
        metrics,
        "pool_bounds",
        lambda labels, *a, **kw: bounded.append(labels.shape[1]) or real_bounds(labels, *a, **kw),
    )
    monkeypatch.setattr(store, "BUILD_ENTRIES", 1)  # one query's entries at a time (two for the final parts)
    monkeypatch.setattr(QueryStack, "BLOCK", 2)
    texts, parts, chunked_bounds = cold()
    assert bounded and set(bounded) == {1}
    assert texts == whole_texts
    for m, got in parts.items():
        assert len(got.cov.blocks) == 5  # built in five blocks of two queries
        for field in dataclasses.fields(got):
            same(getattr(got, field.name), getattr(whole_parts[m], field.name))
    for m, (low, high) in chunked_bounds.items():
        np.testing.assert_array_equal(low, whole_bounds[m][0])
        np.testing.assert_array_equal(high, whole_bounds[m][1])


def test_a_second_process_reads_the_verdicts_of_a_state_another_computed(make_user, monkeypatch):
    """The bounds and verdicts of a labels state are computed by the first process asked and published in the
    shared cache: a freshly started process (empty memory) answers the same JSON without building them, and a
    new judgment (a new state) is computed afresh, never served from the old one."""
    from judging import scoring
    from judging.models import Pair
    from judging.scoring.trust import shapes
    from judging.services import judgment_record

    campaign, runs, qrels = random_campaign(make_user, seed=13)
    first = leaderboard_data(campaign=campaign, k=10, per_query=False)
    trust.caches_clear()
    scoring.process_caches_clear()  # another server process: empty memory, the same shared cache
    computed = []
    real = shapes._entries
    monkeypatch.setattr(shapes, "_entries", lambda *a, **kw: computed.append(1) or real(*a, **kw))
    assert leaderboard_data(campaign=campaign, k=10, per_query=False) == first
    assert computed == []  # read from the shared cache
    user = make_user("second-process")
    membership_add(campaign=campaign, user=user, role="annotator")
    pair = Pair.objects.filter(campaign=campaign, pooled=True, label__isnull=True).select_related("campaign").first()
    judgment_record(pair=pair, annotator=user, grade=2)
    after = leaderboard_data(campaign=campaign, k=10, per_query=False)
    assert computed == [1]  # the new state's verdicts were computed, not the old ones reused
    assert after["pairs_left"] < first["pairs_left"]
    trust.caches_clear()
    scoring.process_caches_clear()
    assert leaderboard_data(campaign=campaign, k=10, per_query=False) == after
    assert computed == [1]


def test_above_the_refit_size_a_judgment_redraws_its_own_query_only(make_user, monkeypatch):
    """Past REFIT_CELLS ranked entries the relevance model is kept between labels states (refitted once the
    judged pooled documents grew by REFIT_SHARE, or 20): after one judgment only the judged query's final
    parts are drawn again, not every query's (a refit and 1,000 queries' draws took 180 ms after each judgment
    at 2M entries)."""
    from judging.models import Pair
    from judging.scoring.trust import final
    from judging.services import judgment_record

    monkeypatch.setattr(final, "REFIT_CELLS", 0)
    campaign, runs, qrels = random_campaign(make_user, seed=17)
    leaderboard_data(campaign=campaign, k=10, per_query=False)
    drawn, fits = [], []
    real_compute, real_fit = final._compute, final._fit
    monkeypatch.setattr(
        final, "_compute", lambda lb, base, fit, q, n: drawn.append(q.size) or real_compute(lb, base, fit, q, n)
    )
    monkeypatch.setattr(final, "_fit", lambda lb, judged: fits.append(judged) or real_fit(lb, judged))
    user = make_user("redraw")
    membership_add(campaign=campaign, user=user, role="annotator")
    pair = Pair.objects.filter(campaign=campaign, pooled=True, label__isnull=True).select_related("campaign").first()
    judgment_record(pair=pair, annotator=user, grade=1)
    leaderboard_data(campaign=campaign, k=10, per_query=False)
    assert fits == [] and drawn == [1]


def test_the_refits_count_of_judged_entries_follows_judgments_as_a_fresh_count(make_user):
    """The relevance model is refitted by the number of judged entries within the pool depth, kept per query
    and recounted for the judged queries only: after judgments it is the count of a fresh build."""
    from judging.models import Pair
    from judging.scoring.trust import final
    from judging.services import judgment_record

    campaign, runs, qrels = random_campaign(make_user, seed=23)
    before = final._judged_in_pool(leaderboard(campaign, Params(k=10)))
    user = make_user("counter")
    membership_add(campaign=campaign, user=user, role="annotator")
    for pair in Pair.objects.filter(campaign=campaign, pooled=True, label__isnull=True)[:5]:
        judgment_record(pair=pair, annotator=user, grade=1)
    lb = leaderboard(campaign, Params(k=10))
    patched = final._judged_in_pool(lb)
    arrays = trust.trust_arrays(lb)
    pd = min(int(campaign.pool_depth), arrays.labels.shape[2])
    assert patched == int(np.count_nonzero(arrays.labels[..., :pd] >= 0)) > before
    trust.caches_clear()
    assert final._judged_in_pool(leaderboard(campaign, Params(k=10))) == patched


@pytest.mark.django_db(transaction=True)
def test_a_process_answering_from_the_shared_cache_builds_its_own_parts_ahead(make_user, settings, monkeypatch):
    """A process that read a state's verdicts from the shared cache builds its own per-query parts in a thread,
    so its first request after the next judgment bounds the judged query only, not every query."""
    import threading

    import metrics
    from judging import scoring
    from judging.models import Pair
    from judging.services import judgment_record

    settings.RELJUDGE_TRUST_WARMUP = True
    campaign, runs, qrels = random_campaign(make_user, seed=19, n_queries=10)
    first = leaderboard_data(campaign=campaign, k=10, per_query=False)
    trust.caches_clear()
    scoring.process_caches_clear()  # another process
    assert leaderboard_data(campaign=campaign, k=10, per_query=False) == first
    for thread in threading.enumerate():
        if thread.name.startswith("trust-warmup-"):
            thread.join(timeout=60)
    assert trust.has_arrays(leaderboard(campaign, Params(k=10)))
    bounded = []
    real_bounds = metrics.pool_bounds
    monkeypatch.setattr(
        metrics,
        "pool_bounds",
        lambda labels, *a, **kw: bounded.append(labels.shape[1]) or real_bounds(labels, *a, **kw),
    )
    user = make_user("warm")
    membership_add(campaign=campaign, user=user, role="annotator")
    pair = Pair.objects.filter(campaign=campaign, pooled=True, label__isnull=True, query__qid="q3").first()
    judgment_record(pair=Pair.objects.select_related("campaign").get(pk=pair.pk), annotator=user, grade=2)
    leaderboard_data(campaign=campaign, k=10, per_query=False)
    assert bounded == [1]  # the judged query only


def test_a_process_keeps_results_of_the_latest_labels_states_only(make_user):
    """Results of past labels states (each may hold a state's per-query bounds of every measure) are dropped
    once a table has newer states: a worker answering judgments for hours holds a few states, not 64."""
    from judging.models import Pair
    from judging.scoring.trust import store
    from judging.services import judgment_record

    campaign, runs, qrels = random_campaign(make_user, seed=9)
    user = make_user("statekeeper")
    membership_add(campaign=campaign, user=user, role="annotator")
    leaderboard_data(campaign=campaign, k=5)  # another table (k=5): its latest state stays
    other = leaderboard(campaign, Params(k=5)).state
    states = []
    for pair in Pair.objects.filter(campaign=campaign, pooled=True, label__isnull=True).order_by("id")[:6]:
        judgment_record(pair=pair, annotator=user, grade=1)
        leaderboard_data(campaign=campaign, k=10)
        states.append(leaderboard(campaign, Params(k=10)).state)
    assert len(set(states)) == 6
    held = {key[0] for key in store._RESULTS}
    assert held == {states[-1], other}
    # the latest state's results are answered again as they are
    lb = leaderboard(campaign, Params(k=10))
    assert trust.bounds(lb) is trust.bounds(lb)
    assert store.recall_cached(lb, ("bounds",))
