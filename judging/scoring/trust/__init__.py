"""How far to trust the leaderboard: score bounds, settled comparisons, curves, segments, pool bias, diversity.

The glue between the live leaderboard (judging.scoring.cache) and the pure-numpy measures of metrics.bounds,
metrics.curves, metrics.pool and metrics.diversity. All of them read the arrays the scorer builds (ranked
labels, qrels rows and document ids of the scored queries, ``arrays``); those are rebuilt once per labels
state (``Leaderboard.state``) and kept in process memory with the results derived from them (``store``), as
the statistics are in judging.scoring.stats. Nothing here loops over queries or documents in Python.

One module per family: ``bounds`` (score bounds and settled verdicts), ``segments`` (per-tag leaderboards),
``curves`` (measures at every cutoff, micro averages), ``pool`` (pool bias), ``diversity``, ``priority`` (the
order of the queue mode "pairs that matter most") and ``shapes`` (what they add to the leaderboard JSON).
"""

from judging.scoring.cube import segment_mask  # noqa: F401
from judging.scoring.trust.arrays import (  # noqa: F401
    PATCH_QUERIES,
    TrustArrays,
    campaign_arrays,
    cutoff_of,
    has_arrays,
    ranking_order,
    resolve_measure,
    scored_labels,
    top_grade,
    trust_arrays,
)
from judging.scoring.trust.bounds import (  # noqa: F401
    TOP_OPEN_QUERIES,
    Bounds,
    Verdicts,
    bounds,
    comparison_pairs_by_query,
    judgments_left,
    pair_priority,
    pairs_left_by_query,
    query_bounds,
    unjudged,
    verdicts,
)
from judging.scoring.trust.curves import (  # noqa: F401
    CURVE_K_DEFAULT,
    CURVE_K_MAX,
    MICRO_NOTE,
    curve_k_default,
    curves,
    micro,
)
from judging.scoring.trust.diversity import (  # noqa: F401
    ATTRIBUTE_PATTERN,
    ATTRIBUTE_SECONDS,
    Diversity,
    attribute_names,
    check_attribute,
    diversity,
)
from judging.scoring.trust.final import CONFIDENCE, TOP_K_DEFAULT, final_verdicts, stop_signal  # noqa: F401
from judging.scoring.trust.pool import PoolBiasResult, pool_bias, pool_bias_json  # noqa: F401
from judging.scoring.trust.priority import (  # noqa: F401
    PRIORITY_MAX_AGE,
    QUEUE_MEASURE,
    QUEUE_PARAMS,
    PriorityList,
    priority_pairs,
)
from judging.scoring.trust.segments import (  # noqa: F401
    SEGMENT_MIN_QUERIES,
    Segment,
    campaign_tags,
    segment_json,
    segments,
)
from judging.scoring.trust.shapes import leaderboard_data_extend, stop_of, trust_entries  # noqa: F401
from judging.scoring.trust.store import caches_clear  # noqa: F401
