"""The app against trec_eval through the database: a random campaign imported through the services, and the
same runs and qrels scored by pytrec_eval (trec_eval's own C code) with -c applied by hand."""

import random

import pytrec_eval

from judging.services import campaign_create, membership_add, qrels_import, run_import

MEASURES = {
    "P@{k}": "P_{k}",
    "R@{k}": "recall_{k}",
    "Hit@{k}": "success_{k}",
    "MRR": "recip_rank",
    "MAP": "map",
    "nDCG@{k}": "ndcg_cut_{k}",
}


def random_campaign(make_user, *, seed=7, n_queries=8, n_docs=40, systems=("alpha", "beta", "gamma")):
    rng = random.Random(seed)
    campaign = campaign_create(slug=f"rand{seed}", pool_depth=10)
    runs = {}
    lines = []
    for name in systems:
        runs[name] = {}
        for q in range(n_queries):
            if name == "gamma" and q == 0:
                continue  # gamma answered nothing for q0: it scores 0 there (trec_eval -c)
            docs = rng.sample(range(n_docs), rng.randint(3, 25))
            runs[name][f"q{q}"] = {}
            for d in docs:
                # coarse scores make ties; float32-exact values so pytrec_eval sees the same ties
                score = rng.randint(0, 8) / 4
                runs[name][f"q{q}"][f"d{d}"] = score
                lines.append(f"q{q} Q0 d{d} 0 {score} {name}\n")
    run_import(campaign=campaign, data="".join(lines).encode(), filename="runs.trec")
    qrels = {}
    qlines = []
    for q in range(n_queries - 1):  # the last query has no labels: it is left out of every mean
        qrels[f"q{q}"] = {}
        for d in rng.sample(range(n_docs), 15):
            label = rng.choice([0, 0, 1, 2])
            qrels[f"q{q}"][f"d{d}"] = label
            qlines.append(f"q{q} 0 d{d} {label}\n")
    user = make_user(f"assessor{seed}")
    membership_add(campaign=campaign, user=user, role="annotator")
    qrels_import(campaign=campaign, data="".join(qlines).encode(), filename="q.qrels", annotator=user)
    return campaign, runs, qrels


def oracle(runs, qrels, k, threshold, *, gain="linear", judged_only=False):
    """Per-system, per-query values from trec_eval (pytrec_eval), -c applied by hand."""
    gq = qrels if gain == "linear" else {q: {d: 2**v - 1 for d, v in ds.items()} for q, ds in qrels.items()}
    names = {m.format(k=k): t.format(k=k) for m, t in MEASURES.items()}
    out = {}
    for name, run in runs.items():
        rel = pytrec_eval.RelevanceEvaluator(
            qrels, set(names.values()) - {f"ndcg_cut_{k}"}, relevance_level=threshold, judged_docs_only_flag=judged_only
        )
        nd = pytrec_eval.RelevanceEvaluator(gq, {f"ndcg_cut_{k}"}, judged_docs_only_flag=judged_only)
        res, res_nd = rel.evaluate(run), nd.evaluate(run)
        per = {}
        for q in qrels:
            vals = {m: res.get(q, {}).get(t, 0.0) for m, t in names.items() if not m.startswith("nDCG")}
            vals[f"nDCG@{k}"] = res_nd.get(q, {}).get(f"ndcg_cut_{k}", 0.0)
            p, r = vals[f"P@{k}"], vals[f"R@{k}"]
            vals[f"F1@{k}"] = 0.0 if p + r == 0 else 2 * p * r / (p + r)
            per[q] = vals
        out[name] = per
    return out
