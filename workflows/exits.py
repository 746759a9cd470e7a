"""Exit actions in the state machine: a task's exit code completes it, fails it or runs its
group again (OSMO's RESCHEDULE), by the spec's `exitActions`, else the pool's
`default_exit_actions` (`osmo.exit_actions`). A code neither holds keeps the status the
backend reported.

A rescheduled group runs again as a gang: every one of its tasks goes back to SCHEDULING,
unbound, with the next `retry_id`, and the scheduler places it again like any pending gang
(the same queue, quota and admission rules: a pending task holds no GPUs). The workflow's
other groups go on untouched. After the pool's `max_retries` reschedules the task fails
(reason `retries_exhausted`). On Kubernetes the backend deletes the earlier run's pods and
PodGroup and dispatches the new run's (scheduler/backends/kubernetes/cleanup.py); only a
backend served by an agent cannot, and there the task fails (`reschedule_unsupported`).
Callers hold the workflow's row lock.
"""

from __future__ import annotations

from datetime import datetime

from osmo.exit_actions import matching_action

from . import logstore, ports
from .logstore import Event
from .models import Task, TaskStatus, Workflow, WorkflowGroup

RESCHEDULED = "rescheduled"
RETRIES_EXHAUSTED = "retries_exhausted"
UNSUPPORTED = "reschedule_unsupported"

# The statuses an exit code decides (a preemption, eviction or timeout is not the task's
# own exit).
_DECIDED = (TaskStatus.COMPLETED, TaskStatus.FAILED)


def _pool_settings(workflow: Workflow) -> tuple[dict, int]:
    pool = workflow.pool
    source = pool.parent if pool.is_subpool else pool
    return source.default_exit_actions or {}, source.max_retries


def decide(*, workflow: Workflow, task: Task, status: str, exit_code: int | None,
           reason: str | None, now: datetime) -> tuple[str, str | None] | None:
    """The status and reason the task ends with, or None when its group was rescheduled
    (nothing ended)."""
    if status not in _DECIDED or exit_code is None:
        return status, reason
    defaults, max_retries = _pool_settings(workflow)
    action = matching_action(exit_code, task.exit_actions, defaults)
    if action is None:
        return status, reason
    if action == "COMPLETE":
        return TaskStatus.COMPLETED, reason if status == TaskStatus.COMPLETED else None
    if action == "FAIL":
        return TaskStatus.FAILED, reason
    group = WorkflowGroup.objects.get(pk=task.group_id)
    if group.retry_id >= max_retries:
        return TaskStatus.FAILED, RETRIES_EXHAUSTED
    if not ports.scheduling().runs_again_in_place(group.backend):
        return TaskStatus.FAILED, UNSUPPORTED
    _reschedule(workflow, group, task, exit_code, max_retries, now)
    return None


def _reschedule(workflow: Workflow, group: WorkflowGroup, task: Task, exit_code: int,
                max_retries: int, now: datetime) -> None:
    retry = group.retry_id + 1
    tasks = list(Task.objects.filter(group=group).values_list("pk", flat=True))
    logstore.events_record(
        [Event(workflow.pk, task.pk, "Rescheduled",
               f"exit code {exit_code}: its group runs again (retry {retry} of {max_retries})",
               now)]
        + [Event(workflow.pk, pk, "Rescheduled", f"its group runs again (retry {retry})", now)
           for pk in tasks if pk != task.pk])
    Task.objects.filter(pk__in=tasks).update(
        status=TaskStatus.SCHEDULING, retry_id=retry, node_name="", started_at=None,
        finished_at=None, exit_code=None, reason=RESCHEDULED, preempted_by="")
    WorkflowGroup.objects.filter(pk=group.pk).update(
        status=TaskStatus.SCHEDULING, retry_id=retry, scheduling_at=now, started_at=None,
        finished_at=None, below_min_since=None, reason=RESCHEDULED)
