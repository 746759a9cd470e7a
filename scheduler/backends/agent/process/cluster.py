"""The agent's hands on its cluster, through the official client: LIST + WATCH of the Nodes
and of our pods into messages, and the service's work applied idempotently (a create that
meets 409 AlreadyExists is done, a delete that meets 404 is done), so work handed out again
after a reconnect changes nothing twice."""

from __future__ import annotations

import logging
import threading
from typing import Any

from kubernetes import client, config

from scheduler.core.kai_names import (
    PODGROUP_ANNOTATION,
    REPLICA_INDEX_ANNOTATION,
    TASK_NAME_ANNOTATION,
    WORKFLOW_NAME_ANNOTATION,
    retry_of,
)
from scheduler.kai.reconcile import KaiSyncError, sync_objects

from ...kubernetes.client import (
    MANAGED_SELECTOR,
    PODGROUPS,
    POOL_SIZE,
    REQUEST_TIMEOUT,
    Kube,
    api_errors,
    call,
    describe,
    is_transient,
    raw,
    status_of,
)
from ...kubernetes.listwatch import ListWatch
from .outbox import Outbox

logger = logging.getLogger("osmo.agent")

PER_MESSAGE = 100  # pods or nodes in one message
WATCH_SECONDS = 15  # a re-list asked for waits at most this long
EVENT_WINDOW = 0.05  # watch events arriving this close together go in one message
PERMANENT = (400, 422)
LOG_MESSAGE_BYTES = 512 * 1024  # of a log in a message (≤ 3 MiB as JSON, whatever it is)
LOG_MAX_BYTES = 16 * 1024 * 1024  # of a pod's log read when it ends
MAX_POD_EVENTS = 100  # a pod's newest Events sent
EVENT_FIELDS = ("reason", "message", "lastTimestamp", "eventTime", "firstTimestamp", "count",
                "source", "reportingComponent")


def kube_from(kubeconfig: str | None) -> Kube:
    configuration = client.Configuration()
    if kubeconfig is None:
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration,
                                persist_config=False)
    configuration.retries = False
    # The worker's threads (APPLY_THREADS) each keep a connection.
    configuration.connection_pool_maxsize = max(POOL_SIZE, configuration.connection_pool_maxsize)
    return Kube(client.ApiClient(configuration))


def cluster_identity(kube: Kube) -> tuple[str, str]:
    """(UID of the kube-system namespace, the API server's version)."""
    namespace = raw(kube.core.read_namespace("kube-system", _preload_content=False,
                                             _request_timeout=REQUEST_TIMEOUT))
    version = client.VersionApi(kube.api_client).get_code(_request_timeout=REQUEST_TIMEOUT)
    return namespace["metadata"]["uid"], version.git_version


def trim_node(node: dict) -> dict:
    """What the service reads of a Node (``scheduler.core.decode``)."""
    metadata, spec, status = node.get("metadata") or {}, node.get("spec") or {}, \
        node.get("status") or {}
    return {"metadata": {"name": metadata.get("name"), "labels": metadata.get("labels") or {}},
            "spec": {"unschedulable": spec.get("unschedulable", False),
                     "taints": spec.get("taints") or []},
            "status": {"allocatable": status.get("allocatable") or {},
                       "capacity": status.get("capacity") or {},
                       "conditions": status.get("conditions") or []}}


def trim_pod(pod: dict) -> dict:
    pod = dict(pod)
    pod["metadata"] = {k: v for k, v in (pod.get("metadata") or {}).items()
                       if k != "managedFields"}
    return pod


class Watcher(ListWatch):
    """LIST then WATCH one kind into the outbox, with the in-process backend's list-watch
    (events in batches as they arrive, resumed from the resourceVersion, a re-list after 410
    Gone); a re-list also after a failed watch and when asked (the agent
    reconnected: :meth:`relist_soon`)."""

    kind = ""

    def __init__(self, kube: Kube, outbox: Outbox, stop: threading.Event):
        super().__init__()
        self.log_name = f"agent {self.kind}"
        self.resource = self.kind
        self.kube = kube
        self.outbox = outbox
        self.stopping = stop
        self.thread = threading.Thread(target=self.run, name=f"agent-{self.kind}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def relist_soon(self) -> None:
        self.request_relist(unless_listed_within=0)
        self.stop()  # end the current watch now rather than at its timeout

    def run(self) -> None:
        delay = 0.2
        while not self.stopping.is_set():
            try:
                self.step()
                delay = 0.2
            except Exception as exc:  # noqa: BLE001 - the cluster is away: list again later
                logger.warning("agent: %s watch failed: %s", self.kind, describe(exc))
                self.resource_version = None
                self.stopping.wait(delay)
                delay = min(delay * 2, 10.0)

    def watch_once(self, *, timeout: int | None = None) -> int:
        return self.stream_batches(self.lister(), *self.args(), **self.kwargs(),
                                   timeout=timeout or WATCH_SECONDS, window=EVENT_WINDOW,
                                   size=PER_MESSAGE, apply=self._apply)

    def _apply(self, events: list[tuple[str, dict]]) -> int:
        self.emit(events)
        return len(events)

    def lister(self) -> Any:
        raise NotImplementedError

    def args(self) -> tuple:
        return ()

    def kwargs(self) -> dict:
        return {}

    def emit(self, events: list[tuple[str, dict]]) -> None:
        raise NotImplementedError


class NodeWatcher(Watcher):
    kind = "nodes"

    def lister(self) -> Any:
        return self.kube.core.list_node

    def relist(self) -> int:
        body = raw(self.kube.core.list_node(_preload_content=False,
                                            _request_timeout=REQUEST_TIMEOUT))
        items = body.get("items") or []
        for start in range(0, len(items), PER_MESSAGE):
            self.outbox.put("nodes", {"nodes": [trim_node(n)
                                                for n in items[start:start + PER_MESSAGE]]})
        self.outbox.put("nodes_listed", {"names": [n["metadata"]["name"] for n in items]})
        self.resource_version = body["metadata"]["resourceVersion"]
        self.relist_requested = False
        return len(items)

    def emit(self, events: list[tuple[str, dict]]) -> None:
        self.outbox.put("nodes", {
            "nodes": [trim_node(obj) for kind, obj in events if kind != "DELETED"],
            "deleted": [obj["metadata"]["name"] for kind, obj in events if kind == "DELETED"]})


class PodWatcher(Watcher):
    kind = "pods"

    def __init__(self, kube: Kube, outbox: Outbox, stop: threading.Event, namespace: str,
                 applied: Any):
        super().__init__(kube, outbox, stop)
        self.namespace = namespace
        self.applied = applied  # () → (highest work id applied in this connection, session)

    def lister(self) -> Any:
        return self.kube.core.list_namespaced_pod

    def args(self) -> tuple:
        return (self.namespace,)

    def kwargs(self) -> dict:
        return {"label_selector": MANAGED_SELECTOR}

    def relist(self) -> int:
        applied_through, session = self.applied()  # BEFORE the list: what it must contain
        body = raw(self.kube.core.list_namespaced_pod(
            self.namespace, label_selector=MANAGED_SELECTOR, _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT))
        items = body.get("items") or []
        for start in range(0, len(items), PER_MESSAGE):
            chunk = [trim_pod(p) for p in items[start:start + PER_MESSAGE]]
            for pod in chunk:
                if _ended(pod):
                    self.archive(pod)
            self.outbox.put("pods", {"pods": [[pod, False] for pod in chunk]})
        tasks = []
        for pod in items:
            annotations = (pod.get("metadata") or {}).get("annotations") or {}
            key = _task_key(annotations)
            if key:
                tasks.append(key)
        self.outbox.put("pods_listed", {"tasks": tasks, "applied_through": applied_through,
                                        "session": session})
        self.resource_version = body["metadata"]["resourceVersion"]
        self.relist_requested = False
        return len(items)

    def emit(self, events: list[tuple[str, dict]]) -> None:
        pods = []
        for kind, obj in events:
            pod = trim_pod(obj)
            if kind == "DELETED":
                pod["events"] = self._podgroup_events(pod)
            if kind == "DELETED" or _ended(pod):
                self.archive(pod)
            pods.append([pod, kind == "DELETED"])
        self.outbox.put("pods", {"pods": pods})

    def _send_log(self, name: str, key: list[str], retry: int) -> None:
        """One read of the log (its first ``LOG_MAX_BYTES``, timestamped), streamed and cut
        at line ends into messages of about ``LOG_MESSAGE_BYTES``: a read resumed with
        ``sinceTime`` would restart at a whole second, and a busy second outgrows a piece."""
        response = self.kube.core.read_namespaced_pod_log(
            name, self.namespace, timestamps=True, limit_bytes=LOG_MAX_BYTES,
            _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
        buffer = b""
        try:
            for piece in response.stream(64 * 1024):
                buffer += piece
                if len(buffer) >= LOG_MESSAGE_BYTES:
                    cut = buffer.rfind(b"\n") + 1 or len(buffer)
                    self._put_log(key, name, retry, buffer[:cut])
                    buffer = buffer[cut:]
            if buffer:
                self._put_log(key, name, retry, buffer)
        finally:
            response.release_conn()

    def _put_log(self, key: list[str], name: str, retry: int, data: bytes) -> None:
        self.outbox.put("pod_logs", {"task": key, "pod": name, "retry": retry,
                                     "text": data.decode("utf-8", "replace")})

    def archive(self, pod: dict) -> None:
        """An ending pod's log and its Events, as ``pod_logs`` messages put BEFORE the pod's
        status (the service keeps them while the task is alive, then ends it; the cleaner
        may delete the pod after): its log in pieces of ``LOG_MESSAGE_BYTES``, each its own
        message — none grows with the log or the workflow — then its Events."""
        key = _task_key((pod.get("metadata") or {}).get("annotations") or {})
        if key is None:
            return
        name = pod["metadata"]["name"]
        retry = retry_of(pod["metadata"])  # the run of its group: the service keeps its own
        try:
            self._send_log(name, key, retry)
        except api_errors() as exc:
            if status_of(exc) not in (400, 404):  # 400: never started, 404: gone
                logger.warning("agent: reading the log of %s failed: %s", name, describe(exc))
        except Exception as exc:  # noqa: BLE001 - a read cut short: what was sent stays
            logger.warning("agent: reading the log of %s failed: %s", name, exc)
        try:
            body = raw(self.kube.core.list_namespaced_event(
                self.namespace, field_selector=f"involvedObject.kind=Pod,"
                                               f"involvedObject.name={name}",
                _preload_content=False, _request_timeout=REQUEST_TIMEOUT))
        except api_errors() as exc:
            logger.warning("agent: reading the Events of %s failed: %s", name, describe(exc))
            return
        events = [{key_: event[key_] for key_ in EVENT_FIELDS if key_ in event}
                  for event in (body.get("items") or [])[-MAX_POD_EVENTS:]]
        if events:
            self.outbox.put("pod_logs", {"task": key, "pod": name, "retry": retry, "text": "",
                                         "events": events})

    def _podgroup_events(self, pod: dict) -> list[dict]:
        """The Events of a deleted pod's PodGroup, from which the service reads KAI's
        eviction (as the in-process listener does) — only for a pod that did not end."""
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return []
        group = ((pod.get("metadata") or {}).get("annotations") or {}).get(PODGROUP_ANNOTATION)
        if not group:
            return []
        try:
            body = raw(self.kube.core.list_namespaced_event(
                self.namespace, field_selector=f"involvedObject.kind=PodGroup,"
                                               f"involvedObject.name={group}",
                _preload_content=False, _request_timeout=REQUEST_TIMEOUT))
        except api_errors() as exc:
            logger.warning("agent: reading the Events of %s failed: %s", group, describe(exc))
            return []
        return body.get("items") or []


def _ended(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _task_key(annotations: dict) -> list[str] | None:
    workflow, task = annotations.get(WORKFLOW_NAME_ANNOTATION), \
        annotations.get(TASK_NAME_ANNOTATION)
    if not workflow or not task:
        return None
    replica = annotations.get(REPLICA_INDEX_ANNOTATION)
    return [workflow, f"{task}-{replica}" if replica is not None else task]


class Transient(Exception):
    """The cluster did not answer usefully: the item stays unacked and comes again."""

    retry_after: float | None = None  # seconds before the next try (None: the worker's own)
    quiet = False


class StillThere(Transient):
    """A rerun's earlier run is still leaving (a pod terminating): its delete is not done, and
    the new run's creates after it wait."""

    retry_after = 1.0
    quiet = True  # expected while a kubelet confirms: no warning a second


class Fenced(Transient):
    """This agent's lease may have ended (``lease.py``): it acts no more until it is renewed;
    the item stays unacked and goes to whoever leads."""


class Applier:
    """One work item (the worker applies several at once, on threads of their own). Returns
    '' (done) or a permanent error. ``may_act`` is asked before every write to the cluster
    (the agent's lease)."""

    def __init__(self, kube: Kube, namespace: str, may_act: Any = lambda: True):
        self.kube = kube
        self.namespace = namespace
        self.may_act = may_act

    def _fence(self) -> None:
        if not self.may_act():
            raise Fenced("the lease may have ended: not acting until the service answers")

    def apply(self, item: dict) -> str:
        try:
            kind, payload = item["kind"], item["payload"]
            if kind == "create":
                return self._create(payload["objects"])
            if kind == "delete":
                self._delete(payload["selector"])
                if payload.get("until_gone"):
                    left = self._delete(payload["selector"])
                    if left:
                        raise StillThere(f"{left} object(s) of an earlier run still leaving")
                return ""
            if kind == "sync":
                self._fence()
                sync_objects(self.kube.custom, payload["objects"], namespace=self.namespace)
                return ""
            return f"unknown work kind {kind!r}"
        except KaiSyncError as exc:
            if exc.status is None or exc.status >= 500 or exc.status == 429:
                raise Transient(str(exc)) from exc
            return f"queue sync: {exc}"
        except api_errors() as exc:
            if is_transient(exc):
                raise Transient(describe(exc)) from exc
            raise

    def _path(self, kind: str) -> str:
        if kind in ("Pod", "Service", "Secret"):
            return f"/api/v1/namespaces/{self.namespace}/{kind.lower()}s"
        return f"/apis/{PODGROUPS[0]}/{PODGROUPS[1]}/namespaces/{self.namespace}/{PODGROUPS[2]}"

    def _create(self, objects: list[dict]) -> str:
        for obj in objects:
            obj = {**obj, "metadata": {**obj["metadata"], "namespace": self.namespace}}
            self._fence()
            try:
                call(self.kube, "POST", self._path(obj["kind"]), obj)
            except api_errors() as exc:
                code = status_of(exc)
                if code == 409:
                    continue  # made before (an answer lost, a restart): done
                if is_transient(exc):
                    raise
                if code in PERMANENT:
                    return f"creating {obj['kind']} {obj['metadata']['name']}: {describe(exc)}"
                raise Transient(describe(exc)) from exc  # 401/403/404: an operator's to fix
        return ""

    def _delete(self, selector: str) -> int:
        """Delete what the selector names; returns how many objects were still there (being
        deleted already, or now)."""
        core, custom, ns = self.kube.core, self.kube.custom, self.namespace
        kw = {"_preload_content": False, "_request_timeout": REQUEST_TIMEOUT}
        kinds = [
            (lambda: core.list_namespaced_pod(ns, label_selector=selector, **kw),
             lambda name: core.delete_namespaced_pod(name, ns, **kw)),
            (lambda: custom.list_namespaced_custom_object(*PODGROUPS[:2], ns, PODGROUPS[2],
                                                          label_selector=selector, **kw),
             lambda name: custom.delete_namespaced_custom_object(*PODGROUPS[:2], ns,
                                                                 PODGROUPS[2], name, **kw)),
            (lambda: core.list_namespaced_service(ns, label_selector=selector, **kw),
             lambda name: core.delete_namespaced_service(name, ns, **kw)),
            (lambda: core.list_namespaced_secret(ns, label_selector=selector, **kw),
             lambda name: core.delete_namespaced_secret(name, ns, **kw)),
        ]
        found = 0
        for lister, deleter in kinds:
            for obj in raw(lister()).get("items") or []:
                self._fence()
                found += 1
                try:
                    raw(deleter(obj["metadata"]["name"]))
                except api_errors() as exc:
                    if status_of(exc) != 404:  # gone already: done
                        raise
        return found
