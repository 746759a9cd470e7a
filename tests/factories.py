"""Test data: pools through the services (as the product writes them), tasks holding GPUs."""

from __future__ import annotations

import itertools

from pools import services as pool_services
from pools.models import Pool
from workflows.models import Task, TaskStatus, Workflow, WorkflowGroup, WorkflowStatus

_counter = itertools.count(1)


def pool(name: str, quota_gpus: int, **settings) -> Pool:
    created, _ = pool_services.pool_upsert(actor=None, name=name, quota_gpus=quota_gpus,
                                           **settings)
    return created


def subpool(parent: Pool, name: str, quota_gpus: int) -> Pool:
    created, _ = pool_services.subpool_create(actor=None, parent=parent, subpool_name=name,
                                              quota_gpus=quota_gpus)
    return created


def running_workflow(target: Pool, gpus: int, priority: str = "NORMAL", *, tasks: int = 1,
                     bound: bool = True) -> Workflow:
    """A workflow whose tasks share `gpus`; bound tasks hold their GPUs (status RUNNING)."""
    n = next(_counter)
    workflow = Workflow.objects.create(
        name=f"wf-{n}", pool=target, priority=priority, gpus_requested=gpus,
        status=WorkflowStatus.RUNNING if bound else WorkflowStatus.PENDING,
    )
    group = WorkflowGroup.objects.create(workflow=workflow, name="group",
                                         status=TaskStatus.RUNNING if bound else
                                         TaskStatus.WAITING)
    share, rest = divmod(gpus, tasks)
    for index in range(tasks):
        Task.objects.create(
            group=group, workflow=workflow, pool=target, priority=priority,
            name=f"task-{index}", position=index,
            gpus=share + (1 if index < rest else 0),
            status=TaskStatus.RUNNING if bound else TaskStatus.WAITING,
            node_name=f"node-{index}" if bound else "",
        )
    return workflow


def pending_workflow(target: Pool, gpus: int, priority: str = "NORMAL") -> Workflow:
    return running_workflow(target, gpus, priority, bound=False)
