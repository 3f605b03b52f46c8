"""Everything that writes and every rule: campaigns and members, imports, judgments and labels, the judging queue."""

from judging.imports.service import (  # noqa: F401
    BATCH,
    IMPORTERS,
    ImportConflict,
    ImportRefused,
    ImportSummary,
    Progress,
    documents_import,
    pool_build,
    qrels_import,
    queries_import,
    query_tags_import,
    query_tags_set,
    run_import,
)
from judging.labels import labels_bump, labels_refresh  # noqa: F401
from judging.services.accounts import (  # noqa: F401
    MemberAdded,
    PersonRow,
    member_add,
    members_add,
    password_pending,
    people_parse,
    set_password_link_issue,
    set_password_path,
)
from judging.services.audit import audit_draw  # noqa: F401
from judging.services.campaigns import (  # noqa: F401
    CAMPAIGN_SETTINGS,
    campaign_create,
    campaign_has_judgments,
    campaign_judged_pairs,
    campaign_policy_set,
    campaign_scale_set,
    campaign_settings_update,
    campaign_update,
    last_lead,
    membership_add,
    membership_remove,
    no_user,
    policy_switch_needs_job,
    scale_check,
    scale_from_values,
    user_get,
)
from judging.services.judgments import (  # noqa: F401
    JudgmentConflict,
    adjudication_remove,
    adjudication_set,
    gold_label_set,
    judgment_intent,
    judgment_record,
    judgment_version,
)
from judging.services.online import online_clear, online_import  # noqa: F401
from judging.services.queue import (  # noqa: F401
    ASSIGNMENT_MINUTES,
    RecordedNext,
    hold_release,
    judgment_record_next,
    pair_assign,
    pair_assign_locked,
    pair_hold,
)

# Online figures are uploaded like every other file (the upload page and the jobs look importers up here).
IMPORTERS["online"] = online_import
