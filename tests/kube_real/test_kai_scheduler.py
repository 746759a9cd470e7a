"""The product's default placement on the real KAI Scheduler (v0.17.0, ``kai.py``): one API
server and one KAI (scheduler + binder) for the module; the backend dispatches, KAI binds, the
kubelet stand-in starts the pods, and the listener turns them into task statuses."""

from __future__ import annotations

import time

import pytest

from scheduler.backends.kubernetes.nodes import inventory
from scheduler.core.kai_names import (
    DEFAULT_TOPOLOGY_NAME,
    HOSTNAME_LABEL,
    RACK_LABEL,
    ZONE_LABEL,
)
from tests import factories
from tests.k8s.conftest import spec, statuses, submit

from .conftest import wait_for
from .kai import add_node

pytestmark = pytest.mark.django_db


def why_pending(cluster) -> dict[str, str]:
    """The PodScheduled message KAI left on each pod of the namespace that is not bound."""
    body = cluster.server.request("GET", cluster._path("pods"))
    return {p["metadata"]["name"]: c.get("message", "")
            for p in body["items"] for c in (p.get("status") or {}).get("conditions") or []
            if c["type"] == "PodScheduled" and c["status"] == "False"}


def settle(backend, alice, name: str, expected: tuple[str, list[str]], cluster=None,
           timeout: float = 30):
    """Step the listener until the workflow shows ``expected``."""
    def seen():
        backend.listen()
        return statuses(alice, name) == expected
    try:
        wait_for(seen, timeout, what=f"{name} to be {expected}")
    except AssertionError:
        raise AssertionError(f"{name} is {statuses(alice, name)}, not {expected}; KAI: "
                             f"{why_pending(cluster) if cluster else '?'}") from None


def test_a_workflow_is_bound_by_kai_runs_and_succeeds(kai_cluster, backend, cluster, alice,
                                                      team) -> None:
    add_node(cluster, "n1", gpus=8)
    name = submit(alice, "team", spec("train", gpus=4, tasks=2))
    assert backend.dispatch().applied == [f"{name}-g"]
    settle(backend, alice, name, ("RUNNING", ["RUNNING", "RUNNING"]), cluster)
    pods = [cluster.get("pods", f"{name}-g-t{i}") for i in range(2)]
    assert [p["spec"]["nodeName"] for p in pods] == ["n1", "n1"]
    for i in range(2):
        cluster.finish(f"{name}-g-t{i}")
    settle(backend, alice, name, ("COMPLETED", ["COMPLETED", "COMPLETED"]))


RACK_SPEC = """
workflow:
  name: ranks
  groups:
  - name: g
    scheduling:
      topologyConstraint: {requiredTopologyLevel: rack}
    tasks:
    - {name: w, image: nvcr.io/x:1, command: [train], resource: r, replicas: 8, lead: true}
  resources:
    r: {gpu: 8, cpu: 2, memory: 8Gi}
"""


def test_a_rack_constraint_puts_the_whole_gang_on_one_rack(kai_cluster, backend, cluster,
                                                           alice, team) -> None:
    # Racks of 4, 4 and 8 nodes of 8 GPUs (no block labels, as on most clusters): only r3
    # holds 8 × 8 GPUs, and its nodes come last by name.
    racks = {"r1": [f"a{i}" for i in range(4)], "r2": [f"b{i}" for i in range(4)],
             "r3": [f"c{i}" for i in range(8)]}
    for rack, names in racks.items():
        for node in names:
            add_node(cluster, node, gpus=8, labels={RACK_LABEL: rack, ZONE_LABEL: "z1"})
    inventory(backend.kube)  # the node mirror: the Topology lists the levels nodes carry
    name = submit(alice, "team", RACK_SPEC)
    podgroup_name = f"{name}-g"
    assert backend.dispatch().applied == [podgroup_name]
    constraint = cluster.get("podgroups", podgroup_name)["spec"]["topologyConstraint"]
    assert constraint == {"requiredTopologyLevel": RACK_LABEL,
                          "topology": DEFAULT_TOPOLOGY_NAME}
    topology = cluster.server.request(
        "GET", f"/apis/kai.scheduler/v1alpha1/topologies/{DEFAULT_TOPOLOGY_NAME}")
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == \
        [ZONE_LABEL, RACK_LABEL, HOSTNAME_LABEL]
    settle(backend, alice, name, ("RUNNING", ["RUNNING"] * 8), cluster)
    nodes = sorted(cluster.get("pods", f"{name}-g-w-{i}")["spec"]["nodeName"]
                   for i in range(8))
    assert nodes == racks["r3"]


def event_lines(alice, name: str) -> list[str]:
    response = alice.get(f"/api/workflow/{name}/events")
    assert response.status_code == 200
    return b"".join(response.streaming_content).decode().splitlines()


def low_gang_then_normal(backend, cluster, low_client, low_pool: str, alice) -> tuple[str, str]:
    """Two 4-GPU LOW pods fill the one 8-GPU node; then an 8-GPU NORMAL workflow of alice's
    in `team` runs there. Both names, once the NORMAL one runs."""
    add_node(cluster, "n1", gpus=8)
    low = submit(low_client, low_pool, spec("filler", gpus=4, tasks=2), priority="LOW")
    assert backend.dispatch().applied == [f"{low}-g"]
    settle(backend, low_client, low, ("RUNNING", ["RUNNING", "RUNNING"]), cluster)
    normal = submit(alice, "team", spec("train", gpus=8))
    assert backend.dispatch().applied == [f"{normal}-g"]
    settle(backend, alice, normal, ("RUNNING", ["RUNNING"]), cluster)
    return low, normal


def wait_preempted(backend, client, low: str) -> list[str]:
    """The LOW gang ends preempted (its first task seen, the other canceled); the task
    events that name the preemptor."""
    def ended():
        backend.listen()
        status, tasks = statuses(client, low)
        return status == "FAILED_PREEMPTED" and sorted(tasks) == ["FAILED_CANCELED",
                                                                  "FAILED_PREEMPTED"]
    try:
        wait_for(ended, 30, what=f"{low} preempted")
    except AssertionError:
        raise AssertionError(f"{low} is {statuses(client, low)}, not preempted; its events: "
                             f"{event_lines(client, low)}") from None
    preempted = [line for line in event_lines(client, low) if "PreemptedBy" in line]
    assert len(preempted) == 1, event_lines(client, low)
    return preempted


def test_kai_preempts_low_work_for_a_normal_workflow_and_the_tasks_say_so(
        kai_cluster, backend, cluster, alice, team, namespace) -> None:
    # KAI deletes both LOW pods (no condition on them: only its Evict Event on the PodGroup);
    # the first one the listener sees ends preempted, and the gang's other task is canceled.
    low, normal = low_gang_then_normal(backend, cluster, alice, "team", alice)
    preempted = wait_preempted(backend, alice, low)
    assert alice.get(f"/api/workflow/{low}").json()["reason"] == "preempted"
    assert f"KAI preempt for PodGroup {namespace}/{normal}-g" in preempted[0]


def test_a_gang_that_does_not_fit_starts_no_pod_until_it_does(kai_cluster, backend, cluster,
                                                                alice, team) -> None:
    add_node(cluster, "n1", gpus=8)
    name = submit(alice, "team", spec("gang", gpus=4, tasks=3))
    pods = [f"{name}-g-t{i}" for i in range(3)]
    assert backend.dispatch().applied == [f"{name}-g"]
    # KAI says why on every pod, and binds none (two of the three would fit).
    wait_for(lambda: set(why_pending(cluster)) == set(pods), 20, what="KAI's reasons")
    time.sleep(3)  # three more scheduling cycles of KAI's
    assert [cluster.get("pods", pod)["spec"].get("nodeName") for pod in pods] == [None] * 3
    backend.listen()
    assert statuses(alice, name) == ("PENDING", ["SCHEDULING"] * 3)
    add_node(cluster, "n2", gpus=8)
    settle(backend, alice, name, ("RUNNING", ["RUNNING"] * 3), cluster)


def test_kai_reclaims_another_pool_s_low_work_for_a_workflow_within_quota(
        kai_cluster, backend, cluster, alice, admin, team, namespace) -> None:
    factories.pool("spare", 0)  # LOW work runs there on what nobody else uses
    low, normal = low_gang_then_normal(backend, cluster, admin, "spare", alice)
    preempted = wait_preempted(backend, admin, low)
    assert f"KAI reclaim for PodGroup {namespace}/{normal}-g" in preempted[0]
