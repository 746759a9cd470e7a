"""A Kubernetes API emulator over real loopback HTTP, for the backend's end-to-end tests.

A sibling of ``tests/kai/emulator.py`` (that one serves cluster-scoped custom objects only and
has no watch); this one serves what the backend and the queue sync call through the official
client, with one store, one resourceVersion counter and one event log:

    core v1   /api/v1/namespaces/{ns}/{pods|services|secrets}[/{name}[/status]]
              /api/v1/nodes[/{name}]
    custom    /apis/{group}/{version}/namespaces/{ns}/{plural}[/{name}[/status]]  (PodGroups)
              /apis/{group}/{version}/{plural}[/{name}]                           (Queues, ...)

Verbs: list (``labelSelector``; ``watch=true`` streams events from ``resourceVersion``), get,
create (409 AlreadyExists), replace (409 Conflict on a stale resourceVersion), merge-patch,
delete (404 when missing). A watch from a compacted resourceVersion gets a 410 ``Expired``
ERROR event, as a real API server sends it.

Controls, as KAI and the kubelet would act: :meth:`unschedulable`, :meth:`bind`,
:meth:`run`, :meth:`finish`, :meth:`preempt`, :meth:`delete`, :meth:`add_node`; faults:
:attr:`outage` (every request answers that status), :meth:`fail_next`, :meth:`compact`
(expire old resourceVersions), :meth:`break_watches` (cut open watch streams),
:meth:`stop` / :meth:`start` (the server goes away and comes back on the same port, state kept).
Idle watches end after :attr:`watch_linger` seconds (a real server keeps them open until
``timeoutSeconds``; ending early is legal and keeps the tests fast).

Where it is still used, and why (everything about "KAI places the pods" runs on the real KAI
Scheduler of ``tests/kube_real``: ``test_kai_scheduler.py``, ``test_kai_workflows.py``,
``test_kai_differential.py``, ``test_kai_readiness.py``):

- ``tests/k8s/test_dispatch.py``: the exact order of the backend's writes, an idle pass making
  no call at all (the request log), and answers injected into one request (a 409 on a replace,
  a 422, a 403 or a 503 on one pod), which neither a real API server nor KAI can be made to
  give on cue;
- ``tests/k8s/test_status.py``: an API server answering 500 to every request for a while, a
  403 on one kind only, the server gone and back on the same port with its state;
- ``tests/k8s/test_runner.py``: watch streams cut mid-flight and a 500 outage under the running
  leader.

None of them is about placement: the emulator's ``bind`` and ``unschedulable`` only put pods in
the states those cases start from. The tests of ``tests/kube_real`` that bind through
``Cluster.run``/``bind``/``preempt`` (status mapping, pod logs, cleanup, the kubelet stand-in)
are about what follows a placement, not the placement, so they need no scheduler at all.
"""

from __future__ import annotations

import copy
import itertools
import json
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from tests.kai.emulator import _matches


def merge(target: dict, patch: dict) -> dict:
    """JSON merge patch (RFC 7386)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


class KubeCluster:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict] = {}  # (plural, namespace, name)
        self.events: list[tuple[int, str, str, str, dict]] = []  # (rv, plural, ns, type, obj)
        self.requests: list[tuple[str, str, str | None]] = []  # (method, plural, name)
        self.outage: int | None = None
        self.watch_linger: float | None = 0.3
        self.open_watches = 0
        self._faults: list[tuple[str, str, str | None, int]] = []
        self._versions = itertools.count(1)
        self._version = 0
        self._compacted = 0
        self._break = 0
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._port = 0
        self.server: ThreadingHTTPServer | None = None

    # --- lifecycle -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def start(self) -> KubeCluster:
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.1 for chunked watch streams (what lets the client read event by event);
            # every response closes its connection, so a stopped server is really gone.
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _handle(self) -> None:
                cluster._dispatch(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda request, address: None  # cut watches are expected
        self.server.block_on_close = False
        self._port = self.server.server_address[1]
        self._serving = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return self

    def stop(self) -> None:
        """The API server goes away: the port refuses connections, open watches are cut."""
        with self._lock:
            self._serving = False
            self._changed.notify_all()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def kubeconfig(self, path) -> str:
        """Write a kubeconfig for this server (how the backend command is pointed at it)."""
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "emulator",
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "contexts": [{"name": "emulator", "context": {"cluster": "emulator",
                                                          "user": "test"}}],
            "users": [{"name": "test", "user": {"token": "test-token"}}]}))
        return str(path)

    def api_client(self):
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.url
        configuration.retries = False
        return client.ApiClient(configuration)

    # --- reading the store -----------------------------------------------------------------
    def get(self, plural: str, name: str, namespace: str = "osmo") -> dict | None:
        with self._lock:
            obj = self.objects.get((plural, namespace if plural not in _CLUSTER_SCOPED else "",
                                    name))
            return copy.deepcopy(obj) if obj is not None else None

    def names(self, plural: str) -> list[str]:
        with self._lock:
            return sorted(name for (p, _, name) in self.objects if p == plural)

    def writes(self) -> list[tuple[str, str, str | None]]:
        return [r for r in self.requests if r[0] != "GET"]

    # --- controls: what KAI, the kubelet and operators do ------------------------------------
    def _store(self, plural: str, namespace: str, obj: dict, event: str) -> dict:
        with self._lock:
            self._version = next(self._versions)
            obj["metadata"]["resourceVersion"] = str(self._version)
            self.objects[(plural, namespace, obj["metadata"]["name"])] = obj
            self.events.append((self._version, plural, namespace, event, copy.deepcopy(obj)))
            self._changed.notify_all()
            return copy.deepcopy(obj)

    def _remove(self, plural: str, namespace: str, name: str) -> dict:
        with self._lock:
            obj = self.objects.pop((plural, namespace, name))
            self._version = next(self._versions)
            obj["metadata"]["resourceVersion"] = str(self._version)
            self.events.append((self._version, plural, namespace, "DELETED", copy.deepcopy(obj)))
            self._changed.notify_all()
            return obj

    def update_pod(self, name: str, *, namespace: str = "osmo", node: str | None = None,
                   **status) -> dict:
        with self._lock:
            pod = copy.deepcopy(self.objects[("pods", namespace, name)])
            if node is not None:
                pod["spec"]["nodeName"] = node
            merge(pod.setdefault("status", {}), status)
            return self._store("pods", namespace, pod, "MODIFIED")

    def unschedulable(self, name: str, message: str, **kw) -> dict:
        return self.update_pod(name, phase="Pending", conditions=[{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": message}], **kw)

    def bind(self, name: str, node: str, **kw) -> dict:
        return self.update_pod(name, node=node, phase="Pending", conditions=[{
            "type": "PodScheduled", "status": "True"}], **kw)

    def run(self, name: str, node: str, **kw) -> dict:
        return self.update_pod(name, node=node, phase="Running", conditions=[
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
            containerStatuses=[_container({"running": {"startedAt": _now()}}, ready=True)],
            **kw)

    def finish(self, name: str, exit_code: int = 0, **kw) -> dict:
        return self.update_pod(
            name, phase="Succeeded" if exit_code == 0 else "Failed",
            containerStatuses=[_container({"terminated": {
                "exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error",
                "finishedAt": _now()}})], **kw)

    def preempt(self, name: str, namespace: str = "osmo", *, delete: bool = True) -> None:
        """KAI's eviction: the DisruptionTarget condition, then the deletion."""
        with self._lock:
            pod = self.objects[("pods", namespace, name)]
            conditions = [c for c in pod.get("status", {}).get("conditions", [])
                          if c.get("type") != "DisruptionTarget"]
            conditions.append({"type": "DisruptionTarget", "status": "True",
                               "reason": "PreemptionByScheduler",
                               "message": "kai-scheduler: preempted by a higher priority job"})
            self.update_pod(name, namespace=namespace, conditions=conditions)
            if delete:
                self._remove("pods", namespace, name)

    def delete(self, plural: str, name: str, namespace: str = "osmo") -> None:
        self._remove(plural, namespace if plural not in _CLUSTER_SCOPED else "", name)

    def add_node(self, name: str, *, gpus: int = 8, cpu: str = "64", memory: str = "512Gi",
                 labels: dict | None = None, unschedulable: bool = False,
                 ready: bool = True) -> dict:
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                      **(labels or {})}},
                "spec": {"unschedulable": True} if unschedulable else {},
                "status": {"allocatable": {"cpu": cpu, "memory": memory,
                                           "nvidia.com/gpu": str(gpus), "pods": "110"},
                           "conditions": [{"type": "Ready",
                                           "status": "True" if ready else "False"}]}}
        return self._store("nodes", "", node, "ADDED")

    def compact(self) -> None:
        """Forget every event so far: a watch from an older resourceVersion gets 410."""
        with self._lock:
            self._compacted = self._version + 1
            self.events.clear()

    def break_watches(self) -> None:
        with self._lock:
            self._break += 1
            self._changed.notify_all()

    def fail_next(self, method: str, plural: str, status: int, name: str | None = None,
                  times: int = 1) -> None:
        for _ in range(times):
            self._faults.append((method, plural, name, status))

    # --- serving -----------------------------------------------------------------------------
    def _reply(self, handler, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("Connection", "close")
        handler.close_connection = True
        handler.end_headers()
        handler.wfile.write(data)

    def _status(self, handler, code: int, reason: str, message: str) -> None:
        self._reply(handler, code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                    "reason": reason, "message": message, "code": code})

    def _route(self, path: str) -> tuple[str, str, str | None, bool] | None:
        """(plural, namespace, name, status subresource) of a path."""
        s = [p for p in path.split("/") if p]
        if s[:2] == ["api", "v1"]:
            rest = s[2:]
        elif s and s[0] == "apis" and len(s) >= 4:
            rest = s[3:]
        else:
            return None
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest:
            return None
        return rest[0], namespace, rest[1] if len(rest) > 1 else None, rest[2:] == ["status"]

    def _dispatch(self, handler: BaseHTTPRequestHandler) -> None:
        method = handler.command
        parts = urlsplit(handler.path)
        route = self._route(parts.path)
        length = int(handler.headers.get("Content-Length") or 0)
        body = json.loads(handler.rfile.read(length) or b"null") if length else None
        if route is None:
            self._status(handler, 404, "NotFound", f"no route {parts.path}")
            return
        plural, namespace, name, subresource = route
        query = parse_qs(parts.query)
        with self._lock:
            target = name
            if target is None and isinstance(body, dict):
                target = (body.get("metadata") or {}).get("name")
            self.requests.append((method, plural, target))
            if self.outage is not None:
                self._status(handler, self.outage, "InternalError", "injected outage")
                return
            for fault in list(self._faults):
                f_method, f_plural, f_name, code = fault
                if f_method == method and f_plural == plural and f_name in (None, target):
                    self._faults.remove(fault)
                    self._status(handler, code, "InternalError" if code >= 500 else "Invalid",
                                 f"injected {code}")
                    return
        if method == "GET" and name is None and query.get("watch", [""])[0] in ("true", "1"):
            self._watch(handler, plural, namespace, query)
            return
        with self._lock:
            self._serve(handler, method, plural, namespace, name, subresource, body, query)

    def _serve(self, handler, method, plural, namespace, name, subresource, body, query):
        key = (plural, namespace, name)
        if method == "GET" and name is None:
            selector = (query.get("labelSelector") or [""])[0]
            items = [copy.deepcopy(obj) for (p, ns, _), obj in sorted(self.objects.items())
                     if p == plural and (not namespace or ns == namespace)
                     and _matches(obj["metadata"].get("labels") or {}, selector)]
            self._reply(handler, 200, {"apiVersion": "v1", "kind": "List", "items": items,
                                       "metadata": {"resourceVersion": str(self._version)}})
        elif method == "GET":
            if key not in self.objects:
                self._status(handler, 404, "NotFound", f"{plural} \"{name}\" not found")
            else:
                self._reply(handler, 200, copy.deepcopy(self.objects[key]))
        elif method == "POST":
            name = body["metadata"]["name"]
            if (plural, namespace, name) in self.objects:
                self._status(handler, 409, "AlreadyExists",
                             f"{plural} \"{name}\" already exists")
                return
            obj = copy.deepcopy(body)
            obj["metadata"].pop("resourceVersion", None)
            obj["metadata"].update({"uid": str(uuid.uuid4()),
                                    "creationTimestamp": time.strftime(
                                        "%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
            if namespace:
                obj["metadata"]["namespace"] = namespace
            if plural == "pods":
                obj["status"] = {"phase": "Pending"}
            self._reply(handler, 201, self._store(plural, namespace, obj, "ADDED"))
        elif method in ("PUT", "PATCH"):
            if key not in self.objects:
                self._status(handler, 404, "NotFound", f"{plural} \"{name}\" not found")
                return
            current = self.objects[key]
            if method == "PUT":
                wanted = body.get("metadata", {}).get("resourceVersion")
                if wanted and wanted != current["metadata"]["resourceVersion"]:
                    self._status(handler, 409, "Conflict",
                                 f"Operation cannot be fulfilled on {plural} \"{name}\": the "
                                 "object has been modified; please apply your changes to the "
                                 "latest version and try again")
                    return
                obj = copy.deepcopy(current)
                if subresource:
                    obj["status"] = copy.deepcopy(body.get("status") or {})
                else:
                    status = obj.get("status")
                    obj = copy.deepcopy(body)
                    obj["metadata"] = {**current["metadata"], **body["metadata"]}
                    if status is not None:
                        obj["status"] = status
            else:
                if not isinstance(body, dict):
                    self._status(handler, 415, "UnsupportedMediaType", "merge patch only")
                    return
                obj = merge(copy.deepcopy(current),
                            {"status": body.get("status", {})} if subresource else body)
            self._reply(handler, 200, self._store(plural, namespace, obj, "MODIFIED"))
        elif method == "DELETE":
            if key not in self.objects:
                self._status(handler, 404, "NotFound", f"{plural} \"{name}\" not found")
                return
            self._reply(handler, 200, copy.deepcopy(self._remove(plural, namespace, name)))
        else:
            self._status(handler, 405, "MethodNotAllowed", method)

    def _watch(self, handler, plural: str, namespace: str, query) -> None:
        selector = (query.get("labelSelector") or [""])[0]
        since = int((query.get("resourceVersion") or ["0"])[0] or 0)
        timeout = float((query.get("timeoutSeconds") or ["300"])[0])
        bookmarks = (query.get("allowWatchBookmarks") or [""])[0] == "true"
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.send_header("Connection", "close")
        handler.close_connection = True
        handler.end_headers()

        def send(event: dict) -> None:
            data = json.dumps(event).encode() + b"\n"
            handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            handler.wfile.flush()

        with self._lock:
            self.open_watches += 1
            generation = self._break
        try:
            if since and since < self._compacted:
                send({"type": "ERROR", "object": {
                    "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410,
                    "reason": "Expired",
                    "message": f"too old resource version: {since} ({self._compacted})"}})
                handler.wfile.write(b"0\r\n\r\n")
                return
            deadline = time.monotonic() + timeout
            idle_since = time.monotonic()
            while True:
                with self._lock:
                    pending = [(rv, kind, obj) for rv, p, ns, kind, obj in self.events
                               if rv > since and p == plural and (not namespace or ns == namespace)
                               and _matches(obj["metadata"].get("labels") or {}, selector)]
                    if not pending:
                        now = time.monotonic()
                        linger_end = idle_since + self.watch_linger \
                            if self.watch_linger is not None else deadline
                        if (not self._serving or self._break != generation
                                or now >= min(deadline, linger_end)):
                            if bookmarks and self._serving and self._break == generation:
                                send({"type": "BOOKMARK", "object": {
                                    "kind": "Pod", "apiVersion": "v1",
                                    "metadata": {"resourceVersion": str(self._version)}}})
                            if self._break != generation or not self._serving:
                                handler.connection.shutdown(socket.SHUT_RDWR)  # cut
                            else:
                                handler.wfile.write(b"0\r\n\r\n")  # a clean end
                            return
                        self._changed.wait(timeout=min(0.05, deadline - now))
                        continue
                for rv, kind, obj in pending:
                    send({"type": kind, "object": obj})
                    since = rv
                idle_since = time.monotonic()
        except OSError:
            return
        finally:
            with self._lock:
                self.open_watches -= 1


_CLUSTER_SCOPED = {"nodes", "queues", "topologies"}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _container(state: dict, *, ready: bool = False) -> dict:
    """A container status with every field the kubelet always sets."""
    return {"name": "main", "image": "x", "imageID": "x@sha256:0", "ready": ready,
            "restartCount": 0, "started": ready, "state": state}
