"""The embedded cluster's scheduling cycle: finish due tasks, snapshot, decide (pure core),
persist — one cycle per embedded backend, each on its own nodes.

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

from scheduler import metrics
from scheduler.backends.fleet import fleet_pass
from scheduler.backends.spec import BackendSpec, default_spec, embedded_specs
from scheduler.core import run_cycle
from scheduler.core.kai_names import DEFAULT_BACKEND, queue_name_for
from scheduler.cycle_figures import (
    CycleRecord,
    PendingGang,
    estimate_row,
    queue_figures,
    waiting_words,
)
from scheduler.cycle_record import cycle_record_write, last_reasons
from scheduler.models import Node
from workflows import lifecycle, logstore
from workflows.lifecycle import TaskEviction, TaskMove
from workflows.models import TaskStatus

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

def _check_capacity() -> None:
    with connection.cursor() as cursor:
        # The GPU holders' predicate is the partial index's (task_holding_gpus): a few thousand
        # rows read through it, not every task that ever ran.
        cursor.execute(
            "SELECT n.name FROM scheduler_node n JOIN ("
            "  SELECT node_name, sum(gpus) AS gpus, sum(cpu_millis) AS cpu, "
            "         sum(memory_bytes) AS memory FROM workflows_task "
            "  WHERE (status = %s OR (node_name > '' AND status IN (%s, %s))) "
            "  AND node_name <> '' GROUP BY node_name) used "
            "ON used.node_name = n.name "
            "WHERE used.gpus > n.gpus OR (n.cpu_millis > 0 AND used.cpu > n.cpu_millis) "
            "OR (n.memory_bytes > 0 AND used.memory > n.memory_bytes) LIMIT 5",
            [TaskStatus.RUNNING, TaskStatus.WAITING, TaskStatus.SCHEDULING])
        over = [row[0] for row in cursor.fetchall()]
    if over:
        raise OverCommitError(f"cycle would over-commit node(s) {', '.join(over)}")


def _eviction_words(eviction, index) -> str:
    """Who took the GPUs, in words (the task's events)."""
    winner = index.groups.get(eviction.by_gang or "")
    if eviction.reason == "stale":
        return "its gang stayed below its minimum too long"
    if winner is None:
        return eviction.reason
    if eviction.reason == "reclaimed":
        queue = queue_name_for(winner["workflow__pool__name"], default_spec().namespace)
        return f"reclaimed by queue {queue} (workflow {winner['workflow__name']})"
    return f"preempted by workflow {winner['workflow__name']}"


def _evictions(result, index) -> list[TaskEviction]:
    return [TaskEviction(task_id=index.tasks[e.pod]["id"], node=index.tasks[e.pod]["node_name"],
                         group_id=index.tasks[e.pod]["group_id"],
                         workflow_id=index.tasks[e.pod]["workflow_id"],
                         reason=EVICTION_REASONS.get(e.reason, e.reason), by=e.by_gang or "",
                         words=_eviction_words(e, index))
            for e in result.evictions]


def _record(result, index, summary_at, duration_ms, bound, evicted,
            backend: str = DEFAULT_BACKEND) -> int:
    """Store the cycle's figures and explanations; returns the number of pending gangs."""
    pending = tuple(
        PendingGang(podgroup=explanation.gang, workflow=group["workflow__name"],
                    group=group["name"], queue=explanation.queue,
                    reasons=[reason.to_dict() for reason in explanation.reasons],
                    estimate=estimate_row(result.estimate(explanation.gang)))
        for explanation in result.explanations
        if (group := index.groups.get(explanation.gang)) is not None)
    _record_waiting(pending, last_reasons(backend), index, summary_at)
    cycle_record_write(CycleRecord(at=summary_at, duration_ms=duration_ms, bound=bound,
                                   evicted=evicted, queues=queue_figures(result),
                                   pending_gangs=pending), backend=backend)
    return len(pending)


def _record_waiting(pending: tuple[PendingGang, ...], before: dict[str, list[dict]], index,
                    at) -> None:
    """An event for each pending group whose reasons changed since the last cycle (`before`:
    podgroup → its reasons then)."""
    events = []
    for gang in pending:
        if before.get(gang.podgroup, None) == gang.reasons:
            continue
        reason, message = waiting_words(gang.reasons)
        events.append(logstore.Event(index.groups[gang.podgroup]["workflow_id"], None,
                                     reason, f"group {gang.group} in queue {gang.queue}: "
                                     f"{message}", at))
    logstore.events_record(events)


def _below_min_changes(result, index) -> dict[int, datetime | None]:
    """Since when running gangs are below their minimum, where that changed (the core decides
    eviction from it)."""
    since = {stale.gang: stale.since for stale in result.stale}
    changes = {}
    for gang, group in index.groups.items():
        value = since.get(gang)
        current = group["below_min_since"]
        if (value is None) != (current is None) or (
                value is not None and abs(current.timestamp() - value) > 1e-3):
            changes[group["id"]] = None if value is None else datetime.fromtimestamp(
                value, tz=timezone.get_current_timezone())
    return changes


def cycle_run(*, now: datetime | None = None, spec: BackendSpec | None = None,
              embedded: tuple[str, ...] | None = None) -> CycleSummary:
    """One scheduling cycle of the embedded backend ``spec`` (default: `default`): finish due
    tasks, snapshot, decide (pure core), persist. ``embedded``: every embedded backend's
    name, when the loop runs several."""
    spec = spec or default_spec()
    if not spec.is_embedded:
        # KAI places pods on the real cluster and the kubelet ends them
        # (scheduler/backends/kubernetes): the embedded loop binds, evicts and completes nothing.
        return CycleSummary(at=now or timezone.now(), duration_ms=0.0, bound=0, evicted=0,
                            pending=0)
    started = time.perf_counter()
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CYCLE_LOCK])
            now = now or timezone.now()
            lifecycle.groups_time_out(now=now)
            completed = complete_due_tasks(now=now, backend=spec.name)
            snapshot, index = build_snapshot(now=now, backend=spec.name, embedded=embedded)
            decide = time.perf_counter()
            result = run_cycle(snapshot)
            apply = time.perf_counter()
            workflows = {index.tasks[b.pod]["workflow_id"] for b in result.bindings}
            workflows |= {index.tasks[e.pod]["workflow_id"] for e in result.evictions}
            workflows |= {index.tasks[m.pod]["workflow_id"] for m in result.moves}
            lifecycle.lock_workflows(workflows)
            evicted = lifecycle.tasks_evict(_evictions(result, index), now)
            lifecycle.tasks_move([TaskMove(task_id=index.tasks[m.pod]["id"], source=m.source,
                                           target=m.target) for m in result.moves])
            bindings = [(index.tasks[b.pod]["id"], b.node) for b in result.bindings]
            bound = lifecycle.tasks_bind(bindings, now)
            lifecycle.tasks_mark_running([task_id for task_id, _ in bindings], now,
                                         _node_backends([node for _, node in bindings]))
            lifecycle.groups_record_below_min(_below_min_changes(result, index))
            _check_capacity()
            duration_ms = (time.perf_counter() - started) * 1000
            pending = _record(result, index, now, duration_ms, bound, evicted, spec.name)
    except Exception:
        metrics.record_cycle_failed()
        raise
    metrics.record_cycle(snapshot=decide - started, decide=apply - decide,
                         apply=time.perf_counter() - apply, bound=bound,
                         evicted=[e.reason for e in result.evictions],
                         moved=[m.reason for m in result.moves],
                         first_binds=_first_binds(result, index, now))
    return CycleSummary(at=now, duration_ms=duration_ms, bound=bound, evicted=evicted,
                        pending=pending, completed=completed)


def cycles_run(*, now: datetime | None = None) -> CycleSummary:
    """A cycle per embedded backend (by name), their figures summed: what the loop runs."""
    fleet_pass(now)  # which backend each waiting gang of a pool naming several goes to
    specs = embedded_specs()
    names = tuple(spec.name for spec in specs)
    total = CycleSummary(at=now or timezone.now(), duration_ms=0.0, bound=0, evicted=0,
                         pending=0)
    for spec in specs:
        summary = cycle_run(now=now, spec=spec, embedded=names)
        total = CycleSummary(at=summary.at, duration_ms=total.duration_ms + summary.duration_ms,
                             bound=total.bound + summary.bound,
                             evicted=total.evicted + summary.evicted,
                             pending=total.pending + summary.pending,
                             completed=total.completed + summary.completed)
    return total


def _node_backends(nodes: list[str]) -> list[str]:
    """The backend of each node bound to (one read, only when the cycle binds)."""
    if not nodes:
        return []
    of = dict(Node.objects.filter(name__in=set(nodes)).values_list("name", "backend"))
    return [of.get(node, DEFAULT_BACKEND) for node in nodes]


def _first_binds(result, index, now: datetime) -> list[tuple[str, float]]:
    """(priority, seconds since submission) of each workflow this cycle started."""
    first: dict[int, tuple[str, float]] = {}
    for binding in result.bindings:
        group = index.groups[binding.gang]
        if group["workflow__started_at"] is None and group["workflow_id"] not in first:
            first[group["workflow_id"]] = (
                group["workflow__priority"],
                (now - group["workflow__submitted_at"]).total_seconds())
    return list(first.values())


# --- the embedded cluster: task completion ---------------------------------------------------

def complete_due_tasks(*, now: datetime, backend: str = DEFAULT_BACKEND) -> int:
    """Embedded backend ``backend``: its running tasks end after `sleep N` seconds, or after
    OSMO_SIM_TASK_SECONDS (0: never by themselves; only status reports end tasks)."""
    if settings.OSMO_SIM_TASK_SECONDS <= 0:
        return 0
    return lifecycle.tasks_complete_due(now=now, default_seconds=settings.OSMO_SIM_TASK_SECONDS,
                                        nodes=list(Node.objects.filter(backend=backend)
                                                   .values_list("name", flat=True)))
