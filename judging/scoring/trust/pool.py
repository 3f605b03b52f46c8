"""Pool bias: each system scored as if the pool pairs only it contributed were unjudged (leave-one-run-out)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import metrics
from judging.scoring.cache import Leaderboard
from judging.scoring.trust.arrays import trust_arrays
from judging.scoring.trust.store import cached


@dataclass
class PoolBiasResult:
    names: list[str]  # measure names, the leaderboard's
    real: np.ndarray  # (M, S) the leaderboard's means
    without: np.ndarray  # (M, S) means without each system's unique pairs
    unique_in_top_k: np.ndarray  # (S,) documents in the top k only this system contributed, over the queries
    unique_in_pool: np.ndarray  # (S,) pool pairs only this system contributed
    n_queries: int

    @property
    def drop(self) -> np.ndarray:
        drop: np.ndarray = self.real - self.without
        return drop


def pool_bias(lb: Leaderboard) -> PoolBiasResult:
    """Leave-one-run-out: each system scored as if the pool pairs only it contributed were unjudged."""

    def compute() -> PoolBiasResult:
        arrays = trust_arrays(lb)
        p = lb.params
        names = lb.measures
        n = arrays.positions.size
        s = len(lb.cube.system_ids)
        if n == 0:
            zeros = np.zeros((len(names), s))
            return PoolBiasResult(names, zeros, zeros.copy(), np.zeros(s, int), np.zeros(s, int), 0)
        got = metrics.pool_bias(
            arrays.labels,
            arrays.qrels,
            arrays.doc_ids,
            pool_depth=int(lb.campaign.pool_depth),
            k=p.k,
            threshold=p.threshold,
            gain=p.gain,
            judged_only=p.judged_only,
        )
        without = np.stack([got.measures[m].sum(axis=1) / n for m in names])
        return PoolBiasResult(
            names,
            lb.means(),
            without,
            got.unique_at_k.sum(axis=1),
            got.unique.sum(axis=1),
            n,
        )

    return cached(lb, ("pool-bias",), compute)


def pool_bias_json(result: PoolBiasResult, lb: Leaderboard) -> dict[str, Any]:
    systems = []
    for s, name in enumerate(lb.cube.system_names):
        systems.append(
            {
                "name": name,
                "measures": {m: float(result.without[i, s]) for i, m in enumerate(result.names)},
                "real": {m: float(result.real[i, s]) for i, m in enumerate(result.names)},
                "drop": {m: float(result.drop[i, s]) for i, m in enumerate(result.names)},
                "unique_in_top_k": int(result.unique_in_top_k[s]),
                "unique_in_pool": int(result.unique_in_pool[s]),
            }
        )
    return {
        "k": lb.params.k,
        "pool_depth": int(lb.campaign.pool_depth),
        "queries": result.n_queries,
        "systems": systems,
    }
