"""Writes of the scheduling domain: a cycle's decisions, the embedded cluster's nodes and
topology, and the embedded cluster's task completion.

A cycle runs in ONE transaction under a transaction-scoped advisory lock, so cycles never
overlap (the loop and `POST /api/scheduler/cycle` alike). Decisions are applied with conditional
updates (a task binds only if it is still pending and unbound; an eviction only if it is still on
that node), and before commit one query checks that no node is over-committed: a crash or an
error anywhere rolls the whole cycle back, and the next cycle starts from what is committed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from osmo.errors import Conflict, OsmoError
from scheduler.core import run_cycle
from workflows.models import Task, TaskStatus, Workflow, WorkflowGroup, WorkflowStatus

from .models import ClusterTopology, Node, SchedulerCycle
from .snapshot import build_snapshot

logger = logging.getLogger(__name__)

CYCLE_LOCK = 0x05_0C1C  # advisory lock: one cycle at a time across processes
# Users see `preempted` whether a higher-priority gang (preempt) or the owner (reclaim) won.
EVICTION_REASONS = {"preempted": "preempted", "reclaimed": "preempted", "stale": "stale_gang"}


class OverCommitError(RuntimeError):
    """A cycle would have put more on a node than it holds; the cycle is rolled back."""


@dataclass(frozen=True)
class CycleSummary:
    at: datetime
    duration_ms: float
    bound: int
    evicted: int
    pending: int
    completed: int = 0

    def as_dict(self) -> dict:
        return {"bound": self.bound, "evicted": self.evicted, "pending": self.pending,
                "duration_ms": round(self.duration_ms, 2)}


# --- the cycle --------------------------------------------------------------------------------

def _lock_workflows(ids) -> None:
    """Every change to a workflow's tasks holds its row lock (same order as status reports)."""
    if ids:
        list(Workflow.objects.filter(pk__in=sorted(ids)).order_by("pk")
             .select_for_update().values_list("pk", flat=True))


def _bind(bindings: list[tuple[int, str]], now) -> int:
    """Bind pending, unbound tasks; returns how many bound (others changed meanwhile)."""
    if not bindings:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE workflows_task t SET node_name = v.node, status = %s, started_at = %s "
            "FROM unnest(%s::bigint[], %s::text[]) AS v(id, node) "
            "WHERE t.id = v.id AND t.node_name = '' AND t.status = %s",
            [TaskStatus.RUNNING, now, [b[0] for b in bindings], [b[1] for b in bindings],
             TaskStatus.SCHEDULING])
        return cursor.rowcount


def _check_capacity() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT n.name FROM scheduler_node n JOIN ("
            "  SELECT node_name, sum(gpus) AS gpus, sum(cpu_millis) AS cpu, "
            "         sum(memory_bytes) AS memory FROM workflows_task "
            "  WHERE node_name <> '' AND status IN (%s, %s, %s) GROUP BY node_name) used "
            "ON used.node_name = n.name "
            "WHERE used.gpus > n.gpus OR (n.cpu_millis > 0 AND used.cpu > n.cpu_millis) "
            "OR (n.memory_bytes > 0 AND used.memory > n.memory_bytes) LIMIT 5",
            [TaskStatus.WAITING, TaskStatus.SCHEDULING, TaskStatus.RUNNING])
        over = [row[0] for row in cursor.fetchall()]
    if over:
        raise OverCommitError(f"cycle would over-commit node(s) {', '.join(over)}")


def _evict(result, index, now) -> tuple[int, set[int]]:
    """Evictions: a whole gang fails (FAILED_PREEMPTED); elastic surplus returns to pending."""
    from workflows.services import settle

    by_gang: dict[str, list] = {}
    for eviction in result.evictions:
        by_gang.setdefault(eviction.gang, []).append(eviction)
    bound_by_group: dict[int, set[str]] = {}
    for name, row in index.tasks.items():  # one pass, not one per evicted gang
        if row["node_name"]:
            bound_by_group.setdefault(row["group_id"], set()).add(name)
    evicted, touched = 0, set()
    for gang, evictions in by_gang.items():
        group = index.groups[gang]
        bound = bound_by_group.get(group["id"], set())
        victims = {e.pod for e in evictions}
        reason = EVICTION_REASONS.get(evictions[0].reason, evictions[0].reason)
        for eviction in evictions:
            row = index.tasks[eviction.pod]
            whole = victims >= bound
            changed = Task.objects.filter(
                pk=row["id"], node_name=row["node_name"], status=TaskStatus.RUNNING,
            ).update(**({"status": TaskStatus.FAILED_PREEMPTED, "reason": reason,
                         "finished_at": now} if whole else
                        {"status": TaskStatus.SCHEDULING, "node_name": "",
                         "reason": reason, "started_at": None}))
            evicted += changed
        touched.add(group["workflow_id"])
    for workflow in Workflow.objects.filter(pk__in=touched).select_related("pool"):
        settle(workflow, now)
    return evicted, touched


def _mark_running(task_ids: list[int], now) -> None:
    groups = set(Task.objects.filter(pk__in=task_ids).values_list("group_id", flat=True))
    WorkflowGroup.objects.filter(pk__in=groups, status=TaskStatus.SCHEDULING).update(
        status=TaskStatus.RUNNING, started_at=now, below_min_since=None)
    Workflow.objects.filter(groups__in=groups, status=WorkflowStatus.PENDING).update(
        status=WorkflowStatus.RUNNING, started_at=now)


def _record(result, index, summary_at, duration_ms, bound, evicted) -> int:
    """Store the cycle's figures and explanations; returns the number of pending gangs."""
    queues = []
    for status in result.queues:
        gpu = status.figures("gpu")
        queues.append({"name": status.name, "parent": status.parent,
                       "deserved_gpus": gpu.deserved, "fair_share_gpus": gpu.fair_share,
                       "allocated_gpus": gpu.allocated,
                       "allocated_non_preemptible_gpus": gpu.allocated_non_preemptible,
                       "requested_gpus": gpu.requested})
    pending = []
    for explanation in result.explanations:
        group = index.groups.get(explanation.gang)
        if group is None:
            continue
        pending.append({"podgroup": explanation.gang, "workflow": group["workflow__name"],
                        "group": group["name"], "queue": explanation.queue,
                        "reasons": [reason.to_dict() for reason in explanation.reasons]})
    SchedulerCycle.objects.update_or_create(pk=1, defaults={
        "at": summary_at, "duration_ms": duration_ms, "bound": bound, "evicted": evicted,
        "pending": len(pending), "queues": queues, "pending_gangs": pending})
    return len(pending)


def _stale(result, index) -> None:
    """Remember since when running gangs are below their minimum (the core decides eviction)."""
    since = {stale.gang: stale.since for stale in result.stale}
    for gang, group in index.groups.items():
        value = since.get(gang)
        current = group["below_min_since"]
        if (value is None) != (current is None) or (
                value is not None and abs(current.timestamp() - value) > 1e-3):
            WorkflowGroup.objects.filter(pk=group["id"]).update(
                below_min_since=None if value is None else datetime.fromtimestamp(
                    value, tz=timezone.get_current_timezone()))


def cycle_run(*, now: datetime | None = None) -> CycleSummary:
    """One scheduling cycle: finish due tasks, snapshot, decide (pure core), persist."""
    if settings.OSMO_CLUSTER_BACKEND == "kubernetes":
        # KAI places pods on the real cluster and the kubelet ends them
        # (scheduler/backends/kubernetes): the embedded loop binds, evicts and completes nothing.
        return CycleSummary(at=now or timezone.now(), duration_ms=0.0, bound=0, evicted=0,
                            pending=0)
    started = time.perf_counter()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CYCLE_LOCK])
        now = now or timezone.now()
        completed = complete_due_tasks(now=now)
        snapshot, index = build_snapshot(now=now)
        result = run_cycle(snapshot)
        workflows = {index.tasks[b.pod]["workflow_id"] for b in result.bindings}
        workflows |= {index.tasks[e.pod]["workflow_id"] for e in result.evictions}
        _lock_workflows(workflows)
        evicted, _ = _evict(result, index, now)
        bindings = [(index.tasks[b.pod]["id"], b.node) for b in result.bindings]
        bound = _bind(bindings, now)
        _mark_running([task_id for task_id, _ in bindings], now)
        _stale(result, index)
        _check_capacity()
        duration_ms = (time.perf_counter() - started) * 1000
        pending = _record(result, index, now, duration_ms, bound, evicted)
    return CycleSummary(at=now, duration_ms=duration_ms, bound=bound, evicted=evicted,
                        pending=pending, completed=completed)


# --- the embedded cluster: task completion ---------------------------------------------------

def complete_due_tasks(*, now: datetime) -> int:
    """Embedded cluster: running tasks end COMPLETED after `sleep N` seconds, or after
    OSMO_SIM_TASK_SECONDS (0: never by itself; only status reports end tasks)."""
    from workflows.services import settle

    default = settings.OSMO_SIM_TASK_SECONDS
    if default <= 0:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, workflow_id FROM workflows_task WHERE status = %s "
            "AND started_at + make_interval(secs => coalesce(run_seconds, %s)) <= %s",
            [TaskStatus.RUNNING, default, now])
        due = cursor.fetchall()
    if not due:
        return 0
    workflow_ids = {workflow_id for _, workflow_id in due}
    _lock_workflows(workflow_ids)
    changed = Task.objects.filter(pk__in=[pk for pk, _ in due], status=TaskStatus.RUNNING
                                  ).update(status=TaskStatus.COMPLETED, exit_code=0,
                                           finished_at=now)
    for workflow in Workflow.objects.filter(pk__in=workflow_ids).select_related("pool"):
        settle(workflow, now)
    return changed


# --- nodes and topology ----------------------------------------------------------------------

@transaction.atomic
def node_register(*, name: str, gpus: int, cpu_millis: int, memory_bytes: int,
                  labels: dict[str, str]) -> tuple[Node, bool]:
    """Register or replace a node (its bound work stays)."""
    node, created = Node.objects.select_for_update().get_or_create(
        name=name, defaults={"gpus": gpus, "cpu_millis": cpu_millis,
                             "memory_bytes": memory_bytes, "labels": labels})
    if not created:
        node.gpus, node.cpu_millis, node.memory_bytes, node.labels = (
            gpus, cpu_millis, memory_bytes, labels)
        node.save()
    return node, created


@transaction.atomic
def node_set_schedulable(*, node: Node, schedulable: bool) -> Node:
    Node.objects.filter(pk=node.pk).update(schedulable=schedulable, updated_at=timezone.now())
    node.refresh_from_db()
    return node


@transaction.atomic
def node_delete(*, node: Node, force: bool = False) -> int:
    """Remove a node. While pods are bound: 409 `node_in_use`, unless `force`, which evicts
    them (tasks end FAILED_EVICTED, their gangs fail as a gang does)."""
    from workflows.services import settle

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CYCLE_LOCK])  # not mid-cycle
    bound = Task.objects.filter(node_name=node.name,
                                status__in=(TaskStatus.SCHEDULING, TaskStatus.RUNNING))
    count = bound.count()
    if count and not force:
        raise Conflict("node_in_use", f"Node '{node.name}' has {count} bound pod(s); cordon "
                                      f"it and let them finish, or delete with ?force=true.")
    now = timezone.now()
    workflow_ids = set(bound.values_list("workflow_id", flat=True))
    _lock_workflows(workflow_ids)
    bound.update(status=TaskStatus.FAILED_EVICTED, reason="node_deleted", finished_at=now)
    for workflow in Workflow.objects.filter(pk__in=workflow_ids).select_related("pool"):
        settle(workflow, now)
    Node.objects.filter(pk=node.pk).delete()
    return count


def validate_topology(levels) -> list[dict]:
    errors = []
    if not isinstance(levels, list) or not 1 <= len(levels) <= 16:
        errors.append("levels must be a list of 1 to 16 {alias, nodeLabel} objects.")
    else:
        for index, level in enumerate(levels):
            if not isinstance(level, dict) or not isinstance(level.get("nodeLabel"), str) \
                    or not level["nodeLabel"] or not isinstance(level.get("alias", ""), str):
                errors.append(f"levels[{index}] needs a nodeLabel (and an optional alias).")
        if not errors:
            labels = [level["nodeLabel"] for level in levels]
            aliases = [level["alias"] for level in levels if level.get("alias")]
            if len(set(labels)) != len(labels):
                errors.append("node labels must be unique.")
            if len(set(aliases)) != len(aliases):
                errors.append("aliases must be unique.")
            if "kubernetes.io/hostname" in labels[:-1]:
                errors.append("kubernetes.io/hostname may only be the last (finest) level.")
    if errors:
        raise OsmoError("invalid_topology", " ".join(errors), errors={"levels": errors})
    return [{"alias": level["alias"], "nodeLabel": level["nodeLabel"]} if level.get("alias")
            else {"nodeLabel": level["nodeLabel"]} for level in levels]


@transaction.atomic
def topology_replace(*, levels) -> ClusterTopology:
    """Replace the levels; placed work is not moved."""
    clean = validate_topology(levels)
    topology, _ = ClusterTopology.objects.update_or_create(
        name="osmo-topology", defaults={"levels": clean})
    return topology
