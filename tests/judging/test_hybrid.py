"""Hybrid judging in the app (issue 40): the hybrid leaderboard (people's labels, the model judge's calibrated reading
elsewhere, in expectation), its verdicts (settled only by people's labels), queue mode ``hybrid`` (the pairs the
model did not answer first, then where a person's label moves the ranking most), and what a lead may not do."""

from __future__ import annotations

import json

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from bench import synthetic
from judging.api import leaderboard_text
from judging.models import Campaign, Pair
from judging.scoring import leaderboard_data, process_caches_clear, trust
from judging.scoring.hybrid import campaign_judge, fits_clear
from judging.services import (
    campaign_create,
    judgment_record,
    membership_add,
    qrels_import,
    queries_import,
    run_import,
)
from judging.services.model_judge import model_judge_get_or_create
from tests.data import client_for


def _hybrid_campaign(make_user, *, seed=4, share_model=0.8, share_people=0.15, slug="hyb", preset="llm-0.5"):
    """A campaign of the realistic preset (8 systems x 10 queries, depth 20, pool depth 10): people label a share of
    the pool, a simulated model judge (kappa ~0.5) answers a share of it; returns the campaign, the collection,
    its lead, an annotator and the model judge."""
    coll = synthetic.generate("realistic", systems=8, queries=10, depth=20, seed=seed)
    scale = [{"value": g, "name": name} for g, name in enumerate(("Not relevant", "Related", "Relevant", "Perfect"))]
    campaign = campaign_create(slug=slug, name="Hybrid", pool_depth=10, scale=scale)
    lead, annotator = make_user(f"{slug}-lead"), make_user(f"{slug}-ann")
    membership_add(campaign=campaign, user=lead, role="lead")
    membership_add(campaign=campaign, user=annotator, role="annotator")
    queries_import(campaign=campaign, data=coll.topics_text().encode(), filename="t.tsv")
    for s in range(len(coll.systems)):
        run_import(campaign=campaign, data=coll.run_text(s).encode(), filename=f"{s}.run")
    rng = np.random.default_rng(seed)
    pooled = coll.pool(10)
    people = pooled & (rng.random(pooled.shape) < share_people)
    model = pooled & (rng.random(pooled.shape) < share_model)
    answers = synthetic.model_answers(coll.grades, synthetic.CONFUSIONS[preset], seed=seed).argmax(-1)
    assessor = make_user(f"{slug}-assessor")
    membership_add(campaign=campaign, user=assessor, role="annotator")
    qrels_import(
        campaign=campaign,
        data="".join(
            f"{coll.qid(q)} 0 {coll.docid(q, d)} {coll.grades[q, d]}\n"
            for q, d in zip(*np.nonzero(people), strict=True)
        ).encode(),
        filename="people.qrels",
        annotator=assessor,
    )
    judge = model_judge_get_or_create(name="bot", campaign=campaign)
    qrels_import(
        campaign=campaign,
        data="".join(
            f"{coll.qid(q)} 0 {coll.docid(q, d)} {answers[q, d]}\n" for q, d in zip(*np.nonzero(model), strict=True)
        ).encode(),
        filename="model.qrels",
        annotator=judge,
    )
    return Campaign.objects.get(pk=campaign.pk), coll, lead, annotator, judge


def test_hybrid_needs_a_model_judge(campaign, lead, as_lead, make_user):
    """No model judge on the campaign: PATCH answers 400 naming queue_mode and what to do; the settings page does not
    offer the mode. Once a model judge has labels, both do."""
    api = client_for(lead)
    url = reverse("api:campaign-detail", args=[campaign.slug])
    response = api.patch(url, {"queue_mode": "hybrid"}, format="json")
    assert response.status_code == 400 and "model judge" in response.json()["queue_mode"][0]
    assert Campaign.objects.get(pk=campaign.pk).queue_mode != "hybrid"
    page = as_lead.get(reverse("judging:campaign_settings", args=[campaign.slug])).content.decode()
    assert 'value="hybrid"' not in page
    ko = client_for(lead).patch(url, {"queue_mode": "hybrid"}, format="json", HTTP_ACCEPT_LANGUAGE="ko")
    assert ko.status_code == 400 and "모델 판정자" in ko.json()["queue_mode"][0]
    model_judge_get_or_create(name="bot", campaign=campaign)
    assert api.patch(url, {"queue_mode": "hybrid"}, format="json").status_code == 200
    page = as_lead.get(reverse("judging:campaign_settings", args=[campaign.slug])).content.decode()
    assert 'value="hybrid"' in page and "needs a model judge" in page


def test_hybrid_leaderboard_is_in_expectation_and_settles_only_on_peoples_labels(make_user):
    campaign, coll, lead, _annotator, _judge = _hybrid_campaign(make_user, share_people=0.3)
    humans = leaderboard_data(campaign=campaign, k=10, per_query=False)
    hybrid = leaderboard_data(campaign=campaign, k=10, labels="hybrid:bot", per_query=False)
    model = leaderboard_data(campaign=campaign, k=10, labels="model:bot", per_query=False)
    by_name = {s["name"]: s for s in hybrid["systems"]}
    # the bounds are people's: the model's answers settle nothing for certain (over the same queries: every query
    # has a person's label here)
    assert hybrid["queries"] == humans["queries"]
    for system in humans["systems"]:
        assert by_name[system["name"]]["bounds"] == system["bounds"]
        for measure, (low, high) in system["bounds"].items():
            assert low - 1e-9 <= by_name[system["name"]]["measures"][measure] <= high + 1e-9
    for entry in hybrid["settled"]:
        assert 0 <= entry["p_holds"] <= 1 and entry["verdict"] in ("settled", "tied", "likely", "open")
    # the means are neither people's alone nor the model's grades taken as labels
    h, m, p = (np.array([s["measures"]["nDCG@10"] for s in d["systems"]]) for d in (hybrid, model, humans))
    assert not np.allclose(h, p) and not np.allclose(h, m)
    assert ((h >= 0) & (h <= 1)).all()


def test_hybrid_after_judgments_equals_a_cold_one(make_user):
    """The hybrid table and its verdicts after judgments (a judged query rescored; a refit of the calibration
    rescores every query) are byte for byte what a process computing everything afresh writes."""
    campaign, coll, lead, annotator, _judge = _hybrid_campaign(make_user, slug="hyb2")
    requests = [{"k": 10, "labels": "hybrid:bot"}, {"k": 5, "labels": "hybrid:bot", "measure": "P"}]

    def texts():
        return [
            leaderboard_text.leaderboard_json(campaign=campaign, **r)
            or json.dumps(leaderboard_data(campaign=campaign, **r))
            for r in requests
        ]

    texts()
    open_pairs = Pair.objects.filter(campaign=campaign, pooled=True, label__isnull=True).order_by("id")
    for grade, n in ((2, 1), (0, 3), (1, 30)):  # one judgment; three; thirty (a refit: the pairs both graded grew)
        for pair in open_pairs[:n]:
            judgment_record(pair=pair, annotator=annotator, grade=grade)
        incremental = texts()
    trust.caches_clear()
    process_caches_clear()
    fits_clear()
    leaderboard_text.text_caches_clear()
    from django.core.cache import cache

    cache.clear()
    assert texts() == incremental


def test_hybrid_queue_serves_the_pairs_the_model_did_not_answer_first(make_user):
    campaign, coll, lead, annotator, judge = _hybrid_campaign(make_user, slug="hyb3", share_model=0.6)
    assert campaign_judge(campaign) == "bot"
    api = client_for(lead)
    assert (
        api.patch(reverse("api:campaign-detail", args=[campaign.slug]), {"queue_mode": "hybrid"}, format="json")
    ).status_code == 200
    answered = set(
        Pair.objects.filter(campaign=campaign, judgments__annotator=judge).values_list("public_id", flat=True)
    )
    uncovered = Pair.objects.filter(campaign=campaign, pooled=True, label__isnull=True).exclude(public_id__in=answered)
    n_uncovered = uncovered.count()
    assert n_uncovered > 5
    people = client_for(annotator)
    served = []
    for _ in range(n_uncovered + 5):
        response = people.get(f"/api/campaigns/{campaign.slug}/next/")
        assert response.status_code == 200
        pair = response.json()["pair"]
        served.append(pair)
        assert people.post("/api/judgments/", {"pair": pair, "grade": 1}, format="json").status_code in (200, 201)
    assert not set(served[:n_uncovered]) & answered  # nobody's pairs first
    assert set(served[n_uncovered:]) <= answered  # then the model's, where a person's label matters most


@pytest.mark.parametrize("preset, helpful", [("llm-0.5", True), ("reversed", False)])
def test_a_model_worse_than_chance_is_found_out(make_user, preset, helpful):
    """A model whose grades are reversed: with a few dozen pairs both graded its weighted kappa is below 0 and the fit
    says it is not helping (the pages then suggest a people-only mode); a judge of today's quality helps."""
    from judging.scoring.cube import run_cube
    from judging.scoring.hybrid import hybrid_fit

    campaign, _coll, _lead, _annotator, _judge = _hybrid_campaign(
        make_user, slug=f"hyb-{preset.replace('.', '')}", share_people=0.4, preset=preset
    )
    versions = np.array(campaign.queries.order_by("id").values_list("labels_version", flat=True))
    fit = hybrid_fit(campaign, run_cube(campaign), "bot", versions)
    assert fit.both >= 20 and fit.helpful is helpful
    data = leaderboard_data(campaign=campaign, k=10, labels="hybrid:bot", per_query=False)
    assert all(0 <= s["measures"]["nDCG@10"] <= 1 for s in data["systems"])


def test_pages_say_who_labelled_what_and_whether_the_model_helps(make_user, client):
    campaign, _coll, lead, _annotator, _judge = _hybrid_campaign(make_user, slug="hyb5", share_model=0.6)
    client.force_login(lead)
    board = client.get(reverse("judging:leaderboard", args=[campaign.slug])).content.decode()
    assert "Hybrid judging" in board and "Which order to trust: this one" in board and "Which number to quote" in board
    assert "pairs have neither label yet: the hybrid queue serves them to people first" in board
    detail = client.get(reverse("judging:campaign_detail", args=[campaign.slug])).content.decode()
    assert "Hybrid judging" in detail and 'model judge <span class="mono">bot</span> answered' in detail
    ko = client.get(reverse("judging:leaderboard", args=[campaign.slug]), HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    assert "혼합 판정" in ko
    bad, _c, bad_lead, _a, _j = _hybrid_campaign(make_user, slug="hyb6", share_people=0.4, preset="reversed")
    client.force_login(bad_lead)
    page = client.get(reverse("judging:leaderboard", args=[bad.slug])).content.decode()
    assert "Model judge bot is not helping" in page and "people-only queue (mtc)" in page


def test_hybrid_verdicts_stay_peoples_in_a_process_that_did_not_score_the_table(make_user):
    """A worker that reads the hybrid scores another worker published (the shared cache) builds its trust arrays from
    the people's labels too: the model's answers settle nothing there either. They were read as labels, taken as
    certain, so a second worker called orders settled that the complete labels reversed (bench/effort_bench.py
    --model-confusion, issue 40)."""
    from judging.scoring import Params, leaderboard
    from judging.scoring.trust.arrays import campaign_arrays

    campaign, _coll, _lead, _annotator, _judge = _hybrid_campaign(make_user, slug="hyb7", share_people=0.3)
    humans = leaderboard_data(campaign=campaign, k=10, per_query=False)
    leaderboard(campaign, Params(k=10, labels="hybrid:bot"))  # worker A scores the hybrid table and publishes it
    trust.caches_clear()
    process_caches_clear()  # worker B: the shared cache only
    lb = leaderboard(campaign, Params(k=10, labels="hybrid:bot"))
    people = campaign_arrays(leaderboard(campaign, Params(k=10)))
    arrays = campaign_arrays(lb)
    np.testing.assert_array_equal(arrays.labels, people.labels)
    np.testing.assert_array_equal(arrays.qrels, people.qrels)
    hybrid = leaderboard_data(campaign=campaign, k=10, labels="hybrid:bot", per_query=False)
    bounds = {s["name"]: s["bounds"] for s in humans["systems"]}
    assert hybrid["queries"] == humans["queries"]  # every query has a person's label: the bounds are the same
    assert all(s["bounds"] == bounds[s["name"]] for s in hybrid["systems"])


def test_the_fit_reads_a_pair_by_its_systems_and_the_models_answer(make_user, monkeypatch):
    """Each pooled pair nobody judged is read as the relevance model's prior for it (the systems that ranked it and
    where, its query) times the likelihood of the model's answer: against the true grades of the generated campaigns,
    that reading predicts better (lower log loss) than the calibrated row of the model's grade alone, the same for
    every pair of one grade and rank bucket."""
    from judging.models import Document, Query
    from judging.scoring import hybrid as hybrid_module
    from judging.scoring.cube import run_cube

    losses = {"pair": 0.0, "rows": 0.0}
    n = 0
    for seed in (4, 5, 6):
        campaign, coll, _lead, _annotator, _judge = _hybrid_campaign(
            make_user, seed=seed, slug=f"hyb-read{seed}", share_people=0.3, share_model=1.0
        )
        versions = np.array(campaign.queries.order_by("id").values_list("labels_version", flat=True))
        qid_of = dict(Query.objects.filter(campaign=campaign).values_list("id", "qid"))
        doc_of = dict(Document.objects.filter(campaign=campaign).values_list("id", "docid"))
        truth = {
            (coll.qid(q), coll.docid(q, d)): int(coll.grades[q, d])
            for q, d in zip(*np.nonzero(coll.pool(10)), strict=True)
        }
        fits_clear()
        fit = hybrid_module.hybrid_fit(campaign, run_cube(campaign), "bot", versions)
        with monkeypatch.context() as patch:
            patch.setattr(hybrid_module, "_with_pair_prior", lambda campaign, cube, keys, dist, *rest: dist)
            fits_clear()
            rows = hybrid_module.hybrid_fit(campaign, run_cube(campaign), "bot", versions)
        fits_clear()
        assert np.array_equal(fit.keys, rows.keys)
        assert np.isfinite(fit.dist).all() and np.allclose(fit.dist.sum(axis=1), 1.0)
        for i in np.flatnonzero(~fit.human):
            key = int(fit.keys[i])
            grade = truth.get((qid_of[key >> 32], doc_of[key & 0xFFFFFFFF]))
            if grade is None:
                continue
            losses["pair"] -= np.log(max(fit.dist[i, grade], 1e-12))
            losses["rows"] -= np.log(max(rows.dist[i, grade], 1e-12))
            n += 1
    print(n, losses)
    assert n > 300
    assert losses["pair"] < 0.9 * losses["rows"], (n, losses)


def test_a_judgment_does_not_recount_the_model_judges_answers(make_user, django_assert_num_queries):
    """After a fit, a few new labels (versions moved by less than REFIT_MIN in all) keep it without a read: the
    count of the pairs both graded read every judgment and answer of the model at each judgment (6,000 rows a
    judgment at 3,000 pairs); once the versions moved by REFIT_MIN the fit is made again, with no count before it
    (it read two rows an answer, and where the model answered the pool the pairs both graded had grown by the
    step): the same answers and labels make the same fit."""
    from judging.scoring import hybrid as hybrid_module
    from judging.scoring.cube import run_cube

    campaign, _coll, _lead, _annotator, _judge = _hybrid_campaign(make_user, slug="hyb-count", share_people=0.3)
    versions = np.array(campaign.queries.order_by("id").values_list("labels_version", flat=True))
    cube = run_cube(campaign)
    fits_clear()
    fit = hybrid_module.hybrid_fit(campaign, cube, "bot", versions)
    moved = versions.copy()
    for step in range(hybrid_module.REFIT_MIN - 1):
        moved[step % moved.size] += 1
        with django_assert_num_queries(0):
            assert hybrid_module.hybrid_fit(campaign, cube, "bot", moved) is fit
    moved[0] += 1
    with CaptureQueriesContext(connection) as reads:
        again = hybrid_module.hybrid_fit(campaign, cube, "bot", moved)
    assert again is not fit and (again.seed, again.both, again.answered) == (fit.seed, fit.both, fit.answered)
    assert not any("COUNT(" in q["sql"] for q in reads.captured_queries), reads.captured_queries
    # nor a join of the documents: the people's labels were read in the pairs' order (campaign, query, document)
    assert not any("judging_document" in q["sql"] for q in reads.captured_queries), reads.captured_queries
    with django_assert_num_queries(0):
        assert hybrid_module.hybrid_fit(campaign, cube, "bot", moved) is again
    fits_clear()


def test_a_label_given_since_the_fit_counts_once_in_the_ideal():
    """Between two fits the fit's mask of human labels is as old as it: a pair people judged since is in the
    query's human qrels, and the model's completion must not add it again (the ideal DCG would count it twice).
    Scored with the stale mask, the query is what a fit that knew of the label gives."""
    from judging.scoring.hybrid import HybridFit, hybrid_scores
    from metrics.keys import pair_keys

    query_ids = np.array([7])
    docs = np.array([[[10, 11, 12]]])  # one system's ranking of three pooled documents
    keys = pair_keys(np.array([7, 7, 7]), np.array([10, 11, 12]))
    order = np.argsort(keys)
    dist = np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1], [0.2, 0.2, 0.3, 0.3]])[order]
    grid = np.array([[[3, -1, -1]]], dtype=np.int8)  # document 10 judged 3 by a person since the fit
    qrels = np.array([[3]], dtype=np.int8)
    counts = np.array([1])

    def scored(human):
        fit = HybridFit(1, None, keys[order], dist, np.asarray(human)[order], 0, 3, 11, dist)
        return hybrid_scores(
            fit,
            query_ids,
            docs,
            grid,
            qrels,
            counts,
            measures=["nDCG@3", "R@3"],
            k=3,
            threshold=1,
            gain="linear",
            judged_only=False,
            draws=64,
        )[0]

    stale, fresh = scored([False, False, False]), scored([True, False, False])
    np.testing.assert_array_equal(stale, fresh)
    assert 0 < fresh[0, 0, 0] < 1


def test_the_hybrid_queue_reads_its_model_judge_when_its_list_is_computed(make_user):
    """Each next pair in queue mode hybrid serves the kept list without reading the campaign's model judges again
    (one statement a judgment); the list computed after the judge has left the campaign is empty, and the queue
    serves query by query."""
    from judging.scoring import selection
    from judging.services import membership_remove

    campaign, _coll, _lead, annotator, judge = _hybrid_campaign(make_user, slug="hyb-kept", share_model=0.6)
    campaign.queue_mode = Campaign.QueueMode.HYBRID
    campaign.save(update_fields=["queue_mode"])
    selection._KEPT.clear()
    first = selection.hybrid_pairs(campaign)
    assert first.size > 0
    with CaptureQueriesContext(connection) as ctx:
        for _ in range(3):
            assert np.array_equal(selection.hybrid_pairs(campaign), first)
    assert not [q["sql"] for q in ctx.captured_queries if "judging_annotatorprofile" in q["sql"]]
    membership_remove(campaign=campaign, user=judge)
    selection._KEPT.clear()
    assert selection.hybrid_pairs(campaign).size == 0
    from judging.selectors import pair_next

    assert pair_next(campaign=campaign, annotator=annotator).pair is not None
