"""URLs of the leads' review, agreement and annotator-quality pages (appended to judging/urls.py)."""

from django.urls import path

from judging import review_views as views

urlpatterns = [
    path("campaigns/<slug:slug>/review/", views.review, name="review"),
    path("campaigns/<slug:slug>/review/<int:pair_id>/decide/", views.review_decide, name="review_decide"),
    path("campaigns/<slug:slug>/review/<int:pair_id>/withdraw/", views.review_withdraw, name="review_withdraw"),
    path("campaigns/<slug:slug>/agreement/", views.agreement, name="agreement"),
    path("campaigns/<slug:slug>/agreement/policy/", views.agreement_policy, name="agreement_policy"),
    path("campaigns/<slug:slug>/quality/", views.quality, name="quality"),
    path("campaigns/<slug:slug>/quality/gold/<int:pair_id>/", views.quality_gold, name="quality_gold"),
]
