"""What the trust measures add to the leaderboard's JSON: bounds, settled verdicts, diversity, micro averages."""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.db import connections

from judging.scoring.cache import Leaderboard, shared_write
from judging.scoring.trust.arrays import has_arrays, resolve_measure
from judging.scoring.trust.bounds import Verdicts, bounds, judgments_left, verdicts
from judging.scoring.trust.curves import MICRO_NOTE, micro
from judging.scoring.trust.diversity import diversity
from judging.scoring.trust.final import TOP_K_DEFAULT, stop_signal
from judging.scoring.trust.store import LOCK, cached, process_store

logger = logging.getLogger(__name__)


def _float(v: float) -> float:
    return float(v)


def leaderboard_data_extend(
    lb: Leaderboard,
    data: dict[str, Any],
    *,
    measure: str | None,
    with_bounds: bool,
    attribute: str | None,
    with_micro: bool,
    per_query: bool,
    top_k: int = TOP_K_DEFAULT,
) -> None:
    """Add bounds, settled verdicts, diversity and micro averages to ``leaderboard_data``'s JSON in place."""
    systems = data["systems"]
    if with_bounds:
        measure = resolve_measure(measure, lb.params.k)
        entries = trust_entries(lb, measure, top_k)
        for entry, system_bounds in zip(systems, entries["bounds"], strict=True):
            entry["bounds"] = system_bounds
        data.update({name: value for name, value in entries.items() if name != "bounds"})
    if attribute:
        d = diversity(lb, attribute)
        ild_name, cov_name = d.names
        ild, cov = d.means()
        data["attribute"] = d.attribute
        qids = lb.scored_qids()
        for s, entry in enumerate(systems):
            entry["measures"][ild_name] = _float(ild[s])
            entry["measures"][cov_name] = _float(cov[s])
            if per_query:
                for q, i_, c_ in zip(qids, d.ild[s].tolist(), d.coverage[s].tolist(), strict=True):
                    entry["per_query"][q][ild_name] = i_
                    entry["per_query"][q][cov_name] = c_
    if with_micro:
        m = micro(lb)
        for s, entry in enumerate(systems):
            entry["micro"] = {name: _float(values[s]) for name, values in m.items()}
        data["micro_note"] = str(MICRO_NOTE)


def trust_entries(lb: Leaderboard, measure: str, top_k: int) -> dict[str, Any]:
    """The bounds and verdicts the leaderboard JSON adds, for the labels state of ``lb`` (plain JSON values):
    each system's ``bounds``, ``ranked_by``, ``settled``, ``pairs_left``, ``stop``, ``verdict_queries`` and
    ``queries_without_labels``.

    Computed once per labels state on the machine's processes together: the first process asked publishes them
    in the shared cache (stamped with the state, as the score blocks are), and another process asked for the
    same state (a restarted worker, a second app server, the worker a balancer sends the lead's next poll to)
    reads them there instead of building the trust arrays and per-query parts it does not have yet: seconds at
    10M ranked entries. The pool depth and the redundancy (in judgments_left) are named in the key as well."""
    campaign = lb.campaign
    key = f"reljudge:trust:{lb.state}:{measure}:{top_k}:{campaign.pool_depth}:{campaign.redundancy}"

    def fetch_or_compute() -> dict[str, Any]:
        shared = cache.get(key)
        if isinstance(shared, dict):
            _warm_later(lb, measure, top_k)
            return shared
        entries = _entries(lb, measure, top_k)
        shared_write({key: entries})
        return entries

    entries: dict[str, Any] = cached(lb, ("json-trust", measure, top_k), fetch_or_compute)
    return entries


# (table, measure) this process has warmed, or is warming
_WARMED: dict[tuple[str, str], bool] = process_store({})


def _warm_later(lb: Leaderboard, measure: str, top_k: int) -> None:
    """Build this process's own trust arrays and per-query parts of ``lb``'s state in a thread, once per table
    and measure, when it has none (settings.RELJUDGE_TRUST_WARMUP). Without them the first new labels state
    this process is asked for would build every query's parts in the request: seconds at 10M entries."""
    if not settings.RELJUDGE_TRUST_WARMUP or has_arrays(lb):
        return
    key = (lb.base_key, measure)
    with LOCK:
        if key in _WARMED:
            return
        _WARMED[key] = True

    def run() -> None:
        try:
            _entries(lb, measure, top_k)
        except Exception:
            logger.exception("the trust arrays of %s could not be built ahead", lb.campaign.slug)
        finally:
            connections.close_all()  # this thread's own connections

    threading.Thread(target=run, name=f"trust-warmup-{lb.campaign.pk}", daemon=True).start()


def _entries(lb: Leaderboard, measure: str, top_k: int) -> dict[str, Any]:
    b = bounds(lb)
    n_systems = len(lb.cube.system_ids)
    entries: dict[str, Any] = {
        "bounds": [
            {m: [_float(b.mean_low[m][s]), _float(b.mean_high[m][s])] for m in b.mean_low} for s in range(n_systems)
        ]
    }
    v = verdicts(lb, measure)
    entries["ranked_by"] = measure
    entries["settled"] = v.adjacent
    entries["pairs_left"] = v.pairs_left
    if v.adjacent:
        entries["stop"] = stop_of(lb, v, top_k)
    # the verdicts are on the final means: every query with a label, and every query with pooled pairs left
    entries["verdict_queries"] = v.final_queries
    entries["queries_without_labels"] = v.without_labels
    return entries


def stop_of(lb: Leaderboard, v: Verdicts, top_k: int) -> dict[str, Any]:
    """The stop signal of the ranking ``v`` for its top ``top_k`` systems (final.stop_signal)."""
    p = np.array([a["p_holds"] for a in v.adjacent], dtype=np.float64)
    return stop_signal(p, top_k, judgments_left(lb, v, top_k))
