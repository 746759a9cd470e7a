"""Workflow lifecycle writes: status reports, completion, cancel.

Every change of a workflow's tasks happens with the workflow row locked, so concurrent reports,
cancels and scheduler decisions on one workflow apply one after the other.

Rules (OSMO's, where the contract is silent):
- A task moves forward only: WAITING → SCHEDULING → RUNNING → a final status (a final status may
  follow any alive one).
- A group is a gang: when one of its tasks fails, its other alive tasks are canceled
  (`FAILED_CANCELED`, reason `group_failed`); when every replica of its lead task has completed,
  the others are stopped as `COMPLETED` (reason `lead_completed`).
- A group's final status takes the worst of its tasks': FAILED_PREEMPTED, then FAILED_EVICTED,
  then FAILED, then FAILED_CANCELED, then COMPLETED. The workflow's takes the worst of its groups'.
- When a group fails, the workflow's other alive groups are canceled (reason `upstream_failed`);
  when a group completes, waiting groups whose inputs have all completed are released to the
  scheduler (SCHEDULING).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from osmo.errors import Conflict

from .models import (
    ALIVE_TASK_STATUSES,
    FINAL_TASK_STATUSES,
    Task,
    TaskStatus,
    Workflow,
    WorkflowGroup,
    WorkflowStatus,
)
from .selectors import alive_workflows, gpu_holding_tasks

STATUS_RANK = {TaskStatus.WAITING: 0, TaskStatus.SCHEDULING: 1, TaskStatus.RUNNING: 2}
SEVERITY = [TaskStatus.FAILED_PREEMPTED, TaskStatus.FAILED_EVICTED, TaskStatus.FAILED,
            TaskStatus.FAILED_CANCELED, TaskStatus.COMPLETED]


def status_rank(status: str) -> int:
    """Forward order of task statuses: alive ones in order, then every final one."""
    return STATUS_RANK.get(status, 3)


def worst_status(statuses: Iterable[str]) -> str:
    present = set(statuses)
    return next(s for s in SEVERITY if s in present)


def _lock_workflow(workflow: Workflow) -> Workflow:
    return Workflow.objects.select_for_update().select_related("pool").get(pk=workflow.pk)


def _end_tasks(tasks, status: str, reason: str | None, now) -> None:
    tasks.filter(status__in=ALIVE_TASK_STATUSES).update(status=status, reason=reason,
                                                        finished_at=now)


def _after_finish(workflow: Workflow) -> None:
    """A workflow ended: its subpool may be DELETING and now drained."""
    if workflow.pool.is_subpool:
        from pools.tasks import drain_check_if_deleting_on_commit

        drain_check_if_deleting_on_commit(workflow.pool_id)


def settle(workflow: Workflow, now) -> None:
    """Derive group and workflow statuses from the tasks (rows already locked)."""
    groups = list(workflow.groups.all())
    task_statuses: dict[int, list[tuple[Task, str]]] = {}
    for task in Task.objects.filter(workflow=workflow).only(
            "id", "group_id", "status", "spec_task"):
        task_statuses.setdefault(task.group_id, []).append((task, task.status))

    changed = True
    while changed:  # a failure or a completion can release or cancel other groups
        changed = False
        by_name = {g.name: g for g in groups}
        for group in groups:
            if group.status in FINAL_TASK_STATUSES:
                continue
            statuses = [status for _, status in task_statuses.get(group.pk, [])]
            failed = [s for s in statuses if s in FINAL_TASK_STATUSES
                      and s != TaskStatus.COMPLETED]
            lead_done = all(status == TaskStatus.COMPLETED
                            for task, status in task_statuses.get(group.pk, [])
                            if task.spec_task == group.lead_task)
            alive = [s for s in statuses if s in ALIVE_TASK_STATUSES]
            if alive and (failed or lead_done):
                end_as, reason = ((TaskStatus.FAILED_CANCELED, "group_failed") if failed
                                  else (TaskStatus.COMPLETED, "lead_completed"))
                _end_tasks(Task.objects.filter(group=group), end_as, reason, now)
                task_statuses[group.pk] = [
                    (t, end_as if s in ALIVE_TASK_STATUSES else s)
                    for t, s in task_statuses[group.pk]]
                statuses = [s for _, s in task_statuses[group.pk]]
                alive = []
            if not alive:
                group.status = worst_status(statuses)
                group.finished_at = now
                group.reason = next((t_reason for t_reason in (
                    Task.objects.filter(group=group, status=group.status)
                    .exclude(reason=None).values_list("reason", flat=True)[:1])), None)
                group.save(update_fields=["status", "finished_at", "reason"])
                changed = True
            elif TaskStatus.RUNNING in statuses and group.status != TaskStatus.RUNNING:
                group.status = TaskStatus.RUNNING
                group.started_at = group.started_at or now
                group.save(update_fields=["status", "started_at"])

        failed_group = next((g for g in groups if g.status in FINAL_TASK_STATUSES
                             and g.status != TaskStatus.COMPLETED), None)
        for group in groups:
            if group.status in FINAL_TASK_STATUSES:
                continue
            if failed_group is not None:
                _end_tasks(Task.objects.filter(group=group), TaskStatus.FAILED_CANCELED,
                           "upstream_failed", now)
                task_statuses[group.pk] = [(t, TaskStatus.FAILED_CANCELED
                                            if s in ALIVE_TASK_STATUSES else s)
                                           for t, s in task_statuses.get(group.pk, [])]
                changed = True
            elif group.status == TaskStatus.WAITING and all(
                    by_name[name].status == TaskStatus.COMPLETED for name in group.depends_on):
                Task.objects.filter(group=group, status=TaskStatus.WAITING).update(
                    status=TaskStatus.SCHEDULING)
                task_statuses[group.pk] = [(t, TaskStatus.SCHEDULING
                                            if s == TaskStatus.WAITING else s)
                                           for t, s in task_statuses.get(group.pk, [])]
                group.status = TaskStatus.SCHEDULING
                group.save(update_fields=["status"])

    if all(g.status in FINAL_TASK_STATUSES for g in groups):
        worst = worst_status(g.status for g in groups)
        workflow.status = worst
        workflow.reason = next((g.reason for g in groups if g.status == worst and g.reason),
                               None) if worst != TaskStatus.COMPLETED else None
        workflow.finished_at = now
        workflow.save(update_fields=["status", "reason", "finished_at"])
        _after_finish(workflow)
    elif any(g.status == TaskStatus.RUNNING for g in groups) and (
            workflow.status == WorkflowStatus.PENDING):
        workflow.status = WorkflowStatus.RUNNING
        workflow.started_at = workflow.started_at or now
        workflow.save(update_fields=["status", "started_at"])


@transaction.atomic
def task_report_status(*, workflow: Workflow, task_name: str, status: str,
                       exit_code: int | None = None, node: str | None = None,
                       reason: str | None = None) -> Task:
    """A backend's report of one task's status; only forward moves are accepted."""
    workflow = _lock_workflow(workflow)
    task = Task.objects.filter(workflow=workflow, name=task_name).first()
    if task is None:
        from osmo.errors import NotFound

        raise NotFound("task_not_found",
                       f"Workflow '{workflow.name}' has no task '{task_name}'.")
    if status not in TaskStatus.values:
        raise Conflict("invalid_transition", f"'{status}' is not a task status.")
    if task.status in FINAL_TASK_STATUSES or status_rank(status) <= status_rank(task.status):
        raise Conflict("invalid_transition",
                       f"Task '{task_name}' is {task.status}; it cannot move to {status}.")
    now = timezone.now()
    task.status = status
    if status == TaskStatus.RUNNING:
        task.started_at = task.started_at or now
        task.node_name = node or task.node_name
    if status in FINAL_TASK_STATUSES:
        task.finished_at = now
        task.exit_code = exit_code
        task.reason = reason or ("preempted" if status == TaskStatus.FAILED_PREEMPTED else
                                 "evicted" if status == TaskStatus.FAILED_EVICTED else None)
    task.save()
    settle(workflow, now)
    return task


def _cancel(workflows: list[Workflow], reason: str) -> None:
    now = timezone.now()
    ids = [w.pk for w in workflows]
    _end_tasks(Task.objects.filter(workflow_id__in=ids), TaskStatus.FAILED_CANCELED, reason,
               now)
    WorkflowGroup.objects.filter(workflow_id__in=ids, status__in=ALIVE_TASK_STATUSES).update(
        status=TaskStatus.FAILED_CANCELED, reason=reason, finished_at=now)
    Workflow.objects.filter(pk__in=ids).update(status=WorkflowStatus.FAILED_CANCELED,
                                               reason=reason, finished_at=now)
    from scheduler.backends import cluster_changed

    cluster_changed()  # kubernetes backend: delete their pods now (no-op when embedded)


@transaction.atomic
def workflow_cancel(*, workflow: Workflow, reason: str = "canceled_by_user") -> Workflow:
    """Cancel an alive workflow: its alive tasks end FAILED_CANCELED and release their GPUs."""
    workflow = _lock_workflow(workflow)
    if workflow.status not in (WorkflowStatus.PENDING, WorkflowStatus.RUNNING):
        raise Conflict("invalid_transition",
                       f"Workflow '{workflow.name}' already ended ({workflow.status}).")
    _cancel([workflow], reason)
    workflow.refresh_from_db()
    _after_finish(workflow)
    return workflow


@transaction.atomic
def workflows_cancel_not_started(*, pool, reason: str) -> list[str]:
    """Cancel the pool's alive workflows that hold no GPUs yet (FAILED_CANCELED, `reason`).

    Rows are locked in id order so concurrent cancels and status reports cannot interleave.
    Returns the canceled workflow names.
    """
    holding = gpu_holding_tasks().filter(workflow=OuterRef("pk"))
    workflows = list(
        alive_workflows(pool_ids=[pool.pk]).filter(~Exists(holding))
        .select_for_update().order_by("pk")
    )
    if workflows:
        _cancel(workflows, reason)
    return [w.name for w in workflows]
