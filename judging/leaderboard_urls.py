"""URLs of the leaderboard pages (included by judging/urls.py, namespace "judging")."""

from django.urls import path

from judging import leaderboard_views as views

urlpatterns = [
    path("campaigns/<slug:slug>/leaderboard/", views.leaderboard, name="leaderboard"),
    path("campaigns/<slug:slug>/leaderboard/table/", views.leaderboard_table, name="leaderboard_table"),
    path("campaigns/<slug:slug>/leaderboard/stats/", views.leaderboard_stats, name="leaderboard_stats"),
    path(
        "campaigns/<slug:slug>/leaderboard/significance/",
        views.leaderboard_significance,
        name="leaderboard_significance",
    ),
    path("campaigns/<slug:slug>/leaderboard/pictures/", views.leaderboard_pictures, name="leaderboard_pictures"),
    path("campaigns/<slug:slug>/leaderboard/queries/", views.leaderboard_queries, name="leaderboard_queries"),
    path("campaigns/<slug:slug>/leaderboard/queries/<path:qid>/", views.leaderboard_query, name="leaderboard_query"),
    path("campaigns/<slug:slug>/leaderboard/compare/", views.leaderboard_compare, name="leaderboard_compare"),
    path("campaigns/<slug:slug>/leaderboard/chart/<str:kind>.svg", views.leaderboard_chart, name="leaderboard_chart"),
]
