"""A small Kubernetes API emulator for cluster-scoped custom objects, over real loopback HTTP.

Why not ``kmock`` (PyPI): it is asyncio/aiohttp-only, its update merges instead of replacing,
and it has neither resourceVersion conflicts nor label selectors — the three things the sync
is about. This threaded ``http.server`` serves exactly the endpoints ``CustomObjectsApi`` uses:

    GET    /apis/{group}/{version}/{plural}?labelSelector=...   list
    GET    /apis/{group}/{version}/{plural}/{name}              get
    POST   /apis/{group}/{version}/{plural}                     create (409 AlreadyExists)
    PUT    /apis/{group}/{version}/{plural}/{name}              replace (409 Conflict on a stale
                                                                resourceVersion, 404 if missing)
    DELETE /apis/{group}/{version}/{plural}/{name}              delete (404 if missing)

Faults: ``fail_next(method, name, status)`` makes the next matching request fail once;
``before(method, name, hook)`` runs ``hook(emulator)`` once before a matching request (e.g. a
concurrent writer bumping resourceVersion → a genuine 409). Every request is logged in
``requests`` as ``(method, plural, name)`` (a create logs the body's name).
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


def _matches(labels: dict, selector: str) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "==" in term or "=" in term:
            key, value = term.split("==", 1) if "==" in term else term.split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


class KubeEmulator:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict] = {}  # (plural, name) → object
        self.requests: list[tuple[str, str, str | None]] = []
        self._faults: list[tuple[str, str | None, int]] = []
        self._hooks: list[tuple[str, str | None, Callable[[KubeEmulator], None]]] = []
        self._versions = itertools.count(1)
        self._lock = threading.RLock()
        emulator = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def _handle(self) -> None:
                emulator._dispatch(self)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)

    # --- lifecycle ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> KubeEmulator:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def api(self):
        """A real ``CustomObjectsApi`` pointed at this server."""
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.url
        return client.CustomObjectsApi(client.ApiClient(configuration))

    # --- test controls -----------------------------------------------------------------------
    def fail_next(self, method: str, name: str | None, status: int) -> None:
        self._faults.append((method, name, status))

    def before(self, method: str, name: str | None, hook: Callable[[KubeEmulator], None]) -> None:
        self._hooks.append((method, name, hook))

    def put_object(self, plural: str, obj: dict) -> dict:
        """Store an object directly (as another writer would), with a fresh resourceVersion."""
        with self._lock:
            stored = copy.deepcopy(obj)
            stored.setdefault("metadata", {})["resourceVersion"] = str(next(self._versions))
            self.objects[(plural, stored["metadata"]["name"])] = stored
            return stored

    def names(self, plural: str) -> list[str]:
        return sorted(name for (p, name) in self.objects if p == plural)

    def writes(self) -> list[tuple[str, str, str | None]]:
        return [r for r in self.requests if r[0] != "GET"]

    # --- serving -----------------------------------------------------------------------------
    def _reply(self, handler: BaseHTTPRequestHandler, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _status(self, handler, code: int, reason: str, message: str) -> None:
        self._reply(handler, code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                    "reason": reason, "message": message, "code": code})

    def _dispatch(self, handler: BaseHTTPRequestHandler) -> None:
        method = handler.command
        parts = urlsplit(handler.path)
        segments = [s for s in parts.path.split("/") if s]
        if len(segments) < 4 or segments[0] != "apis":
            self._status(handler, 404, "NotFound", f"no route {parts.path}")
            return
        plural = segments[3]
        name = segments[4] if len(segments) > 4 else None
        length = int(handler.headers.get("Content-Length") or 0)
        body = json.loads(handler.rfile.read(length) or b"null") if length else None
        with self._lock:
            target = name or (body or {}).get("metadata", {}).get("name")
            self.requests.append((method, plural, target))
            for hook_entry in list(self._hooks):
                hook_method, hook_name, hook = hook_entry
                if hook_method == method and hook_name in (None, target):
                    self._hooks.remove(hook_entry)
                    hook(self)
            for fault in list(self._faults):
                fault_method, fault_name, code = fault
                if fault_method == method and fault_name in (None, target):
                    self._faults.remove(fault)
                    self._status(handler, code, "InternalError" if code >= 500 else "Conflict",
                                 f"injected {code}")
                    return
            self._serve(handler, method, plural, name, body, parse_qs(parts.query))

    def _serve(self, handler, method, plural, name, body, query) -> None:
        key = (plural, name)
        if method == "GET" and name is None:
            selector = (query.get("labelSelector") or [""])[0]
            items = [copy.deepcopy(obj) for (p, _), obj in sorted(self.objects.items())
                     if p == plural
                     and _matches(obj.get("metadata", {}).get("labels") or {}, selector)]
            self._reply(handler, 200, {"apiVersion": "v1", "kind": "List", "items": items,
                                       "metadata": {"resourceVersion": "0"}})
        elif method == "GET":
            if key not in self.objects:
                self._status(handler, 404, "NotFound", f"{plural} {name} not found")
            else:
                self._reply(handler, 200, copy.deepcopy(self.objects[key]))
        elif method == "POST":
            name = body["metadata"]["name"]
            if (plural, name) in self.objects:
                self._status(handler, 409, "AlreadyExists", f"{plural} {name} already exists")
                return
            body["metadata"].pop("resourceVersion", None)
            self._reply(handler, 201, self.put_object(plural, body))
        elif method == "PUT":
            if key not in self.objects:
                self._status(handler, 404, "NotFound", f"{plural} {name} not found")
                return
            current = self.objects[key]["metadata"]["resourceVersion"]
            if body.get("metadata", {}).get("resourceVersion") != current:
                self._status(handler, 409, "Conflict",
                             f"Operation cannot be fulfilled on {plural} \"{name}\": the object "
                             "has been modified; please apply your changes to the latest version")
                return
            self._reply(handler, 200, self.put_object(plural, body))
        elif method == "DELETE":
            if key not in self.objects:
                self._status(handler, 404, "NotFound", f"{plural} {name} not found")
                return
            del self.objects[key]
            self._reply(handler, 200, {"kind": "Status", "apiVersion": "v1",
                                       "status": "Success"})
        else:
            self._status(handler, 405, "MethodNotAllowed", method)
