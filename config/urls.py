"""Top-level URL configuration."""

from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from config.health import healthz
from judging.views.account import LoginView, RateLimitedPasswordResetView, needs_mail, token_page
from judging.views.language import javascript_catalog, language_set

# The accounts routes of django.contrib.auth.urls, listed so that password reset answers 404 unless mail
# can be sent (settings.PASSWORD_RESET_ENABLED); elsewhere a reset link would promise a mail that never comes.
account_urls = [
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password_change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("password_change/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("password_reset/", needs_mail(RateLimitedPasswordResetView.as_view()), name="password_reset"),
    path("password_reset/done/", needs_mail(auth_views.PasswordResetDoneView.as_view()), name="password_reset_done"),
    path(
        "reset/<uidb64>/<token>/",
        needs_mail(auth_views.PasswordResetConfirmView.as_view()),
        name="password_reset_confirm",
    ),
    path("reset/done/", needs_mail(auth_views.PasswordResetCompleteView.as_view()), name="password_reset_complete"),
]

# Swagger UI from drf-spectacular-sidecar, its start-up script served as a file (the split view) so that
# script-src stays 'self'. Its page carries one small <style> block and its CSS draws icons as data: SVGs:
# only this page allows inline styles and data: images.
api_docs = csp_update({"style-src": ["'unsafe-inline'"], "img-src": ["data:"]})(
    SpectacularSwaggerSplitView.as_view(url_name="api-schema")
)

# A database locked past the busy timeout (SQLite during a long import) is 503 + Retry-After, not 500.
handler500 = "judging.db_busy.server_error"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("accounts/token/", token_page, name="account-token"),
    # the header's language switcher, and the translations of the scripts' messages (static/judging/*.js)
    path("i18n/language/", language_set, name="set_language"),
    path("i18n/<str:language>/catalog-<str:version>.js", javascript_catalog, name="javascript-catalog"),
    path("accounts/", include(account_urls)),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", api_docs, name="api-docs"),
    path("api/", include("judging.api.urls")),
    path("", include("judging.urls")),
]
