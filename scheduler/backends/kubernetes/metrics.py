"""The Kubernetes backend's metrics (names after client-go's and the API server's own).

Every request of the official client goes through one urllib3 pool manager per
``ApiClient``, and every one of :func:`.client.call` through that manager's connection pool of
the API server: :func:`instrument` and :func:`counted` count there, by verb, resource and
code, so no call site counts by hand. A watch is counted when its response starts."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

from prometheus_client import Counter, Histogram

from osmo.observability.metrics import enabled

API_REQUESTS = Counter(
    "osmo_backend_kube_api_requests_total",
    "Requests to the Kubernetes API server, by verb, resource and HTTP code (error: no answer).",
    ["verb", "resource", "code"])
API_DURATION = Histogram(
    "osmo_backend_kube_api_request_duration_seconds",
    "Time to the API server's answer (for a watch: to the start of its stream), by verb.",
    ["verb"], buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
WATCH_RESTARTS = Counter(
    "osmo_backend_watch_restarts_total",
    "Watches that ended and are started again, by resource and reason (timeout, expired, "
    "error).", ["resource", "reason"])
RELISTS = Counter(
    "osmo_backend_relists_total",
    "Full LISTs, by resource and reason (initial, expired, requested).", ["resource", "reason"])
DISPATCH_LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600)
DISPATCH_LAG = Histogram(
    "osmo_backend_dispatch_lag_seconds",
    "Time from a workflow's submission to its group's objects all existing on the cluster.",
    buckets=DISPATCH_LAG_BUCKETS)


def request_labels(method: str, url: str) -> tuple[str, str]:
    """(verb, resource) of an API path, as the API server names them: ``POST
    /api/v1/namespaces/x/pods/p/binding`` → (create, pods/binding). Object names never become
    labels."""
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    if segments[:1] == ["api"]:
        segments = segments[2:]
    elif segments[:1] == ["apis"]:
        segments = segments[3:]
    else:
        return method.lower(), "other"
    if len(segments) >= 3 and segments[0] == "namespaces":
        segments = segments[2:]
    if not segments:
        return method.lower(), "other"
    resource = segments[0] + (f"/{segments[2]}" if len(segments) > 2 else "")
    named = len(segments) > 1
    query = parse_qs(parts.query)
    verb = {"GET": "get" if named else ("watch" if query.get("watch", [""])[0] in
                                        ("true", "1") else "list"),
            "POST": "create", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete" if named else "deletecollection"}.get(method.upper(),
                                                                      method.lower())
    return verb, resource


def instrument(api_client):
    """Count every request of ``api_client`` (a ``kubernetes.client.ApiClient``)."""
    if not enabled():
        return api_client
    manager = api_client.rest_client.pool_manager
    manager.request = counted(manager.request)
    return api_client


def counted(send):
    """``send(method, url, ...)`` (urllib3's ``request`` or a pool's ``urlopen``), each request
    counted by verb, resource and code, and timed; as it is when the metrics are off."""
    if not enabled():
        return send

    def request(method, url, *args, **kwargs):
        started = time.perf_counter()
        code = "error"
        try:
            response = send(method, url, *args, **kwargs)
            code = str(response.status)
            return response
        finally:
            verb, resource = request_labels(method, url)
            API_REQUESTS.labels(verb, resource, code).inc()
            API_DURATION.labels(verb).observe(time.perf_counter() - started)

    return request


def record_watch_restart(resource: str, reason: str) -> None:
    if enabled():
        WATCH_RESTARTS.labels(resource, reason).inc()


def record_relist(resource: str, reason: str) -> None:
    if enabled():
        RELISTS.labels(resource, reason).inc()


def record_dispatched(lags: list[float]) -> None:
    if enabled():
        for seconds in lags:
            DISPATCH_LAG.observe(max(0.0, seconds))
