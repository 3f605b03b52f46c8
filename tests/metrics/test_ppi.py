"""Prediction-powered means (metrics.ppi): against the authors' library, a plain reference, and coverage of the
all-human value on generated campaigns with a good and a mediocre model judge."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import metrics
from bench import synthetic
from metrics.ppi import audited_only_mean, ppi_mean

ORACLE = Path(__file__).with_name("ppi_oracle.json")


def _oracle_cases():
    """ppi_py.ppi_mean_ci(Y, Yhat, Yhat_unlabeled, alpha, lam=1) on generated data: computed live when the
    authors' library (ppi-python) is installed, else the values it gave, recorded in ppi_oracle.json (made by
    the same call with ppi-python 0.2.3)."""
    try:
        from ppi_py import ppi_mean_ci
    except ImportError:
        ppi_mean_ci = None
    for case in json.loads(ORACLE.read_text())["cases"]:
        if ppi_mean_ci is not None:
            f, h, a = np.array(case["model"]), np.array(case["human"]), np.array(case["audited"])
            low, high = ppi_mean_ci(h, f[a], f, alpha=case["alpha"], lam=1)
            case = dict(case, low=float(np.ravel(low)[0]), high=float(np.ravel(high)[0]))
        yield case


@pytest.mark.parametrize("case", list(_oracle_cases()), ids=lambda c: f"N{len(c['model'])}-n{len(c['audited'])}")
def test_classical_interval_is_ppi_py(case):
    # The paper's interval: unlabeled data a sample of an infinite population, no finite-population correction,
    # normal quantiles and ddof=0 (ppi_py's numpy std).
    got = ppi_mean(
        np.array(case["model"]),
        np.array(case["audited"]),
        np.array(case["human"]),
        alpha=case["alpha"],
        population=math.inf,
        fpc=False,
        t=False,
        ddof=0,
    )
    assert float(got.low) == pytest.approx(case["low"], abs=1e-12)
    assert float(got.high) == pytest.approx(case["high"], abs=1e-12)
    # the point estimate is the interval's centre: mean of f over all + mean of (h - f) over the audited
    assert float(got.estimate) == pytest.approx((case["low"] + case["high"]) / 2, abs=1e-12)


def _reference(f, aud, h, *, alpha=0.05):
    """One system, one measure, written out: the estimate and the t interval with the finite-population
    correction (scipy.stats.t for the quantile)."""
    N, n = len(f), len(aud)
    d = [h[i] - f[a] for i, a in enumerate(aud)]
    est = sum(f) / N + sum(d) / n
    mean_d = sum(d) / n
    var_d = sum((x - mean_d) ** 2 for x in d) / (n - 1)
    half = stats.t.ppf(1 - alpha / 2, n - 1) * math.sqrt((1 - n / N) * var_d / n)
    return est, est - half, est + half


def test_vectorized_matches_reference_per_system_and_measure():
    rng = np.random.default_rng(5)
    M, S, N, n = 3, 7, 40, 9
    model = rng.random((M, S, N))
    aud = rng.choice(N, n, replace=False)
    human = np.clip(model[..., aud] + rng.normal(0, 0.2, (M, S, n)), 0, 1)
    got = ppi_mean(model, aud, human)
    for m in range(M):
        for s in range(S):
            est, low, high = _reference(model[m, s].tolist(), aud.tolist(), human[m, s].tolist())
            assert got.estimate[m, s] == pytest.approx(est, abs=1e-12)
            assert got.low[m, s] == pytest.approx(low, abs=1e-12)
            assert got.high[m, s] == pytest.approx(high, abs=1e-12)


def test_population_adds_the_model_terms_variance():
    rng = np.random.default_rng(1)
    model, aud = rng.random(30), np.arange(0, 30, 3)
    human = model[aud] + 0.1 * rng.standard_normal(aud.size)
    census = ppi_mean(model, aud, human)
    wider = ppi_mean(model, aud, human, population=math.inf)
    assert float(census.se_model) == 0
    assert float(wider.se_model) == pytest.approx(np.std(model, ddof=1) / math.sqrt(30))
    assert wider.high - wider.low > census.high - census.low
    assert float(wider.estimate) == float(census.estimate)


def test_fewer_than_two_audited_queries_give_no_interval():
    model = np.array([[0.2, 0.4, 0.6]])
    one = ppi_mean(model, np.array([1]), np.array([[0.5]]))
    assert one.estimate[0] == pytest.approx(0.4 + 0.1)
    assert np.isnan(one.low[0]) and np.isnan(one.high[0])
    none = ppi_mean(model, np.zeros(0, int), np.zeros((1, 0)))
    assert none.estimate[0] == pytest.approx(0.4) and none.n == 0


def test_every_query_audited_gives_the_human_mean_exactly():
    rng = np.random.default_rng(3)
    model, human = rng.random((4, 20)), rng.random((4, 20))
    got = ppi_mean(model, np.arange(20), human)
    np.testing.assert_allclose(got.estimate, human.mean(axis=1))
    np.testing.assert_allclose(got.high - got.low, 0, atol=1e-12)  # the correction (1 - n/N) = 0: nothing left


def test_no_query_gives_zero_and_no_interval():
    got = ppi_mean(np.zeros((3, 0)), np.zeros(0, int), np.zeros((3, 0)))
    np.testing.assert_array_equal(got.estimate, 0)
    assert np.isnan(got.low).all()


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError):
        ppi_mean(np.zeros((2, 5)), np.array([0, 1]), np.zeros((2, 3)))
    with pytest.raises(ValueError):
        ppi_mean(np.zeros(5), np.array([0, 0]), np.zeros(2))
    with pytest.raises(ValueError):
        ppi_mean(np.zeros(5), np.array([0, 9]), np.zeros(2))


# --------------------------------------------------------------------------- generated campaigns


def generated_campaign(
    seed: int, *, quality: str, preset: str = "own", S: int = 12, Q: int = 50, D: int = 20, docs: int = 80
):
    """Ranked human and model labels (S, Q, D) and qrels of a random campaign, every pooled pair labelled by
    both. ``preset`` "own": human grades 0-2 with a difficulty per query, systems of varying quality;
    "realistic": bench/synthetic.py's realistic preset (families of near-tied systems, grades 0-3, queries from
    almost nothing relevant to mostly relevant). The model judge: "good" keeps the human grade 80% of the time;
    "mediocre" 45%, and is lenient (a grade up) half the time it errs, about Cohen's kappa 0.25 as the LLMJudge
    label sets (0.06-0.29)."""
    rng = np.random.default_rng(seed)
    if preset == "realistic":
        coll = synthetic.generate("realistic", systems=S, queries=Q, depth=D, seed=seed)
        grades, ranked, top = coll.grades.astype(np.int64), coll.ranked, coll.scale[-1]
        docs = grades.shape[1]
    else:
        p_rel = rng.beta(1.2, 3.0, Q)
        grades = np.where(rng.random((Q, docs)) < p_rel[:, None], rng.choice([1, 2], (Q, docs), p=[0.6, 0.4]), 0)
        ranked, top = None, 2
    keep = {"good": 0.8, "mediocre": 0.45}[quality]
    noise = rng.integers(0, top + 1, (Q, docs))
    lenient = np.minimum(grades + 1, top)
    err = np.where(rng.random((Q, docs)) < 0.5, lenient, noise) if quality == "mediocre" else noise
    model = np.where(rng.random((Q, docs)) < keep, grades, err)
    if ranked is None:
        skill = rng.uniform(0.2, 2.0, S)
        score = skill[:, None, None] * grades[None] + rng.normal(0, 1, (S, Q, docs))
        ranked = np.argsort(-score, axis=2)[:, :, :D]  # (S, Q, D) document positions
    listed = ranked >= 0
    at = np.maximum(ranked, 0)
    pooled = np.zeros((Q, docs), bool)
    pooled[np.broadcast_to(np.arange(Q)[None, :, None], ranked.shape)[listed], ranked[listed]] = True

    def arrays(g):
        lab = np.where(pooled, g, metrics.UNJUDGED).astype(np.int8)
        grid = np.where(listed, lab[np.arange(Q)[None, :, None], at], metrics.PAD).astype(np.int8)
        qrels = np.full((Q, docs), metrics.UNJUDGED, np.int8)
        qrels[pooled] = g[pooled]
        return grid, np.sort(qrels, axis=1)[:, ::-1]

    return arrays(grades), arrays(model)


def per_query_ndcg(grid, qrels):
    return metrics.evaluate(grid, qrels, k=10)["nDCG@10"]  # (S, Q)


@pytest.mark.parametrize("preset", ["own", "realistic"])
@pytest.mark.parametrize("quality", ["good", "mediocre"])
@pytest.mark.parametrize("n", [10, 20])
def test_coverage_of_the_all_human_value(quality, n, preset):
    (hg, hq), (mg, mq) = generated_campaign(11, quality=quality, preset=preset)
    human, model = per_query_ndcg(hg, hq), per_query_ndcg(mg, mq)
    truth = human.mean(axis=1)  # the all-human value of each system
    S, Q = human.shape
    rng = np.random.default_rng(100 + n)
    cover, ppi_width, audit_width = [], [], []
    for _ in range(200):
        aud = rng.choice(Q, n, replace=False)
        got = ppi_mean(model, aud, human[:, aud])
        cover.append((got.low <= truth) & (truth <= got.high))
        ppi_width.append(got.high - got.low)
        _, lo, hi = audited_only_mean(human[:, aud], Q)
        audit_width.append(hi - lo)
    coverage = np.mean(cover)
    assert coverage >= 0.90, coverage
    # a decent model buys narrower intervals than the audited queries alone
    assert np.mean(ppi_width) < np.mean(audit_width)
    # and the model alone is biased, which the audit corrects: it misses the truth where PPI does not
    bias = np.abs(model.mean(axis=1) - truth).max()
    assert bias > 0.005
