"""The trust statistics as the app serves them, on campaigns built from generated collections (bench/synthetic.py,
both presets) and on the degenerate campaigns of issue 39, labelled in steps to a completion of the pool that
hypothesis draws: the leaderboard's numbers are finite and in range, bounds hold today's value (and the final one
for the measures of a run's own labels), a settled order never flips, p_holds is a probability; the PPI intervals
are finite and ordered; the planner's powers are probabilities."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from bench import synthetic
from judging.models import AuditQuery, Pair
from judging.scoring import leaderboard_data
from judging.scoring.plan import campaign_plan, plan_params
from judging.services import (
    audit_draw,
    campaign_create,
    membership_add,
    qrels_import,
    queries_import,
    run_import,
    scale_from_values,
)
from judging.services.model_judge import model_judge_get_or_create

EPS = 1e-9
# measures whose value reads nothing but the system's own ranked labels: the final one lies in today's bounds
OWN_LABELS = ("P@10", "Hit@10", "MRR")
VERDICTS = {"settled", "likely", "tied", "open"}

# the degenerate campaigns of issue 39 (and the generated ones as they are)
SHAPES = (
    "as generated",
    "nothing imported",
    "topics only",
    "qrels only",
    "runs without labels",
    "one system",
    "one query",
    "empty lists",  # a system that returned nothing for some queries
    "all 0",
    "all top grade",
    "all scores tied",
)
# each degenerate shape on the realistic preset; the generated collections as they are on both presets
CAMPAIGNS = [("as generated", "easy"), *((shape, "realistic") for shape in SHAPES)]
_slugs = itertools.count()


class Built:
    """A campaign built from a generated collection, and the grades its pooled pairs will end with."""

    def __init__(self, campaign, coll, annotator, final):
        self.campaign, self.coll, self.annotator = campaign, coll, annotator
        self.final = final  # {(qid, docid): grade} of every pooled pair (and of the qrels-only labels)

    def label(self, keys) -> None:
        lines = [f"{q} 0 {d} {self.final[(q, d)]}\n" for q, d in sorted(keys)]
        if lines:
            qrels_import(
                campaign=self.campaign, data="".join(lines).encode(), filename="l.qrels", annotator=self.annotator
            )

    def pooled(self) -> list[tuple[str, str]]:
        return list(
            Pair.objects.filter(campaign=self.campaign, pooled=True).values_list("query__qid", "document__docid")
        )


def _collection(preset: str, shape: str, seed: int) -> synthetic.Collection:
    systems = 1 if shape == "one system" else 5
    queries = 1 if shape == "one query" else 5
    return synthetic.generate(preset, systems=systems, queries=queries, depth=15, seed=seed)


def _run_text(coll: synthetic.Collection, shape: str, rng: np.random.Generator) -> str:
    lines = "".join(coll.run_text(s) for s in range(len(coll.systems))).splitlines()
    if shape == "all scores tied":
        lines = [" ".join([*line.split()[:4], "1", line.split()[5]]) for line in lines]
    elif shape == "empty lists":  # the first system returns nothing for some queries
        gone = {coll.qid(q) for q in range(coll.shape[1]) if rng.random() < 0.5} or {coll.qid(0)}
        lines = [ln for ln in lines if not (ln.split()[5] == coll.systems[0] and ln.split()[0] in gone)]
    return "".join(line + "\n" for line in lines)


def build(make_user, preset: str, shape: str, seed: int, completion: str) -> Built:
    rng = np.random.default_rng(seed)
    coll = _collection(preset, shape, seed)
    campaign = campaign_create(slug=f"p{next(_slugs)}", pool_depth=5, scale=scale_from_values(coll.scale))
    lead = make_user(f"lead-{campaign.slug}")
    annotator = make_user(f"ann-{campaign.slug}")
    membership_add(campaign=campaign, user=lead, role="lead")
    membership_add(campaign=campaign, user=annotator, role="annotator")
    built = Built(campaign, coll, annotator, {})
    if shape == "nothing imported":
        return built
    queries_import(campaign=campaign, data=coll.topics_text().encode(), filename="t.tsv")
    if shape == "topics only":
        return built
    top = coll.scale[-1]
    if shape == "qrels only":
        q, d = np.nonzero(rng.random(coll.grades.shape) < 0.2)
        built.final = {(coll.qid(a), coll.docid(a, b)): int(coll.grades[a, b]) for a, b in zip(q, d, strict=True)}
        built.label(built.final)
        return built
    run_import(campaign=campaign, data=_run_text(coll, shape, rng).encode(), filename="runs.trec")
    for qid, docid in built.pooled():
        q, d = coll.qids.index(qid), int(docid.rsplit("-", 1)[1].lstrip("d"))
        truth = {"all 0": 0, "all top grade": top}.get(shape, int(coll.grades[q, d]))
        grade = {"truth": truth, "all 0": 0, "all top grade": top, "random": int(rng.integers(0, top + 1))}
        built.final[(qid, docid)] = truth if shape in ("all 0", "all top grade") else grade[completion]
    return built


def check_board(data: dict) -> None:
    """Finite JSON; measures and bounds in [0, 1], low <= today <= high; verdicts named, p_holds a probability."""
    json.dumps(data, allow_nan=False)
    for system in data["systems"]:
        for name, value in system["measures"].items():
            assert 0 <= value <= 1, (system["name"], name, value)
            if name in system.get("bounds", {}):
                low, high = system["bounds"][name]
                assert 0 <= low <= high <= 1, (system["name"], name, low, high)
                assert low - EPS <= value <= high + EPS, (system["name"], name, low, value, high)
    for entry in data.get("settled", []):
        assert entry["verdict"] in VERDICTS and 0 <= entry["p_holds"] <= 1, entry
    stop = data.get("stop")
    if stop is not None:
        assert isinstance(stop["reached"], bool) and stop["judgments_left_estimate"] >= 0


def _means(data: dict, measure: str) -> dict[str, float]:
    return {s["name"]: s["measures"][measure] for s in data["systems"]}


APP = settings(
    max_examples=3,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize(("shape", "preset"), CAMPAIGNS)
@APP
# issue 39's nDCG@10 bound of 1.0000000000000002 (before metrics.numbers): on one query of the realistic preset,
# seed 21 at 20% judged; with every label the top grade, seed 9
@example(seed=21, share=0.2, completion="truth")
@example(seed=9, share=0.2, completion="truth")
@given(
    seed=st.integers(0, 2**16),
    share=st.sampled_from([0.0, 0.2, 0.6]),
    completion=st.sampled_from(["truth", "random", "all 0", "all top grade"]),
)
def test_leaderboard_statistics_hold_as_labels_are_added(make_user, preset, shape, seed, share, completion):
    built = build(make_user, preset, shape, seed, completion)
    rng = np.random.default_rng(seed)
    pooled = sorted(built.final) if shape != "qrels only" else []
    rng.shuffle(pooled)
    first = int(share * len(pooled))
    steps = [pooled[:first], pooled[first : (first + len(pooled)) // 2], pooled[(first + len(pooled)) // 2 :]]
    boards = []
    for keys in steps:
        built.label(keys)
        data = leaderboard_data(campaign=built.campaign, per_query=False)
        check_board(data)
        boards.append(data)
    end = boards[-1]
    ranked_by = end.get("ranked_by", "nDCG@10")
    final = _means(end, ranked_by)
    for t, data in enumerate(boards):
        for entry in data.get("settled", []):
            if entry["verdict"] != "settled":
                continue
            a, b = entry["systems"]
            assert final[a] > final[b], (t, entry, final[a], final[b])  # the final order is the settled one
            for later in boards[t + 1 :]:  # and every later state still says so where a and b are neighbours
                again = [e for e in later.get("settled", []) if set(e["systems"]) == {a, b}]
                assert all(e["systems"] == [a, b] and e["verdict"] == "settled" for e in again), (entry, again)
        if data["queries"] == end["queries"]:  # the same queries in the mean: the final value is in the bounds
            for system in data["systems"]:
                done = next(s for s in end["systems"] if s["name"] == system["name"])
                for name in OWN_LABELS:
                    if name in system.get("bounds", {}):
                        low, high = system["bounds"][name]
                        assert low - EPS <= done["measures"][name] <= high + EPS, (system["name"], name)


@pytest.mark.parametrize(
    ("shape", "preset"),
    [(shape, preset) for shape, preset in CAMPAIGNS if shape not in ("nothing imported", "topics only", "qrels only")],
)
def test_ppi_intervals_are_finite_and_ordered(make_user, preset, shape):
    """A model judge that labels every pooled pair (right about 70% of the time), audits of 0 to every query:
    estimates finite, intervals absent below two audited queries and finite with low <= high from there."""
    built = build(make_user, preset, shape, seed=7, completion="truth")
    rng = np.random.default_rng(7)
    top = built.coll.scale[-1]
    model = {key: g if rng.random() < 0.7 else int(rng.integers(0, top + 1)) for key, g in built.final.items()}
    judge = model_judge_get_or_create(name="bot", campaign=built.campaign)
    lines = "".join(f"{q} 0 {d} {g}\n" for (q, d), g in sorted(model.items()))
    qrels_import(campaign=built.campaign, data=lines.encode(), filename="bot.qrels", annotator=judge)
    n_q = built.campaign.queries.count()
    drawn = 0
    for size in sorted({0, 1, min(2, n_q), n_q}):  # audits of none, one, two and every query
        if size > drawn:
            audit_draw(campaign=built.campaign, size=size - drawn, user=None, seed=size)
            drawn = size
        audited = set(AuditQuery.objects.filter(draw__campaign=built.campaign).values_list("query__qid", flat=True))
        if shape != "runs without labels":
            built.label([key for key in built.final if key[0] in audited])
        data = leaderboard_data(campaign=built.campaign, labels="ppi:bot")
        json.dumps(data, allow_nan=False)
        for system in data["systems"]:
            for name, value in system["measures"].items():
                assert np.isfinite(value), (system["name"], name)
            for name, (low, high) in system.get("intervals", {}).items():
                assert (low is None) == (high is None), (name, low, high)
                if low is not None:
                    assert low <= system["measures"][name] <= high, (system["name"], name, low, high)


@pytest.mark.parametrize(("shape", "preset"), CAMPAIGNS)
def test_the_planners_powers_are_probabilities(make_user, shape, preset):
    """Every pooled pair labelled, any delta from 0.01 to 1: the plan is finite JSON, with powers in [0, 1] (or
    none where two systems do not differ)."""
    built = build(make_user, preset, shape, seed=3, completion="truth")
    built.label(built.final if shape != "qrels only" else [])
    for delta in (0.01, 0.05, 0.2, 0.5, 1.0):
        params = plan_params({"delta": str(delta), "power": "0.8", "measure": "nDCG@10"})
        plan = campaign_plan(campaign=built.campaign, params=params, seconds_per_judgment=20.0)
        json.dumps(plan, allow_nan=False)
        if plan["status"] == "ok":
            assert 0 <= plan["power_now"] <= 1
            for entry in plan["adjacent"]:
                assert entry["power"] is None or 0 <= entry["power"] <= 1, entry
