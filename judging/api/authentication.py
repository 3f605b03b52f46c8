"""The API's token authentication: DRF's, with the token and its user read by one compiled query
(access.token_owner) instead of the ORM's, which every API call paid for (settings.REST_FRAMEWORK names it)."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions

from judging.access import token_owner


class TokenAuthentication(authentication.TokenAuthentication):
    """``Authorization: Token <key>``, answered as DRF's TokenAuthentication answers it (the same errors)."""

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        found = token_owner(key)
        if found is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        user, token = found
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        return user, token
