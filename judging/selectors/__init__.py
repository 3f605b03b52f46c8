"""Everything that reads for a page or an export: campaigns, the judging queue, judgments, agreement."""

from judging.figures import JudgeProgress, percent_complete  # noqa: F401
from judging.reads import POOL_SIZE_TTL, AuditState, audit_state, grade_top, pool_size, pool_size_forget  # noqa: F401
from judging.selectors.audit import audit_draws, audit_queries  # noqa: F401
from judging.selectors.campaigns import (  # noqa: F401
    annotators_progress,
    api_token_exists,
    campaign_list,
    campaign_members,
    campaign_progress,
    campaign_rows,
    campaign_setup,
    grade_list,
    membership_get,
    membership_roles,
    query_list,
    query_tag_exists,
    scale_rows,
    scale_stored,
    system_rankings,
)
from judging.selectors.judgments import (  # noqa: F401
    JUDGMENT_EXPORT_COLUMNS,
    judgment_current,
    judgment_export_chunks,
    judgment_export_row,
    judgment_following,
    judgment_following_pair,
    judgment_list,
    judgment_neighbours,
    judgments_count,
    judgments_in_campaigns,
    judgments_visible,
    qrels_chunks,
    qrels_rows,
)
from judging.selectors.people import PeopleProgress, label_source_ids, people_progress  # noqa: F401
from judging.selectors.progress import judge_progress  # noqa: F401
from judging.selectors.queue import (  # noqa: F401
    NextPair,
    latest_query_id,
    pair_get,
    pair_next,
    pair_with_scale,
)
from judging.selectors.queue_rules import (  # noqa: F401
    QUEUE_FIELDS,
    open_pair_of,
    overlap_q,
    pair_is_open,
    queue_values,
)
from judging.selectors.strategies import PRIORITY_MODES, priority_for  # noqa: F401
