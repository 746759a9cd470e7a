"""Writes over workflows, groups and tasks."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from .models import ALIVE_TASK_STATUSES, Task, TaskStatus, Workflow, WorkflowGroup, WorkflowStatus
from .selectors import alive_workflows, gpu_holding_tasks


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
    if not workflows:
        return []
    now = timezone.now()
    ids = [w.pk for w in workflows]
    Task.objects.filter(workflow_id__in=ids, status__in=ALIVE_TASK_STATUSES).update(
        status=TaskStatus.FAILED_CANCELED, reason=reason, finished_at=now
    )
    WorkflowGroup.objects.filter(workflow_id__in=ids, status__in=ALIVE_TASK_STATUSES).update(
        status=TaskStatus.FAILED_CANCELED, reason=reason
    )
    Workflow.objects.filter(pk__in=ids).update(
        status=WorkflowStatus.FAILED_CANCELED, reason=reason, finished_at=now
    )
    return [w.name for w in workflows]
