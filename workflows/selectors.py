"""Reads over workflows and tasks."""

from __future__ import annotations

from django.db.models import Exists, OuterRef

from .models import ALIVE_TASK_STATUSES, ALIVE_WORKFLOW_STATUSES, Task, Workflow


def gpu_holding_tasks():
    """Tasks that hold GPUs on the cluster: bound to a node and not finished."""
    return Task.objects.filter(node_name__gt="", status__in=ALIVE_TASK_STATUSES)


def alive_workflows(*, pool_ids: list[int]):
    return Workflow.objects.filter(pool_id__in=pool_ids, status__in=ALIVE_WORKFLOW_STATUSES)


def workflows_holding_gpus(*, pool_ids: list[int]):
    """Alive workflows in these pools with at least one task holding GPUs."""
    return alive_workflows(pool_ids=pool_ids).filter(
        Exists(gpu_holding_tasks().filter(workflow=OuterRef("pk"))))
