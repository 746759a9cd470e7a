"""Before any view, parser or lock runs: request limits (README "Limits"), and paths as the
OSMO client writes them; Django's messages made only when used."""

from __future__ import annotations

import re
from urllib.parse import unquote

from django.conf import settings
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.messages.storage import default_storage
from django.http import JsonResponse
from django.utils.functional import SimpleLazyObject, empty

from .errors import error_body

# C0 controls and DEL: never part of a name, a path or a query value here.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


class RequestLimitsMiddleware:
    """One body limit for every content type (413 `request_too_large`, read from
    Content-Length before the body is), and no control characters in the path or the query
    string (400 `invalid_request`; PostgreSQL cannot even store a NUL)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = -1
        if length < 0:
            return JsonResponse(error_body("invalid_request", "Bad Content-Length header."),
                                status=400)
        limit = settings.OSMO_MAX_BODY_BYTES
        if length > limit:
            return JsonResponse(error_body(
                "request_too_large", f"The request body has {length} bytes; at most {limit} "
                                     f"(OSMO_MAX_BODY_BYTES)."), status=413)
        query = unquote(request.META.get("QUERY_STRING", ""))
        if CONTROL_CHARACTERS.search(request.path) or CONTROL_CHARACTERS.search(query):
            return JsonResponse(error_body(
                "invalid_request", "Control characters (such as NUL) are not allowed in the "
                                   "path or the query string."), status=400)
        return self.get_response(request)


_SLASHES = re.compile(r"/{2,}")


class CollapseSlashesMiddleware:
    """Serves `//api/...` as `/api/...`: the OSMO client joins its base URL and an endpoint that
    may start with a slash (`url + "/" + "/api/pool_quota"`). Only runs of slashes are collapsed;
    the path is otherwise untouched."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "//" in request.path_info:
            request.path_info = _SLASHES.sub("/", request.path_info)
            request.path = _SLASHES.sub("/", request.path)
            request.META["PATH_INFO"] = request.path_info
        return self.get_response(request)


class LazyMessageMiddleware(MessageMiddleware):
    """Django's messages, with the storage made when a view or a template first uses it: an API
    request never does, and making the cookie storage and its signer is a thirtieth of a
    submission's CPU. A storage nothing used stores nothing when the response goes out
    (``BaseStorage.update``), so one never made changes nothing."""

    def process_request(self, request):
        request._messages = SimpleLazyObject(lambda: default_storage(request))

    def process_response(self, request, response):
        messages = getattr(request, "_messages", None)
        if isinstance(messages, SimpleLazyObject) and messages._wrapped is empty:
            return response
        return super().process_response(request, response)
