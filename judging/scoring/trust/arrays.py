"""The arrays the trust measures read: ranked labels, qrels and document ids, rebuilt once per labels state."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from django.db.models import Max
from django.utils.translation import gettext

import metrics
from judging.models import Campaign, Grade
from judging.scoring.cache import LEADERBOARD_MEASURES, Leaderboard, rescored_label_arrays_take
from judging.scoring.cube import label_arrays, labels_for
from judging.scoring.trust.store import LOCK, process_store, recall, remember
from metrics import Measure

_ARRAYS: OrderedDict[str, TrustArrays] = process_store(OrderedDict())
# The latest whole-campaign arrays per score table (unsegmented key): the base of the next state's arrays.
_LATEST: dict[str, tuple[np.ndarray, TrustArrays]] = process_store({})
PATCH_QUERIES = 256  # queries whose labels moved up to which the previous arrays are patched, not rebuilt
_KEEP_ARRAYS = 2  # the latest states: a request of an older one holds its own reference


# --------------------------------------------------------------------------- measure names


def resolve_measure(raw: str | None, k: int) -> str:
    """A measure as a user writes it ("nDCG", "nDCG@10", "MRR", "bpref") -> its leaderboard name at cutoff ``k``
    ("nDCG@10", "MRR"): the one reading of a user's measure, for the leaderboard page's form and the API.

    ValueError in the reader's language for an unknown measure, a cutoff on a whole-run measure or a cutoff
    other than ``k`` (metrics.Measure.parse checks the same, in English, for library callers)."""
    raw = (raw or "nDCG").strip()
    base, at, cut = raw.partition("@")
    if base not in LEADERBOARD_MEASURES:
        raise ValueError(
            gettext("unknown measure %(measure)r; expected one of %(choices)s")
            % {"measure": raw[:40], "choices": ", ".join(LEADERBOARD_MEASURES)}
        )
    if at and base in metrics.WHOLE_RUN:
        raise ValueError(gettext("%(measure)s has no cutoff") % {"measure": base})
    if at and cut != str(k):
        raise ValueError(gettext("%(measure)s does not match k=%(k)d") % {"measure": raw[:40], "k": k})
    return str(Measure(base).at(k))


def cutoff_of(measure: str, k: int) -> int | None:
    """The depth a measure (a leaderboard name) looks at: k for the @k measures, the whole run for MRR, MAP
    and bpref."""
    return None if Measure.parse(measure).base in metrics.WHOLE_RUN else k


def ranking_order(lb: Leaderboard, measure: str) -> np.ndarray:
    """Systems by the measure's mean, best first; ties by name (the leaderboard page's order)."""
    means = lb.means()[lb.measure_index(measure)]
    names = np.array(lb.cube.system_names, dtype=str)
    return np.lexsort((names, -np.round(means, 12))) if len(names) else np.zeros(0, np.intp)


# --------------------------------------------------------------------------- the arrays


@dataclass
class TrustArrays:
    """The metrics inputs of the queries in a leaderboard's means (its ``labelled`` mask)."""

    labels: np.ndarray  # (S, Qs, D) int8 ranked labels, UNJUDGED / PAD
    qrels: np.ndarray  # (Qs, M) int8 qrels rows padded with UNJUDGED
    doc_ids: np.ndarray  # (S, Qs, D) int64 document pks, -1 after the end of a run
    positions: np.ndarray  # (Qs,) cube positions of these queries


def campaign_arrays(lb: Leaderboard) -> TrustArrays:
    """Ranked labels, qrels and document ids of every query of the campaign, built once per labels state.

    Cached under the unsegmented table key and the labels versions. After a few new judgments only the
    queries whose labels version moved are read and probed again: a copy of the previous state's arrays
    with those columns replaced (reading every label and probing 10M ranked documents is most of the
    cost otherwise).
    """
    h = hashlib.sha256(lb.base_key.encode())
    versions = lb.table.versions
    h.update(versions.tobytes())
    key = h.hexdigest()[:24]
    full = recall(_ARRAYS, key)
    if full is None:
        full = remember(_ARRAYS, key, _arrays_build(lb), _KEEP_ARRAYS)
        with LOCK:
            _LATEST[lb.base_key] = (versions.copy(), full)
    return full


def has_arrays(lb: Leaderboard) -> bool:
    """Whether this process holds whole-campaign arrays of ``lb``'s table (of some labels state): the next state's
    are then patched, not built."""
    with LOCK:
        return lb.base_key in _LATEST


def trust_arrays(lb: Leaderboard) -> TrustArrays:
    """The arrays of the leaderboard's scored queries (its ``labelled`` mask, a segment's): taken out of
    :func:`campaign_arrays`, or those themselves when every query is scored."""
    full = campaign_arrays(lb)
    wanted = np.flatnonzero(lb.table.labelled)
    if wanted.size == full.positions.size:
        return full
    return TrustArrays(full.labels[:, wanted], full.qrels[wanted], full.doc_ids[:, wanted], wanted)


def _arrays_build(lb: Leaderboard) -> TrustArrays:
    n_q = len(lb.cube.query_ids)
    versions = lb.table.versions
    with LOCK:
        previous = _LATEST.get(lb.base_key)
    if previous is not None and previous[0].shape == versions.shape:
        dirty = np.flatnonzero(previous[0] != versions)
        if dirty.size <= PATCH_QUERIES:
            old = previous[1]
            kept = rescored_label_arrays_take(lb.base_key, versions, dirty)
            if kept is None:
                labels = labels_for(
                    lb.campaign, lb.cube.query_ids[dirty], lb.params.policy, total=n_q, labels=lb.params.labels
                )
                grid, qrels, _, _ = label_arrays(lb.cube, dirty, labels)
            else:  # the leaderboard just rescored these queries from the same labels
                grid, qrels = kept
            patched = old.labels.copy()
            patched[:, dirty] = grid
            width = max(old.qrels.shape[1], qrels.shape[1])
            rows = np.full((n_q, width), metrics.UNJUDGED, dtype=old.qrels.dtype)
            rows[:, : old.qrels.shape[1]] = old.qrels
            rows[dirty] = metrics.UNJUDGED
            rows[dirty, : qrels.shape[1]] = qrels
            return TrustArrays(patched, rows, old.doc_ids, old.positions)
    kept = rescored_label_arrays_take(lb.base_key, versions, np.arange(n_q))
    if kept is not None:  # the leaderboard was just scored whole from the same labels
        return TrustArrays(kept[0], kept[1], lb.cube.doc_ids, np.arange(n_q))
    labels = labels_for(lb.campaign, lb.cube.query_ids, lb.params.policy, total=n_q, labels=lb.params.labels)
    grid, qrels, doc_ids, _ = label_arrays(lb.cube, np.arange(n_q), labels)
    return TrustArrays(grid, qrels, doc_ids, np.arange(n_q))


def scored_labels(lb: Leaderboard, arrays: TrustArrays) -> np.ndarray:
    return metrics.condense(arrays.labels) if lb.params.judged_only else arrays.labels


def top_grade(campaign: Campaign, qrels: np.ndarray) -> int:
    """The best grade of the campaign's scale (or of its labels, should an import have gone beyond it)."""
    scale = Grade.objects.filter(campaign=campaign).aggregate(top=Max("value"))["top"] or 0
    return max(int(scale), int(qrels.max()) if qrels.size else 0, 0)
