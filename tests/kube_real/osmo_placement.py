"""Helpers of the ``OSMO_PLACEMENT=osmo`` tests: the scheduler's RBAC, the scheduler stepped by
the test, and KAI objects made by "another user" (the kubelet stand-in is in ``kubelet.py``)."""

from __future__ import annotations

import copy
import time
from typing import Any

from scheduler.backends.kubernetes.cache import ClusterCache
from scheduler.backends.kubernetes.client import Kube
from scheduler.backends.kubernetes.placement import Placement
from scheduler.core import SchedulerConfig
from scheduler.core.readiness import InvalidGang, build_tree, is_ready, ready_counts

from .server import DEPLOY, KubeError, load_documents

SCHEDULER = "osmo-scheduler"
PLACEMENT_RBAC = DEPLOY / "placement-osmo" / "rbac.yaml"


def _ready(gang) -> bool:
    try:
        tree = build_tree(gang)
    except InvalidGang:
        return False
    return is_ready(tree, ready_counts(tree))


def install_rbac(apiserver, namespace: str) -> None:
    """The placement's RBAC as shipped: cluster-wide parts once, the Role into ``namespace``."""
    for doc in load_documents(PLACEMENT_RBAC):
        doc = copy.deepcopy(doc)
        if doc["kind"] in ("Role", "RoleBinding"):
            doc["metadata"]["namespace"] = namespace
        apiserver.create(doc, exist_ok=True)


def uninstall_cluster_rbac(apiserver) -> None:
    try:
        apiserver.request("DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/"
                                    "osmo-scheduler")
    except KubeError:
        pass


def delete_all_nodes(apiserver) -> None:
    for node in apiserver.request("GET", "/api/v1/nodes")["items"]:
        try:
            apiserver.request("DELETE", f"/api/v1/nodes/{node['metadata']['name']}")
        except KubeError:
            pass


class Scheduler:
    """The placement over the backend's least-privilege client, its informers running, its
    cycles stepped by the test."""

    def __init__(self, apiserver, namespace: str, config: SchedulerConfig | None = None):
        self.running = True
        self.cache = ClusterCache(lambda: Kube(apiserver.backend_client()),
                                  namespace=namespace, watch_timeout=30)
        self.kube = Kube(apiserver.backend_client())
        self.placement = Placement(self.kube, self.cache, scheduler_name=SCHEDULER,
                                   config=config)
        self.cache.start(lambda: self.running)
        assert self.cache.wait_synced(20), "the scheduler's cache did not sync"

    def cycle(self):
        figures = self.placement.cycle()
        assert not (unexplained := self.unexplained()), (
            f"pending gangs neither placed nor explained: {unexplained}; "
            f"last cycle: {self.placement.last_result.to_dict()}")
        return figures

    def unexplained(self) -> list[str]:
        """The gangs below their minimum (KAI's readiness over bound pods) that the last cycle
        neither placed, made room for, evicted, nor explained: every pending gang must be told
        why it waits."""
        result, index = self.placement.last_result, self.placement.last_index
        told = ({binding.gang for binding in result.bindings}
                | {explanation.gang for explanation in result.explanations}
                | {action.by_gang for action in (*result.moves, *result.evictions)}
                | {eviction.gang for eviction in result.evictions} | set(index.skipped))
        return sorted(name for name, gang in index.gangs.items()
                      if name not in told and not _ready(gang))

    def until(self, predicate, *, timeout: float = 20.0, what: str = "condition") -> Any:
        """Cycle until ``predicate()`` holds (the cache catches up between cycles)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.cycle()
            value = predicate()
            if value:
                return value
            time.sleep(0.05)
        result = self.placement.last_result
        # A cycle's result holds what that cycle did: where earlier ones bound is in the cache.
        pods = {pod["metadata"]["name"]: ((pod.get("spec") or {}).get("nodeName"),
                                          pod["metadata"].get("deletionTimestamp"))
                for pod in self.cache.pods.items()
                if pod["metadata"].get("namespace") == self.cache.namespace}
        raise AssertionError(f"timed out waiting for {what}; pods (node, deleting): {pods}; "
                             f"last cycle: {result.to_dict() if result else None}; "
                             f"skipped: {self.placement.last_index.skipped}; nodes: "
                             f"{self.cache.nodes.items()} "
                             f"rv {self.cache.nodes.resource_version}")

    def settle(self, seconds: float = 0.5) -> None:
        """Cycle for a while (to show that something does NOT happen)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.cycle()
            time.sleep(0.05)

    def stop(self) -> None:
        self.running = False
        self.cache.stop()
        self.placement.close()
        self.kube.close()


# --- objects "another user" makes ------------------------------------------------------------

def queue(name: str, *, parent: str | None = None, quota: int = -1, limit: int = -1,
          priority: int | None = None) -> dict:
    spec: dict[str, Any] = {"resources": {
        "gpu": {"quota": quota, "limit": limit, "overQuotaWeight": 1},
        "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
        "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1}}}
    if parent:
        spec["parentQueue"] = parent
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name},
            "spec": spec}


def podgroup(namespace: str, name: str, queue_name: str, *, min_member: int | None = None,
             priority_class: str = "osmo-normal", **spec_fields) -> dict:
    spec: dict[str, Any] = {"queue": queue_name, "priorityClassName": priority_class}
    if min_member is not None:
        spec["minMember"] = min_member
    spec.update(spec_fields)
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def pod(namespace: str, name: str, group: str, queue_name: str, *, gpus: int = 1,
        subgroup: str | None = None, priority_class: str = "osmo-normal",
        scheduler: str = SCHEDULER, node_selector: dict | None = None) -> dict:
    labels = {"kai.scheduler/queue": queue_name}
    if subgroup:
        labels["kai.scheduler/subgroup-name"] = subgroup
    spec: dict[str, Any] = {
        "schedulerName": scheduler, "priorityClassName": priority_class,
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox", "resources": {
            "requests": {"nvidia.com/gpu": str(gpus), "cpu": "1", "memory": "1Gi"},
            "limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "annotations": {"pod-group-name": group}},
            "spec": spec}


def node_of(apiserver, namespace: str, name: str) -> str | None:
    try:
        found = apiserver.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    except KubeError as exc:
        if exc.status == 404:
            return None
        raise
    return found["spec"].get("nodeName")


def events_for(apiserver, namespace: str, name: str) -> list[dict]:
    items = apiserver.request("GET", f"/api/v1/namespaces/{namespace}/events")["items"]
    return [e for e in items if e["involvedObject"]["name"] == name]


# --- reading and making the cluster's pods ---------------------------------------------------

def n(namespace: str, i: int) -> str:
    """Node names are cluster-wide and pods of earlier tests stay bound to theirs: one set of
    names per test."""
    return f"{namespace}-n{i}"


def bound(apiserver, namespace, names) -> dict[str, str | None]:
    return {name: node_of(apiserver, namespace, name) for name in names}


def all_bound(apiserver, namespace, names) -> bool:
    return all(bound(apiserver, namespace, names).values())


def make_queue(apiserver, namespace: str, suffix: str = "q", **fields) -> str:
    name = f"{namespace}-{suffix}"
    apiserver.create(queue(name, **fields), exist_ok=True)
    return name


def create_gang(apiserver, namespace: str, name: str, q: str, *, pods: int, gpus: int,
                min_member: int | None = None, priority_class: str = "osmo-normal",
                **spec_fields) -> list[str]:
    apiserver.create(podgroup(namespace, name, q, min_member=min_member,
                              priority_class=priority_class, **spec_fields))
    names = [f"{name}-{i}" for i in range(pods)]
    for pod_name in names:
        apiserver.create(pod(namespace, pod_name, name, q, gpus=gpus,
                             priority_class=priority_class))
    return names


def running(apiserver, namespace: str, names) -> bool:
    for name in names:
        try:
            found = apiserver.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        except KubeError:
            return False
        if found["status"].get("phase") != "Running":
            return False
    return True


def gone(apiserver, namespace: str, names) -> bool:
    return all(node_of(apiserver, namespace, name) is None and not exists(apiserver, namespace,
                                                                            name)
               for name in names)


def exists(apiserver, namespace: str, name: str) -> bool:
    try:
        apiserver.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        return True
    except KubeError as exc:
        if exc.status == 404:
            return False
        raise
