"""The account page where a user sees, creates and revokes the API token their scripts use."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from rest_framework.authtoken.models import Token


@login_required
@require_http_methods(["GET", "POST"])
def token_page(request):
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "create":
            # A new key each time: "create" on a page that already shows a token means "rotate it".
            Token.objects.filter(user=request.user).delete()
            Token.objects.create(user=request.user)
            messages.success(request, "A new API token was created. Scripts using the old one get 401 now.")
        elif action == "revoke":
            deleted, _ = Token.objects.filter(user=request.user).delete()
            if deleted:
                messages.success(request, "Your API token was revoked. Scripts using it get 401 now.")
        else:
            messages.error(request, "Unknown action.")
        return redirect("account-token")
    token = Token.objects.filter(user=request.user).first()
    return render(
        request,
        "account/token.html",
        {
            "token": token,
            "api_root": request.build_absolute_uri("/api/"),
        },
    )
