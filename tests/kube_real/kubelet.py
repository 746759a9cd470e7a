"""A kubelet stand-in for nodes that are only objects (the real-API-server tier and
``benchmarks/k8s_fill.py``): it admits a bound pod as kubelet's admission would, then marks it
Running, and makes the final delete of a pod being deleted.

:class:`Admission` is kubelet's pod admission (``pkg/kubelet/lifecycle/predicate.go``) over one
view of the nodes and of the pods each node already runs:

- resources, counted over every pod on the node whatever its namespace, in kubelet's order —
  ``pods`` (the count), ``cpu``, ``memory``, ``ephemeral-storage``, then extended resources
  such as ``nvidia.com/gpu`` — against the node's
  allocatable minus what the pods it admitted and has not removed request. Short: the pod ends
  ``Failed`` with reason ``OutOf<resource>`` (``OutOfcpu``, ``OutOfnvidia.com/gpu``) and message
  ``Pod was rejected: Node didn't have enough resource: <resource>, requested: N, used: N,
  capacity: N``, and a Warning Event with that reason. An extended resource the node does not
  list counts as 0 there (what the device plugin's allocation refuses; the predicate alone would
  ignore it);
- before resources, the pod's OS: a pod labelled ``kubernetes.io/os`` other than the node's OS
  (kubelet takes its own, ``linux``, whatever the node's label says) ends ``Failed``, reason
  ``PodOSSelectorNodeLabelDoesNotMatch``; a ``spec.os.name`` other than ``linux``,
  ``PodOSNotSupported``;
- after resources, in kubelet's order (the first failure is the one reported): the pod's
  ``nodeSelector`` and required node affinity against the node's labels (reason
  ``NodeAffinity``), then its host ports against those the node's pods hold (``NodePorts``);
  these end ``Failed`` with message ``Pod was rejected: Predicate <name> failed: <why>``;
- a ``NoExecute`` taint the pod does not tolerate: ``Failed``, reason ``TaintToleration``;
- a node that does not exist: no kubelet ever runs the pod; the pod garbage collector marks it
  ``Failed`` with a ``DisruptionTarget`` condition (reason ``DeletionByPodGC``, message
  ``PodGC: node no longer exists``). Here that happens at once (the collector waits 40 s) and the
  pod is left in place to be read (the collector then deletes it);
- a node that is not Ready: its kubelet is not running pods, so the pod stays Pending (listed in
  ``waiting``) until the node is Ready again.

:func:`overcommitted` is the invariant the placement tests assert: on no node do the bound pods
that hold resources (every bound pod that has not ended, except one being deleted that never
started) request more than the node's allocatable.

The stand-in raises what goes wrong in it: an error is kept and raised again by :meth:`stop`
(a pod deleted between its LIST and a write is the one answer it expects: 404).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes.utils import parse_quantity

from .server import KubeError

FINISHED = ("Succeeded", "Failed")
BASIC = ("cpu", "memory", "ephemeral-storage")  # kubelet checks these, then extended ones
NATIVE = {"cpu", "memory", "ephemeral-storage", "pods", "hugepages-1Gi", "hugepages-2Mi",
          "storage"}
REJECTED = "Pod was rejected: "
NODE_OS = "linux"  # kubelet's runtime OS, which it puts in place of the node's label
OS_LABEL = "kubernetes.io/os"
WHY = {"NodeAffinity": "node(s) didn't match Pod's node affinity/selector",
       "NodePorts": "node(s) didn't have free ports for the requested pod ports",
       "TaintToleration": "node(s) had taints that the pod didn't tolerate"}
POD_GC = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
          "message": "PodGC: node no longer exists"}


def _amount(resource: str, value: Any) -> int:
    """A quantity in kubelet's unit: millicores for cpu, whole units (bytes) otherwise."""
    quantity = parse_quantity(str(value))
    return int(quantity * 1000) if resource == "cpu" else int(quantity)


def requests_of(pod: dict[str, Any]) -> dict[str, int]:
    """What the pod requests (the API server has copied limits into missing requests): its
    containers summed, the largest init container when that is more, plus its overhead."""
    spec = pod.get("spec") or {}

    def of(container: dict) -> dict[str, int]:
        requests = (container.get("resources") or {}).get("requests") or {}
        return {name: _amount(name, value) for name, value in requests.items()}

    total: dict[str, int] = {}
    for container in spec.get("containers") or []:
        for name, value in of(container).items():
            total[name] = total.get(name, 0) + value
    for container in spec.get("initContainers") or []:
        for name, value in of(container).items():
            total[name] = max(total.get(name, 0), value)
    for name, value in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, 0) + _amount(name, value)
    return total


def allocatable_of(node: dict[str, Any]) -> dict[str, int]:
    status = node.get("status") or {}
    raw = status.get("allocatable") or status.get("capacity") or {}
    return {name: _amount(name, value) for name, value in raw.items()}


def is_ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _tolerates(tolerations: list[dict], taint: dict) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists":
            if not toleration.get("key") or toleration["key"] == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and \
                (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _requirement_holds(requirement: dict, labels: dict[str, str]) -> bool:
    key, operator = requirement.get("key"), requirement.get("operator")
    values = requirement.get("values") or []
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt") and key in labels:
        try:
            have, bound = int(labels[key]), int(values[0])
        except (ValueError, IndexError):
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def _term_holds(term: dict, node: dict[str, Any]) -> bool:
    """A node selector term: every expression and field holds; an empty term matches no
    node."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    labels = node["metadata"].get("labels") or {}
    named = {"metadata.name": node["metadata"]["name"]}
    return all(_requirement_holds(e, labels) for e in expressions) and \
        all(_requirement_holds(f, named) for f in fields)


def affinity_matches(pod: dict[str, Any], node: dict[str, Any]) -> bool:
    """The pod's ``nodeSelector`` (every pair) and required node affinity (any term) hold
    for the node's labels."""
    spec = pod.get("spec") or {}
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(key) != value for key, value in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required is None:
        return True
    return any(_term_holds(term, node) for term in required.get("nodeSelectorTerms") or [])


def host_ports_of(pod: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(host IP, protocol, port) of every container port the pod takes on its node."""
    spec = pod.get("spec") or {}
    return [(port.get("hostIP") or "0.0.0.0", port.get("protocol") or "TCP", port["hostPort"])
            for container in (*(spec.get("initContainers") or []), *(spec.get("containers") or []))
            for port in container.get("ports") or [] if port.get("hostPort")]


def _ports_clash(wanted: tuple[str, str, int], held: tuple[str, str, int]) -> bool:
    (ip, protocol, port), (other_ip, other_protocol, other_port) = wanted, held
    return (protocol, port) == (other_protocol, other_port) and (
        ip == other_ip or "0.0.0.0" in (ip, other_ip))


@dataclass(frozen=True)
class Refusal:
    pod: str
    node: str
    reason: str
    message: str


@dataclass
class Admission:
    """Kubelet's admission over ``nodes`` (name → Node) and what each node already runs."""

    nodes: dict[str, dict[str, Any]]
    used: dict[str, dict[str, int]] = field(default_factory=dict)  # node → requests held
    count: dict[str, int] = field(default_factory=dict)  # node → pods held
    ports: dict[str, list[tuple[str, str, int]]] = field(default_factory=dict)  # host ports

    def hold(self, node: str, pod: dict[str, Any]) -> None:
        used = self.used.setdefault(node, {})
        for name, value in requests_of(pod).items():
            used[name] = used.get(name, 0) + value
        self.count[node] = self.count.get(node, 0) + 1
        self.ports.setdefault(node, []).extend(host_ports_of(pod))

    def hold_if_running(self, pod: dict[str, Any]) -> None:
        """What kubelet counts on a node: every pod it runs there, of any namespace."""
        if (pod.get("status") or {}).get("phase") == "Running" and pod["spec"].get("nodeName"):
            self.hold(pod["spec"]["nodeName"], pod)

    def release(self, node: str, pod: dict[str, Any]) -> None:
        used = self.used.setdefault(node, {})
        for name, value in requests_of(pod).items():
            used[name] = used.get(name, 0) - value
        self.count[node] = self.count.get(node, 0) - 1
        for port in host_ports_of(pod):
            self.ports.get(node, []).remove(port)

    def admit(self, pod: dict[str, Any]) -> Refusal | None:
        """None: the pod is admitted (and from now on holds its requests on its node); else
        why kubelet refuses it. A pod on a node that is not Ready is neither (see
        :meth:`can_start`)."""
        name, node_name = pod["metadata"]["name"], pod["spec"]["nodeName"]
        node = self.nodes.get(node_name)
        if node is None:
            return Refusal(name, node_name, POD_GC["reason"], POD_GC["message"])
        if (pod["metadata"].get("labels") or {}).get(OS_LABEL, NODE_OS) != NODE_OS:
            return Refusal(name, node_name, "PodOSSelectorNodeLabelDoesNotMatch",
                           f"Failed to admit pod as the `{OS_LABEL}` label doesn't match "
                           "node label")
        if ((pod["spec"].get("os") or {}).get("name") or NODE_OS) != NODE_OS:
            return Refusal(name, node_name, "PodOSNotSupported",
                           "Failed to admit pod as the OS field doesn't match node OS")
        requests = requests_of(pod)
        allocatable = allocatable_of(node)
        used = self.used.get(node_name, {})
        short = None
        if self.count.get(node_name, 0) + 1 > allocatable.get("pods", 0):
            short = ("pods", 1, self.count.get(node_name, 0), allocatable.get("pods", 0))
        extended = sorted(r for r in requests if r not in NATIVE)
        for resource in (*BASIC, *extended):
            if short is not None:
                break
            wanted = requests.get(resource, 0)
            if wanted and wanted + used.get(resource, 0) > allocatable.get(resource, 0):
                short = (resource, wanted, used.get(resource, 0), allocatable.get(resource, 0))
        if short is not None:
            resource, wanted, held, capacity = short
            return Refusal(name, node_name, f"OutOf{resource}",
                           f"Node didn't have enough resource: {resource}, requested: "
                           f"{wanted}, used: {held}, capacity: {capacity}")
        held = self.ports.get(node_name, [])
        taints = [t for t in (node.get("spec") or {}).get("taints") or []
                  if t.get("effect") == "NoExecute"]
        tolerations = pod["spec"].get("tolerations") or []
        for predicate, fails in (
                ("NodeAffinity", lambda: not affinity_matches(pod, node)),
                ("NodePorts", lambda: any(_ports_clash(wanted, other) for wanted in
                                          host_ports_of(pod) for other in held)),
                ("TaintToleration", lambda: any(not _tolerates(tolerations, taint)
                                                for taint in taints))):
            if fails():
                return Refusal(name, node_name, predicate,
                               f"Predicate {predicate} failed: {WHY[predicate]}")
        self.hold(node_name, pod)
        return None

    def can_start(self, pod: dict[str, Any]) -> bool:
        """False while the pod's node exists but is not Ready: nothing runs it yet."""
        node = self.nodes.get(pod["spec"]["nodeName"])
        return node is None or is_ready(node)


def holds_resources(pod: dict[str, Any]) -> bool:
    """A bound pod that has not ended; one being deleted only if it started (one that never
    ran holds nothing on its node)."""
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    if not (pod.get("spec") or {}).get("nodeName") or phase in FINISHED:
        return False
    return not (pod["metadata"].get("deletionTimestamp") and phase == "Pending")


def overcommitted(pods: Iterable[dict[str, Any]], nodes: Iterable[dict[str, Any]]
                  ) -> list[str]:
    """Every (node, resource) whose bound pods request more than the node's allocatable, in
    words; empty when every node holds what it has."""
    allocatable = {node["metadata"]["name"]: allocatable_of(node) for node in nodes}
    totals: dict[str, dict[str, int]] = {}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if node not in allocatable or not holds_resources(pod):
            continue
        total = totals.setdefault(node, {"pods": 0})
        total["pods"] += 1
        for name, value in requests_of(pod).items():
            total[name] = total.get(name, 0) + value
    return [f"node {node}: {resource} requested {value} > allocatable "
            f"{allocatable[node].get(resource, 0)}"
            for node, total in sorted(totals.items()) for resource, value in sorted(total.items())
            if value > allocatable[node].get(resource, 0)]


def now() -> str:
    """The current time as the API server stores a timestamp (whole seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def running_status(pod: dict[str, Any]) -> dict[str, Any]:
    """The status kubelet writes when it starts the pod: started now."""
    container = pod["spec"]["containers"][0]
    started = now()
    return {"phase": "Running", "startTime": started,
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{
                "name": container["name"], "image": container["image"], "imageID": "",
                "ready": True, "restartCount": 0,
                "state": {"running": {"startedAt": started}}}]}


def refused_status(refusal: Refusal) -> dict[str, Any]:
    if refusal.reason == POD_GC["reason"]:
        return {"phase": "Failed", "conditions": [dict(POD_GC)]}
    return {"phase": "Failed", "reason": refusal.reason, "message": REJECTED + refusal.message}


def refusal_event(pod: dict[str, Any], refusal: Refusal) -> dict[str, Any]:
    metadata = pod["metadata"]
    at = now()
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{metadata['name']}.",
                         "namespace": metadata["namespace"]},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": metadata["name"],
                               "namespace": metadata["namespace"], "uid": metadata.get("uid")},
            "reason": refusal.reason, "message": refusal.message, "type": "Warning",
            "source": {"component": "kubelet", "host": refusal.node}, "count": 1,
            "firstTimestamp": at, "lastTimestamp": at}


class Kubelet:
    """Every node's kubelet for the pods of one namespace (another namespace's pods are
    another test's to start, but they count on the node as kubelet counts them), polling: a pod
    being deleted is removed (the final delete), a bound Pending pod is admitted
    (:class:`Admission`) and marked Running, or refused; pods finish when the test says so.

    ``pause()`` returns once no step is running and none will until ``resume()``. Each step
    also checks :func:`overcommitted` (after its deletes, before admitting): what it finds is
    in ``overcommits`` and fails :meth:`check`."""

    def __init__(self, apiserver, namespace: str, *, poll: float = 0.05):
        self.apiserver = apiserver
        self.namespace = namespace
        self.poll = poll
        self.started: list[str] = []
        self.removed: list[str] = []
        self.refused: list[Refusal] = []
        self.waiting: set[str] = set()  # bound to a node that is not Ready
        self.overcommits: list[str] = []
        self.errors: list[BaseException] = []
        self._paused = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="kubelet")

    def start(self) -> Kubelet:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        if self.errors:
            raise self.errors[0]

    def pause(self) -> None:
        with self._lock:
            self._paused = True

    def resume(self) -> None:
        self._paused = False

    def step_now(self) -> None:
        """One step at once, paused or not (a test that needs the kubelet to have acted)."""
        with self._lock:
            self.step()

    def check(self, *, refusals: bool = False) -> None:
        """Fail on an error of the stand-in, an over-committed node, or (unless ``refusals``)
        any pod kubelet refused for want of resources."""
        if self.errors:
            raise self.errors[0]
        assert not self.overcommits, self.overcommits
        if not refusals:
            short = [r for r in self.refused if r.reason.startswith("OutOf")]
            assert not short, short

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with self._lock:
                    if not self._paused:
                        self.step()
            except Exception as exc:  # noqa: BLE001 - kept, raised by stop() and check()
                self.errors.append(exc)
                return
            self._stop.wait(self.poll)

    def _write(self, method: str, path: str, body: Any = None, **options) -> bool:
        """False when the pod is gone (deleted between the LIST and this write)."""
        try:
            self.apiserver.request(method, path, body, **options)
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def step(self) -> None:
        every = self.apiserver.request("GET", "/api/v1/pods")["items"]  # kubelet counts all
        pods = [p for p in every if p["metadata"]["namespace"] == self.namespace]
        nodes = {n["metadata"]["name"]: n
                 for n in self.apiserver.request("GET", "/api/v1/nodes")["items"]}
        base = f"/api/v1/namespaces/{self.namespace}/pods"
        kept = []
        for pod in pods:
            name = pod["metadata"]["name"]
            if pod["metadata"].get("deletionTimestamp"):
                if self._write("DELETE", f"{base}/{name}", query=[("gracePeriodSeconds", "0")]):
                    self.removed.append(name)
            else:
                kept.append(pod)
        found = overcommitted(kept, nodes.values())
        self.overcommits.extend(f for f in found if f not in self.overcommits)
        admission = Admission(nodes)
        for pod in [*kept, *(p for p in every if p["metadata"]["namespace"] != self.namespace)]:
            admission.hold_if_running(pod)
        pending = [pod for pod in kept if pod["spec"].get("nodeName")
                   and (pod.get("status") or {}).get("phase", "Pending") == "Pending"]
        pending.sort(key=lambda p: (p["metadata"].get("creationTimestamp") or "",
                                    p["metadata"]["name"]))
        for pod in pending:  # kubelet admits in creation order
            name = pod["metadata"]["name"]
            if not admission.can_start(pod):
                self.waiting.add(name)
                continue
            self.waiting.discard(name)
            refusal = admission.admit(pod)
            status = running_status(pod) if refusal is None else refused_status(refusal)
            if not self._write("PATCH", f"{base}/{name}/status", {"status": status},
                               content_type="application/merge-patch+json"):
                continue
            if refusal is None:
                self.started.append(name)
                continue
            self.refused.append(refusal)
            if refusal.reason != POD_GC["reason"]:
                self.apiserver.request("POST", f"/api/v1/namespaces/{self.namespace}/events",
                                       refusal_event(pod, refusal))
