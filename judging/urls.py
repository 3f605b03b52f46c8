"""Web pages of the judging app (namespace "judging")."""

from django.urls import path

from judging.views import (
    audit,
    campaigns,
    engines,
    jobs,
    judges,
    judging,
    leaderboard,
    leaderboard_drill,
    leaderboard_trust,
    online,
    review,
    team,
    worker,
)

app_name = "judging"

urlpatterns = [
    path("", campaigns.home, name="home"),
    path("campaigns/new/", campaigns.campaign_new, name="campaign_new"),
    # what this worker keeps between requests (judging.runtime), for staff and leads
    path("worker/", worker.worker_page, name="worker"),
    # one-time set-password links that leads hand to new members
    path("accounts/set-password/done/", campaigns.set_password_done, name="set_password_done"),
    path("accounts/set-password/<uidb64>/<token>/", campaigns.SetPasswordView.as_view(), name="set_password"),
    path("campaigns/<slug:slug>/", campaigns.campaign_detail, name="campaign_detail"),
    path("campaigns/<slug:slug>/settings/", campaigns.campaign_settings, name="campaign_settings"),
    path("campaigns/<slug:slug>/members/", campaigns.campaign_members, name="campaign_members"),
    path("campaigns/<slug:slug>/upload/", campaigns.campaign_upload, name="campaign_upload"),
    path("campaigns/<slug:slug>/progress/", campaigns.campaign_progress, name="campaign_progress"),
    path("campaigns/<slug:slug>/audit/", audit.campaign_audit, name="campaign_audit"),
    path("campaigns/<slug:slug>/jobs/<int:job_id>/", jobs.job_detail, name="job_detail"),
    # judging
    path("campaigns/<slug:slug>/judge/", judging.judge, name="judge"),
    # Annotators' pages name pairs by their public id (Pair.public_id), never the row id.
    path("campaigns/<slug:slug>/judge/<int:public_id>/", judging.judge_record, name="judge_record"),
    path("campaigns/<slug:slug>/judge/<int:public_id>/skip/", judging.judge_skip, name="judge_skip"),
    path("campaigns/<slug:slug>/judge/<int:public_id>/hold/", judging.judge_hold, name="judge_hold"),
    path("campaigns/<slug:slug>/mine/", judging.my_judgments, name="my_judgments"),
    path("campaigns/<slug:slug>/mine/<int:public_id>/", judging.my_judgment_save, name="my_judgment_save"),
    # the leaderboard
    path("campaigns/<slug:slug>/leaderboard/", leaderboard.leaderboard, name="leaderboard"),
    path("campaigns/<slug:slug>/leaderboard/table/", leaderboard.leaderboard_table, name="leaderboard_table"),
    path("campaigns/<slug:slug>/leaderboard/stats/", leaderboard.leaderboard_stats, name="leaderboard_stats"),
    path(
        "campaigns/<slug:slug>/leaderboard/significance/",
        leaderboard.leaderboard_significance,
        name="leaderboard_significance",
    ),
    path("campaigns/<slug:slug>/leaderboard/pictures/", leaderboard.leaderboard_pictures, name="leaderboard_pictures"),
    path(
        "campaigns/<slug:slug>/leaderboard/queries/", leaderboard_drill.leaderboard_queries, name="leaderboard_queries"
    ),
    path(
        "campaigns/<slug:slug>/leaderboard/queries/<path:qid>/",
        leaderboard_drill.leaderboard_query,
        name="leaderboard_query",
    ),
    path(
        "campaigns/<slug:slug>/leaderboard/compare/", leaderboard_drill.leaderboard_compare, name="leaderboard_compare"
    ),
    path("campaigns/<slug:slug>/leaderboard/trust/", leaderboard_trust.leaderboard_trust, name="leaderboard_trust"),
    path("campaigns/<slug:slug>/leaderboard/curves/", leaderboard_trust.leaderboard_curves, name="leaderboard_curves"),
    path(
        "campaigns/<slug:slug>/leaderboard/segments/",
        leaderboard_trust.leaderboard_segments,
        name="leaderboard_segments",
    ),
    path("campaigns/<slug:slug>/leaderboard/tags/", leaderboard_drill.leaderboard_tags, name="leaderboard_tags"),
    path(
        "campaigns/<slug:slug>/leaderboard/chart/<str:kind>.svg",
        leaderboard.leaderboard_chart,
        name="leaderboard_chart",
    ),
    # review, agreement and annotator quality (leads)
    path("campaigns/<slug:slug>/review/", review.review, name="review"),
    path("campaigns/<slug:slug>/review/<int:pair_id>/decide/", review.review_decide, name="review_decide"),
    path("campaigns/<slug:slug>/review/<int:pair_id>/withdraw/", review.review_withdraw, name="review_withdraw"),
    path("campaigns/<slug:slug>/agreement/", review.agreement, name="agreement"),
    path("campaigns/<slug:slug>/agreement/policy/", review.agreement_policy, name="agreement_policy"),
    path("campaigns/<slug:slug>/quality/", review.quality, name="quality"),
    path("campaigns/<slug:slug>/quality/gold/<int:pair_id>/", review.quality_gold, name="quality_gold"),
    # offline vs online, and model judges (issue 15)
    path("campaigns/<slug:slug>/online/", online.online, name="online"),
    path("campaigns/<slug:slug>/judges/", online.judges, name="judges"),
    path("campaigns/<slug:slug>/judges/run/", online.judges_run, name="judges_run"),
    path("campaigns/<slug:slug>/judges/<str:name>/calibration/", online.calibration, name="calibration"),
    path("campaigns/<slug:slug>/judges/<str:name>/", judges.judge_detail, name="judge_detail"),
    path("campaigns/<slug:slug>/judges/<str:name>/template/", judges.judge_template, name="judge_template"),
    # systems made of live search engines, their snapshots (issue 44)
    path("campaigns/<slug:slug>/engines/", engines.engines, name="engines"),
    path("campaigns/<slug:slug>/engines/new/", engines.engine_system_edit, name="engine_system_new"),
    path("campaigns/<slug:slug>/engines/try/", engines.engine_try_page, name="engine_try"),
    path("campaigns/<slug:slug>/engines/try/judge/", engines.engine_try_judge, name="engine_try_judge"),
    path("campaigns/<slug:slug>/engines/systems/<str:name>/", engines.engine_system_edit, name="engine_system"),
    path("campaigns/<slug:slug>/engines/systems/<str:name>/fetch/", engines.engine_fetch, name="engine_fetch"),
    path(
        "campaigns/<slug:slug>/engines/systems/<str:name>/snapshots/<int:number>/",
        engines.engine_changes,
        name="engine_changes",
    ),
    path(
        "campaigns/<slug:slug>/engines/systems/<str:name>/snapshots/<int:number>/focus/",
        engines.engine_focus,
        name="engine_focus",
    ),
    # a lead's team: assignments, the jobs list, the budget planner
    path("campaigns/<slug:slug>/assignments/", team.assignments, name="assignments"),
    path("campaigns/<slug:slug>/jobs/", team.jobs_list, name="jobs"),
    path("campaigns/<slug:slug>/plan/", team.plan, name="plan"),
]
