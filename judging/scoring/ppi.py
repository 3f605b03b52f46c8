"""The prediction-powered leaderboard, ``labels=ppi:NAME``: model judge NAME's scores on every query, corrected by
the random audit (metrics.ppi; Angelopoulos et al., "Prediction-powered inference", Science 2023).

Both terms come from score tables the leaderboard already keeps (``cache.leaderboard``): per-query scores under
``model:NAME`` and under the humans' labels, each rescored only where labels moved. Only the queries of the
audit draw that people have labelled completely (judging.reads.audit_state) enter the correction: a human label
elsewhere, such as one the "doubtful" queue asked for, never does, or the audit would stop being random.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from judging.errors import RequestError
from judging.models import Campaign
from judging.reads import AuditState, audit_state
from judging.scoring.cache import Leaderboard, Params, leaderboard
from judging.scoring.cube import segment_mask
from metrics.numbers import MEASURE_RANGE, clip_interval, finite_array, within
from metrics.ppi import MIN_AUDITED, PPIMean, ppi_mean

PREFIX = "ppi:"


def ppi_judge(labels: str | None) -> str | None:
    """The model judge's name of a ``ppi:NAME`` label source, else None."""
    if labels and labels.startswith(PREFIX) and labels[len(PREFIX) :].strip():
        return labels[len(PREFIX) :].strip()
    return None


@dataclass
class PPIBoard:
    """A prediction-powered leaderboard: ``result`` holds (M, S) estimates and intervals (NaN below
    MIN_AUDITED audited queries) over the ``N`` queries of ``universe``; ``audit`` the audit's state."""

    params: Params
    judge: str
    model: Leaderboard
    human: Leaderboard
    measures: list[str]
    result: PPIMean
    audit: AuditState
    n_audited: int  # audited queries among the N (a segment may leave some out)
    N: int
    seconds: float

    @property
    def system_names(self) -> list[str]:
        return self.model.cube.system_names

    @property
    def more_needed(self) -> int:
        """Audited queries still needed before intervals can be shown."""
        return max(MIN_AUDITED - self.n_audited, 0)

    @property
    def has_intervals(self) -> bool:
        return self.n_audited >= MIN_AUDITED

    def shown(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(M, S) estimates and interval ends as a reader is shown them: clipped to the measure's range [0, 1]
        (metrics.numbers). PPI is unbiased, not bounded: where the model's labels and the audit disagree, an
        estimate or an interval end can step outside the range; the raw values stay in ``result`` and in the
        JSON's ``measures_raw``/``intervals_raw``. The interval ends are NaN below MIN_AUDITED audited queries."""
        r = self.result
        estimate = np.clip(finite_array(r.estimate, what=f"PPI estimates of {self.judge}"), *MEASURE_RANGE)
        if not self.has_intervals:
            nan = np.full(r.estimate.shape, np.nan)
            return estimate, nan, nan.copy()
        low, high = clip_interval(r.low, r.high, *MEASURE_RANGE, what=f"PPI intervals of {self.judge}")
        return estimate, low, high

    def order(self, measure: str) -> np.ndarray:
        """System indices by estimate of ``measure``, best first (ties by name)."""
        values = self.result.estimate[self.measures.index(measure)]
        names = self.system_names
        return np.array(sorted(range(len(names)), key=lambda s: (-round(float(values[s]), 12), names[s])), np.intp)


def ppi_leaderboard(campaign: Campaign, params: Params) -> PPIBoard:
    """The prediction-powered estimates and intervals of every system and measure.

    ``params.labels`` is ``ppi:NAME``; the other parameters score both tables alike. The N queries are the
    campaign's (or the segment's): the model term averages all of them, the correction those of the audit
    draw among them whose pooled pairs all have a human label. ValueError for a judge nobody has."""
    started = time.perf_counter()
    judge = ppi_judge(params.labels)
    if judge is None:
        raise RequestError("labels", f"labels must be ppi:NAME, not {params.labels!r}")
    segment = params.segment
    model = leaderboard(campaign, replace(params, labels=f"model:{judge}", segment=None))
    human = leaderboard(campaign, replace(params, labels="humans", segment=None))
    cube = model.cube
    universe = np.ones(len(cube.query_ids), bool) if segment is None else segment_mask(campaign, cube, segment)
    state = audit_state(campaign=campaign, total=len(cube.query_ids), stamp=(cube.key, campaign.pool_depth))
    audited_in_cube = np.isin(cube.query_ids, state.audited_ids) & universe
    # positions among the N queries of the universe, in the cube's order
    positions = np.flatnonzero(audited_in_cube[universe])
    result = ppi_mean(model.table.scores[:, :, universe], positions, human.table.scores[:, :, audited_in_cube])
    return PPIBoard(
        params=params,
        judge=judge,
        model=model,
        human=human,
        measures=model.measures,
        result=result,
        audit=state,
        n_audited=int(positions.size),
        N=int(universe.sum()),
        seconds=time.perf_counter() - started,
    )


def ppi_data(*, campaign: Campaign, params: Params, measure: str | None = None) -> dict[str, Any]:
    """The leaderboard JSON of a ``ppi:NAME`` label source: each system's ``measures`` holds the estimates and
    ``intervals`` the 95% intervals {measure: [low, high]} (absent below two audited queries), both clipped to the
    measure's range [0, 1]; ``measures_raw`` and ``intervals_raw`` the same unclipped (PPI is unbiased, not
    bounded: see PPIBoard.shown); ``audit`` says
    how many of the N queries are audited (``queries``/``of``), how many were drawn and how many more are
    needed for intervals; ``model_measures`` are the model's labels alone, for comparison."""
    board = ppi_leaderboard(campaign, params)
    r = board.result
    estimate, low, high = board.shown()
    ranked_by = measure if measure in board.measures else f"nDCG@{params.k}"
    systems = []
    for s in board.order(ranked_by).tolist():  # over systems
        entry: dict[str, Any] = {
            "name": board.system_names[s],
            "measures": {m: float(estimate[i, s]) for i, m in enumerate(board.measures)},
            "measures_raw": {m: float(r.estimate[i, s]) for i, m in enumerate(board.measures)},
            "model_measures": {
                m: within(r.model_mean[i, s], *MEASURE_RANGE, what=f"{m} of {board.judge}")
                for i, m in enumerate(board.measures)
            },
        }
        if board.has_intervals:
            entry["intervals"] = {m: [float(low[i, s]), float(high[i, s])] for i, m in enumerate(board.measures)}
            entry["intervals_raw"] = {
                m: [float(r.low[i, s]), float(r.high[i, s])] for i, m in enumerate(board.measures)
            }
        systems.append(entry)
    return {
        "campaign": campaign.slug,
        "k": params.k,
        "gain": params.gain,
        "threshold": params.threshold,
        "judged_only": params.judged_only,
        "policy": params.policy or campaign.aggregation,
        "labels": params.labels,
        "queries": board.N,
        "ranked_by": ranked_by,
        "audit": {
            "queries": board.n_audited,
            "of": board.N,
            "drawn": int(board.audit.drawn.size),
            "open_pairs": board.audit.open_pairs,
            "more_needed": board.more_needed,
        },
        "interval": {"level": 0.95, "method": "ppi-t-fpc"},
        "systems": systems,
        **({"segment": params.segment} if params.segment is not None else {}),
    }
