"""Account pages: the login page, password reset (rate-limited, only where mail can be sent), the API token page."""

from __future__ import annotations

from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordResetForm
from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods
from rest_framework.authtoken.models import Token

from judging.access import View, signed_in
from judging.auth_backends import client_address
from judging.services.accounts import api_token_revoke, api_token_rotate


@never_cache  # the page shows the token itself: no browser or proxy may keep a copy
@login_required
@require_http_methods(["GET", "POST"])
def token_page(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "create":
            # A new key each time: "create" on a page that already shows a token means "rotate it".
            api_token_rotate(user=signed_in(request.user))
            messages.success(request, _("A new API token was created. Scripts using the old one get 401 now."))
        elif action == "revoke":
            if api_token_revoke(user=signed_in(request.user)):
                messages.success(request, _("Your API token was revoked. Scripts using it get 401 now."))
        else:
            messages.error(request, _("Unknown action."))
        return redirect("account-token")
    token = Token.objects.filter(user=signed_in(request.user)).first()
    return render(
        request,
        "account/token.html",
        {
            "token": token,
            "api_root": request.build_absolute_uri(reverse("api:api-root")),
        },
    )


# --------------------------------------------------------------------------- login and password reset


class LoginView(auth_views.LoginView):
    """Django's login page, offering the password reset link only where mail can be sent."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return super().get_context_data(**kwargs) | {"password_reset_enabled": settings.PASSWORD_RESET_ENABLED}


def needs_mail(view: View) -> View:
    """A password reset route that does not exist (404) without an e-mail backend (``EMAIL_HOST``)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: object, **kwargs: Any) -> HttpResponseBase:
        if not settings.PASSWORD_RESET_ENABLED:
            raise Http404(_("Password reset is not available: this server cannot send e-mail."))
        return view(request, *args, **kwargs)

    return wrapped


class RateLimitedPasswordResetView(auth_views.PasswordResetView):
    """Django's password reset, at most ``PASSWORD_RESET_RATE`` mails an hour per client address and per
    e-mail address, so the form cannot be used to flood an inbox or the mail server."""

    template_name = "registration/password_reset_form.html"

    def form_valid(self, form: PasswordResetForm) -> HttpResponse:
        email = form.cleaned_data["email"].strip().lower()
        keys = [f"reljudge:pwreset:addr:{client_address(self.request)}", f"reljudge:pwreset:email:{email}"]
        for key in keys:
            cache.add(key, 0, timeout=3600)
        counts = [cache.incr(key) for key in keys]
        if max(counts) > settings.PASSWORD_RESET_RATE:
            form.add_error(None, _("Too many password reset requests. Try again in an hour."))
            return self.render_to_response(self.get_context_data(form=form), status=429)
        return super().form_valid(form)
