"""Domain errors and the one exception handler that maps every error to `{code, detail, errors}`."""

from __future__ import annotations

import logging
import sys

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response


class OsmoError(Exception):
    """A domain error with a stable contract code (API.md) and an HTTP status."""

    status_code = status.HTTP_400_BAD_REQUEST

    def __init__(self, code: str, detail: str, *, status_code: int | None = None,
                 errors: dict[str, list[str]] | None = None):
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.errors = errors
        if status_code is not None:
            self.status_code = status_code

    def body(self) -> dict:
        body = {"code": self.code, "detail": self.detail}
        if self.errors:
            body["errors"] = self.errors
        return body


class NotFound(OsmoError):
    status_code = status.HTTP_404_NOT_FOUND


class Conflict(OsmoError):
    status_code = status.HTTP_409_CONFLICT


class RequestInvalid(exceptions.ValidationError):
    """A request body or query string its serializer refused (osmo.serializers), with the
    contract code it maps to; the exception handler renders it."""

    def __init__(self, detail, *, error_code: str = "invalid_request"):
        super().__init__(detail)
        self.error_code = error_code


class Forbidden(OsmoError):
    status_code = status.HTTP_403_FORBIDDEN

    def __init__(self, detail: str = "You are not allowed to do this."):
        super().__init__("forbidden", detail)


def flatten_errors(detail) -> dict[str, list[str]]:
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for field, messages in detail.items():
            if isinstance(messages, dict):
                for sub, sub_messages in flatten_errors(messages).items():
                    out[f"{field}.{sub}"] = sub_messages
            elif isinstance(messages, list):
                out[field] = [str(m) for m in messages]
            else:
                out[field] = [str(messages)]
        return out
    if isinstance(detail, list):
        return {"non_field_errors": [str(m) for m in detail]}
    return {"non_field_errors": [str(detail)]}


_DRF_CODES = {
    exceptions.NotAuthenticated: ("not_authenticated", status.HTTP_401_UNAUTHORIZED),
    exceptions.AuthenticationFailed: ("not_authenticated", status.HTTP_401_UNAUTHORIZED),
    exceptions.PermissionDenied: ("forbidden", status.HTTP_403_FORBIDDEN),
    exceptions.NotFound: ("not_found", status.HTTP_404_NOT_FOUND),
    exceptions.MethodNotAllowed: ("method_not_allowed", status.HTTP_405_METHOD_NOT_ALLOWED),
    exceptions.NotAcceptable: ("not_acceptable", status.HTTP_406_NOT_ACCEPTABLE),
    exceptions.UnsupportedMediaType: ("unsupported_media_type",
                                      status.HTTP_415_UNSUPPORTED_MEDIA_TYPE),
    exceptions.ParseError: ("invalid_request", status.HTTP_400_BAD_REQUEST),
    exceptions.Throttled: ("throttled", status.HTTP_429_TOO_MANY_REQUESTS),
}


def _summary(errors: dict[str, list[str]]) -> str:
    """A one-line detail naming each wrong field with its first message."""
    parts = [messages[0] if field == "non_field_errors" else f"{field}: {messages[0]}"
             for field, messages in errors.items() if messages]
    return "; ".join(parts) or "The request is not valid."


def error_body(code: str, detail: str, errors: dict | None = None) -> dict:
    body = {"code": code, "detail": detail}
    if errors:
        body["errors"] = errors
    return body


logger = logging.getLogger(__name__)
DATABASE_UNAVAILABLE = ("database_unavailable",
                        "The database is unavailable; nothing was changed. Try again shortly.")


def _database_error_body(exc: BaseException) -> tuple[dict, int] | None:
    """Database trouble as the contract's error: unreachable → 503 (nothing was changed: the
    request's transaction never committed); a value it cannot store (out of range, a NUL) →
    400, a safety net behind the serializers' own bounds."""
    if isinstance(exc, OperationalError | InterfaceError):
        logger.warning("database unavailable: %s", exc)
        return error_body(*DATABASE_UNAVAILABLE), status.HTTP_503_SERVICE_UNAVAILABLE
    if isinstance(exc, DataError):
        return (error_body("invalid_request", "A value in the request cannot be stored "
                                              f"({str(exc).splitlines()[0]})."),
                status.HTTP_400_BAD_REQUEST)
    return None


def exception_handler(exc, context):
    """DRF's EXCEPTION_HANDLER: every 4xx/5xx body has the contract's shape."""
    headers = {}
    if isinstance(exc, OsmoError):
        return Response(exc.body(), status=exc.status_code)
    if (database := _database_error_body(exc)) is not None:
        return Response(database[0], status=database[1], headers={"Retry-After": "5"})
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, DjangoValidationError):
        errors = flatten_errors(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
        return Response(error_body("invalid_request", "The request is not valid.", errors),
                        status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, exceptions.ValidationError):
        # Serializers and FilterSets: the contract code the serializer chose, else the generic one.
        errors = flatten_errors(exc.detail)
        code = getattr(exc, "error_code", "invalid_request")
        return Response(error_body(code, _summary(errors), errors),
                        status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, exceptions.APIException):
        code, status_code = next(
            ((c, s) for kind, (c, s) in _DRF_CODES.items() if isinstance(exc, kind)),
            (exc.default_code, exc.status_code),
        )
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return Response(error_body(code, str(detail)), status=status_code, headers=headers)
    return None


def json_not_found(request, exception=None):
    return JsonResponse(error_body("not_found", "No such resource."), status=404)


def json_server_error(request):
    """Django's 500 view (outside DRF: the dashboard, the admin, middleware): database trouble
    still answers 503/400 in the contract's shape."""
    database = _database_error_body(sys.exc_info()[1]) if sys.exc_info()[1] else None
    if database is not None:
        response = JsonResponse(database[0], status=database[1])
        response["Retry-After"] = "5"
        return response
    return JsonResponse(error_body("server_error", "Internal server error."), status=500)
