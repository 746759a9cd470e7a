"""KAI, the backstop in each cluster, never guarantees a pool more GPUs across its clusters
than its quota (docs/SCHEDULING.md "Each cluster's queues"): two real API servers, each with
its agent and the real KAI Scheduler (scheduler + binder) placing the pods, a pool of quota 8
on both. OSMO admission lets 8 guaranteed GPUs run; each cluster's queues hold the share of
the quota its work holds. Non-preemptible work written straight into either cluster's queue —
past OSMO admission — is then refused by KAI in both, while preemptible work of the same queue
still runs on the free GPUs (so the refusal is the quota's, not a stalled KAI)."""

from __future__ import annotations

import time

import pytest

from scheduler.backends import services as backend_services
from scheduler.models import Node
from tests import factories
from tests.k8s.conftest import spec, statuses, submit
from workflows.models import WorkflowGroup

from .agent import install_agent_rbac, wait_until
from .conftest import Cluster, kai_served
from .kai import add_node, prepare_namespace
from .kubelet import Kubelet
from .test_agent import agent_of

pytestmark = pytest.mark.timeout(300)
QUOTA = 8
GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def west_kai(west_apiserver, tmp_path_factory):
    yield from kai_served(west_apiserver, tmp_path_factory.mktemp("kai-west"))


def leaf_queue(cluster: Cluster, pool: str) -> dict:
    """The pool's `.shared` leaf Queue in that cluster (Queues are cluster-wide: the names
    carry the namespace)."""
    queues = cluster.queues()
    name = f"osmo-pool-{cluster.namespace}-{pool}.shared"
    assert name in queues, sorted(queues)
    return queues[name]


def gpu_quota(queue: dict) -> int:
    return int(queue["spec"]["resources"]["gpu"]["quota"])


def outsider(cluster: Cluster, name: str, queue: str, priority_class: str, gpus: int) -> None:
    """A gang of one pod written straight into the cluster, as a user with access to it
    could, past OSMO admission: a PodGroup in the pool's queue and its pod."""
    server, namespace = cluster.server, cluster.namespace
    server.create({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                   "metadata": {"name": name, "namespace": namespace},
                   "spec": {"minMember": 1, "queue": queue,
                            "priorityClassName": priority_class}})
    server.create({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": namespace,
                                "annotations": {"pod-group-name": name},
                                "labels": {"kai.scheduler/queue": queue}},
                   "spec": {"schedulerName": "kai-scheduler",
                            "priorityClassName": priority_class,
                            "containers": [{"name": "main", "image": "busybox",
                                            "resources": {"requests": {GPU: str(gpus)},
                                                          "limits": {GPU: str(gpus)}}}]}})


def bound_gpus(cluster: Cluster, priority_classes: set[str]) -> int:
    """GPUs the cluster's bound pods of these priority classes request."""
    body = cluster.server.request("GET", cluster._path("pods"))
    return sum(int(container["resources"]["requests"].get(GPU, 0))
               for pod in body["items"]
               if pod["spec"].get("nodeName")
               and pod["spec"].get("priorityClassName") in priority_classes
               and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
               for container in pod["spec"]["containers"])


def node_of(cluster: Cluster, pod: str) -> str | None:
    return (cluster.get("pods", pod) or {}).get("spec", {}).get("nodeName")


def test_kai_never_guarantees_a_pool_more_than_its_quota_across_clusters(
        kai, west_kai, apiserver, west_apiserver, k8s_settings, namespace, transactional_db,
        live_server, tmp_path, cluster, alice):
    west_apiserver.namespace(namespace)
    west = Cluster(west_apiserver, namespace)
    for server, name in ((apiserver, "east"), (west_apiserver, "west")):
        prepare_namespace(server, namespace)
        install_agent_rbac(server, namespace)
        backend_services.backend_upsert(name=name, kind="kubernetes", k8s_namespace=namespace)
    kubelets = [Kubelet(apiserver, namespace).start(), Kubelet(west_apiserver, namespace).start()]
    agents = [agent_of(apiserver, live_server, tmp_path, "east"),
              agent_of(west_apiserver, live_server, tmp_path, "west")]
    for node in ("east-n1", "east-n2"):
        add_node(cluster, node, gpus=8)
    for node in ("west-n1", "west-n2"):
        add_node(west, node, gpus=8)
    factories.pool("team", QUOTA, backends=["east", "west"])
    clusters = {"east": cluster, "west": west}
    try:
        for agent in agents:
            agent.start()
        wait_until(lambda: Node.objects.count() == 4, 30, "both mirrors", agents[1])
        # OSMO admission: two guaranteed gangs of 4 GPUs, the quota's worth, run.
        names = [submit(alice, "team", spec(f"w{i}", gpus=4)) for i in range(2)]
        for name in names:
            wait_until(lambda name=name: statuses(alice, name) == ("RUNNING", ["RUNNING"]), 90,
                       f"{name} placed by KAI and running", agents[0])
        held = {backend: 0 for backend in clusters}
        for group in WorkflowGroup.objects.filter(workflow__name__in=names):
            held[group.backend] += 4
        # Each cluster's leaf queue holds what its work holds; the shares sum to the quota.
        shares = {"east": held["east"] + QUOTA - sum(held.values()), "west": held["west"]}
        wait_until(lambda: {b: gpu_quota(leaf_queue(c, "team")) for b, c in clusters.items()}
                   == shares, 30, "each cluster's share", agents[0])
        assert sum(gpu_quota(leaf_queue(c, "team")) for c in clusters.values()) == QUOTA
        # A third guaranteed gang over the quota is sent to one cluster and waits in its
        # queue there: its share is what the work there holds, not the other's.
        third = submit(alice, "team", spec("w2", gpus=4))
        third_pod = f"{third}-g-t0"
        wait_until(lambda: any(third_pod in c.names("pods") for c in clusters.values()), 30,
                   "the third gang sent", agents[0])
        sent = WorkflowGroup.objects.get(workflow__name=third).backend
        assert {b: third_pod in c.names("pods") for b, c in clusters.items()} == {
            b: b == sent for b in clusters}
        assert {b: gpu_quota(leaf_queue(c, "team")) for b, c in clusters.items()} == shares
        # Past admission: non-preemptible work straight into each cluster's queue is refused
        # by KAI there — each cluster has 8 GPUs free — while preemptible work still runs.
        for backend, target in clusters.items():
            queue = leaf_queue(target, "team")["metadata"]["name"]
            outsider(target, f"guaranteed-{backend}", queue, "osmo-normal", 4)
            outsider(target, f"opportunist-{backend}", queue, "osmo-low", 4)
        for backend, target in clusters.items():
            wait_until(lambda t=target, b=backend: node_of(t, f"opportunist-{b}") is not None,
                       60, f"the preemptible outsider bound in {backend}", agents[0])
        time.sleep(5)  # several more KAI cycles in each cluster
        for backend, target in clusters.items():
            assert node_of(target, f"guaranteed-{backend}") is None, backend
        assert node_of(clusters[sent], third_pod) is None
        assert statuses(alice, third) == ("PENDING", ["SCHEDULING"])
        guaranteed = sum(bound_gpus(c, {"osmo-normal", "osmo-high"}) for c in clusters.values())
        assert guaranteed == QUOTA
    finally:
        for agent in agents:
            agent.stop()
        for stand_in in kubelets:
            stand_in.stop()
        for target in clusters.values():
            for plural in ("pods", "podgroups"):
                target.server.request("DELETE", target._path(plural),
                                      query=[("gracePeriodSeconds", "0")])
    for stand_in in kubelets:
        stand_in.check()
