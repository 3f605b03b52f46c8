"""The API token endpoint: a username and password traded for the token scripts send."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth import authenticate
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import NotAuthenticated
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle, ScopedRateThrottle
from rest_framework.views import APIView

from judging.api import serializers
from judging.api.views.base import ApiMixin
from judging.services.accounts import api_token_get, api_token_revoke


class AuthTokenView(ApiMixin, APIView):
    """Trade a username and password for the API token a script sends as `Authorization: Token ...`."""

    # Differs: anyone may ask for a token (it is how one logs in), under the stricter login rate.
    permission_classes = [AllowAny]
    throttle_classes: Sequence[type[BaseThrottle]] = [ScopedRateThrottle]
    throttle_scope = "login"

    @extend_schema(
        operation_id="auth_token_create",
        request=serializers.TokenRequestSerializer,
        responses={200: serializers.TokenSerializer},
        auth=[],
        description=(
            "Returns your API token, creating it on first use. Failed logins are counted per username and per "
            "client address: after too many, 429 with `Retry-After` until the lockout ends."
        ),
    )
    def post(self, request: Request) -> Response:
        credentials = serializers.TokenRequestSerializer(data=request.data)
        credentials.is_valid(raise_exception=True)
        # The Django request, not DRF's wrapper: django-axes marks a locked-out client on it, and its
        # middleware then answers 429 with when to retry (judging.auth_backends.lockout_response).
        user = authenticate(request._request, **credentials.validated_data)
        if user is None or not user.is_active:
            raise DRFValidationError(
                {"non_field_errors": [_("Unable to log in with the given username and password.")]}
            )
        token = api_token_get(user=user)
        return Response({"token": token.key}, headers={"Cache-Control": "no-store"})

    @extend_schema(
        operation_id="auth_token_destroy",
        request=None,
        responses={204: None},
        description="Revoke your API token; scripts using it get 401 from now on.",
    )
    def delete(self, request: Request) -> Response:
        if not request.user.is_authenticated:
            raise NotAuthenticated()
        api_token_revoke(user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
