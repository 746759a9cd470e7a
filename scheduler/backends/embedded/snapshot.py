"""The one seam between the database and the pure core: rows → a `scheduler.core.Snapshot`.

A fixed number of queries whatever the cluster size: nodes, the topology, the pool tree (for the
queues), the gangs (groups ready to schedule or running), and their tasks. One embedded
backend at a time: its own nodes, and the gangs of the pools that name it — none with a pod on
another backend's node (a gang never spans two), and a pending one only once every embedded
backend its pool lists before this one left it pending in its last cycle (first that fits, in
the pool's order). The queues are the
core `Queue` objects the KAI Queue manifests are written from (`scheduler.kai.queues`), so what
a real cluster would get is what this loop schedules.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from pools.selectors import served_by_q
from scheduler.backends.spec import default_spec
from scheduler.core import Node, Pod, SchedulerConfig, Snapshot, Topology
from scheduler.core.collector import collector_paused
from scheduler.core.decode import gang_of, topology_levels
from scheduler.core.kai_names import DEFAULT_BACKEND, PRIORITY_VALUES, queue_name_for
from scheduler.cycle_config import scheduler_config
from scheduler.kai.selectors import cluster_topology, queues
from scheduler.models import Node as NodeRow
from scheduler.models import SchedulerCycle
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


def _pending_elsewhere(backends: set[str]) -> dict[str, set[str]]:
    """backend → the podgroups its last cycle left pending."""
    return {name: {gang["podgroup"] for gang in pending or []}
            for name, pending in SchedulerCycle.objects.filter(backend__in=backends)
            .values_list("backend", "pending_gangs")}


def _turn_has_come(row: dict, backend: str, embedded: tuple[str, ...],
                   pending: dict[str, set[str]]) -> bool:
    """Every embedded backend the group's pool lists before ``backend`` left it pending."""
    listed = (row["workflow__pool__parent__backends"] if row["workflow__pool__parent_id"]
              else row["workflow__pool__backends"]) or []
    earlier = [name for name in listed[:listed.index(backend)] if name in embedded] \
        if backend in listed else []
    return all(row["podgroup"] in pending.get(name, ()) for name in earlier)


def _build_snapshot(now: datetime, config: SchedulerConfig | None, backend: str,
                    embedded: tuple[str, ...]) -> tuple[Snapshot, SnapshotIndex]:
    namespace = default_spec().namespace
    nodes = tuple(
        Node(name=row["name"], gpus=row["gpus"], cpu=row["cpu_millis"],
             memory=row["memory_bytes"], labels=row["labels"], schedulable=row["schedulable"])
        for row in NodeRow.objects.filter(backend=backend).values(
            "name", "gpus", "cpu_millis", "memory_bytes", "labels", "schedulable")
    )
    several = len(embedded) > 1
    elsewhere = set(NodeRow.objects.exclude(backend=backend).values_list("name", flat=True)) \
        if several else set()
    topology = Topology(levels=topology_levels(cluster_topology()))
    groups = {
        row["id"]: row for row in WorkflowGroup.objects.filter(
            status__in=SCHEDULABLE_GROUPS,
            workflow__status__in=(WorkflowStatus.PENDING, WorkflowStatus.RUNNING),
        ).filter(served_by_q(backend, pool_field="workflow__pool")).values(
            "id", "podgroup", "gang", "started_at", "below_min_since", "scheduling_at",
            "workflow_id", "workflow__name", "workflow__priority", "workflow__submitted_at",
            "workflow__started_at", "workflow__pool__name", "name",
            "workflow__exec_timeout_seconds", "workflow__pool__backends",
            "workflow__pool__parent_id", "workflow__pool__parent__backends")
    }
    if several:
        tasks = Task.objects.filter(group_id__in=list(groups), status__in=GANG_TASKS)
        placed = set(tasks.exclude(node_name="").values_list("group_id", flat=True).distinct())
        away = set(tasks.filter(node_name__in=elsewhere).values_list("group_id", flat=True))
        pending = _pending_elsewhere(set(embedded) - {backend})
        groups = {group_id: row for group_id, row in groups.items() if group_id not in away
                  and (group_id in placed or _turn_has_come(row, backend, embedded, pending))}
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
