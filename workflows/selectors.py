"""Reads over workflows and tasks."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db.models import Count, Exists, F, OuterRef, Prefetch, Q, Sum

from osmo import keyset
from osmo.accounts.roles import Roles
from osmo.errors import NotFound
from pools.models import Pool
from pools.quota import Usage

from . import ports
from .models import (
    ALIVE_TASK_STATUSES,
    ALIVE_WORKFLOW_STATUSES,
    HOLDS_GPUS,
    QUOTA_PRIORITIES,
    Task,
    TaskStatus,
    Workflow,
    WorkflowGroup,
)


def gpu_holding_tasks():
    """Tasks that hold GPUs on the cluster: running or bound to a node, not finished."""
    return Task.objects.filter(HOLDS_GPUS)


def alive_workflows(*, pool_ids: list[int]):
    return Workflow.objects.filter(pool_id__in=pool_ids, status__in=ALIVE_WORKFLOW_STATUSES)


def guaranteed_gpus_by_backend() -> dict[tuple[str, str], tuple[int, int]]:
    """(pool name, backend) → (GPUs held on nodes, GPUs waiting) of the alive guaranteed (HIGH,
    NORMAL) tasks of groups dispatched to that backend: what each cluster's queue of the pool
    must guarantee there, the work that holds GPUs first."""
    rows = (Task.objects.filter(status__in=ALIVE_TASK_STATUSES, priority__in=QUOTA_PRIORITIES,
                                group__backend__isnull=False)
            .values_list("pool__name", "group__backend")
            .annotate(held=Sum("gpus", filter=HOLDS_GPUS, default=0),
                      waiting=Sum("gpus", filter=~HOLDS_GPUS, default=0)).order_by())
    return {(pool, backend): (held, waiting) for pool, backend, held, waiting in rows}


def pools_with_alive_workflows(pool_ids: list[int]) -> set[int]:
    return set(alive_workflows(pool_ids=pool_ids).values_list("pool_id", flat=True).distinct())


def usage_by_pool(pool_ids: list[int] | None = None) -> dict[int, Usage]:
    """GPUs held per pool, split by priority, with the workflows holding them: ONE aggregate
    over the partial index of bound tasks."""
    tasks = gpu_holding_tasks()
    if pool_ids is not None:
        tasks = tasks.filter(pool_id__in=pool_ids)
    rows = tasks.values_list("pool_id").annotate(
        used=Sum("gpus", filter=Q(priority__in=QUOTA_PRIORITIES), default=0),
        total=Sum("gpus", default=0),
        workflows=Count("workflow_id", distinct=True),
    ).order_by()
    return {pool_id: Usage(used, total, workflows) for pool_id, used, total, workflows in rows}


def workflows_holding_gpus(*, pool_ids: list[int]):
    """Alive workflows in these pools with at least one task holding GPUs."""
    return alive_workflows(pool_ids=pool_ids).filter(
        Exists(gpu_holding_tasks().filter(workflow=OuterRef("pk"))))


def visible_pool_ids(roles: Roles):
    """The pools (top-level and their subpools) the caller can view, as a subquery of ids;
    None: every pool. Filtering on `pool_id IN (…)` keeps one row per workflow or task, so a
    page never needs a DISTINCT over the whole history."""
    visible = roles.visible_q("name")
    if visible is None or roles.backend:  # cluster backends report on every workflow
        return None
    return Pool.objects.filter(visible | roles.visible_q("parent__name")).values("pk")


def visible_workflows(*, roles: Roles, user):
    """Workflows in pools the caller can view, plus the caller's own; groups and tasks
    prefetched (a fixed number of queries whatever the page size)."""
    queryset = Workflow.objects.select_related("pool", "user").prefetch_related(
        Prefetch("groups", queryset=WorkflowGroup.objects.order_by("position")),
        Prefetch("groups__tasks", queryset=Task.objects.order_by("position")),
    )
    pools = visible_pool_ids(roles)
    if pools is None:
        return queryset
    return queryset.filter(Q(pool_id__in=pools) | Q(user=user))


def visible_tasks(*, roles: Roles, user):
    """Tasks of the workflows `visible_workflows` gives: a task carries its workflow's pool,
    so the same filter without going through the workflows."""
    pools = visible_pool_ids(roles)
    if pools is None:
        return Task.objects.all()
    return Task.objects.filter(Q(pool_id__in=pools) | Q(workflow__user=user))


def can_cancel(*, workflow: Workflow, roles: Roles, user) -> bool:
    """The submitter, or an admin of the workflow's pool."""
    return workflow.user_id == user.pk or roles.can_admin(workflow.pool.top_level_name)


def workflow_get(*, name: str, roles: Roles, user) -> Workflow:
    workflow = visible_workflows(roles=roles, user=user).filter(name=name).first()
    if workflow is None:
        raise NotFound("workflow_not_found", f"Workflow '{name}' does not exist.")
    return workflow


def bound_tasks_on_node(node_name: str):
    """Tasks bound to a node that still hold it (starting or running)."""
    return Task.objects.filter(node_name=node_name,
                               status__in=(TaskStatus.SCHEDULING, TaskStatus.RUNNING))


def bound_tasks_on_nodes(node_names: list[str]):
    """Tasks bound to any of these nodes that still hold it."""
    return Task.objects.filter(node_name__in=node_names,
                               status__in=(TaskStatus.SCHEDULING, TaskStatus.RUNNING))


def task_alive(*, workflow_name: str, task_name: str, retry_id: int | None = None) -> bool:
    """Is the task still waiting, scheduling or running (in its group's run ``retry_id``,
    when given)?"""
    tasks = Task.objects.filter(workflow__name=workflow_name, name=task_name,
                                status__in=ALIVE_TASK_STATUSES)
    return (tasks if retry_id is None else tasks.filter(retry_id=retry_id)).exists()


def workflows_not_started(names: Iterable[str]) -> dict[str, tuple[str, datetime]]:
    """Of the named workflows, those none of whose tasks has started yet: name → (priority,
    submitted_at)."""
    return {name: (priority, submitted) for name, priority, submitted in Workflow.objects.filter(
        name__in=set(names), started_at__isnull=True).values_list(
        "name", "priority", "submitted_at")}


def gangs_by_backend() -> dict[str | None, dict[str, int]]:
    """Backend name (None: not dispatched yet) → {"pending", "running"}: the gangs (groups)
    waiting for a placement and those running, one aggregate over the alive groups' index."""
    counts: dict[str | None, dict[str, int]] = {}
    for backend, status, count in (
        WorkflowGroup.objects.filter(status__in=(TaskStatus.SCHEDULING, TaskStatus.RUNNING))
        .values_list("backend", "status").annotate(count=Count("pk")).order_by()
    ):
        entry = counts.setdefault(backend, {"pending": 0, "running": 0})
        entry["running" if status == TaskStatus.RUNNING else "pending"] += count
    return counts


def pending_reasons(workflows: Iterable[Workflow]) -> dict[str, dict]:
    """Why each alive workflow with no reason of its own still waits: the scheduler's first
    reason for a pending gang of it (`{group, code, message}`; one query for a whole page)."""
    names = [w.name for w in workflows if w.status in ALIVE_WORKFLOW_STATUSES and not w.reason]
    return dict(ports.scheduling().pending_reasons(names)) if names else {}


def task_page(tasks, *, descending: bool, limit: int, offset: int = 0,
              position: keyset.Position | None = None) -> tuple[list[Task], str | None]:
    """A page of `osmo task list` by start time (tasks not started last, by id), and the
    cursor of the page after it (None: no task follows). From a cursor, the page is read from
    the (started_at, id) index at its position: as cheap deep in the history as at its start."""
    time = F("started_at").desc(nulls_last=True) if descending else \
        F("started_at").asc(nulls_last=True)
    # Their workflows, users and pools read by id after the page (not joined into it): the
    # page's plan is the task index alone, whatever share of the history it filters.
    ordered = tasks.prefetch_related("workflow__user", "pool").order_by(time, "id")
    if position is None:
        rows = list(ordered[offset:offset + limit + 1])
    elif position.time is None:
        rows = list(ordered.filter(started_at__isnull=True, id__gt=position.id)[:limit + 1])
    else:
        rows = list(ordered.filter(keyset.beyond("started_at", position, id_descending=False))
                    [:limit + 1])
        if len(rows) <= limit:  # the started ones ran out: the tasks not started follow
            rows += ordered.filter(started_at__isnull=True)[:limit + 1 - len(rows)]
    page = rows[:limit]
    if len(rows) <= limit:
        return page, None
    last = page[-1]
    return page, keyset.Position(descending, True, last.started_at, last.pk).encode()
