"""How far to trust the leaderboard: score bounds, settled comparisons, curves, segments, pool bias, diversity.

The glue between the live leaderboard (judging.scoring.cache) and the pure-numpy measures of metrics.bounds,
metrics.curves, metrics.pool and metrics.diversity. All of them read the arrays the scorer builds (ranked
labels, qrels rows and document ids of the scored queries); those are rebuilt once per labels state
(``Leaderboard.state``) and kept in process memory with the results derived from them, as the statistics
are in judging.scoring.stats. Nothing here loops over queries or documents in Python.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace

import numpy as np
from django.db.models import Count, Max
from django.db.models.fields.json import KT
from django.utils.translation import gettext, gettext_lazy

import metrics
from judging.models import Campaign, Document, Grade, Pair, QueryTag
from judging.scoring.cache import LEADERBOARD_MEASURES, Leaderboard, Params, ScoreTable, label_arrays, leaderboard
from judging.scoring.cube import RunCube, labels_for
from judging.scoring.stats import ranking_stats
from metrics import Measure

# Warn under this many scored queries in a segment: its CIs are wide and its tests have little power.
SEGMENT_MIN_QUERIES = 10
# Curves go up to this cutoff unless asked for more (the issue: "K up to the pool depth or 100").
CURVE_K_DEFAULT = 100
CURVE_K_MAX = 1000
# The queue mode "pairs that matter most" may serve from a priority list this many seconds older than the
# labels: recomputing it costs about a second on 20 x 5,000 x 100, and every served pair is re-checked
# against the live queue rules (redundancy, holds), so a slightly stale order only changes which open
# pair comes first.
PRIORITY_MAX_AGE = 30.0
PRIORITY_CHUNK = 200  # candidate pairs checked against the live queue per database query
ATTRIBUTE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
ATTRIBUTE_SECONDS = 60.0  # documents' attributes change only on import: re-read at most this often
# An open comparison names this many of the queries that hold most of its unjudged pairs.
TOP_OPEN_QUERIES = 5

_LOCK = threading.Lock()
_ARRAYS: OrderedDict[str, TrustArrays] = OrderedDict()
# The latest whole-campaign arrays per score table (unsegmented key): the base of the next state's arrays.
_LATEST: dict[str, tuple[np.ndarray, TrustArrays]] = {}
PATCH_QUERIES = 256  # queries whose labels moved up to which the previous arrays are patched, not rebuilt
_RESULTS: OrderedDict[tuple, object] = OrderedDict()
_PRIORITY: dict[int, PriorityList] = {}
_ATTRIBUTES: dict[tuple, tuple[float, np.ndarray, np.ndarray, list[str]]] = {}
_KEEP_ARRAYS = 4
_KEEP_RESULTS = 64


def _remember(store: OrderedDict, key, value, keep: int):
    with _LOCK:
        store[key] = value
        store.move_to_end(key)
        while len(store) > keep:
            store.popitem(last=False)
    return value


def _recall(store: OrderedDict, key):
    with _LOCK:
        value = store.get(key)
        if value is not None:
            store.move_to_end(key)
        return value


def caches_clear() -> None:
    """Forget every array and result kept here (for tests and benchmarks)."""
    with _LOCK:
        _ARRAYS.clear()
        _LATEST.clear()
        _RESULTS.clear()
        _PRIORITY.clear()
        _ATTRIBUTES.clear()


def _cached(lb: Leaderboard, what: tuple, compute):
    key = (lb.state, *what)
    got = _recall(_RESULTS, key)
    if got is None:
        got = _remember(_RESULTS, key, compute(), _KEEP_RESULTS)
    return got


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


def trust_arrays(lb: Leaderboard) -> TrustArrays:
    """Ranked labels, qrels and document ids of the leaderboard's scored queries, built once per labels state.

    The whole campaign's arrays (every query) are cached under the unsegmented table key and the labels
    versions; the leaderboard's query set (its ``labelled`` mask, a segment's) is taken out of them. After a
    few new judgments only the queries whose labels version moved are read and probed again: a copy of
    the previous state's arrays with those columns replaced (reading every label and probing 10M ranked
    documents is most of the cost otherwise).
    """
    h = hashlib.sha256(lb.base_key.encode())
    versions = lb.table.versions
    h.update(versions.tobytes())
    key = h.hexdigest()[:24]
    full = _recall(_ARRAYS, key)
    if full is None:
        full = _remember(_ARRAYS, key, _arrays_build(lb), _KEEP_ARRAYS)
        with _LOCK:
            _LATEST[lb.base_key] = (versions.copy(), full)
    wanted = np.flatnonzero(lb.table.labelled)
    if wanted.size == full.positions.size:
        return full
    return TrustArrays(full.labels[:, wanted], full.qrels[wanted], full.doc_ids[:, wanted], wanted)


def _arrays_build(lb: Leaderboard) -> TrustArrays:
    n_q = len(lb.cube.query_ids)
    versions = lb.table.versions
    with _LOCK:
        previous = _LATEST.get(lb.base_key)
    if previous is not None and previous[0].shape == versions.shape:
        dirty = np.flatnonzero(previous[0] != versions)
        if dirty.size <= PATCH_QUERIES:
            old = previous[1]
            labels = labels_for(
                lb.campaign, lb.cube.query_ids[dirty], lb.params.policy, total=n_q, labels=lb.params.labels
            )
            grid, qrels, _, _ = label_arrays(lb.cube, dirty, labels)
            patched = old.labels.copy()
            patched[:, dirty] = grid
            width = max(old.qrels.shape[1], qrels.shape[1])
            rows = np.full((n_q, width), metrics.UNJUDGED, dtype=old.qrels.dtype)
            rows[:, : old.qrels.shape[1]] = old.qrels
            rows[dirty] = metrics.UNJUDGED
            rows[dirty, : qrels.shape[1]] = qrels
            return TrustArrays(patched, rows, old.doc_ids, old.positions)
    labels = labels_for(lb.campaign, lb.cube.query_ids, lb.params.policy, total=n_q, labels=lb.params.labels)
    grid, qrels, doc_ids, _ = label_arrays(lb.cube, np.arange(n_q), labels)
    return TrustArrays(grid, qrels, doc_ids, np.arange(n_q))


def _scored_labels(lb: Leaderboard, arrays: TrustArrays) -> np.ndarray:
    return metrics.condense(arrays.labels) if lb.params.judged_only else arrays.labels


def top_grade(campaign: Campaign, qrels: np.ndarray) -> int:
    """The best grade of the campaign's scale (or of its labels, should an import have gone beyond it)."""
    scale = Grade.objects.filter(campaign=campaign).aggregate(top=Max("value"))["top"] or 0
    return max(int(scale), int(qrels.max()) if qrels.size else 0, 0)


# --------------------------------------------------------------------------- segments


def segment_mask(campaign: Campaign, cube: RunCube, segment: str) -> np.ndarray:
    """(Q,) bool over the cube's queries: the query carries the tag. ValueError for a tag no query has."""
    ids = np.fromiter(
        QueryTag.objects.filter(query__campaign=campaign, tag=segment).order_by().values_list("query_id", flat=True),
        dtype=np.int64,
    )
    if ids.size == 0:
        raise ValueError(gettext("segment: no query of this campaign has the tag %(tag)r") % {"tag": segment[:100]})
    return np.isin(cube.query_ids, ids)


def campaign_tags(campaign: Campaign) -> list[tuple[str, int]]:
    """Every tag of the campaign's queries with its number of queries, most used first."""
    rows = (
        QueryTag.objects.filter(query__campaign=campaign)
        .order_by()
        .values("tag")
        .annotate(n=Count("id"))
        .order_by("-n", "tag")
        .values_list("tag", "n")
    )
    return list(rows)


@dataclass
class Segment:
    tag: str
    n_queries: int  # queries carrying the tag
    n_scored: int  # of those, queries with a label (in the means)
    stats: object  # judging.scoring.RankingStats of the segment, or None without scored queries

    @property
    def few(self) -> bool:
        return self.n_scored < SEGMENT_MIN_QUERIES


def segments(lb: Leaderboard, measure: str) -> list[Segment]:
    """Each tag's leaderboard: means, 95% bootstrap CIs and the randomization test against the segment's best.

    One RankingStats per segment (a loop over tags, not queries), cached per labels state.
    """

    def compute():
        out = []
        ids = QueryTag.objects.filter(query__campaign=lb.campaign).order_by().values_list("tag", "query_id")
        rows = np.array(list(ids), dtype=object).reshape(-1, 2)
        if not rows.size:
            return out
        tags, inverse = np.unique(rows[:, 0].astype(str), return_inverse=True)
        query_ids = rows[:, 1].astype(np.int64)
        for t, tag in enumerate(tags.tolist()):
            inside = np.isin(lb.cube.query_ids, query_ids[inverse == t])
            scored = lb.table.labelled & inside
            sub = replace(
                lb, table=ScoreTable(lb.table.versions, lb.table.scores, scored), _means=None, key=f"{lb.key}:{tag}"
            )
            stats = ranking_stats(sub, measure, n_resamples=1000, n_permutations=2000) if scored.any() else None
            out.append(Segment(tag, int(inside.sum()), int(scored.sum()), stats))
        return out

    return _cached(lb, ("segments", measure), compute)


# --------------------------------------------------------------------------- bounds and settled comparisons


@dataclass
class Bounds:
    """Per-query and mean bounds of every measure but Judged@k over the leaderboard's scored queries."""

    low: dict[str, np.ndarray]  # measure -> (S, Qs)
    high: dict[str, np.ndarray]
    mean_low: dict[str, np.ndarray]  # measure -> (S,)
    mean_high: dict[str, np.ndarray]


def bounds(lb: Leaderboard) -> Bounds:
    def compute():
        arrays = trust_arrays(lb)
        p = lb.params
        got = metrics.score_bounds(
            arrays.labels,
            arrays.qrels,
            k=p.k,
            top_grade=top_grade(lb.campaign, arrays.qrels),
            threshold=p.threshold,
            gain=p.gain,
        )
        low = {m: v[0] for m, v in got.items()}
        high = {m: v[1] for m, v in got.items()}
        n = max(arrays.positions.size, 1)
        return Bounds(
            low,
            high,
            {m: v.sum(axis=1) / n for m, v in low.items()},
            {m: v.sum(axis=1) / n for m, v in high.items()},
        )

    return _cached(lb, ("bounds",), compute)


@dataclass
class Verdicts:
    """Which adjacent systems of the ranking by one measure keep their order whatever is left to judge."""

    measure: str
    order: np.ndarray  # (S,) systems best first
    # {"systems": [a, b], "settled": bool, "open_pairs": n, "open_queries": n, "top_queries": [{"qid", "pairs"}]},
    # a above b
    adjacent: list[dict]
    pairs_left: int  # distinct unjudged pairs that can still change an open comparison
    priority: metrics.PairPriority | None  # those pairs, most urgent first (cube query positions)


def verdicts(lb: Leaderboard, measure: str) -> Verdicts:
    """Settled or open for every adjacent pair, and the unjudged pairs that can still change the ranking.

    "Settled" compares the per-system bounds of :func:`metrics.settled`: exact for P@k, Hit@k and MRR;
    for the measures normalised by the query's relevant documents (R, F1, MAP, nDCG, bpref) it is
    settled against each system's own unjudged documents only.
    """

    def compute():
        order = ranking_order(lb, measure)
        names = lb.cube.system_names
        b = bounds(lb)
        if measure not in b.low or len(order) < 2:
            return Verdicts(measure, order, [], 0, None)
        arrays = trust_arrays(lb)
        verdict = metrics.settled(b.low[measure], b.high[measure])
        cutoff = cutoff_of(measure, lb.params.k)
        n_open = metrics.open_pairs(arrays.labels, arrays.doc_ids, verdict.order, cutoff=cutoff)
        priority = metrics.pair_priority(arrays.labels, arrays.doc_ids, verdict.order, cutoff=cutoff)
        above, below = order[:-1], order[1:]
        settled_ = verdict.order[above, below] != 0
        # where the open comparisons' unjudged pairs are: their number per query, the busiest queries first
        where = np.zeros((above.size, arrays.positions.size), dtype=np.int64)
        is_open = np.flatnonzero(~settled_)
        if is_open.size:
            pairs = np.stack([above[is_open], below[is_open]], axis=1)
            where[is_open] = metrics.open_pairs_by_query(arrays.labels, arrays.doc_ids, pairs, cutoff=cutoff)
        busiest = np.argsort(-where, axis=1, kind="stable")[:, :TOP_OPEN_QUERIES]
        qids = lb.cube.qids
        adjacent = []
        for i, (a, c, s, n) in enumerate(
            zip(above.tolist(), below.tolist(), settled_.tolist(), n_open[above, below].tolist(), strict=True)
        ):  # over adjacent systems, not queries
            top = [(int(q), int(where[i, q])) for q in busiest[i].tolist() if where[i, q] > 0]
            adjacent.append(
                {
                    "systems": [names[a], names[c]],
                    "settled": bool(s),
                    "open_pairs": int(n),
                    "open_queries": int(np.count_nonzero(where[i])),
                    "top_queries": [{"qid": qids[arrays.positions[q]], "pairs": m} for q, m in top],
                }
            )
        # priority.query indexes the arrays' queries: back to cube positions
        priority = priority._replace(query=arrays.positions[priority.query])
        return Verdicts(measure, order, adjacent, int(priority.query.size), priority)

    return _cached(lb, ("verdicts", measure), compute)


# --------------------------------------------------------------------------- curves


def curves(lb: Leaderboard, measure_base: str, k_max: int) -> np.ndarray:
    """(S, k_max) mean of ``measure_base`` (one of metrics.CURVE_MEASURES) at every cutoff 1..k_max."""
    if measure_base not in metrics.CURVE_MEASURES:
        raise ValueError(
            gettext("measure must be one of %(choices)s, not %(measure)r")
            % {"choices": ", ".join(metrics.CURVE_MEASURES), "measure": measure_base[:40]}
        )
    if not 1 <= k_max <= CURVE_K_MAX:
        raise ValueError(gettext("k_max must be between 1 and %(top)d") % {"top": CURVE_K_MAX})

    def compute():
        arrays = trust_arrays(lb)
        if arrays.positions.size == 0:
            return np.zeros((len(lb.cube.system_ids), k_max))
        p = lb.params
        got = metrics.curves(
            _scored_labels(lb, arrays),
            arrays.qrels,
            k_max,
            threshold=p.threshold,
            gain=p.gain,
            measures=[measure_base],
        )
        return got[measure_base]

    return _cached(lb, ("curves", measure_base, k_max), compute)


def curve_k_default(lb: Leaderboard) -> int:
    return int(min(CURVE_K_DEFAULT, max(lb.cube.doc_ids.shape[2], lb.campaign.pool_depth, 1)))


# --------------------------------------------------------------------------- pool bias


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
        return self.real - self.without


def pool_bias(lb: Leaderboard) -> PoolBiasResult:
    """Leave-one-run-out: each system scored as if the pool pairs only it contributed were unjudged."""

    def compute():
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

    return _cached(lb, ("pool-bias",), compute)


# --------------------------------------------------------------------------- diversity


def check_attribute(attribute: str) -> str:
    if not ATTRIBUTE_PATTERN.match(attribute or "") or "__" in attribute:
        raise ValueError(
            gettext(
                "attribute must be 1 to 64 letters, digits, '-' or '_' (one '_' at a time), "
                "starting with a letter or digit"
            )
        )
    return attribute


def _attribute_codes(campaign: Campaign, attribute: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(document pks sorted, their value codes, the values): the documents that have the attribute.

    The database extracts the key (``KT``, a JSON path on SQLite and PostgreSQL alike); numpy numbers
    the distinct values. Kept ATTRIBUTE_SECONDS, keyed by the campaign's document count and largest id.
    """
    shape = Document.objects.filter(campaign=campaign).aggregate(n=Count("id"), top=Max("id"))
    key = (campaign.pk, attribute, shape["n"], shape["top"])
    with _LOCK:
        got = _ATTRIBUTES.get(key)
    if got is not None and time.monotonic() - got[0] < ATTRIBUTE_SECONDS:
        return got[1], got[2], got[3]
    rows = np.array(
        list(
            Document.objects.filter(campaign=campaign)
            .annotate(value=KT(f"attributes__{attribute}"))
            .exclude(value__isnull=True)
            .order_by("id")
            .values_list("id", "value")
        ),
        dtype=object,
    ).reshape(-1, 2)
    text = rows[:, 1].astype(str)
    keep = text != ""  # an empty value says no more than a missing one
    pks = rows[keep, 0].astype(np.int64)
    values, codes = np.unique(text[keep], return_inverse=True)
    values = values.tolist()
    codes = codes.astype(np.int64).reshape(-1)
    with _LOCK:
        _ATTRIBUTES[key] = (time.monotonic(), pks, codes, values)
    return pks, codes, values


def attribute_names(campaign: Campaign, *, sample: int = 500) -> list[str]:
    """Attribute keys found on (a sample of) the campaign's documents, for the page's menu."""
    rows = (
        Document.objects.filter(campaign=campaign)
        .exclude(attributes={})
        .order_by("id")
        .values_list("attributes", flat=True)[:sample]
    )
    keys: set[str] = set()
    for attrs in rows:  # a bounded sample, not the collection
        if isinstance(attrs, dict):
            keys.update(k for k in attrs if ATTRIBUTE_PATTERN.match(k) and "__" not in k)
    return sorted(keys)


@dataclass
class Diversity:
    attribute: str
    k: int
    ild: np.ndarray  # (S, Qs) intra-list diversity at k
    coverage: np.ndarray  # (S, Qs) distinct values in the top k
    n_values: int  # distinct values of the attribute in the campaign
    share_known: float  # share of the top-k documents that have the attribute

    @property
    def names(self) -> tuple[str, str]:
        return f"ILD@{self.k}", f"Coverage@{self.k}"

    def means(self) -> tuple[np.ndarray, np.ndarray]:
        n = max(self.ild.shape[1], 1)
        return self.ild.sum(axis=1) / n, self.coverage.sum(axis=1) / n


def diversity(lb: Leaderboard, attribute: str) -> Diversity:
    """ILD@k and coverage@k of every system over one document attribute, on the scored queries."""
    attribute = check_attribute(attribute)
    pks, codes, values = _attribute_codes(lb.campaign, attribute)
    if not values:
        raise ValueError(
            gettext("attribute: no document of this campaign has the attribute %(name)r") % {"name": attribute}
        )

    def compute():
        arrays = trust_arrays(lb)
        k = lb.params.k
        docs = arrays.doc_ids[..., :k]  # both measures look at the top k only: look up no deeper
        at = np.minimum(np.searchsorted(pks, docs), max(pks.size - 1, 0))
        found = pks[at] == docs
        grid = np.where(found, codes[at], metrics.NO_VALUE)
        grid[docs < 0] = metrics.PAD
        listed = np.count_nonzero(grid != metrics.PAD)
        share = float(np.count_nonzero(grid >= 0) / listed) if listed else 0.0
        return Diversity(
            attribute,
            k,
            metrics.intra_list_diversity(grid, k=k),
            metrics.coverage(grid, k=k).astype(np.float64),
            len(values),
            share,
        )

    return _cached(lb, ("diversity", attribute, len(values)), compute)


# --------------------------------------------------------------------------- micro averages


def micro(lb: Leaderboard) -> dict[str, np.ndarray]:
    """Micro-averaged P@k and R@k, (S,) each, over the leaderboard's scored queries."""

    def compute():
        arrays = trust_arrays(lb)
        k, t = lb.params.k, lb.params.threshold
        labels = _scored_labels(lb, arrays)
        return {
            str(Measure("P", k)): metrics.micro_precision(labels, k=k, threshold=t),
            str(Measure("R", k)): metrics.micro_recall(labels, arrays.qrels, k=k, threshold=t),
        }

    return _cached(lb, ("micro",), compute)


MICRO_NOTE = gettext_lazy(
    "Macro averages give every query the same weight; micro averages pool the documents of all queries, "
    "so queries with long runs (P) or many relevant documents (R) weigh more."
)


# --------------------------------------------------------------------------- the leaderboard JSON


def _float(v: float) -> float:
    return float(v)


def leaderboard_data_extend(
    lb: Leaderboard,
    data: dict,
    *,
    measure: str | None,
    with_bounds: bool,
    attribute: str | None,
    with_micro: bool,
    per_query: bool,
) -> None:
    """Add bounds, settled verdicts, diversity and micro averages to ``leaderboard_data``'s JSON in place."""
    systems = data["systems"]
    if with_bounds:
        measure = resolve_measure(measure, lb.params.k)
        b = bounds(lb)
        for s, entry in enumerate(systems):
            entry["bounds"] = {m: [_float(b.mean_low[m][s]), _float(b.mean_high[m][s])] for m in b.mean_low}
        v = verdicts(lb, measure)
        data["ranked_by"] = measure
        data["settled"] = v.adjacent
        data["pairs_left"] = v.pairs_left
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


# --------------------------------------------------------------------------- the judging queue


@dataclass
class PriorityList:
    state: str
    computed: float  # time.monotonic()
    pair_ids: np.ndarray  # pooled unjudged pairs, most urgent first


QUEUE_PARAMS = Params()  # the queue ranks by the leaderboard's defaults: nDCG@10 under the campaign's policy
QUEUE_MEASURE = str(Measure("nDCG", QUEUE_PARAMS.k))


def priority_pairs(campaign: Campaign) -> np.ndarray:
    """Pair ids in the order "pairs that matter most" serves them (see selectors.queue.pair_next).

    The unjudged pooled pairs that systems with an open comparison (nDCG@10) rank within their top 10,
    best rank first (metrics.pair_priority). Recomputed when the labels state moved and the list is
    older than PRIORITY_MAX_AGE seconds; mapping (query, document) to pair ids is one sorted search.
    """
    lb = leaderboard(campaign, QUEUE_PARAMS)
    with _LOCK:
        got = _PRIORITY.get(campaign.pk)
    if got is not None and (got.state == lb.state or time.monotonic() - got.computed < PRIORITY_MAX_AGE):
        return got.pair_ids
    # Every query counts here, labelled or not: before the first label no query is in the leaderboard's
    # means, yet every comparison is open and the queue needs an order.
    every = np.ones(len(lb.cube.query_ids), dtype=bool)
    lb = replace(lb, table=ScoreTable(lb.table.versions, lb.table.scores, every), key=f"{lb.key}:queue", _means=None)
    v = verdicts(lb, QUEUE_MEASURE)
    ids = np.zeros(0, dtype=np.int64)
    if v.priority is not None and v.priority.query.size:
        rows = np.array(
            list(
                Pair.objects.filter(campaign=campaign, pooled=True, label__isnull=True)
                .order_by()
                .values_list("query_id", "document_id", "id")
            ),
            dtype=np.int64,
        ).reshape(-1, 3)
        keys = (rows[:, 0] << 32) | rows[:, 1]
        order = np.argsort(keys)
        keys, pair_ids = keys[order], rows[order, 2]
        wanted = (lb.cube.query_ids[v.priority.query] << 32) | v.priority.doc
        at = np.minimum(np.searchsorted(keys, wanted), max(keys.size - 1, 0))
        found = keys[at] == wanted if keys.size else np.zeros(wanted.size, bool)
        ids = pair_ids[at[found]] if keys.size else ids
    with _LOCK:
        _PRIORITY[campaign.pk] = PriorityList(lb.state, time.monotonic(), ids)
    return ids


# --------------------------------------------------------------------------- JSON shapes of the API


def _finite(v) -> float | None:
    v = float(v)
    return v if np.isfinite(v) else None


def segment_json(seg: Segment, names: list[str]) -> dict:
    out = {"tag": seg.tag, "queries": seg.n_queries, "scored_queries": seg.n_scored, "few_queries": seg.few}
    systems = []
    for i, name in enumerate(names):
        entry = {"name": name, "value": None, "ci": None, "p_vs_best": None, "best": False}
        if seg.stats is not None:
            st = seg.stats
            entry["value"] = float(st.means[i])
            low, high = _finite(st.ci_low[i]), _finite(st.ci_high[i])
            entry["ci"] = [low, high] if low is not None else None
            entry["best"] = i == st.best
            entry["p_vs_best"] = _finite(st.p_vs_best[i])
        systems.append(entry)
    out["systems"] = systems
    return out


def pool_bias_json(result: PoolBiasResult, lb: Leaderboard) -> dict:
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
