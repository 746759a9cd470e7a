"""The one seam between the database and the pure core: rows → a `scheduler.core.Snapshot`.

A fixed number of queries whatever the cluster size: nodes, the topology, the pool tree (for the
queues), the gangs (groups ready to schedule or running), and their tasks. One embedded
backend at a time: its own nodes, and the gangs that are its to run (`destined_q`: chosen
for it by the fleet pass, which runs before the cycles, or of a pool it alone serves), so a
gang never spans two backends. The queues are the
core `Queue` objects the KAI Queue manifests are written from (`scheduler.kai.queues`), so what
a real cluster would get is what this loop schedules.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from scheduler.backends.destined import destined_q
from scheduler.backends.spec import default_spec
from scheduler.core import Node, Pod, SchedulerConfig, Snapshot, Topology
from scheduler.core.collector import collector_paused
from scheduler.core.decode import gang_of, topology_levels
from scheduler.core.kai_names import DEFAULT_BACKEND, PRIORITY_VALUES, queue_name_for
from scheduler.cycle_config import scheduler_config
from scheduler.kai.selectors import cluster_topology, queues
from scheduler.models import Node as NodeRow
from scheduler.usage import queue_usage
from workflows.models import Task, TaskStatus, WorkflowGroup, WorkflowStatus

SCHEDULABLE_GROUPS = (TaskStatus.SCHEDULING, TaskStatus.RUNNING)
# Tasks that belong to a live gang: pending, bound or running (finished ones have left it).
GANG_TASKS = (TaskStatus.SCHEDULING, TaskStatus.RUNNING)


@dataclass
class SnapshotIndex:
    """Maps the core's names back to rows."""

    tasks: dict[str, dict] = field(default_factory=dict)  # pod name → task row
    groups: dict[str, dict] = field(default_factory=dict)  # gang name → group row


def _ts(value: datetime | None) -> float | None:
    return value.timestamp() if value else None


def build_snapshot(*, now: datetime, config: SchedulerConfig | None = None,
                   backend: str = DEFAULT_BACKEND, embedded: tuple[str, ...] | None = None
                   ) -> tuple[Snapshot, SnapshotIndex]:
    """``backend``'s snapshot; ``embedded``: every embedded backend's name (default: only
    ``backend``), for the pool order and the nodes of the others."""
    with collector_paused():
        return _build_snapshot(now, config, backend, tuple(embedded or (backend,)))


def _build_snapshot(now: datetime, config: SchedulerConfig | None, backend: str,
                    embedded: tuple[str, ...]) -> tuple[Snapshot, SnapshotIndex]:
    namespace = default_spec().namespace
    nodes = tuple(
        Node(name=row["name"], gpus=row["gpus"], cpu=row["cpu_millis"],
             memory=row["memory_bytes"], labels=row["labels"], schedulable=row["schedulable"])
        for row in NodeRow.objects.filter(backend=backend).values(
            "name", "gpus", "cpu_millis", "memory_bytes", "labels", "schedulable")
    )
    topology = Topology(levels=topology_levels(cluster_topology()))
    groups = {
        row["id"]: row for row in WorkflowGroup.objects.filter(
            status__in=SCHEDULABLE_GROUPS,
            workflow__status__in=(WorkflowStatus.PENDING, WorkflowStatus.RUNNING),
        ).filter(destined_q(backend)).values(
            "id", "podgroup", "gang", "started_at", "below_min_since", "scheduling_at",
            "workflow_id", "workflow__name", "workflow__priority", "workflow__submitted_at",
            "workflow__started_at", "workflow__pool__name", "name",
            "workflow__exec_timeout_seconds", "workflow__pool__backends",
            "workflow__pool__parent_id", "workflow__pool__parent__backends")
    }
    pods: dict[int, list[Pod]] = {group_id: [] for group_id in groups}
    finished: set[int] = set()
    index = SnapshotIndex()
    for row in Task.objects.filter(group_id__in=list(groups)).values(
            "id", "group_id", "workflow_id", "name", "status", "gpus", "cpu_millis",
            "memory_bytes", "node_selector", "subgroup", "node_name").order_by("position"):
        if row["status"] not in GANG_TASKS:
            finished.add(row["group_id"])
            continue
        name = f"{groups[row['group_id']]['workflow__name']}/{row['name']}"
        index.tasks[name] = row
        pods[row["group_id"]].append(Pod(
            name=name, subgroup=row["subgroup"] or None, gpus=row["gpus"],
            cpu=row["cpu_millis"], memory=row["memory_bytes"],
            node_selector=row["node_selector"] or {}, node=row["node_name"] or None))
    gangs = []
    for group_id, row in groups.items():
        if not pods[group_id]:
            continue
        gang = row["gang"] or {}
        priority = row["workflow__priority"]
        index.groups[row["podgroup"]] = row
        gangs.append(gang_of(
            row["podgroup"], gang, tuple(pods[group_id]),
            queue=queue_name_for(row["workflow__pool__name"], namespace),
            priority=PRIORITY_VALUES[priority], preemptible=priority == "LOW",
            created_at=row["workflow__submitted_at"].timestamp(),
            running_since=_ts(row["started_at"]),
            below_min_since=_ts(row["below_min_since"]),
            # A gang whose members are finishing is winding down, not stale.
            staleness_grace_seconds=-1 if group_id in finished else None,
            exec_timeout=row["workflow__exec_timeout_seconds"],
            queued_since=_ts(row["scheduling_at"]),
            workload=f"workflow {row['workflow__name']!r}",
        ))
    capacity = sum(node.gpus for node in nodes if node.schedulable)
    usage = queue_usage(now=now, namespace=namespace, capacity=capacity)
    snapshot = Snapshot(nodes=nodes,
                        queues=tuple(replace(q.queue, usage=usage.get(q.queue.name, 0.0))
                                     for q in queues(namespace=namespace)),
                        gangs=tuple(gangs), topology=topology, now=now.timestamp(),
                        config=config or scheduler_config())
    return snapshot, index
