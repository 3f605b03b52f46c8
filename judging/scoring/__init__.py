"""DB -> arrays -> metrics -> leaderboard: the bridge between stored runs and labels and metrics/.

Runs are fixed once imported, so each process keeps a campaign's run cube (systems x queries x depth
document ids) keyed by the systems' content fingerprints. Labels change all the time: per-query scores
are cached per parameter set, each block stamped with the labels versions of its queries, in Django's
cache (shared by every server process) and in process memory. A request reads the versions (one small
query), rescores only the queries whose version moved, and averages.

Derived results are cached under the same fingerprint (``Leaderboard.state``): bootstrap confidence
intervals and significance tests (``stats_refresh``, ``pairwise_cached``). ``presenters`` shapes scores for
the pages: ranking rows, significance cells, the queries heatmap, head-to-head, one query's ranked lists
(``query_rankings``) and the judging timeline (``judging_timeline``). ``trust`` says how far to trust the
ranking (bounds, settled comparisons, pool bias ...); ``board`` writes the leaderboard JSON of the API and
`scores --json`, scores and trust together.

Modules depend one way: cube <- cache <- stats <- trust <- board (presenters beside trust).
"""

from judging.scoring.board import hybrid_overview, leaderboard_data, process_caches_clear  # noqa: F401
from judging.scoring.cache import (  # noqa: F401
    BLOCK,
    CACHE_SECONDS,
    LEADERBOARD_MEASURES,
    Leaderboard,
    Params,
    ScoreTable,
    leaderboard,
    measure_names,
    score_queries,
    threshold_check,
)
from judging.scoring.cube import (  # noqa: F401
    LABEL_SOURCES,
    RunCube,
    label_source_judge,
    labels_for,
    run_cube,
)
from judging.scoring.hybrid import campaign_judge, hybrid_fit  # noqa: F401
from judging.scoring.ppi import PPIBoard, ppi_data, ppi_judge, ppi_leaderboard  # noqa: F401
from judging.scoring.presenters import (  # noqa: F401
    JUDGED_WARNING,
    MEASURE_TITLES,
    SORTS,
    HeadToHead,
    Heatmap,
    QueryRankings,
    Timeline,
    bar_chart_of,
    head_to_head,
    heatmap,
    holds_percent,
    judging_timeline,
    measure_title,
    query_page,
    query_rankings,
    query_texts,
    ranking_rows,
    significance_rows,
    stop_sentence,
    system_order,
)
from judging.scoring.stats import (  # noqa: F401
    ALPHA,
    MIN_QUERIES_FOR_STATS,
    PAIRWISE_PERMUTATIONS,
    TESTS,
    PairwiseStats,
    RankingStats,
    pairwise_cached,
    pairwise_cost,
    pairwise_current,
    pairwise_needs_job,
    pairwise_stats,
    pairwise_store,
    ranking_stats,
    stats_cached,
    stats_for_page,
    stats_refresh,
    stats_refresh_once,
)
