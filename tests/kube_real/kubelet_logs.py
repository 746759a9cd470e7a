"""The kubelet's log endpoint, for the real API server to proxy ``pods/log`` to.

The API server reads a pod's log from the kubelet of the pod's node: at the node's address
(``status.addresses``, by ``--kubelet-preferred-address-types``: here an ``InternalIP``) and
port (``status.daemonEndpoints.kubeletEndpoint.Port``), over HTTPS, path
``/containerLogs/{namespace}/{pod}/{container}`` with ``follow``, ``timestamps``, ``sinceTime``,
``sinceSeconds``, ``tailLines``, ``limitBytes`` and ``previous``. This serves known container
logs there, as strictly as the kubelet does: an unknown pod or container is 404, a malformed
parameter 400, and a log line carries the kubelet's RFC 3339 timestamp when asked.
``sinceSeconds`` keeps the lines of the last N seconds (kubelet turns it into a ``sinceTime``);
``previous=true`` reads the container's previous instance (:meth:`ContainerLog.restart`), and
without one the kubelet's 400 ``previous terminated container "c" in pod "p" not found``.

TLS: the test API server runs without ``--kubelet-certificate-authority`` (and without kubelet
client certificates), so it does not verify this server's certificate — the certificate is
self-signed here, made with openssl like the API server's own.
"""

from __future__ import annotations

import datetime as dt
import re
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

PATH = re.compile(r"^/containerLogs/(?P<ns>[^/]+)/(?P<pod>[^/]+)/(?P<container>[^/]+)$")
KNOWN = {"follow", "timestamps", "sinceTime", "sinceSeconds", "tailLines", "limitBytes",
         "previous"}


def rfc3339nano(at: dt.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


class ContainerLog:
    """One container's output: timestamped lines; ``open`` while the container runs."""

    def __init__(self):
        self.lines: list[tuple[dt.datetime, str]] = []
        self.earlier: list[tuple[dt.datetime, str]] | None = None  # the previous instance's
        self.open = True
        self.changed = threading.Condition()

    def restart(self) -> None:
        """The container restarted: its lines so far become the previous instance's log."""
        with self.changed:
            self.earlier, self.lines = self.lines, []
            self.changed.notify_all()

    def write(self, *texts: str, at: dt.datetime | None = None) -> None:
        with self.changed:
            for text in texts:
                when = at or dt.datetime.now(dt.UTC)
                if self.lines and when <= self.lines[-1][0]:
                    when = self.lines[-1][0] + dt.timedelta(microseconds=1)
                self.lines.append((when, text))
            self.changed.notify_all()

    def close(self) -> None:
        with self.changed:
            self.open = False
            self.changed.notify_all()


class KubeletLogs:
    """An HTTPS server with the kubelet's ``/containerLogs`` endpoint for every node of the
    test (nodes point at it with :meth:`serve_node`)."""

    def __init__(self, run_dir: Path):
        self.logs: dict[tuple[str, str, str], ContainerLog] = {}
        self.requests: list[str] = []
        cert, key = run_dir / "kubelet.crt", run_dir / "kubelet.key"
        if not cert.exists():
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                            "-days", "2", "-subj", "/CN=kubelet", "-addext",
                            "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out",
                            str(cert)], check=True, capture_output=True)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # chunked bodies, as the kubelet streams logs

            def log_message(self, *_args):
                pass

            def do_GET(self):  # noqa: N802 - the http.server name
                outer.requests.append(self.path)
                outer.serve(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True,
                                       name="kubelet-logs")

    def start(self) -> KubeletLogs:
        self.thread.start()
        return self

    def stop(self) -> None:
        for log in self.logs.values():
            log.close()
        self.server.shutdown()
        self.server.server_close()

    def container(self, namespace: str, pod: str, container: str = "main") -> ContainerLog:
        return self.logs.setdefault((namespace, pod, container), ContainerLog())

    def serve_node(self, apiserver, node: str) -> None:
        """Point the node's kubelet endpoint here, as a kubelet registers itself."""
        apiserver.request("PATCH", f"/api/v1/nodes/{node}/status", {"status": {
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}}}},
            content_type="application/merge-patch+json")

    # --- one request -------------------------------------------------------------------------
    def serve(self, handler: BaseHTTPRequestHandler) -> None:
        url = urlparse(handler.path)
        match = PATH.match(url.path)
        if match is None:
            return self._error(handler, 404, "404 page not found")
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        if set(query) - KNOWN:
            return self._error(handler, 400, f"unknown parameters {sorted(set(query) - KNOWN)}")
        log = self.logs.get((match["ns"], match["pod"], match["container"]))
        if log is None:
            return self._error(handler, 404, f"pod {match['ns']}/{match['pod']} container "
                                              f"{match['container']} not found")
        try:
            since = dt.datetime.fromisoformat(query["sinceTime"].replace("Z", "+00:00")) \
                if query.get("sinceTime") else None
            if query.get("sinceSeconds"):
                seconds = int(query["sinceSeconds"])
                if seconds <= 0:
                    raise ValueError
                since = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds)
            previous = {"true": True, "false": False, "": False}[query.get("previous", "")]
            tail = int(query["tailLines"]) if query.get("tailLines") else None
            limit = int(query["limitBytes"]) if query.get("limitBytes") else None
            if (tail is not None and tail < 0) or (limit is not None and limit <= 0):
                raise ValueError
        except (ValueError, KeyError):
            return self._error(handler, 400, "malformed parameters")
        if previous and log.earlier is None:
            return self._error(handler, 400, f"previous terminated container "
                                              f"\"{match['container']}\" in pod "
                                              f"\"{match['pod']}\" not found")
        stamps = query.get("timestamps") == "true"
        follow = query.get("follow") == "true"
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        sent, position = 0, 0
        with log.changed:
            source = log.earlier if previous else log.lines
            lines = [line for line in source if since is None or line[0] >= since]
            if tail is not None:
                lines = lines[-tail:] if tail else []
            position = len(log.lines)
            follow = follow and not previous  # an instance that ended has no more lines
        try:
            while True:
                for at, text in lines:
                    data = (f"{rfc3339nano(at)} {text}\n" if stamps else f"{text}\n").encode()
                    if limit is not None and sent + len(data) > limit:
                        data = data[:limit - sent]
                    if data:
                        self._chunk(handler, data)
                        sent += len(data)
                    if limit is not None and sent >= limit:
                        return self._end(handler)
                if not follow:
                    return self._end(handler)
                with log.changed:
                    deadline = time.monotonic() + 30
                    while len(log.lines) == position and log.open and \
                            time.monotonic() < deadline:
                        log.changed.wait(0.2)
                    lines = log.lines[position:]
                    position = len(log.lines)
                    if not lines and not log.open:
                        return self._end(handler)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            return None

    @staticmethod
    def _chunk(handler, data: bytes) -> None:
        handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        handler.wfile.flush()

    @staticmethod
    def _end(handler) -> None:
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()

    @staticmethod
    def _error(handler, status: int, message: str) -> None:
        body = message.encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
