"""``OSMO_METRICS_PORT``: ``GET /metrics`` of a process that is not the web server (the
scheduler, the Kubernetes backend, the Celery worker and beat), for deployments where each
runs in a pod of its own and so has a metrics folder of its own. The same access rules as the
web tier's endpoint; the samples of the processes sharing the folder (the Celery worker's
children, the backend's scheduler process), without the scrape-time gauges the web tier
exports once."""

from __future__ import annotations

import json
import logging
import threading
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.conf import settings
from django.db import connection

from osmo.errors import error_body

from . import access, metrics

logger = logging.getLogger(__name__)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


def application(environ, start_response):
    try:
        if environ.get("PATH_INFO") != "/metrics" or environ.get("REQUEST_METHOD") not in (
                "GET", "HEAD"):
            status, body, kind = "404 Not Found", error_body("not_found", "No such resource."), \
                "application/json"
        elif denied := access.denial(environ.get("REMOTE_ADDR", ""),
                                     environ.get("HTTP_AUTHORIZATION")):
            code = {401: "401 Unauthorized", 403: "403 Forbidden"}[denied[0]]
            status, body, kind = code, error_body(denied[1], denied[2]), "application/json"
        else:
            status, body, kind = "200 OK", metrics.exposition(scrape_collectors=False), \
                metrics.CONTENT_TYPE
    finally:
        connection.close()  # this thread's, if the token was looked up
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    start_response(status, [("Content-Type", kind), ("Content-Length", str(len(data)))])
    return [data]


def serve(port: int, host: str = "0.0.0.0") -> WSGIServer:  # noqa: S104 - a pod's port
    """Serve on a daemon thread; returns the server (``shutdown()`` stops it)."""
    server = make_server(host, port, application, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    logger.info("metrics: serving /metrics on %s:%s", host, server.server_port)
    return server


def serve_if_configured() -> WSGIServer | None:
    if settings.OSMO_METRICS and settings.OSMO_METRICS_PORT:
        return serve(settings.OSMO_METRICS_PORT)
    return None
