"""Top-level URL configuration."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from judging.api.account import token_page

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/token/", token_page, name="account-token"),
    path("accounts/", include("django.contrib.auth.urls")),
    # The OpenAPI schema and its Swagger UI, served from drf-spectacular-sidecar (no CDN).
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/", include("judging.api.urls")),
    path("", include("judging.urls")),
]
