"""The prediction-powered leaderboard (labels=ppi:NAME), its audit (draws, the "audit" queue) and the "doubtful"
queue: the estimate and interval against a numpy reference on a generated campaign, what enters the audit, the
page, the API and the commands."""

from __future__ import annotations

import dataclasses
import io
import json

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from scipy import stats

from bench import synthetic
from judging.models import AuditDraw, AuditQuery, Campaign, Judgment, Pair, Query
from judging.scoring import leaderboard_data
from judging.selectors import audit_state, pair_next
from judging.selectors.strategies import doubtful
from judging.services import (
    audit_draw,
    campaign_create,
    judgment_record,
    membership_add,
    qrels_import,
    run_import,
    scale_from_values,
)
from judging.services.model_judge import model_judge_get_or_create

N_QUERIES = 12
SYSTEMS = ("alpha", "beta", "gamma", "delta")


def _campaign(make_user, *, seed: int = 3, depth: int = 5, preset: str = "random"):
    """A random campaign: 4 systems over 12 queries (q0-q11) pooled to depth 5; model judge "bot" labels every
    pooled pair (right about 70% of the time); ``truth`` holds the human grade of every pooled pair. ``preset``
    "realistic": 8 systems of bench/synthetic.py's realistic preset (near ties, tied scores, grades 0-3)."""
    rng = np.random.default_rng(seed)
    lead = make_user("boss")
    coll = None
    if preset == "realistic":
        coll = synthetic.generate("realistic", systems=8, queries=N_QUERIES, depth=8, docs=30, seed=seed)
        coll = dataclasses.replace(coll, qid_format="q{q}", docid_format="d{d}-{qid}")
    campaign = campaign_create(
        slug="ppi", name="PPI", pool_depth=depth, scale=scale_from_values(coll.scale if coll else [0, 1, 2])
    )
    membership_add(campaign=campaign, user=lead, role="lead")
    people = make_user("person")
    membership_add(campaign=campaign, user=people, role="annotator")
    lines = []
    for name in SYSTEMS if coll is None else ():
        for q in range(N_QUERIES):
            docs = rng.permutation(20)[:8]
            lines += [f"q{q} Q0 d{d} {r + 1} {10 - r} {name}\n" for r, d in enumerate(docs.tolist())]
    if coll is not None:  # its queries q1-q12 renamed q0-q11
        runs = "".join(coll.run_text(s) for s in range(len(coll.systems)))
        lines = [f"q{int(line.split()[0][1:]) - 1} {line.split(' ', 1)[1]}\n" for line in runs.splitlines()]
    run_import(campaign=campaign, data="".join(lines).encode(), filename="runs.trec")
    truth, model_lines = {}, []
    top = 2 if coll is None else coll.scale[-1]
    for pair in Pair.objects.filter(campaign=campaign, pooled=True).select_related("query", "document"):
        if coll is None:
            grade = int(rng.choice([0, 1, 2], p=[0.5, 0.3, 0.2]))
        else:
            d = int(pair.document.docid.split("-")[0][1:])
            grade = int(coll.grades[int(pair.query.qid[1:]), d])
        truth[(pair.query.qid, pair.document.docid)] = grade
        said = grade if rng.random() < 0.7 else int(rng.integers(0, top + 1))
        model_lines.append(f"{pair.query.qid} 0 {pair.document.docid} {said}\n")
    judge = model_judge_get_or_create(name="bot", campaign=campaign)
    qrels_import(campaign=campaign, data="".join(model_lines).encode(), filename="bot.qrels", annotator=judge)
    return campaign, lead, people, truth


def _label(campaign, people, truth, qids):
    """People label every pooled pair of these queries with the true grade."""
    lines = [f"{q} 0 {d} {g}\n" for (q, d), g in sorted(truth.items()) if q in qids]
    if lines:
        qrels_import(campaign=campaign, data="".join(lines).encode(), filename="h.qrels", annotator=people)


def _drawn_qids(campaign) -> list[str]:
    return list(
        AuditQuery.objects.filter(draw__campaign=campaign).order_by("position").values_list("query__qid", flat=True)
    )


def _per_query(campaign, labels, measure="nDCG@10"):
    data = leaderboard_data(campaign=campaign, labels=labels, per_query=True, bounds=False)
    return {s["name"]: {q: v[measure] for q, v in s["per_query"].items()} for s in data["systems"]}


@pytest.mark.parametrize("preset", ["random", "realistic"])
def test_estimate_and_interval_match_a_numpy_reference(make_user, preset):
    campaign, lead, people, truth = _campaign(make_user, preset=preset)
    audit_draw(campaign=campaign, size=5, user=lead, seed=42)
    drawn = _drawn_qids(campaign)
    _label(campaign, people, truth, set(drawn))
    data = leaderboard_data(campaign=campaign, labels="ppi:bot")
    assert data["audit"] == {"queries": 5, "of": N_QUERIES, "drawn": 5, "open_pairs": 0, "more_needed": 0}
    model = _per_query(campaign, "model:bot")
    human = _per_query(campaign, "humans")
    qids = [f"q{i}" for i in range(N_QUERIES)]
    t = stats.t.ppf(0.975, 4)
    for system in data["systems"]:
        f = np.array([model[system["name"]].get(q, 0.0) for q in qids])
        d = np.array([human[system["name"]][q] - model[system["name"]][q] for q in drawn])
        estimate = f.mean() + d.mean()
        half = t * np.sqrt((1 - 5 / N_QUERIES) * d.var(ddof=1) / 5)
        assert system["measures_raw"]["nDCG@10"] == pytest.approx(estimate, abs=1e-12)
        assert system["measures"]["nDCG@10"] == pytest.approx(min(max(estimate, 0), 1), abs=1e-12)
        low, high = system["intervals_raw"]["nDCG@10"]
        assert (low, high) == (pytest.approx(estimate - half, abs=1e-12), pytest.approx(estimate + half, abs=1e-12))
        # shown clipped to the measure's range (the realistic preset's wide intervals reach below 0)
        low, high = system["intervals"]["nDCG@10"]
        assert (low, high) == (
            pytest.approx(max(estimate - half, 0), abs=1e-12),
            pytest.approx(min(estimate + half, 1), abs=1e-12),
        )
        assert system["model_measures"]["nDCG@10"] == pytest.approx(f.mean(), abs=1e-12)


@pytest.mark.parametrize("preset", ["random", "realistic"])
def test_every_query_audited_gives_the_all_human_value(make_user, preset):
    campaign, lead, people, truth = _campaign(make_user, preset=preset)
    audit_draw(campaign=campaign, size=N_QUERIES, user=lead)
    _label(campaign, people, truth, {f"q{i}" for i in range(N_QUERIES)})
    ppi = leaderboard_data(campaign=campaign, labels="ppi:bot")
    humans = leaderboard_data(campaign=campaign, labels="humans", bounds=False, per_query=False)
    by_name = {s["name"]: s["measures"] for s in humans["systems"]}
    for system in ppi["systems"]:
        for m, v in system["measures"].items():
            assert v == pytest.approx(by_name[system["name"]][m], abs=1e-12)
            assert system["intervals"][m][1] - system["intervals"][m][0] == pytest.approx(0, abs=1e-12)


def test_labels_outside_the_draw_never_enter_the_audit(make_user):
    campaign, lead, people, truth = _campaign(make_user)
    audit_draw(campaign=campaign, size=3, user=lead, seed=1)
    drawn = set(_drawn_qids(campaign))
    _label(campaign, people, truth, drawn)
    before = leaderboard_data(campaign=campaign, labels="ppi:bot")
    others = {f"q{i}" for i in range(N_QUERIES)} - drawn
    _label(campaign, people, truth, others)  # e.g. the doubtful queue's labels: every other query, complete
    after = leaderboard_data(campaign=campaign, labels="ppi:bot")
    assert after["audit"]["queries"] == 3
    assert [s["measures"] for s in after["systems"]] == [s["measures"] for s in before["systems"]]


def test_a_drawn_query_counts_once_each_pooled_pair_has_a_human_label(make_user):
    campaign, lead, people, truth = _campaign(make_user)
    audit_draw(campaign=campaign, size=3, user=lead, seed=5)
    first, *rest = _drawn_qids(campaign)
    pairs = sorted((q, d) for (q, d) in truth if q == first)
    # every pair but one of the first drawn query
    lines = "".join(f"{q} 0 {d} {truth[(q, d)]}\n" for q, d in pairs[:-1])
    qrels_import(campaign=campaign, data=lines.encode(), filename="h.qrels", annotator=people)
    state = audit_state(campaign=campaign)
    assert state.n_audited == 0 and state.open_pairs == sum(1 for q, _d in truth if q in {first, *rest}) - (
        len(pairs) - 1
    )
    data = leaderboard_data(campaign=campaign, labels="ppi:bot")
    assert data["audit"]["queries"] == 0 and data["audit"]["more_needed"] == 2
    assert all("intervals" not in s for s in data["systems"])
    # the model's labels alone: no correction yet
    assert [s["measures"] for s in data["systems"]] == [s["model_measures"] for s in data["systems"]]


def test_draws_are_uniform_without_replacement_repeatable_and_recorded(make_user):
    campaign, lead, _people, _truth = _campaign(make_user)
    audit_draw(campaign=campaign, size=4, user=lead, seed=7)
    first = _drawn_qids(campaign)
    audit_draw(campaign=campaign, size=8, user=lead, seed=8)
    assert sorted(_drawn_qids(campaign)) == sorted(f"q{i}" for i in range(N_QUERIES))
    with pytest.raises(Exception, match="only 0 queries"):
        audit_draw(campaign=campaign, size=1, user=lead)
    draw = AuditDraw.objects.filter(campaign=campaign).order_by("id").first()
    assert (draw.size, draw.seed, draw.drawn_by) == (4, 7, lead)
    # the same seed over the same undrawn queries draws the same queries, in the same order
    other, lead2, _p, _t = _campaign_copy(make_user)
    audit_draw(campaign=other, size=4, user=lead2, seed=7)
    assert _drawn_qids(other) == first


def _campaign_copy(make_user):
    Campaign.objects.filter(slug="ppi").delete()
    Query.objects.all().delete()
    from django.contrib.auth import get_user_model

    get_user_model().objects.filter(username__in=["boss", "person"]).delete()
    return _campaign(make_user)


def test_uniform_over_many_draws(make_user):
    """Each query is drawn about equally often: a chi-square test over 600 draws of 3 of 12 queries."""
    campaign, lead, _people, _truth = _campaign(make_user)
    counts = dict.fromkeys(range(N_QUERIES), 0)
    ids = list(Query.objects.filter(campaign=campaign).order_by("id").values_list("id", flat=True))
    for seed in range(600):
        rng = np.random.default_rng(seed)  # what audit_draw does with this seed over all 12 queries
        for i in rng.choice(len(ids), size=3, replace=False).tolist():
            counts[i] += 1
    audit_draw(campaign=campaign, size=3, user=lead, seed=599)
    assert set(AuditQuery.objects.values_list("query_id", flat=True)) == {
        ids[i] for i in np.random.default_rng(599).choice(len(ids), size=3, replace=False).tolist()
    }
    assert stats.chisquare(list(counts.values())).pvalue > 0.01


def test_audit_queue_serves_exactly_the_drawn_queries_in_draw_order(make_user):
    campaign, lead, people, truth = _campaign(make_user)
    campaign.queue_mode = Campaign.QueueMode.AUDIT
    campaign.save()
    assert pair_next(campaign=campaign, annotator=people).pair is None  # nothing drawn: nothing to audit
    audit_draw(campaign=campaign, size=2, user=lead, seed=3)
    drawn = _drawn_qids(campaign)
    seen = []
    while (found := pair_next(campaign=campaign, annotator=people).pair) is not None:
        seen.append(found.query.qid)
        judgment_record(pair=found, annotator=people, grade=truth[(found.query.qid, found.document.docid)])
    assert seen == sorted(seen, key=drawn.index) and set(seen) == set(drawn)
    assert len(seen) == sum(1 for q, _d in truth if q in drawn)
    assert audit_state(campaign=campaign).n_audited == 2


def test_doubt_from_confidence_disagreement_and_missing_answers():
    none = doubtful.NO_ANSWER
    answers = np.array([[2, 2, 2], [2, 1, 2], [0, 1, 2], [1, none, none], [none, none, none]])
    got = doubtful.doubt(answers)
    np.testing.assert_allclose(got, [0, 1 / 3, 2 / 3, 0, 1])
    stated = doubtful.doubt(answers, np.array([0.9, np.nan, np.nan, 0.2, np.nan]))
    np.testing.assert_allclose(stated, [0.1, 1 / 3, 2 / 3, 0.8, 1])


def test_doubtful_queue_serves_the_pairs_the_model_is_least_sure_of_first(make_user):
    campaign, lead, people, truth = _campaign(make_user)
    second = model_judge_get_or_create(name="bot2", campaign=campaign)
    bot = model_judge_get_or_create(name="bot", campaign=campaign)
    # bot2 agrees with bot everywhere but on two pairs of q3
    mine = {
        (j.pair.query.qid, j.pair.document.docid): j.grade.value
        for j in Judgment.objects.filter(annotator=bot).select_related("pair__query", "pair__document", "grade")
    }
    flipped = sorted(k for k in mine if k[0] == "q3")[:2]
    lines = "".join(f"{q} 0 {d} {(g + 1) % 3 if (q, d) in flipped else g}\n" for (q, d), g in sorted(mine.items()))
    qrels_import(campaign=campaign, data=lines.encode(), filename="bot2.qrels", annotator=second)
    campaign.queue_mode = Campaign.QueueMode.DOUBTFUL
    campaign.save()
    first = pair_next(campaign=campaign, annotator=people).pair
    assert (first.query.qid, first.document.docid) in flipped
    judgment_record(pair=first, annotator=people, grade=truth[(first.query.qid, first.document.docid)])
    doubtful.lists_clear()
    following = pair_next(campaign=campaign, annotator=people).pair
    assert (following.query.qid, following.document.docid) in flipped
    assert following.pk != first.pk


# --------------------------------------------------------------------------- page, API, command


def _api(user):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=user).key)
    return api


def test_api_answers_estimates_intervals_and_audit_and_400_lists_the_judges(make_user):
    campaign, lead, people, truth = _campaign(make_user)
    api = _api(lead)
    drawn = api.post("/api/campaigns/ppi/audit/", {"queries": 4, "seed": 11}, format="json")
    assert drawn.status_code == 201, drawn.content
    assert drawn.json()["drawn"] == 4 and drawn.json()["draws"][0]["seed"] == 11
    _label(campaign, people, truth, set(_drawn_qids(campaign)))
    assert drawn.json()["draws"][0]["audited"] == 0
    state = api.get("/api/campaigns/ppi/audit/").json()
    assert (state["queries"], state["of"], state["draws"][0]["audited"]) == (4, N_QUERIES, 4)
    assert [q["qid"] for q in state["drawn_queries"]] == _drawn_qids(campaign)
    data = api.get("/api/campaigns/ppi/leaderboard/?labels=ppi:bot").json()
    assert data["audit"] == {"queries": 4, "of": N_QUERIES, "drawn": 4, "open_pairs": 0, "more_needed": 0}
    assert set(data["systems"][0]["intervals"]) == set(data["systems"][0]["measures"])
    low, high = data["systems"][0]["intervals"]["nDCG@10"]
    assert low <= data["systems"][0]["measures"]["nDCG@10"] <= high
    csv = api.get("/api/campaigns/ppi/leaderboard/?labels=ppi:bot&format=csv")
    assert csv.status_code == 200
    bad = api.get("/api/campaigns/ppi/leaderboard/?labels=ppi:nobody")
    assert bad.status_code == 400
    assert "no model judge named 'nobody'; this campaign's model judges: bot" in json.dumps(bad.json())
    assert api.post("/api/campaigns/ppi/audit/", {"queries": 99}, format="json").status_code == 400
    assert api.post("/api/campaigns/ppi/audit/", {"queries": "٣"}, format="json").status_code == 400
    annotator = _api(people)
    assert annotator.post("/api/campaigns/ppi/audit/", {"queries": 1}, format="json").status_code == 403
    assert annotator.get("/api/campaigns/ppi/audit/").status_code == 403


def test_page_shows_intervals_progress_and_what_they_mean(client, make_user):
    campaign, lead, people, truth = _campaign(make_user)
    client.force_login(lead)
    html = client.get("/campaigns/ppi/leaderboard/?labels=ppi:bot").content.decode()
    assert "No intervals yet: audit 2 more queries" in html
    r = client.post("/campaigns/ppi/audit/", {"queries": "3", "seed": "4"})
    assert r.status_code == 302
    _label(campaign, people, truth, set(_drawn_qids(campaign)))
    html = client.get("/campaigns/ppi/leaderboard/?labels=ppi:bot").content.decode()
    assert "<strong>3</strong> of 12 queries audited" in html
    assert "95% interval" in html and "No intervals yet" not in html
    assert "not a better ranking than the model's own" in html
    assert "never this audit" in html
    assert client.get("/campaigns/ppi/leaderboard/table/?labels=ppi:bot").status_code == 200
    assert client.get("/campaigns/ppi/leaderboard/trust/?labels=ppi:bot").status_code == 400
    assert client.get("/campaigns/ppi/leaderboard/?labels=ppi:nobody").status_code == 400
    audit_page = client.get("/campaigns/ppi/audit/").content.decode()
    assert "3 of 12 queries audited, 3 drawn." in audit_page
    client.force_login(people)
    assert client.get("/campaigns/ppi/audit/").status_code == 403


def test_korean_page(client, make_user):
    campaign, lead, _people, _truth = _campaign(make_user)
    client.force_login(lead)
    html = client.get("/campaigns/ppi/leaderboard/?labels=ppi:bot", HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    assert "PPI" in html and "No intervals yet" not in html


def test_scores_and_audit_draw_commands(make_user):
    campaign, lead, people, truth = _campaign(make_user)
    out = io.StringIO()
    call_command("audit_draw", "ppi", "--queries", "3", "--seed", "9", stdout=out)
    assert "drew 3 queries (seed 9)" in out.getvalue()
    _label(campaign, people, truth, set(_drawn_qids(campaign)))
    out = io.StringIO()
    call_command("scores", "ppi", "--labels", "ppi:bot", stdout=out)
    assert "audit: 3 of 12 queries audited" in out.getvalue()
    out = io.StringIO()
    call_command("scores", "ppi", "--labels", "ppi:bot", "--json", stdout=out)
    assert json.loads(out.getvalue())["audit"]["queries"] == 3
    with pytest.raises(CommandError, match="this campaign's model judges: bot"):
        call_command("scores", "ppi", "--labels", "ppi:nobody")
    with pytest.raises(CommandError, match="only 9 queries"):
        call_command("audit_draw", "ppi", "--queries", "10")


def test_a_segment_audits_its_own_queries(make_user):
    from judging.services import query_tags_set

    campaign, lead, people, truth = _campaign(make_user)
    tagged = [f"q{i}" for i in range(6)]
    for q in tagged:
        query_tags_set(campaign=campaign, qid=q, tags=["head"])
    audit_draw(campaign=campaign, size=N_QUERIES, user=lead, seed=2)
    _label(campaign, people, truth, {"q0", "q1", "q2", "q7", "q8"})
    data = leaderboard_data(campaign=campaign, labels="ppi:bot", segment="head")
    assert (data["audit"]["queries"], data["audit"]["of"]) == (3, 6)
    model = _per_query(campaign, "model:bot")
    human = _per_query(campaign, "humans")
    for system in data["systems"]:
        f = np.array([model[system["name"]][q] for q in tagged])
        d = np.array([human[system["name"]][q] - model[system["name"]][q] for q in ("q0", "q1", "q2")])
        assert system["measures"]["nDCG@10"] == pytest.approx(f.mean() + d.mean(), abs=1e-12)


def test_doubtful_queue_serves_unreadable_and_missing_model_answers_first(make_user):
    campaign, lead, people, truth = _campaign(make_user)
    bot = model_judge_get_or_create(name="bot", campaign=campaign)
    unsure = Judgment.objects.filter(annotator=bot).order_by("id").first()
    Judgment.objects.filter(pk=unsure.pk).update(grade=None, unsure=True)
    campaign.queue_mode = Campaign.QueueMode.DOUBTFUL
    campaign.save()
    first = pair_next(campaign=campaign, annotator=people).pair
    assert first.pk == unsure.pair_id


def test_a_campaign_without_queries_answers_without_error(client, make_user):
    lead = make_user("boss")
    campaign = campaign_create(slug="empty", name="Empty")
    membership_add(campaign=campaign, user=lead, role="lead")
    model_judge_get_or_create(name="bot", campaign=campaign)
    client.force_login(lead)
    assert client.get("/campaigns/empty/leaderboard/?labels=ppi:bot").status_code == 200
    data = leaderboard_data(campaign=campaign, labels="ppi:bot")
    assert data["audit"] == {"queries": 0, "of": 0, "drawn": 0, "open_pairs": 0, "more_needed": 2}


def test_doubtful_queue_reads_a_judges_repeated_answers(make_user):
    from judging.models import ModelConsistency

    campaign, lead, people, truth = _campaign(make_user)
    bot = model_judge_get_or_create(name="bot", campaign=campaign)
    pairs = list(Pair.objects.filter(campaign=campaign, pooled=True).order_by("id")[:3])
    # asked three times: unanimous, split 2-1, and all different
    for pair, answers in zip(pairs, ([1, 1, 1], [2, 2, 0], [0, 1, None]), strict=True):
        ModelConsistency.objects.create(
            pair=pair, judge=bot, answers=answers, repeats=3, agreement=0.5, unanimous=False, temperature=0.7
        )
    ids = np.array(sorted(p.pk for p in Pair.objects.filter(campaign=campaign, pooled=True)), dtype=np.int64)
    answers, _confidence = doubtful.model_answers(campaign, ids)
    d = doubtful.doubt(answers)
    at = {p.pk: int(np.searchsorted(ids, p.pk)) for p in pairs}
    assert [d[at[p.pk]] for p in pairs] == [pytest.approx(0), pytest.approx(1 / 3), pytest.approx(1 / 2)]
    campaign.queue_mode = Campaign.QueueMode.DOUBTFUL
    campaign.save()
    assert pair_next(campaign=campaign, annotator=people).pair.pk == pairs[2].pk
