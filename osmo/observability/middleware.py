"""The outermost middleware: a request id (``X-Request-ID``, taken from the caller when it is
sane, else made here; returned on every response), HTTP metrics by route template, and one log
line per request.

Labels stay bounded: the route is the URL pattern (``api/workflow/<str:name>``), never the
path; a path no pattern matches is ``unmatched``; methods outside the standard set are
``other``."""

from __future__ import annotations

import logging
import re
import time
import uuid

from django.utils.functional import SimpleLazyObject, empty
from prometheus_client import Counter, Histogram

from . import logs, metrics

logger = logging.getLogger("osmo.request")

REQUEST_ID_HEADER = "X-Request-ID"
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

HTTP_REQUESTS = Counter(
    "osmo_http_requests_total", "HTTP requests answered, by method, route template and status.",
    ["method", "route", "code"])
HTTP_DURATION = Histogram(
    "osmo_http_request_duration_seconds", "Time to answer an HTTP request, by route template.",
    ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))


def request_id_of(request) -> str:
    incoming = request.META.get("HTTP_X_REQUEST_ID", "")
    return incoming if _SANE_REQUEST_ID.fullmatch(incoming) else uuid.uuid4().hex


def route_of(request) -> str:
    match = getattr(request, "resolver_match", None)
    return match.route if match is not None and match.route else "unmatched"


class RequestObservabilityMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response
        self.metrics_on = metrics.enabled()

    def __call__(self, request):
        request_id = request_id_of(request)
        request.request_id = request_id
        token = logs.bind(request_id=request_id)
        started = time.perf_counter()
        try:
            response = self.get_response(request)
            duration = time.perf_counter() - started
            response[REQUEST_ID_HEADER] = request_id
            self.record(request, response, duration)
            return response
        finally:
            logs.reset(token)

    def record(self, request, response, duration: float) -> None:
        route = route_of(request)
        method = request.method if request.method in METHODS else "other"
        if self.metrics_on:
            HTTP_REQUESTS.labels(method, route, str(response.status_code)).inc()
            HTTP_DURATION.labels(method, route).observe(duration)
        event = {"method": request.method, "route": route, "status": response.status_code,
                 "duration_ms": round(duration * 1000, 2), "user": _username(request),
                 **_subjects(request, route), **logs.current()}
        logger.info("%s %s %s %.1f ms", request.method, request.path, response.status_code,
                    duration * 1000,
                    extra={"event": {k: v for k, v in event.items() if v is not None}})


def _username(request) -> str | None:
    """The caller, if authentication already ran (never a query of its own here: during a
    database outage this line must not fail the answer)."""
    user = request.__dict__.get("user")
    if isinstance(user, SimpleLazyObject):
        user = None if user._wrapped is empty else user._wrapped  # not evaluated: unknown
    return user.get_username() if getattr(user, "is_authenticated", False) else None


def _subjects(request, route: str) -> dict:
    """The pool and workflow a request is about, from its URL (a view may bind better ones:
    admission binds the pool it admitted into and the workflow's name)."""
    kwargs = request.resolver_match.kwargs if request.resolver_match else {}
    pool = kwargs.get("pool") or kwargs.get("parent")
    if pool is None and "pool/<str:name>" in route:
        pool = kwargs.get("name")
    workflow = kwargs.get("name") if "workflow/<str:name>" in route else None
    return {"pool": pool, "workflow": workflow}
