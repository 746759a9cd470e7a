"""A pod and a Node are read once, by ``scheduler.core.decode``: the scheduler's reading (the
core Pod the snapshots build, a Node's schedulability), the pod grouper's (a group's GPUs),
admission's (the task rows charged to quota, which the embedded loop schedules) and the Node
table's (``/api/cluster/nodes``, the pools' node sets) agree on the same objects — init
containers, sidecars, limits-only requests, Nodes not Ready, tainted or cordoned."""

from __future__ import annotations

import pytest
from django.utils import timezone

from scheduler.backends.embedded.snapshot import build_snapshot
from scheduler.backends.kubernetes.nodes import node_fields
from scheduler.core.decode import node_allocatable, node_schedulable, pod_of
from scheduler.podgrouper import group_workload
from workflows.models import Task, Workflow

GiB = 2**30


def pod(name: str, containers: list[dict], init: list[dict] | None = None,
        overhead: dict | None = None) -> dict:
    spec = {"containers": [{"name": f"c{i}", "image": "busybox", **c}
                           for i, c in enumerate(containers)]}
    if init:
        spec["initContainers"] = [{"name": f"i{i}", "image": "busybox", **c}
                                  for i, c in enumerate(init)]
    if overhead:
        spec["overhead"] = overhead
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def res(requests: dict | None = None, limits: dict | None = None, **extra) -> dict:
    resources = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"resources": resources, **extra}


SIDECAR = {"restartPolicy": "Always"}

# (pod, (GPUs, millicores, bytes) as Kubernetes counts its effective request)
PODS = [
    # a large init container: it runs alone, before the main one
    (pod("init-large", [res({"cpu": "1", "memory": "1Gi"}, {"nvidia.com/gpu": "2"})],
         init=[res({"cpu": "4", "memory": "8Gi"}, {"nvidia.com/gpu": "6"})]),
     (6, 4000, 8 * GiB)),
    # a sidecar (an init container that keeps running) is summed with the main containers
    (pod("sidecar", [res({"cpu": "1", "memory": "1Gi"}, {"nvidia.com/gpu": "2"})],
         init=[res({"cpu": "500m", "memory": "512Mi"}, {"nvidia.com/gpu": "1"}, **SIDECAR)]),
     (3, 1500, GiB + GiB // 2)),
    # an init container after a sidecar runs beside it: 3 + 1 CPUs is more than 2 + 1
    (pod("init-after-sidecar", [res({"cpu": "2", "memory": "1Gi"})],
         init=[res({"cpu": "1", "memory": "1Gi"}, **SIDECAR),
               res({"cpu": "3", "memory": "1Gi"})]),
     (0, 4000, 2 * GiB)),
    # limits only: the API server copies each limit into the missing request
    (pod("limits-only", [res(limits={"cpu": "2", "memory": "3Gi", "nvidia.com/gpu": "4"})]),
     (4, 2000, 3 * GiB)),
    # a request that is stated wins over its limit
    (pod("requests-and-limits", [res({"cpu": "250m"}, {"cpu": "1", "memory": "2Gi"})]),
     (0, 250, 2 * GiB)),
    # the RuntimeClass' overhead is added to the pod's request
    (pod("overhead", [res({"cpu": "1", "memory": "1Gi"})],
         overhead={"cpu": "250m", "memory": "128Mi"}),
     (0, 1250, GiB + 128 * 2**20)),
]


@pytest.mark.parametrize(("manifest", "expected"), PODS,
                         ids=[p["metadata"]["name"] for p, _ in PODS])
def test_every_path_reads_a_pod_alike(team, user, manifest, expected):
    scheduler = pod_of("p", manifest, None, subgroups=False)
    assert (scheduler.gpus, scheduler.cpu, scheduler.memory) == expected

    grouping = group_workload(manifest, namespace="osmo", default_queue="q")
    assert [group.gpus for group in grouping.groups] == [expected[0]]

    response = user.post("/api/pool/team/workload?priority=HIGH", manifest, format="json")
    assert response.status_code == 201, response.json()
    workflow = Workflow.objects.get(name=response.json()["name"])
    assert workflow.gpus_requested == expected[0]  # what quota is charged
    assert list(Task.objects.filter(workflow=workflow).values_list(
        "gpus", "cpu_millis", "memory_bytes")) == [expected]
    snapshot, _index = build_snapshot(now=timezone.now())  # what the embedded loop places
    assert [(p.gpus, p.cpu, p.memory) for gang in snapshot.gangs for p in gang.pods] == [expected]


def test_a_bad_quantity_in_an_init_container_is_refused(team, user):
    manifest = pod("bad", [res({"cpu": "1"})], init=[res({"cpu": "lots"})])
    response = user.post("/api/pool/team/workload", manifest, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_spec"
    assert list(body["errors"]) == ["spec.initContainers[0].resources.requests.cpu"]
    assert not Workflow.objects.exists()


def node(name: str, *, ready: str | None = "True", taints: list | None = None,
         unschedulable: bool = False) -> dict:
    status = {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi"}}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready}]
    return {"metadata": {"name": name, "labels": {}},
            "spec": {"unschedulable": unschedulable, "taints": taints or []},
            "status": status}


NODES = [
    (node("ready"), True),
    (node("no-ready-condition", ready=None), False),
    (node("not-ready", ready="False"), False),
    (node("unknown", ready="Unknown"), False),
    (node("cordoned", unschedulable=True), False),
    (node("no-schedule", taints=[{"key": "gpu-broken", "effect": "NoSchedule"}]), False),
    (node("no-execute", taints=[{"key": "maintenance", "effect": "NoExecute"}]), False),
    (node("prefer-no-schedule",
          taints=[{"key": "spot", "effect": "PreferNoSchedule"}]), True),
]


@pytest.mark.parametrize(("obj", "schedulable"), NODES,
                         ids=[n["metadata"]["name"] for n, _ in NODES])
def test_the_node_table_reads_a_node_as_the_scheduler_does(obj, schedulable):
    fields = node_fields(obj)
    assert fields["schedulable"] is node_schedulable(obj) is schedulable
    assert (fields["gpus"], fields["cpu_millis"], fields["memory_bytes"]) == \
        node_allocatable(obj) == (8, 64_000, 512 * GiB)
