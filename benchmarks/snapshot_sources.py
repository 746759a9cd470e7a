"""A benchmark scenario as the two places the product reads a cycle's snapshot from: the
embedded cluster's database rows (`scheduler/backends/embedded/snapshot.py`) and the Kubernetes
backend's informer cache (`OSMO_PLACEMENT=osmo`), each written as the product writes them, so that
timing their snapshot builders measures what a cycle pays before it decides.

`shape` reduces a snapshot to what both builders must carry over (nodes, gangs, their pods,
requests and nodes), so a benchmark checks the snapshot it built before it prints a time.
Needs Django (`benchmarks.django_env.bootstrap()` first).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from scheduler.core.model import Gang, Snapshot

NAMESPACE = "osmo"
START = datetime(2026, 1, 1, tzinfo=UTC)  # the scenario's time 0


def _iso(seconds: float) -> str:
    return (START + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def shape(snapshot: Snapshot, gang_name=lambda gang: gang.name, queue_name=lambda q: q,
          pod_name=lambda gang, pod: pod.name, bound: bool = False, epoch: float = 0.0
          ) -> tuple:
    """What a builder must carry over, names mapped to the builder's (`gang_name`, ...);
    `bound`: the nodes' bound totals and releases too (a builder that keeps them), the
    releases' deadlines as wall-clock times (`epoch`: the scenario's time 0)."""
    nodes = sorted((n.name, n.gpus, n.cpu, n.memory, n.labels, n.schedulable,
                    (n.bound, n.releases and [(e[0] + epoch, *e[1:4]) for e in n.releases])
                    if bound else None)
                   for n in snapshot.nodes)
    gangs = sorted(
        (gang_name(g), queue_name(g.queue), g.min_member, g.exec_timeout, g.priority,
         g.preemptible, tuple(sorted((pod_name(g, p), p.gpus, p.cpu, p.memory, p.node)
                                     for p in g.pods)))
        for g in snapshot.gangs)
    return nodes, gangs


# --- the informer cache ----------------------------------------------------------------------

def kube_cache(snapshot: Snapshot, scheduler_name: str):
    """The cache the placement reads: real `Informer`s holding the Nodes, Pods, PodGroups,
    Queues and the Topology of `snapshot`, as the API server returns them."""
    from scheduler.backends.kubernetes.informer import Informer
    from scheduler.core.kai_names import (
        EXEC_TIMEOUT_ANNOTATION,
        GPU_RESOURCE,
        PODGROUP_ANNOTATION,
        WORKFLOW_NAME_ANNOTATION,
    )

    def informer(name: str, objects: list[dict[str, Any]]) -> Informer:
        filled = Informer(name, lambda **_kwargs: None)
        for obj in objects:
            filled.apply("ADDED", obj)
        filled.synced.set()
        return filled

    nodes = [{"metadata": {"name": n.name, "labels": dict(n.labels)},
              "spec": {"unschedulable": not n.schedulable},
              "status": {"allocatable": {GPU_RESOURCE: str(n.gpus), "cpu": f"{n.cpu}m",
                                         "memory": str(n.memory), "pods": "110"},
                         "conditions": [{"type": "Ready", "status": "True"}]}}
             for n in snapshot.nodes]
    queues = [{"metadata": {"name": q.name, "creationTimestamp": _iso(q.created_at)},
               "spec": {**({"parentQueue": q.parent} if q.parent else {}),
                        "priority": q.priority,
                        "resources": {r: {"quota": q.resource(r).quota,
                                          "limit": q.resource(r).limit,
                                          "overQuotaWeight": q.resource(r).over_quota_weight}
                                      for r in ("gpu", "cpu", "memory")}}}
              for q in snapshot.queues]
    topology = {"metadata": {"name": snapshot.topology.name},
                "spec": {"levels": [{"nodeLabel": level.node_label}
                                    for level in snapshot.topology.levels]}}
    podgroups, pods = [], []
    for gang in snapshot.gangs:
        annotations = {WORKFLOW_NAME_ANNOTATION: gang.name}
        if gang.exec_timeout is not None:
            annotations[EXEC_TIMEOUT_ANNOTATION] = str(int(gang.exec_timeout))
        podgroups.append({
            "metadata": {"name": gang.name, "namespace": NAMESPACE, "resourceVersion": "1",
                         "creationTimestamp": _iso(gang.created_at), "annotations": annotations,
                         "labels": {"app.kubernetes.io/managed-by": "osmo"}},
            "spec": {"queue": gang.queue, "minMember": gang.min_member,
                     "preemptibility": "preemptible" if gang.preemptible
                     else "non-preemptible"}})
        pods.extend(_pod(gang, pod, scheduler_name, PODGROUP_ANNOTATION, GPU_RESOURCE)
                    for pod in gang.pods)
    return SimpleNamespace(namespace=NAMESPACE, nodes=informer("nodes", nodes),
                           pods=informer("pods", pods),
                           podgroups=informer("podgroups", podgroups),
                           queues=informer("queues", queues),
                           topologies=informer("topologies", [topology]))


def _pod(gang: Gang, pod, scheduler_name: str, group_annotation: str, gpu: str) -> dict:
    started = gang.running_since if gang.running_since is not None else gang.created_at
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name, "priority": gang.priority,
        "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                        "resources": {"requests": {gpu: str(pod.gpus), "cpu": f"{pod.cpu}m",
                                                   "memory": str(pod.memory)},
                                      "limits": {gpu: str(pod.gpus)}}}]}
    if pod.node is not None:
        spec["nodeName"] = pod.node
    return {"metadata": {"name": pod.name, "namespace": NAMESPACE, "uid": f"uid-{pod.name}",
                         "resourceVersion": "1", "creationTimestamp": _iso(gang.created_at),
                         "labels": {"app.kubernetes.io/managed-by": "osmo"},
                         "annotations": {group_annotation: gang.name,
                                         "osmo/workflow-name": gang.name,
                                         "osmo/task-name": pod.name}},
            "spec": spec,
            "status": {"phase": "Running" if pod.node else "Pending",
                       **({"startTime": _iso(started)} if pod.node else {})}}


def kube_shape(snapshot: Snapshot) -> tuple:
    """`shape` under the names the Kubernetes builder gives (`namespace/name`)."""
    return shape(snapshot, gang_name=lambda g: f"{NAMESPACE}/{g.name}",
                 pod_name=lambda _g, p: f"{NAMESPACE}/{p.name}", bound=True,
                 epoch=START.timestamp())


# --- the database rows -----------------------------------------------------------------------

def write_rows(snapshot: Snapshot) -> None:
    """The embedded cluster's rows for `snapshot`: its nodes and topology, a pool per leaf
    queue, and per gang a workflow of one group whose tasks are the gang's pods (running
    tasks bound to their nodes). Written in bulk, as no submission path could at this size."""
    from pools import services as pool_services
    from scheduler.models import ClusterTopology
    from scheduler.models import Node as NodeRow
    from workflows.models import Task, TaskStatus, Workflow, WorkflowGroup, WorkflowStatus

    NodeRow.objects.bulk_create(
        [NodeRow(name=n.name, gpus=n.gpus, cpu_millis=n.cpu, memory_bytes=n.memory,
                 labels=dict(n.labels), schedulable=n.schedulable) for n in snapshot.nodes],
        batch_size=5000)
    ClusterTopology.objects.create(levels=[{"nodeLabel": level.node_label}
                                           for level in snapshot.topology.levels])
    leaves = {g.queue for g in snapshot.gangs}
    pools = {}
    for queue in snapshot.queues:
        if queue.name in leaves:
            pools[queue.name], _ = pool_services.pool_upsert(
                actor=None, name=queue.name, quota_gpus=max(0, queue.gpu.quota),
                weight=queue.gpu.over_quota_weight)
    running = {g.name: any(p.node for p in g.pods) for g in snapshot.gangs}
    workflows = Workflow.objects.bulk_create(
        [Workflow(name=g.name, pool=pools[g.queue], priority="LOW" if g.preemptible
                  else "NORMAL", gpus_requested=sum(p.gpus for p in g.pods),
                  status=WorkflowStatus.RUNNING if running[g.name] else WorkflowStatus.PENDING,
                  exec_timeout_seconds=None if g.exec_timeout is None else int(g.exec_timeout),
                  started_at=START + timedelta(seconds=g.running_since)
                  if g.running_since is not None else None)
         for g in snapshot.gangs], batch_size=5000)
    groups = WorkflowGroup.objects.bulk_create(
        [WorkflowGroup(workflow=w, name="group", podgroup=g.name,
                       status=TaskStatus.RUNNING if running[g.name] else TaskStatus.SCHEDULING,
                       gang={"minMember": g.min_member} if g.min_member is not None else {},
                       gpus=w.gpus_requested, started_at=w.started_at,
                       scheduling_at=START + timedelta(seconds=g.created_at))
         for g, w in zip(snapshot.gangs, workflows, strict=True)], batch_size=5000)
    tasks = []
    for gang, workflow, group in zip(snapshot.gangs, workflows, groups, strict=True):
        for position, pod in enumerate(gang.pods):
            tasks.append(Task(
                group=group, workflow=workflow, pool=workflow.pool,
                priority=workflow.priority, name=pod.name.removeprefix(f"{gang.name}-"),
                position=position, gpus=pod.gpus, cpu_millis=pod.cpu,
                memory_bytes=pod.memory, node_name=pod.node or "",
                status=TaskStatus.RUNNING if pod.node else TaskStatus.SCHEDULING))
            if len(tasks) >= 20_000:
                Task.objects.bulk_create(tasks)
                tasks = []
    Task.objects.bulk_create(tasks)


def rows_shape(snapshot: Snapshot) -> tuple:
    """`shape` under the names the embedded builder gives (`workflow/task`, the pool's leaf
    queue); the builder reads the priority class (LOW: 50) from the workflow."""
    from django.conf import settings

    from scheduler.core.kai_names import PRIORITY_VALUES, queue_name_for

    normal = SimpleNamespace(
        gangs=[SimpleNamespace(**{**g.__dict__, "priority": PRIORITY_VALUES[
            "LOW" if g.preemptible else "NORMAL"]}) for g in snapshot.gangs],
        nodes=snapshot.nodes)
    return shape(normal, queue_name=lambda q: queue_name_for(q, settings.OSMO_NAMESPACE),
                 pod_name=lambda g, p: f"{g.name}/{p.name.removeprefix(f'{g.name}-')}")
