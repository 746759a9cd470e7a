"""Groups' and workflows' statuses derived from their tasks: the gang and dependency rules of
`workflows.lifecycle` (its docstring states them), for any number of workflows in a fixed number
of statements — the embedded cluster ends hundreds of tasks in one scheduling cycle.

The callers hold the workflows' row locks, so what is read here is what the rows hold until
commit: the rules run in memory on one read of the groups and tasks, and every change is then
written with one statement per table (tasks ended or released, groups, workflows) and one for
the events.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection

from pools.drain import drain_check_if_deleting_on_commit

from .logstore import Event
from .models import (
    ALIVE_TASK_STATUSES,
    ALIVE_WORKFLOW_STATUSES,
    FINAL_TASK_STATUSES,
    TaskStatus,
    Workflow,
    WorkflowGroup,
    WorkflowStatus,
)
from .notifications import enqueue_on_commit

TIMED_OUT = (TaskStatus.FAILED_EXEC_TIMEOUT, TaskStatus.FAILED_QUEUE_TIMEOUT)
SEVERITY = [TaskStatus.FAILED_EXEC_TIMEOUT, TaskStatus.FAILED_QUEUE_TIMEOUT,
            TaskStatus.FAILED_PREEMPTED, TaskStatus.FAILED_EVICTED,
            TaskStatus.FAILED_BACKEND_ERROR, TaskStatus.FAILED,
            TaskStatus.FAILED_CANCELED, TaskStatus.COMPLETED]

# Events in words (GET /api/workflow/{name}/events) for the reasons tasks end with.
REASON_WORDS = {"group_failed": "another task of its group failed",
                "upstream_failed": "a group it depends on failed",
                "lead_completed": "its group's lead task completed",
                "canceled_by_user": "the workflow was canceled",
                "subpool_deleted": "its subpool was deleted",
                "submission_failed": "the cluster refused the group's objects",
                "pod_deleted": "its pod was deleted", "node_deleted": "its node was removed",
                "backend_lost": "its cluster sent nothing for longer than the lost timeout",
                "backend_deleted": "its cluster was deleted",
                "evicted": "evicted by the kubelet", "stale_gang": "its gang stayed below its "
                "minimum", "preempted": "its GPUs went to another workload",
                "retries_exhausted": "its exit action asked for a reschedule, but its group "
                "ran its pool's max_retries times again already",
                "reschedule_unsupported": "its exit action asked for a reschedule, which a "
                "backend served by an agent does not run"}


def words(reason: str | None) -> str:
    return REASON_WORDS.get(reason or "", reason or "")


def worst_status(statuses: Iterable[str]) -> str:
    present = set(statuses)
    return next(s for s in SEVERITY if s in present)


def final_event(task_id: int, workflow_id: int, status: str, *, exit_code: int | None = None,
                reason: str | None = None, at=None) -> Event:
    """A task's end, as the events endpoint tells it."""
    code = f"exit code {exit_code}" if exit_code is not None else ""
    if status == TaskStatus.COMPLETED:
        reason_word, message = "Completed", code or "exit code 0"
    elif status == TaskStatus.FAILED:
        reason_word, message = "Failed", ", ".join(x for x in (code, words(reason)) if x)
    elif status == TaskStatus.FAILED_PREEMPTED:
        reason_word, message = "Preempted", words(reason or "preempted")
    elif status == TaskStatus.FAILED_EVICTED:
        reason_word, message = "Evicted", words(reason or "evicted")
    elif status == TaskStatus.FAILED_BACKEND_ERROR:
        reason_word, message = "BackendError", words(reason)
    else:
        reason_word, message = "Canceled", words(reason)
    if status == TaskStatus.COMPLETED and reason:
        message = f"{message} ({words(reason)})"
    return Event(workflow_id, task_id, reason_word, message, at)


# --- the rows, as read under the workflows' locks ----------------------------------------------

@dataclass(slots=True)
class _Task:
    id: int
    workflow_id: int
    spec_task: str
    status: str
    reason: str | None


@dataclass(slots=True)
class _Group:
    id: int
    name: str
    status: str
    reason: str | None
    depends_on: list[str]
    lead_task: str
    started_at: datetime | None
    scheduling_at: datetime | None
    finished_at: datetime | None
    tasks: list[_Task] = field(default_factory=list)  # in position order
    changed: bool = False


@dataclass(slots=True)
class _Workflow:
    id: int
    status: str
    reason: str | None
    started_at: datetime | None
    finished_at: datetime | None
    subpool_id: int | None  # its pool's id when that pool is a subpool
    groups: list[_Group] = field(default_factory=list)  # in position order
    changed: bool = False


@dataclass
class _Changes:
    ended: list[tuple[_Task, str, str | None]] = field(default_factory=list)  # status, reason
    released: list[int] = field(default_factory=list)  # WAITING → SCHEDULING


def settle_workflows(workflow_ids: Iterable[int], now: datetime) -> None:
    """Derive the groups' and workflows' statuses of these workflows from their tasks and write
    what changed (the callers hold the workflows' locks)."""
    workflows = _read(set(workflow_ids))
    changes = _Changes()
    for workflow in workflows:
        _derive(workflow, changes, now)
    _write(workflows, changes, now)


def _read(ids: set[int]) -> list[_Workflow]:
    if not ids:
        return []
    workflows = {row["id"]: _Workflow(
        id=row["id"], status=row["status"], reason=row["reason"], started_at=row["started_at"],
        finished_at=row["finished_at"],
        subpool_id=row["pool_id"] if row["pool__parent_id"] is not None else None)
        for row in Workflow.objects.filter(pk__in=ids).order_by("pk").values(
            "id", "status", "reason", "started_at", "finished_at", "pool_id",
            "pool__parent_id")}
    groups: dict[int, _Group] = {}
    for row in WorkflowGroup.objects.filter(workflow_id__in=ids).order_by(
            "workflow_id", "position", "id").values(
            "id", "workflow_id", "name", "status", "reason", "depends_on", "lead_task",
            "started_at", "scheduling_at", "finished_at"):
        workflow_id = row.pop("workflow_id")
        groups[row["id"]] = group = _Group(**row)
        workflows[workflow_id].groups.append(group)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, workflow_id, group_id, spec_task, status, reason FROM workflows_task "
            "WHERE workflow_id = ANY(%s) ORDER BY group_id, position, id", [list(ids)])
        for task_id, workflow_id, group_id, spec_task, status, reason in cursor.fetchall():
            groups[group_id].tasks.append(_Task(task_id, workflow_id, spec_task, status,
                                                reason))
    return list(workflows.values())


def _end(group: _Group, status: str, reason: str | None, changes: _Changes) -> None:
    """The group's alive tasks end with ``status`` and ``reason``."""
    for task in group.tasks:
        if task.status in ALIVE_TASK_STATUSES:
            task.status, task.reason = status, reason
            changes.ended.append((task, status, reason))


def _set(group: _Group, **values) -> None:
    for name, value in values.items():
        setattr(group, name, value)
    group.changed = True


def _derive(workflow: _Workflow, changes: _Changes, now: datetime) -> None:
    """The rules, in memory (lifecycle's docstring); what changed is recorded in ``changes``
    and on the rows."""
    groups = workflow.groups
    by_name = {g.name: g for g in groups}
    changed = True
    while changed:  # a failure or a completion can release or cancel other groups
        changed = False
        for group in groups:
            if group.status in FINAL_TASK_STATUSES:
                continue
            statuses = [task.status for task in group.tasks]
            failed = any(s in FINAL_TASK_STATUSES and s != TaskStatus.COMPLETED
                         for s in statuses)
            lead_done = all(task.status == TaskStatus.COMPLETED for task in group.tasks
                            if task.spec_task == group.lead_task)
            alive = any(s in ALIVE_TASK_STATUSES for s in statuses)
            if alive and (failed or lead_done):
                _end(group, *((TaskStatus.FAILED_CANCELED, "group_failed") if failed
                              else (TaskStatus.COMPLETED, "lead_completed")), changes)
                statuses = [task.status for task in group.tasks]
                alive = False
            if not alive:
                status = worst_status(statuses)
                _set(group, status=status, finished_at=now, reason=next(
                    (task.reason for task in group.tasks
                     if task.status == status and task.reason is not None), None))
                changed = True
            elif TaskStatus.RUNNING in statuses and group.status != TaskStatus.RUNNING:
                _set(group, status=TaskStatus.RUNNING, started_at=group.started_at or now)

        failed_group = any(g.status in FINAL_TASK_STATUSES
                           and g.status not in (TaskStatus.COMPLETED, *TIMED_OUT)
                           for g in groups)
        for group in groups:
            if group.status in FINAL_TASK_STATUSES:
                continue
            upstream_failed = any(by_name[name].status in FINAL_TASK_STATUSES
                                  and by_name[name].status != TaskStatus.COMPLETED
                                  for name in group.depends_on if name in by_name)
            if failed_group or upstream_failed:
                _end(group, TaskStatus.FAILED_CANCELED, "upstream_failed", changes)
                changed = True
            elif group.status == TaskStatus.WAITING and all(
                    by_name[name].status == TaskStatus.COMPLETED for name in group.depends_on):
                for task in group.tasks:
                    if task.status == TaskStatus.WAITING:
                        task.status = TaskStatus.SCHEDULING
                        changes.released.append(task.id)
                _set(group, status=TaskStatus.SCHEDULING, scheduling_at=now)

    if workflow.status not in (WorkflowStatus.PENDING, WorkflowStatus.RUNNING):
        return  # ended already (canceled): nothing to derive
    if all(g.status in FINAL_TASK_STATUSES for g in groups):
        worst = worst_status(g.status for g in groups)
        workflow.status, workflow.finished_at, workflow.changed = worst, now, True
        workflow.reason = next((g.reason for g in groups if g.status == worst and g.reason),
                               None) if worst != TaskStatus.COMPLETED else None
    elif any(g.status == TaskStatus.RUNNING for g in groups) and (
            workflow.status == WorkflowStatus.PENDING):
        workflow.status, workflow.changed = WorkflowStatus.RUNNING, True
        workflow.started_at = workflow.started_at or now


# --- the writes: one statement per table -------------------------------------------------------

def _write(workflows: list[_Workflow], changes: _Changes, now: datetime) -> None:
    with connection.cursor() as cursor:
        if changes.ended:
            events = [final_event(task.id, task.workflow_id, status, reason=reason, at=now)
                      for task, status, reason in changes.ended]
            # The tasks end and their events are written by the same statement.
            cursor.execute(
                "WITH v AS (SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[], "
                "  %s::text[], %s::text[]) WITH ORDINALITY AS v(id, status, reason, word, "
                "  message, n)), "
                "ended AS (UPDATE workflows_task t SET status = v.status, reason = v.reason, "
                "  finished_at = %s FROM v WHERE t.id = ANY(%s::bigint[]) AND t.id = v.id "
                "  AND t.status = ANY(%s) "
                "  RETURNING t.id, t.workflow_id, t.retry_id) "
                "INSERT INTO workflows_taskevent (workflow_id, task_id, at, reason, message, "
                "retry_id) SELECT ended.workflow_id, ended.id, %s, v.word, v.message, "
                "ended.retry_id "
                "FROM ended JOIN v ON v.id = ended.id ORDER BY v.n",
                [[task.id for task, _, _ in changes.ended],
                 [status for _, status, _ in changes.ended],
                 [reason for _, _, reason in changes.ended],
                 [e.reason for e in events], [e.message for e in events],
                 now, [task.id for task, _, _ in changes.ended], list(ALIVE_TASK_STATUSES),
                 now])
        if changes.released:
            cursor.execute("UPDATE workflows_task SET status = %s "
                           "WHERE id = ANY(%s) AND status = %s",
                           [TaskStatus.SCHEDULING, changes.released, TaskStatus.WAITING])
        groups = [g for w in workflows for g in w.groups if g.changed]
        if groups:
            cursor.execute(
                "UPDATE workflows_workflowgroup g SET status = v.status, reason = v.reason, "
                "started_at = v.started_at, scheduling_at = v.scheduling_at, "
                "finished_at = v.finished_at FROM unnest(%s::bigint[], %s::text[], "
                "%s::text[], %s::timestamptz[], %s::timestamptz[], %s::timestamptz[]) "
                "AS v(id, status, reason, started_at, scheduling_at, finished_at) "
                "WHERE g.id = v.id",
                [[g.id for g in groups], [g.status for g in groups],
                 [g.reason for g in groups], [g.started_at for g in groups],
                 [g.scheduling_at for g in groups], [g.finished_at for g in groups]])
        changed = [w for w in workflows if w.changed]
        if changed:
            cursor.execute(
                "UPDATE workflows_workflow w SET status = v.status, reason = v.reason, "
                "started_at = v.started_at, finished_at = v.finished_at "
                "FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::timestamptz[], "
                "%s::timestamptz[]) AS v(id, status, reason, started_at, finished_at) "
                "WHERE w.id = v.id",
                [[w.id for w in changed], [w.status for w in changed],
                 [w.reason for w in changed], [w.started_at for w in changed],
                 [w.finished_at for w in changed]])
    for subpool_id in sorted({w.subpool_id for w in changed if w.subpool_id is not None
                              and w.status in FINAL_TASK_STATUSES}):
        drain_check_if_deleting_on_commit(subpool_id)  # a DELETING subpool may now be drained
    enqueue_on_commit(w.id for w in changed if w.status not in ALIVE_WORKFLOW_STATUSES)
