"""The real-API-server tier: one kube-apiserver + etcd per test session (``server.py``), the
product's backend driven through the official client under the least-privilege token of
``deploy/kubernetes/rbac.yaml``, and the test playing KAI and the kubelet as the admin.

Skipped, with the reason, only when the apiserver binary (``../shared/tools/kube``) is absent
(in CI, ``CI=true``, that absence fails instead).
Each test gets a namespace of its own (``OSMO_NAMESPACE``), so queue names, pods and PodGroups
never meet across tests; the server is thrown away at the end of the session.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from scheduler.backends.kubernetes.client import Kube
from tests import factories
from tests.conftest import make_client
from tests.k8s.conftest import Backend
from tests.shared_data import missing

from .kubelet import Admission, Kubelet, now, refused_status, running_status
from .osmo_placement import (
    SCHEDULER,
    Scheduler,
    delete_all_nodes,
    install_rbac,
    uninstall_cluster_rbac,
)
from .server import ApiServer, KubeError, unavailable_reason

_namespaces = itertools.count(1)


@pytest.fixture(scope="session")
def apiserver(tmp_path_factory):
    reason = unavailable_reason()
    if reason:
        missing(reason)  # in CI: a failure
    yield from served(ApiServer(tmp_path_factory.mktemp("kube-apiserver")))


@pytest.fixture(scope="module")
def west_apiserver(apiserver, tmp_path_factory):
    """A second real API server (another cluster, ``west``), for the fleet tests' module."""
    yield from served(ApiServer(tmp_path_factory.mktemp("kube-apiserver-west")))


def served(server: ApiServer):
    """A fixture's body for an API server: started, yielded, stopped (also when its start
    failed half-way)."""
    try:
        server.start()
    except Exception:
        server.stop()
        raise
    yield server
    server.stop()


@pytest.fixture
def namespace(apiserver) -> str:
    name = f"osmo-t{next(_namespaces)}"
    apiserver.namespace(name)
    return name


@pytest.fixture
def k8s_settings(settings, apiserver, namespace):
    settings.OSMO_CLUSTER_BACKEND = "kubernetes"
    settings.OSMO_KAI_SYNC = False  # the dispatcher syncs a missing queue itself
    settings.OSMO_NAMESPACE = namespace
    settings.OSMO_SCHEDULER_NAME = "kai-scheduler"
    settings.OSMO_KAI_KUBECONFIG = str(apiserver.backend_kubeconfig)
    return settings


@pytest.fixture
def backend(apiserver, k8s_settings, db):
    kube = Kube(apiserver.backend_client())
    # A watch lasts one second: everything that happened before it started comes at once.
    yield Backend(kube, watch_timeout=1)
    kube.close()


class Cluster:
    """The test's hands on the cluster, as the admin: read objects, and act as KAI (bind,
    preempt) and as the kubelet (admission and pod status, graceful and final deletes)."""

    def __init__(self, server: ApiServer, namespace: str):
        self.server = server
        self.namespace = namespace
        self.added: list[str] = []

    def _path(self, plural: str, name: str = "") -> str:
        base = {"pods": "/api/v1", "services": "/api/v1", "secrets": "/api/v1",
                "podgroups": "/apis/scheduling.run.ai/v2alpha2"}[plural]
        path = f"{base}/namespaces/{self.namespace}/{plural}"
        return f"{path}/{name}" if name else path

    def get(self, plural: str, name: str) -> dict | None:
        try:
            return self.server.request("GET", self._path(plural, name))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def names(self, plural: str) -> list[str]:
        body = self.server.request("GET", self._path(plural))
        return sorted(item["metadata"]["name"] for item in body["items"])

    def queues(self) -> dict[str, dict]:
        body = self.server.request("GET", "/apis/scheduling.run.ai/v2/queues")
        return {q["metadata"]["name"]: q for q in body["items"]}

    # --- KAI ---------------------------------------------------------------------------------
    def bind(self, pod: str, node: str) -> None:
        self.server.request("POST", self._path("pods", pod) + "/binding", {
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": pod, "namespace": self.namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}})

    def unschedulable(self, pod: str, message: str) -> None:
        self._status(pod, {"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": message}]})

    def preempt(self, pod: str, message: str = "preempted by a higher priority job", *,
                reason: str = "PreemptionByScheduler") -> None:
        """What KAI's evictor does: a DisruptionTarget condition through a strategic merge
        patch of pods/status, then a (graceful) delete."""
        self.server.request("PATCH", self._path("pods", pod) + "/status", {"status": {
            "conditions": [{"type": "DisruptionTarget", "status": "True",
                            "reason": reason, "message": message}]}},
            content_type="application/strategic-merge-patch+json")
        self.server.request("DELETE", self._path("pods", pod))

    # --- kubelet -----------------------------------------------------------------------------
    def _status(self, pod: str, status: dict) -> None:
        self.server.request("PATCH", self._path("pods", pod) + "/status", {"status": status},
                            content_type="application/merge-patch+json")

    def run(self, pod: str, node: str | None = None) -> None:
        """Bind (when ``node`` is given) and start the pod as its node's kubelet would: the
        kubelet's admission first (``kubelet.Admission``, over every running pod on the node).
        A pod it would refuse gets the kubelet's Failed status, and the test fails here."""
        if node is not None:
            self.bind(pod, node)
        current = self.get("pods", pod)
        nodes = {n["metadata"]["name"]: n
                 for n in self.server.request("GET", "/api/v1/nodes")["items"]}
        admission = Admission(nodes)
        for other in self.server.request("GET", "/api/v1/pods")["items"]:
            if (other["metadata"]["namespace"], other["metadata"]["name"]) != (
                    self.namespace, pod):
                admission.hold_if_running(other)
        assert admission.can_start(current), \
            f"node {current['spec']['nodeName']} is not Ready: no kubelet starts {pod}"
        refusal = admission.admit(current)
        if refusal is not None:
            self._status(pod, refused_status(refusal))
            raise AssertionError(f"the kubelet refuses {pod} on {refusal.node}: "
                                 f"{refusal.reason}: {refusal.message}")
        self._status(pod, running_status(current))

    def finish(self, pod: str, exit_code: int = 0) -> None:
        current = self.get("pods", pod)
        container = current["spec"]["containers"][0]
        started = (current.get("status") or {}).get("startTime") or now()
        self._status(pod, {"phase": "Succeeded" if exit_code == 0 else "Failed",
                           "containerStatuses": [{
                               "name": container["name"], "image": container["image"],
                               "imageID": "", "ready": False, "restartCount": 0,
                               "state": {"terminated": {
                                   "exitCode": exit_code,
                                   "reason": "Completed" if exit_code == 0 else "Error",
                                   "startedAt": started, "finishedAt": now()}}}]})

    def delete_pod(self, pod: str, *, final: bool = False) -> None:
        """A graceful delete (a bound pod stays Terminating: no kubelet confirms it), or the
        final one the kubelet (or a force delete) makes."""
        query = [("gracePeriodSeconds", "0")] if final else None
        self.server.request("DELETE", self._path("pods", pod), query=query)

    # --- nodes -------------------------------------------------------------------------------
    def add_node(self, name: str, *, gpus: int, cpu: str = "64", memory: str = "512Gi",
                 pods: int = 110, labels: dict[str, str] | None = None,
                 ready: bool | None = True, unschedulable: bool = False,
                 taints: list[dict[str, str]] | None = None) -> None:
        """A Node (nodes are cluster-wide: the fixture deletes those a test added); ``ready``
        None: it states no Ready condition yet."""
        self.added.append(name)
        self.server.request("POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                  **(labels or {})}},
            "spec": {"unschedulable": unschedulable, "taints": taints or []}})
        capacity = {"nvidia.com/gpu": str(gpus), "cpu": cpu, "memory": memory, "pods": str(pods)}
        self.server.request("PATCH", f"/api/v1/nodes/{name}/status", {"status": {
            "capacity": capacity, "allocatable": capacity,
            "conditions": [] if ready is None else [
                {"type": "Ready", "status": "True" if ready else "False",
                 "reason": "KubeletReady", "message": "test"}]}},
            content_type="application/merge-patch+json")

    def delete_node(self, name: str) -> None:
        self.server.request("DELETE", f"/api/v1/nodes/{name}")


@pytest.fixture
def cluster(apiserver, namespace):
    hands = Cluster(apiserver, namespace)
    yield hands
    # What the pod collector does once the test's nodes are gone: their pods go too, so a
    # later test's node of the same name does not count them (kubelet counts every namespace).
    apiserver.request("DELETE", f"/api/v1/namespaces/{namespace}/pods",
                      query=[("gracePeriodSeconds", "0")])
    # And what the cleaner does when a workflow ends: its PodGroups go. A later test reuses
    # the workflow names (its database starts empty), and KAI v0.17 confuses two PodGroups of
    # one name in two namespaces: it evicted for a stale one and wrote the Evict Event there.
    apiserver.request(
        "DELETE", f"/apis/scheduling.run.ai/v2alpha2/namespaces/{namespace}/podgroups")
    for name in hands.added:
        try:
            hands.delete_node(name)
        except KubeError as exc:  # the test deleted it already
            if exc.status != 404:
                raise


@pytest.fixture
def alice(db):
    return make_client("alice", "osmo-team-user")


@pytest.fixture
def admin(db):
    return make_client("root", "osmo-admin")


@pytest.fixture
def team(db):
    return factories.pool("team", 64)


def wait_for(predicate, timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# --- OSMO_PLACEMENT=osmo: our scheduler stepped by the test ----------------------------------

@pytest.fixture
def osmo_settings(k8s_settings):
    k8s_settings.OSMO_PLACEMENT = "osmo"
    k8s_settings.OSMO_SCHEDULER_NAME = SCHEDULER
    return k8s_settings


@pytest.fixture
def kubelet(apiserver, namespace):
    """The kubelet stand-in; at the end, the test fails if it saw a node hold more than its
    allocatable, refused a pod for want of resources, or broke."""
    stand_in = Kubelet(apiserver, namespace).start()
    yield stand_in
    stand_in.stop()
    stand_in.check()


@pytest.fixture
def sched(apiserver, namespace, osmo_settings, kubelet):
    install_rbac(apiserver, namespace)
    delete_all_nodes(apiserver)  # nodes are cluster-wide: this test's cluster starts empty
    scheduler = Scheduler(apiserver, namespace)
    yield scheduler
    scheduler.stop()
    delete_all_nodes(apiserver)
    uninstall_cluster_rbac(apiserver)  # the session's other tests hold the base RBAC only


# --- OSMO_PLACEMENT=kai on the real KAI Scheduler --------------------------------------------

@pytest.fixture(scope="module")
def kai(apiserver, tmp_path_factory):
    """The real KAI scheduler and binder, one per test module, stopped by PID at its end."""
    yield from kai_served(apiserver, tmp_path_factory.mktemp("kai"))


def kai_served(apiserver: ApiServer, run_dir):
    """A fixture's body for the real KAI on ``apiserver``: started on an empty cluster (nodes
    are cluster-wide), yielded, stopped (also when its start failed half-way)."""
    from .kai import Kai
    from .kai import unavailable_reason as kai_unavailable

    reason = kai_unavailable()
    if reason:
        missing(reason)  # in CI: a failure
    delete_all_nodes(apiserver)
    scheduler = Kai(apiserver, run_dir)
    try:
        scheduler.start()
    except Exception:
        scheduler.stop()
        raise
    yield scheduler
    scheduler.stop()
    delete_all_nodes(apiserver)


@pytest.fixture
def kai_cluster(kai, apiserver, namespace, k8s_settings, kubelet):
    """A test's namespace as KAI needs it (the root CA's ConfigMap), the kubelet stand-in
    running; the test fails if a KAI process ended meanwhile."""
    from .kai import prepare_namespace

    prepare_namespace(apiserver, namespace)
    yield kai
    kai.check()
