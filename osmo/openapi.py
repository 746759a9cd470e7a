"""The OpenAPI document's schema class: every operation lists the error statuses it can answer,
each in the contract's ``{code, detail, errors}`` shape (``osmo/errors.py``), so a client — or a
schema-driven test — knows every status to expect, not only the successful one."""

from __future__ import annotations

from drf_spectacular import openapi
from rest_framework import serializers
from rest_framework.permissions import AllowAny

UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
# Operations that bound something per caller or per process (a followed log).
LIMITED_PATHS = ("/logs",)


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="What went wrong, for programs (`invalid_request`).")
    detail = serializers.CharField(help_text="What went wrong, for people.")
    errors = serializers.DictField(required=False, help_text="Per field: its messages.")


ERRORS = {
    400: "The request is invalid (its parameters, its body, or a character no field may hold).",
    401: "No credentials, or ones that are not (or no longer) valid.",
    403: "The caller's role does not allow it.",
    404: "What the path names does not exist, or the caller cannot see it.",
    405: "The path does not take this method.",
    409: "It conflicts with the present state.",
    413: "The body is larger than the server takes.",
    429: "Too many at once: try again shortly.",
    503: "The database is unavailable; nothing was changed.",
}


class AutoSchema(openapi.AutoSchema):
    def _error_statuses(self) -> list[int]:
        method = self.method.upper()
        statuses = [400]
        authenticated = bool(self.view.get_authenticators())
        public = all(isinstance(p, AllowAny) for p in self.view.get_permissions())
        if authenticated:
            statuses.append(401)
        if not public:
            statuses.append(403)
        # DRF answers a `?format=` the view does not render with 404, as a path not found
        if "{" in self.path or len(self.view.get_renderers()) > 1:
            statuses.append(404)
        if method in UNSAFE:
            statuses += [409, 413]
        if self.path.endswith(LIMITED_PATHS):
            statuses.append(429)
        statuses.append(503)
        # a view answers some statuses the rules above cannot see (a token in its body)
        return sorted({*statuses, *getattr(self.view, "error_statuses", ())})

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        for status in self._error_statuses():
            if str(status) not in responses:
                response = self._get_response_for_code(ErrorSerializer, str(status),
                                                       ["application/json"])
                response["description"] = ERRORS[status]
                responses[str(status)] = response
        return responses
