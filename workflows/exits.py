"""Exit actions in the state machine: a task's exit code completes it, fails it or runs its
group again (OSMO's RESCHEDULE), by the spec's `exitActions`, else the pool's
`default_exit_actions` (`osmo.exit_actions`). A code neither holds keeps the status the
backend reported.

A rescheduled group runs again as a gang: every one of its tasks goes back to SCHEDULING,
unbound, with the next `retry_id`, and the scheduler places it again like any pending gang
(the same queue, quota and admission rules: a pending task holds no GPUs). The workflow's
other groups go on untouched. After the pool's `max_retries` reschedules the task fails
(reason `retries_exhausted`). On Kubernetes the backend deletes the earlier run's pods and
PodGroup and dispatches the new run's (scheduler/backends/kubernetes/cleanup.py), and an
agent's work queue the same, a delete before the creates (backends/agent/work.py).
Callers hold the workflow's row lock.
"""

from __future__ import annotations

from datetime import datetime

from osmo.exit_actions import matching_action

from . import logstore
from .logstore import Event
from .models import Task, TaskStatus, Workflow, WorkflowGroup

# OSMO's infra exit code for a task its backend failed (OSMO's user guide, "Exit Codes"): a
# task ended FAILED_BACKEND_ERROR reports it, and an exit action over it may run the group
# again — on another backend of the pool when its own is lost.
BACKEND_ERROR = 3001
RESCHEDULED = "rescheduled"
RETRIES_EXHAUSTED = "retries_exhausted"

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
    _reschedule(workflow, group, task, exit_code, max_retries, now)
    return None


def rescheduled_on_backend_loss(*, workflow: Workflow, group: WorkflowGroup,
                                now: datetime) -> bool:
    """A lost backend ends the group's tasks: True when, instead, one of its alive tasks'
    exit actions (or the pool's defaults) says RESCHEDULE for ``BACKEND_ERROR`` and a retry
    is left — the group then runs again, unbound, and the fleet sends it where it can start
    (its lost backend is OFFLINE); its earlier run's objects are fenced there."""
    defaults, max_retries = _pool_settings(workflow)
    if group.retry_id >= max_retries:
        return False
    asking = next((task for task in Task.objects.filter(
        group=group, status__in=(TaskStatus.SCHEDULING, TaskStatus.RUNNING)).order_by(
            "position") if matching_action(BACKEND_ERROR, task.exit_actions, defaults)
        == "RESCHEDULE"), None)
    if asking is None:
        return False
    _reschedule(workflow, group, asking, BACKEND_ERROR, max_retries, now)
    return True


def _reschedule(workflow: Workflow, group: WorkflowGroup, task: Task, exit_code: int,
                max_retries: int, now: datetime) -> None:
    retry = group.retry_id + 1
    tasks = list(Task.objects.filter(group=group).values_list("pk", flat=True))
    logstore.events_record(
        # The new run's first events: written before the tasks take its retry_id.
        [Event(workflow.pk, task.pk, "Rescheduled",
               f"exit code {exit_code}: its group runs again (retry {retry} of {max_retries})",
               now, retry)]
        + [Event(workflow.pk, pk, "Rescheduled", f"its group runs again (retry {retry})", now,
                 retry) for pk in tasks if pk != task.pk])
    Task.objects.filter(pk__in=tasks).update(
        status=TaskStatus.SCHEDULING, retry_id=retry, node_name="", started_at=None,
        finished_at=None, exit_code=None, reason=RESCHEDULED, preempted_by="")
    WorkflowGroup.objects.filter(pk=group.pk).update(
        status=TaskStatus.SCHEDULING, retry_id=retry, scheduling_at=now, started_at=None,
        finished_at=None, below_min_since=None, reason=RESCHEDULED)
