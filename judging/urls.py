"""Web pages of the judging app."""

from django.urls import path

from judging import leaderboard_urls, views

app_name = "judging"

urlpatterns = [
    path("", views.home, name="home"),
    path("campaigns/new/", views.campaign_new, name="campaign_new"),
    path("campaigns/<slug:slug>/", views.campaign_detail, name="campaign_detail"),
    path("campaigns/<slug:slug>/judge/", views.judge, name="judge"),
    path("campaigns/<slug:slug>/judge/<int:pair_id>/", views.judge_record, name="judge_record"),
    path("campaigns/<slug:slug>/judge/<int:pair_id>/skip/", views.judge_skip, name="judge_skip"),
    path("campaigns/<slug:slug>/mine/", views.my_judgments, name="my_judgments"),
    path("campaigns/<slug:slug>/mine/<int:pair_id>/", views.my_judgment_save, name="my_judgment_save"),
    path("campaigns/<slug:slug>/settings/", views.campaign_settings, name="campaign_settings"),
    path("campaigns/<slug:slug>/members/", views.campaign_members, name="campaign_members"),
    path("campaigns/<slug:slug>/upload/", views.campaign_upload, name="campaign_upload"),
    path("campaigns/<slug:slug>/progress/", views.campaign_progress, name="campaign_progress"),
    *leaderboard_urls.urlpatterns,
]
from judging.review_urls import urlpatterns as review_urlpatterns  # noqa: E402

urlpatterns += review_urlpatterns
