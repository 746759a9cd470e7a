"""Workflow admission (API.md "Workflows", seed 002 "Core Rules").

Order of checks: the spec parses (400 `invalid_spec`), then — in one transaction with the target
pool row and its parent locked — the subpool is ACTIVE (409 `subpool_not_active`), a HIGH/NORMAL
parent submission fits the unallocated share (409 `exceeds_unallocated`), and no group needs more
GPUs than the target's quota (409 `exceeds_quota`). LOW skips both quota checks.

The rows are locked FOR SHARE: submissions do not wait for each other, while a subpool change
(which takes FOR UPDATE on the same rows) cannot interleave with one. A rejected submission writes
nothing; an accepted one is committed before the response is sent.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from osmo.errors import Conflict, OsmoError
from pools.models import Pool, PoolStatus, SubpoolState
from pools.selectors import active_subpool_quota_sum
from scheduler.kai.podgroups import podgroup_name

from .models import (
    QUOTA_PRIORITIES,
    Priority,
    Task,
    TaskStatus,
    Workflow,
    WorkflowGroup,
    WorkflowKind,
    WorkflowStatus,
)
from .spec import SpecError, WorkflowSpec, parse_workflow_spec


@dataclass
class Admission:
    """What a submission created (or, for a dry run, would create)."""

    workflow: Workflow
    groups: list[WorkflowGroup]
    tasks: list[Task]
    spec: WorkflowSpec


def validate_priority(priority: str | None) -> str:
    value = (priority or Priority.NORMAL).upper()
    if value not in Priority.values:
        raise OsmoError("invalid_request", f"priority must be HIGH, NORMAL or LOW, not "
                                           f"'{priority}'.", errors={"priority": ["Unknown."]})
    return value


def parse_for_pool(pool: Pool, source, *, set_variables=(), set_string_variables=()
                   ) -> WorkflowSpec:
    """Parse with the pool's platforms (subpools inherit their parent's)."""
    settings_pool = pool.parent if pool.is_subpool else pool
    try:
        return parse_workflow_spec(
            source, set_variables=list(set_variables or ()),
            set_string_variables=list(set_string_variables or ()),
            platforms=list(settings_pool.platforms or {}),
            default_platform=settings_pool.default_platform or None,
        )
    except SpecError as error:
        raise OsmoError("invalid_spec", "The workflow spec is not valid: "
                        + "; ".join(f"{path}: {messages[0]}"
                                    for path, messages in list(error.errors.items())[:3]),
                        errors={path: list(messages) for path, messages in error.errors.items()}
                        ) from error


def _lock_for_share(pk: int) -> Pool:
    return next(iter(Pool.objects.raw("SELECT * FROM pools WHERE id = %s FOR SHARE", [pk])))


def check_quota(*, target: Pool, parent: Pool, spec_total: int, largest_group: int,
                priority: str) -> None:
    """Checks 3-5 of API.md, with the rows already locked."""
    settings_pool = parent
    if settings_pool.status != PoolStatus.ONLINE:
        raise Conflict("pool_not_online",
                       f"Pool '{parent.name}' is {settings_pool.status}: it takes no new "
                       f"workflows.")
    if target.is_subpool and target.subpool_state != SubpoolState.ACTIVE:
        raise Conflict("subpool_not_active",
                       f"Subpool '{target.name}' is {target.subpool_state} and takes no new "
                       f"workflows.")
    if priority not in QUOTA_PRIORITIES:
        return  # LOW is opportunistic and preemptible
    if target.is_subpool:
        quota, what = target.quota_gpus, f"subpool '{target.name}' quota"
    else:
        allocated = active_subpool_quota_sum(parent=parent)
        has_subpools = parent.subpools.filter(subpool_state=SubpoolState.ACTIVE).exists()
        quota = parent.quota_gpus - allocated if has_subpools else parent.quota_gpus
        what = (f"unallocated share of pool '{parent.name}'" if has_subpools
                else f"pool '{parent.name}' quota")
        if has_subpools and spec_total > quota:
            subpools = list(parent.subpools.filter(subpool_state=SubpoolState.ACTIVE)
                            .order_by("name").values_list("name", flat=True)[:5])
            raise Conflict(
                "exceeds_unallocated",
                f"The workflow requests {spec_total} GPUs but pool '{parent.name}' has only "
                f"{quota} unallocated GPUs ({allocated} of its {parent.quota_gpus} are in "
                f"subpools). Submit to a subpool ({', '.join(subpools)}) or with priority LOW.",
            )
    if largest_group > quota:
        raise Conflict(
            "exceeds_quota",
            f"A group needs {largest_group} GPUs at once but the {what} is {quota} GPUs, so it "
            f"could never run at {priority}. Use a pool with more quota or priority LOW.",
        )


def _peek_name(spec_name: str) -> str:
    """The name a submission would get now (dry runs write nothing, not even the counter)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT value FROM workflows_workflownamecounter WHERE spec_name = %s",
                       [spec_name])
        row = cursor.fetchone()
    return f"{spec_name}-{(row[0] if row else 0) + 1}"


def _next_name(spec_name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO workflows_workflownamecounter (spec_name, value) VALUES (%s, 1) "
            "ON CONFLICT (spec_name) DO UPDATE SET value = "
            "workflows_workflownamecounter.value + 1 RETURNING value", [spec_name])
        return f"{spec_name}-{cursor.fetchone()[0]}"


def _build(spec: WorkflowSpec, *, name: str, pool: Pool, priority: str, actor, source: str,
           set_variables, set_string_variables, kind: str) -> Admission:
    workflow = Workflow(
        name=name, kind=kind, pool=pool, priority=priority,
        user=actor if getattr(actor, "is_authenticated", False) else None,
        status=WorkflowStatus.PENDING, spec=source if isinstance(source, str) else "",
        rendered_spec=spec.rendered_text or "", set_variables=list(set_variables or ()),
        set_string_variables=list(set_string_variables or ()), gpus_requested=spec.total_gpus,
    )
    workflow.submitted_at = timezone.now()
    groups, tasks = [], []
    for group_index, group_spec in enumerate(spec.groups):
        status = TaskStatus.WAITING if group_spec.depends_on else TaskStatus.SCHEDULING
        group = WorkflowGroup(workflow=workflow, name=group_spec.name, position=group_index,
                              status=status, depends_on=list(group_spec.depends_on),
                              lead_task=group_spec.lead, gpus=group_spec.gpus,
                              podgroup=podgroup_name(name, group_spec.name))
        groups.append(group)
        for task_spec in group_spec.tasks:
            replicas = [None] if task_spec.replicas == 1 else range(task_spec.replicas)
            for replica in replicas:
                tasks.append(Task(
                    group=group, workflow=workflow, pool=pool, priority=priority,
                    name=task_spec.name if replica is None else f"{task_spec.name}-{replica}",
                    spec_task=task_spec.name, replica=replica, position=len(tasks),
                    status=status, gpus=task_spec.resource.gpus,
                ))
    return Admission(workflow, groups, tasks, spec)


def workflow_submit(*, actor, pool: Pool, source, priority: str | None = None,
                    set_variables=(), set_string_variables=(), dry_run: bool = False,
                    kind: str = WorkflowKind.WORKFLOW, spec: WorkflowSpec | None = None
                    ) -> Admission:
    """Admit a workflow into `pool` (top-level or subpool); see the module docstring."""
    priority = validate_priority(priority)
    if spec is None:
        spec = parse_for_pool(pool, source, set_variables=set_variables,
                              set_string_variables=set_string_variables)
    with transaction.atomic():
        parent = _lock_for_share(pool.parent.pk if pool.is_subpool else pool.pk)
        target = _lock_for_share(pool.pk) if pool.is_subpool else parent
        if target.is_subpool:
            target.parent = parent
        check_quota(target=target, parent=parent, spec_total=spec.total_gpus,
                    largest_group=spec.max_group_gpus, priority=priority)
        if dry_run:
            return _build(spec, name=_peek_name(spec.name), pool=target, priority=priority,
                          actor=actor, source=source, set_variables=set_variables,
                          set_string_variables=set_string_variables, kind=kind)
        admission = _build(spec, name=_next_name(spec.name), pool=target, priority=priority,
                           actor=actor, source=source, set_variables=set_variables,
                           set_string_variables=set_string_variables, kind=kind)
        admission.workflow.save()
        WorkflowGroup.objects.bulk_create(admission.groups)
        for task in admission.tasks:
            task.group_id, task.workflow_id = task.group.pk, admission.workflow.pk
        Task.objects.bulk_create(admission.tasks)
    return admission
