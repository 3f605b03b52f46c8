"""metrics.hybrid: the calibration of a model judge's grades against people's, and scores in expectation over it
(against scikit-learn's weighted kappa, scipy's chi-square test and exact enumeration of every completion)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

import metrics
from metrics.hybrid import (
    RANK_BUCKETS,
    answer_likelihood,
    calibrate,
    expected_scores,
    generic_confusion,
    pair_distributions,
    rank_bucket,
    sample_grades,
)


def test_the_generic_confusion_on_other_scales():
    np.testing.assert_allclose(generic_confusion(4).sum(axis=1), 1.0)
    for n in (2, 3, 5, 11):
        c = generic_confusion(n)
        assert c.shape == (n, n) and np.allclose(c.sum(axis=1), 1.0) and (c.argmax(axis=1) == np.arange(n)).all()


def test_rank_buckets():
    np.testing.assert_array_equal(rank_bucket([1, 2, 3, 4, 7, 8, 15, 16, 1000, 0]), [0, 1, 1, 2, 2, 3, 3, 4, 4, 4])


def test_calibration_rows_by_hand():
    # model grade 2 on five pairs of bucket 0: human 2, 2, 2, 1, 0; no other pairs; human labels overall 0,1,2,2,2
    human = np.array([2, 2, 2, 1, 0])
    model = np.full(5, 2)
    bucket = np.zeros(5, dtype=int)
    cal = calibrate(human, model, bucket, human_all=human, top_grade=2, prior_weight=5.0)
    prior = (np.array([1, 1, 3]) + 1.0) / (5 + 3)
    np.testing.assert_allclose(cal.prior, prior)
    # before the campaign's pairs: P(h | m) under the generic LLM judge's confusion and the human grades
    believed = prior[None, :] * generic_confusion(3).T
    prior_rows = believed / believed.sum(axis=1, keepdims=True)
    grade_row = (np.array([1, 1, 3]) + 5 * prior_rows[2]) / (5 + 5)
    np.testing.assert_allclose(cal.table[0, 2], (np.array([1, 1, 3]) + 5 * grade_row) / 10)
    # a bucket without pairs reads the model grade's row; a grade never seen reads its prior row
    np.testing.assert_allclose(cal.table[3, 2], grade_row)
    np.testing.assert_allclose(cal.table[0, 0], prior_rows[0])
    assert prior_rows[0].argmax() == 0 and prior_rows[2].argmax() == 2  # a model's grade means something at first
    np.testing.assert_allclose(cal.table.sum(axis=2), 1.0)
    assert cal.n_pairs == 5 and cal.counts.shape == (RANK_BUCKETS, 3, 3)


def test_kappa_is_scikit_learns_quadratic_kappa():
    sklearn = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    human = rng.integers(0, 4, 300)
    model = np.clip(human + rng.integers(-1, 2, 300), 0, 3)
    cal = calibrate(human, model, np.zeros(300, dtype=int), human_all=human, top_grade=3)
    assert cal.kappa == pytest.approx(sklearn.cohen_kappa_score(human, model, weights="quadratic"), abs=1e-12)
    noise = calibrate(human, rng.integers(0, 4, 300), np.zeros(300, dtype=int), human_all=human, top_grade=3)
    assert abs(noise.kappa) < 0.15  # a model answering at random carries no information
    assert np.isnan(calibrate([1], [1], [0], human_all=[1], top_grade=2).kappa)


def test_calibration_recovers_the_posterior_of_a_known_confusion():
    """Human grades from a prior, model grades from a confusion matrix: the table approaches Bayes' posterior."""
    rng = np.random.default_rng(7)
    prior = np.array([0.5, 0.3, 0.2])
    confusion = np.array([[0.8, 0.15, 0.05], [0.3, 0.5, 0.2], [0.1, 0.3, 0.6]])  # P(model | human)
    human = rng.choice(3, size=20000, p=prior)
    model = np.array([rng.choice(3, p=confusion[h]) for h in human])
    cal = calibrate(human, model, np.zeros(human.size, dtype=int), human_all=human, top_grade=2)
    posterior = prior[:, None] * confusion
    posterior = (posterior / posterior.sum(axis=0)).T  # (model, human)
    np.testing.assert_allclose(cal.table[0], posterior, atol=0.02)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="one length"):
        calibrate([1, 2], [1], [0, 0], human_all=[1], top_grade=2)
    with pytest.raises(ValueError, match="model grades must lie in 0..2"):
        calibrate([1], [3], [0], human_all=[1], top_grade=2)
    with pytest.raises(ValueError, match="bucket"):
        calibrate([1], [1], [RANK_BUCKETS], human_all=[1], top_grade=2)
    with pytest.raises(ValueError, match="draws"):
        sample_grades(np.ones((1, 3)) / 3, [1], 0)


def test_the_answer_likelihood_recovers_the_known_confusion_and_inverts_the_table():
    """Bayes' rule both ways: the likelihood of a model grade is the simulated confusion P(m | h), and a bucket's
    human-grade distribution times it, renormalised, is the calibrated row of that model grade again."""
    rng = np.random.default_rng(8)
    prior = np.array([0.5, 0.3, 0.2])
    confusion = np.array([[0.8, 0.15, 0.05], [0.3, 0.5, 0.2], [0.1, 0.3, 0.6]])  # P(model | human)
    human = rng.choice(3, size=20000, p=prior)
    model = np.array([rng.choice(3, p=confusion[h]) for h in human])
    bucket = np.zeros(human.size, dtype=int)
    cal = calibrate(human, model, bucket, human_all=human, top_grade=2)
    seen = np.zeros((RANK_BUCKETS, 3))
    np.add.at(seen, (bucket, model), 1.0)
    one_hot = np.eye(3)
    lik = answer_likelihood(one_hot, [0, 0, 0], cal, seen)  # row m: P(m | h) over h
    np.testing.assert_allclose(lik, confusion.T, atol=0.02)
    p_h = (cal.table[0] * ((seen[0] + 1) / (seen[0].sum() + 3))[:, None]).sum(axis=0)  # P(h | bucket 0)
    back = p_h[None, :] * lik
    np.testing.assert_allclose(back / back.sum(axis=1, keepdims=True), cal.table[0], atol=1e-12)
    # repeated answers mix their rows; a pair never asked carries no evidence
    mixed = answer_likelihood(np.array([[0, 3, 1], [0, 0, 0]]), [0, 0], cal, seen)
    np.testing.assert_allclose(mixed[0], 0.75 * lik[1] + 0.25 * lik[2])
    np.testing.assert_allclose(mixed[1], 1.0)
    with pytest.raises(ValueError, match="answered_by_bucket"):
        answer_likelihood(one_hot, [0, 0, 0], cal, seen[:2])


def test_pair_distributions_mix_the_rows_of_repeated_answers():
    cal = calibrate([0, 1, 2, 2], [0, 1, 2, 1], [0, 0, 0, 1], human_all=[0, 1, 2, 2], top_grade=2)
    answers = np.array([[0, 0, 1], [0, 3, 1], [0, 0, 0]])  # one answer 2; answers 1, 1, 1, 2; never asked
    dist = pair_distributions(answers, [0, 1, 2], cal)
    np.testing.assert_allclose(dist[0], cal.table[0, 2])
    np.testing.assert_allclose(dist[1], 0.75 * cal.table[1, 1] + 0.25 * cal.table[1, 2])
    np.testing.assert_allclose(dist[2], cal.prior)
    np.testing.assert_allclose(dist.sum(axis=1), 1.0)


def test_sampled_grades_follow_their_distribution_and_are_the_same_for_a_key():
    dist = np.array([[0.6, 0.3, 0.1], [0.05, 0.15, 0.8], [0.0, 1.0, 0.0]])
    keys = np.array([(7 << 32) | 1, (7 << 32) | 2, (8 << 32) | 1])
    draws = sample_grades(dist, keys, 20000)
    for i in range(2):
        counts = np.bincount(draws[i], minlength=3)
        assert stats.chisquare(counts, 20000 * dist[i]).pvalue > 1e-4
    assert (draws[2] == 1).all()
    np.testing.assert_array_equal(sample_grades(dist[::-1], keys[::-1], 50), draws[::-1, :50])  # by key, not place
    assert (sample_grades(dist, keys, 50, seed=1) != draws[:, :50]).any()


def _exact(docs, human, rows, dist, n_rows, k):
    """Every completion of the model-answered documents with its probability: the exact expectation."""
    total: dict[str, np.ndarray] = {}
    for grades in itertools.product(range(dist.shape[1]), repeat=n_rows):
        p = float(np.prod([dist[r, g] for r, g in enumerate(grades)]))
        full = dict(human)
        full.update({d: grades[r] for d, r in rows.items()})
        lab = np.vectorize(lambda d, full=full: full.get(d, -1) if d >= 0 else -2)(docs).astype(np.int8)
        q = np.array([list(full.values())], dtype=np.int8)
        for name, values in metrics.evaluate(lab, q, k=k).items():
            total[name] = total.get(name, 0.0) + p * np.asarray(values)
    return total


@pytest.mark.parametrize("seed", range(6))
def test_expected_scores_are_the_expectation_over_every_completion(seed):
    """Random small queries (a human label, model-answered documents, unanswered ones, short runs): the Monte Carlo
    mean over 40,000 completions is within 0.01 of the exact expectation of every measure."""
    rng = np.random.default_rng(seed)
    n_docs, n_s, depth = 6, 3, 5
    docs = np.stack([rng.permutation(n_docs)[:depth] for _ in range(n_s)])[:, None, :]
    docs[0, 0, -1] = -1  # a shorter run
    human = {0: int(rng.integers(0, 3))}
    answered = [1, 2, 3]  # 4 and 5: nobody's, unjudged
    rows = {d: i for i, d in enumerate(answered)}
    dist = rng.dirichlet(np.ones(3), size=len(answered))
    lab = np.vectorize(lambda d: human.get(d, -1) if d >= 0 else -2)(docs).astype(np.int8)
    row = np.vectorize(lambda d: rows.get(d, -1))(docs)
    sampled = sample_grades(dist, np.array(answered), 40000, seed=seed)
    means, every = expected_scores(
        lab, row, np.array([list(human.values())], dtype=np.int8), np.array([list(rows.values())]), sampled, k=4
    )
    exact = _exact(docs, human, rows, dist, len(answered), 4)
    for name, value in exact.items():
        np.testing.assert_allclose(means[name], value, atol=0.01, err_msg=name)
        assert every[name].shape == (n_s, 1, 40000)


def test_the_relevance_model_learns_its_rates_from_the_model_judges_soft_labels():
    """answered_relevance puts each answered unjudged pair's calibrated P(relevant) on its pooled document; the
    relevance model counts them beside people's labels (all NaN is people alone)."""
    from bench import synthetic
    from metrics.keys import pair_keys
    from metrics.relevance_model import Answers, answered_relevance, doc_prior, label_model
    from metrics.verdicts import final_pool

    coll = synthetic.generate("realistic", systems=6, queries=8, depth=10, seed=2)
    pooled = coll.pool(5)
    known = pooled & (np.random.default_rng(2).random(pooled.shape) < 0.3)
    pool = final_pool(coll.labels(known), coll.ranked, pool_depth=5)
    q_idx, d_idx = np.nonzero(pooled & ~known)
    q_idx, d_idx = q_idx[::2], d_idx[::2]  # the model answered half of the unjudged pairs
    dist = np.tile([0.1, 0.2, 0.3, 0.4], (q_idx.size, 1))  # P(relevant) = 0.9 each
    soft = answered_relevance(pool, Answers(np.arange(8), pair_keys(q_idx, d_idx), dist))
    answered = np.isfinite(soft)
    assert answered.sum() == q_idx.size and (pool.pool_label[answered] == -1).all()
    np.testing.assert_allclose(soft[answered], 0.9)
    people = label_model(pool, top_grade=3, n_systems=6)
    both = label_model(pool, top_grade=3, n_systems=6, soft=soft)
    alone = label_model(pool, top_grade=3, n_systems=6, soft=np.full(soft.shape, np.nan))
    np.testing.assert_array_equal(alone.cell_rate, people.cell_rate)
    assert doc_prior(pool, both).mean() > doc_prior(pool, people).mean() + 0.05
    np.testing.assert_array_equal(both.grade_cdf, people.grade_cdf)  # grades stay people's
