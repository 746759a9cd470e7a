"""Writing an admitted workflow, its groups, its tasks and its first events in ONE statement.

Admission is the hot path of the API: as ORM calls this is four round trips (workflow, groups,
tasks, the workflow's first events), as one data-modifying CTE it is one. The column lists and
casts come from the models' fields (computed once per process), so the statement follows the
models as they change; the admission tests cover it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache, lru_cache

from django.db import connection

from .models import Task, TaskEvent, Workflow, WorkflowGroup

_SKIP = {Workflow: (), WorkflowGroup: ("workflow_id",), Task: ("group_id", "workflow_id")}


@cache
def _fields(model) -> tuple[list, str, str]:
    """(fields, quoted column list, one row of typed placeholders) of a model."""
    fields = [f for f in model._meta.concrete_fields
              if not f.primary_key and f.attname not in _SKIP[model]]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    row = ", ".join(f"%s::{f.db_type(connection)}" for f in fields)
    return fields, columns, row


@lru_cache(maxsize=256)
def _statement(groups: int, tasks: int, events: int) -> str:
    _, workflow_columns, workflow_row = _fields(Workflow)
    _, group_columns, group_row = _fields(WorkflowGroup)
    task_fields, task_columns, task_row = _fields(Task)
    task_values = ", ".join(f"v.{connection.ops.quote_name(f.column)}" for f in task_fields)
    group_rows = ", ".join([f"({group_row})"] * groups)
    task_rows = ", ".join([f"(%s::text, {task_row})"] * tasks)
    return f"""
WITH workflow AS (
    INSERT INTO {Workflow._meta.db_table} ({workflow_columns}) VALUES ({workflow_row})
    RETURNING id),
grp AS (
    INSERT INTO {WorkflowGroup._meta.db_table} (workflow_id, {group_columns})
    SELECT workflow.id, g.* FROM workflow, (VALUES {group_rows}) g RETURNING id, name),
task AS (
    INSERT INTO {Task._meta.db_table} (group_id, workflow_id, {task_columns})
    SELECT grp.id, workflow.id, {task_values} FROM workflow,
        (VALUES {task_rows}) v(group_name, {task_columns}) JOIN grp ON grp.name = v.group_name
    RETURNING id, group_id, name){_events(events)}
SELECT workflow.id, grp.id, grp.name, task.id, task.name
FROM workflow JOIN grp ON true LEFT JOIN task ON task.group_id = grp.id
"""


def _events(count: int) -> str:
    """The workflow's own events (``TaskEvent`` rows without a task), as ``logstore`` keeps
    them, in the same statement."""
    if not count:
        return ""
    rows = ", ".join(["(%s::text, %s::text)"] * count)
    return f""",
event AS (
    INSERT INTO {TaskEvent._meta.db_table} (workflow_id, task_id, at, reason, message)
    SELECT workflow.id, NULL, %s::timestamptz, e.reason, e.message
    FROM workflow, (VALUES {rows}) e(reason, message))"""


def _values(instance, model, params: list) -> None:
    for field in _fields(model)[0]:
        params.append(field.get_db_prep_save(field.pre_save(instance, add=True), connection))


def insert_admitted(workflow: Workflow, groups: list[WorkflowGroup], tasks: list[Task], *,
                    events: Sequence[tuple[str, str]] = ()) -> None:
    """Insert everything, and the workflow's ``events`` ((reason, message), at its submission
    time); the instances get their primary keys."""
    params: list = []
    _values(workflow, Workflow, params)
    for group in groups:
        _values(group, WorkflowGroup, params)
    for task in tasks:
        params.append(task.group.name)
        _values(task, Task, params)
    if events:
        params.append(workflow.submitted_at)
        for reason, message in events:
            params += [reason[:40], message[:1000]]
    with connection.cursor() as cursor:
        cursor.execute(_statement(len(groups), len(tasks), len(events)), params)
        rows = cursor.fetchall()
    workflow.pk = rows[0][0]
    group_ids = {name: pk for _, pk, name, _, _ in rows}
    task_ids = {(group, name): pk for _, _, group, pk, name in rows if pk is not None}
    for group in groups:
        group.pk = group_ids[group.name]
        group.workflow = workflow  # sets workflow_id and keeps the cached instance
    for task in tasks:
        group = task.group
        task.pk = task_ids[(group.name, task.name)]
        task.group, task.workflow = group, workflow
