"""What the trust measures add to the leaderboard's JSON: bounds, settled verdicts, diversity, micro averages."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from django.conf import settings
from django.core.cache import cache

from judging import runtime
from judging.scoring.cache import Leaderboard, shared_write_later
from judging.scoring.memory import trim_after_build
from judging.scoring.trust.arrays import has_arrays, resolve_measure
from judging.scoring.trust.bounds import Verdicts, bounds, judgments_left, judgments_to_stop, verdicts
from judging.scoring.trust.curves import MICRO_NOTE, micro
from judging.scoring.trust.diversity import diversity
from judging.scoring.trust.final import CONFIDENCE, TOP_K_DEFAULT, stop_signal
from judging.scoring.trust.store import LOCK, cached, recall_cached
from metrics.numbers import MEASURE_RANGE, ordered_bounds, within

logger = logging.getLogger(__name__)


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
    allow_stale: bool = False,
) -> None:
    """Add bounds, settled verdicts, diversity and micro averages to ``leaderboard_data``'s JSON in place."""
    systems = data["systems"]
    if with_bounds:
        measure = resolve_measure(measure, lb.params.k)
        entries = trust_entries(lb, measure, top_k, allow_stale=allow_stale)
        for entry, system_bounds in zip(systems, entries["bounds"], strict=True):
            entry["bounds"] = system_bounds
        data.update({name: value for name, value in entries.items() if name != "bounds"})
    if attribute:
        d = diversity(lb, attribute)
        ild_name, cov_name = d.names
        ild, cov = d.means()
        ild = within(ild, *MEASURE_RANGE, what=ild_name)  # (S,) a share of the top k's pairs: in [0, 1]
        cov = within(cov, 0.0, float(lb.params.k), what=cov_name)  # distinct values among the top k: 0 to k
        data["attribute"] = d.attribute
        qids = lb.scored_qids()
        for s, entry in enumerate(systems):
            entry["measures"][ild_name] = float(ild[s])
            entry["measures"][cov_name] = float(cov[s])
            if per_query:
                for q, i_, c_ in zip(qids, d.ild[s].tolist(), d.coverage[s].tolist(), strict=True):
                    entry["per_query"][q][ild_name] = i_
                    entry["per_query"][q][cov_name] = c_
    if with_micro:
        m = {name: within(values, *MEASURE_RANGE, what=f"micro {name}") for name, values in micro(lb).items()}
        for s, entry in enumerate(systems):
            entry["micro"] = {name: float(values[s]) for name, values in m.items()}
        data["micro_note"] = str(MICRO_NOTE)


# Systems x queries x depth above which a process that has no trust arrays of a table may answer a new labels state
# with the latest published verdicts (allow_stale): building every query's parts takes seconds there (5.7 s at 20M
# ranked entries), once per worker.
STALE_CELLS = 2_000_000


def trust_entries(lb: Leaderboard, measure: str, top_k: int, *, allow_stale: bool = False) -> dict[str, Any]:
    """The bounds and verdicts the leaderboard JSON adds, for the labels state of ``lb`` (plain JSON values):
    each system's ``bounds``, ``ranked_by``, ``settled``, ``pairs_left``, ``stop``, ``verdict_queries`` and
    ``queries_without_labels``.

    Computed once per labels state on the machine's processes together: the first process asked publishes them
    in the shared cache (stamped with the state, as the score blocks are), and another process asked for the
    same state (a restarted worker, a second app server, the worker a balancer sends the lead's next poll to)
    reads them there instead of building the trust arrays and per-query parts it does not have yet: seconds at
    10M ranked entries. The pool depth, the redundancy (in judgments_left) and the queue mode (the stop's estimate
    follows mtc's order) are named in the key as well.

    ``allow_stale``: when nobody has published this state yet, this process has no arrays of the table to patch
    (it would build every query's parts in the request), the campaign is larger than :data:`STALE_CELLS` and
    background work is on (settings.RELJUDGE_TRUST_WARMUP), the latest entries published for the table are
    returned with ``verdicts_behind`` (how many queries' labels moved since them), and this state's are built in
    a thread and published; the next request gets them."""
    campaign = lb.campaign
    # the queue mode too: the stop's estimate follows mtc's order (bounds.judgments_to_stop)
    tail = f"{measure}:{top_k}:{campaign.pool_depth}:{campaign.redundancy}:{campaign.queue_mode}"
    key = f"reljudge:trust:{lb.state}:{tail}"
    latest_key = f"reljudge:trust-latest:{lb.key}:{tail}"

    def publish(entries: dict[str, Any]) -> None:
        latest = {"versions": lb.table.versions.copy(), "entries": entries}
        shared_write_later({key: entries, latest_key: latest})

    def fetch_or_compute() -> dict[str, Any]:
        shared = cache.get(key)
        if isinstance(shared, dict):
            _warm_later(lb, measure, top_k)
            return shared
        entries = _entries(lb, measure, top_k)
        publish(entries)
        return entries

    what = ("json-trust", measure, top_k, campaign.queue_mode)

    def current() -> dict[str, Any]:
        return cached(lb, what, fetch_or_compute)

    if allow_stale and _may_be_stale(lb, measure, top_k):
        found = cache.get_many([key, latest_key])
        if not isinstance(found.get(key), dict):
            latest = found.get(latest_key)
            if isinstance(latest, dict) and getattr(latest.get("versions"), "shape", None) == lb.table.versions.shape:
                behind = int(np.count_nonzero(latest["versions"] != lb.table.versions))
                _compute_later(lb, measure, top_k, current)
                return {**latest["entries"], "verdicts_behind": behind}
    return current()


def _may_be_stale(lb: Leaderboard, measure: str, top_k: int) -> bool:
    """Whether trust_entries may answer ``lb``'s state with older entries: see its ``allow_stale``. Also while
    this process builds the state in a thread (its arrays then exist, but the parts are not done)."""
    s, q, d = lb.cube.doc_ids.shape
    if not settings.RELJUDGE_TRUST_WARMUP or int(s) * int(q) * int(d) <= STALE_CELLS:
        return False
    if recall_cached(lb, ("json-trust", measure, top_k, lb.campaign.queue_mode)):
        return False
    with LOCK:
        if (lb.key, measure, top_k) in _COMPUTING:
            return True  # a thread builds an earlier state's parts: this one would build them all again
    return not has_arrays(lb)


# tables (with measure and top_k) whose current entries this process is computing in a thread
_COMPUTING: dict[tuple[object, ...], bool] = runtime.keep(
    "trust.states_computing",
    {},
    bound=None,
    grows_with="score table, measure and top k being built in a thread",
    invalidated_by="the thread's end",
    lock=LOCK,
    group="trust",
)


def _compute_later(lb: Leaderboard, measure: str, top_k: int, compute: Any, name: str = "trust-state") -> None:
    """Run ``compute`` (which builds the state's parts, and publishes its entries) in a thread, one per table at
    a time: later states are answered with the published entries meanwhile (allow_stale), and patched from these
    parts once they are done, instead of building every part again in a request."""
    what = (lb.key, measure, top_k)
    with LOCK:
        if what in _COMPUTING:
            return
        _COMPUTING[what] = True

    def run() -> None:
        try:
            compute()
        except Exception:
            logger.exception("the verdicts of %s could not be built", lb.campaign.slug)
        finally:
            with LOCK:
                _COMPUTING.pop(what, None)
            trim_after_build()

    runtime.later(run, name=f"{name}-{lb.campaign.pk}")


# (table, measure) this process has warmed, or is warming
_WARMED: dict[tuple[str, str], bool] = runtime.keep(
    "trust.warmed",
    {},
    bound=None,
    grows_with="score table and measure",
    invalidated_by="nothing: warmed once per process",
    lock=LOCK,
    group="trust",
)


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
    _compute_later(lb, measure, top_k, lambda: _entries(lb, measure, top_k), name="trust-warmup")


def _entries(lb: Leaderboard, measure: str, top_k: int) -> dict[str, Any]:
    b = bounds(lb)
    n_systems = len(lb.cube.system_ids)
    # each measure's (S,) bounds of the means, in the measure's range and in order after rounding (metrics.numbers)
    means = {m: ordered_bounds(b.mean_low[m], b.mean_high[m], *MEASURE_RANGE, what=f"{m} bounds") for m in b.mean_low}
    entries: dict[str, Any] = {
        "bounds": [{m: [float(low[s]), float(high[s])] for m, (low, high) in means.items()} for s in range(n_systems)]
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
    certain = all(a["verdict"] in ("settled", "tied") for a in v.adjacent[:top_k])
    reached = certain or float(np.sum(1.0 - p[:top_k])) <= 1.0 - CONFIDENCE + 1e-12
    to_stop = 0 if reached else judgments_to_stop(lb, v, top_k)
    return stop_signal(p, top_k, judgments_left(lb, v, top_k), certain=certain, to_stop=to_stop)
