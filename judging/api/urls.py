"""API routes under /api/: a DefaultRouter for the resources, plus the token endpoint."""

from django.urls import path
from rest_framework.routers import APIRootView, DefaultRouter

from judging.api import jobs, views

app_name = "api"


class ApiRootView(APIRootView):
    """The browsable entry point of the API; the schema is at /api/schema/, its docs at /api/docs/."""


class Router(DefaultRouter):
    APIRootView = ApiRootView
    # `?format=` selects json/csv/jsonl; `.json` URL suffixes would only double every route.
    include_format_suffixes = False


router = Router()
router.register("campaigns", views.CampaignViewSet, basename="campaign")
router.register("queries", views.QueryViewSet, basename="query")
router.register("documents", views.DocumentViewSet, basename="document")
router.register("systems", views.SystemViewSet, basename="system")
router.register("pairs", views.PairViewSet, basename="pair")
router.register("judgments", views.JudgmentViewSet, basename="judgment")
router.register("jobs", jobs.JobViewSet, basename="job")

urlpatterns = [
    path("auth/token/", views.AuthTokenView.as_view(), name="auth-token"),
    *router.urls,
]
