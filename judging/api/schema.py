"""OpenAPI generation: every operation documents the error responses it can really return."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema, Direction

from judging.api.serializers import ErrorSerializer

# A DRF validation error: field name (or non_field_errors) -> its messages (nested for nested fields).
VALIDATION_ERROR = {
    "type": "object",
    "description": "Validation errors: each offending field (or non_field_errors) with its messages.",
    "additionalProperties": {},
}
ERRORS = {
    "401": "Not authenticated: send `Authorization: Token <token>` (or log in for a browser session).",
    "403": "Authenticated, but your role in the campaign does not allow this.",
    "404": "No such object among your campaigns' (non-members get 404 for a campaign).",
    "429": "Too many requests: wait and retry (see the Retry-After header).",
}


class ApiAutoSchema(AutoSchema):
    def _get_response_bodies(self, direction: Direction = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        json = ("application/json",)
        if self.method != "DELETE" and "400" not in responses:
            responses["400"] = self._get_response_for_code(VALIDATION_ERROR, "400", json, direction)
        for code, description in ERRORS.items():
            if code not in responses:
                response = self._get_response_for_code(ErrorSerializer, code, json, direction)
                response["description"] = description
                responses[code] = response
        return responses
