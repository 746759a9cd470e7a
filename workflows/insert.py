"""Writing an admitted workflow, its groups, its tasks and its first events in ONE statement.

Admission is the hot path of the API: as ORM calls this is four round trips (workflow, groups,
tasks, the workflow's first events), as one data-modifying CTE it is one. The column lists and
casts come from the models' fields (computed once per process), so the statement follows the
models as they change; the admission tests cover it. The groups, tasks and events go as one JSON
array each (``json_populate_recordset``): the statement is the same text with at most 25 parameters
whatever the workflow's size, so psycopg converts it once per process (it re-parses a statement
longer than 4 KiB or with more than 50 parameters on every call, a tenth of a submission's CPU).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from functools import cache

from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from psycopg.types.json import Jsonb

from .models import Task, TaskEvent, Workflow, WorkflowGroup, WorkflowNameCounter

_SKIP = {Workflow: (), WorkflowGroup: ("workflow_id",), Task: ("group_id", "workflow_id")}


@cache
def _fields(model) -> tuple[list, str, str]:
    """(fields, quoted column list, one row of typed placeholders) of a model."""
    fields = [f for f in model._meta.concrete_fields
              if not f.primary_key and f.attname not in _SKIP[model]]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    row = ", ".join(f"%s::{f.db_type(connection)}" for f in fields)
    return fields, columns, row


@cache
def _statement(events: bool, numbered: bool) -> str:
    """``numbered``: the workflow's number is taken in the statement itself (the name
    counter's row, locked until the commit, is then held for this one statement and the
    commit only); its name is the sent name, "-" and the number, and each group's PodGroup
    the workflow's name, "-" and the sent one."""
    workflow_fields, workflow_columns, workflow_row = _fields(Workflow)
    group_fields, group_columns, _ = _fields(WorkflowGroup)
    task_fields, task_columns, _ = _fields(Task)
    quote = connection.ops.quote_name
    task_values = ", ".join(f"v.{quote(f.column)}" for f in task_fields)
    if numbered:
        counter = f"""counter AS (
    INSERT INTO {WorkflowNameCounter._meta.db_table} (spec_name, value) VALUES (%s, 1)
    ON CONFLICT (spec_name) DO UPDATE SET value = {WorkflowNameCounter._meta.db_table}.value + 1
    RETURNING value),
"""
        workflow_values = ", ".join(
            f"w.{quote(f.column)} || '-' || counter.value" if f.attname == "name"
            else f"w.{quote(f.column)}" for f in workflow_fields)
        workflow_insert = (f"SELECT {workflow_values} FROM counter, (VALUES ({workflow_row})) "
                           f"w({workflow_columns})")
        group_values = ", ".join(
            f"workflow.name || '-' || g.{quote(f.column)}" if f.attname == "podgroup"
            else f"g.{quote(f.column)}" for f in group_fields)
    else:
        counter, workflow_insert = "", f"VALUES ({workflow_row})"
        group_values = ", ".join(f"g.{quote(f.column)}" for f in group_fields)
    return f"""
WITH {counter}workflow AS (
    INSERT INTO {Workflow._meta.db_table} ({workflow_columns}) {workflow_insert}
    RETURNING id, name),
grp AS (
    INSERT INTO {WorkflowGroup._meta.db_table} (workflow_id, {group_columns})
    SELECT workflow.id, {group_values} FROM workflow,
        json_populate_recordset(NULL::{WorkflowGroup._meta.db_table}, %s::json) g
    RETURNING id, name, podgroup),
task AS (
    INSERT INTO {Task._meta.db_table} (group_id, workflow_id, {task_columns})
    SELECT grp.id, workflow.id, {task_values} FROM workflow, grp, json_array_elements(%s::json) j,
        json_populate_record(NULL::{Task._meta.db_table}, j) v WHERE grp.name = j->>'group'
    RETURNING id, group_id, name){_events() if events else ""}
SELECT workflow.id, workflow.name, grp.id, grp.name, grp.podgroup, task.id, task.name
FROM workflow JOIN grp ON true LEFT JOIN task ON task.group_id = grp.id
"""


def _events() -> str:
    """The workflow's own events (``TaskEvent`` rows without a task), as ``logstore`` keeps
    them, in the same statement."""
    return f""",
event AS (
    INSERT INTO {TaskEvent._meta.db_table} (workflow_id, task_id, at, reason, message)
    SELECT workflow.id, NULL, %s::timestamptz, e.reason, e.message
    FROM workflow, json_to_recordset(%s::json) e(reason text, message text))"""


# Field classes (exactly these, not subclasses) whose values of these types, and None, reach
# the database as they are, an integer column's through the backend's adaptation (its binary
# type, or a plain int when too large for it: osmo/postgres): Django's preparation
# (``pre_save``, ``get_db_prep_save``) is a chain of calls that does no more, a tenth of a
# submission's CPU for its 52 columns. So do a foreign key's to an automatic key, and an aware
# time not set automatically (``_plan``). Other values, and other fields, take it.
_AS_IS = {models.CharField: str, models.TextField: str, models.IntegerField: int,
          models.PositiveIntegerField: int, models.BigIntegerField: int}
_AUTOMATIC_KEYS = (models.AutoField, models.BigAutoField)


@cache
def _plan(model) -> list[tuple]:
    """(field, its attribute, the type whose values go as they are or None, the internal
    type of an integer column, whose values the backend adapts, or None) of each inserted
    column."""
    plan = []
    for field in _fields(model)[0]:
        kind = type(field)
        plain, integer = _AS_IS.get(kind), None
        if plain is int:
            integer = field.get_internal_type()
        elif kind is models.ForeignKey and type(field.target_field) in _AUTOMATIC_KEYS:
            plain = int  # as the automatic key's own preparation sends it
        elif kind is models.DateTimeField and not (field.auto_now or field.auto_now_add):
            plain = datetime.datetime  # when aware: a naive one takes Django's way (its warning)
        plan.append((field, field.attname, plain, integer))
    return plan


def _prepared(instance, model, db):
    """(field, the value the database gets) for each inserted column of ``instance``; ``db``:
    the connection itself, not the ``connection`` proxy, which looks the thread's connection
    up again at every read."""
    values = instance.__dict__
    for field, attname, plain, integer in _plan(model):
        if plain is not None and attname in values:
            value = values[attname]
            if value is None:
                yield field, None
                continue
            if type(value) is plain and (plain is not datetime.datetime
                                         or value.tzinfo is not None):
                yield field, (value if integer is None
                              else db.ops.adapt_integerfield_value(value, integer))
                continue
        yield field, field.get_db_prep_save(field.pre_save(instance, add=True), db)


def _values(instance, model, params: list, db) -> None:
    params.extend(value for _field, value in _prepared(instance, model, db))


def _record(instance, model, record: dict, db) -> dict:
    """A row as a JSON object (``json_populate_record``): the values ``_values`` sends."""
    for field, value in _prepared(instance, model, db):
        record[field.column] = value.obj if isinstance(value, Jsonb) else value
    return record


def _json(value):
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not a column value the insert sends")


def _dumps(rows: list) -> str:
    return json.dumps(rows, default=_json, ensure_ascii=False, separators=(",", ":"))


def insert_admitted(workflow: Workflow, groups: list[WorkflowGroup], tasks: list[Task], *,
                    events: Sequence[tuple[str, str]] = (), numbered: str | None = None) -> None:
    """Insert everything, and the workflow's ``events`` ((reason, message), at its submission
    time); the instances get their primary keys. ``numbered``: the spec name whose counter
    numbers the workflow in this statement — the workflow was built named ``numbered`` and
    each group's PodGroup named as the group; they get their final names."""
    params: list = []
    if numbered is not None:
        params.append(numbered)
    db = connections[DEFAULT_DB_ALIAS]
    _values(workflow, Workflow, params, db)
    params.append(_dumps([_record(group, WorkflowGroup, {}, db) for group in groups]))
    params.append(_dumps([_record(task, Task, {"group": task.group.name}, db)
                          for task in tasks]))
    if events:
        params.append(workflow.submitted_at)
        params.append(_dumps([{"reason": reason[:40], "message": message[:1000]}
                              for reason, message in events]))
    with db.cursor() as cursor:
        cursor.execute(_statement(bool(events), numbered is not None), params)
        rows = cursor.fetchall()
    workflow.pk, workflow.name = rows[0][0], rows[0][1]
    group_ids = {name: (pk, podgroup) for _, _, pk, name, podgroup, _, _ in rows}
    task_ids = {(group, name): pk for _, _, _, group, _, pk, name in rows if pk is not None}
    for group in groups:
        group.pk, group.podgroup = group_ids[group.name]
        group.workflow = workflow  # sets workflow_id and keeps the cached instance
    for task in tasks:
        group = task.group
        task.pk = task_ids[(group.name, task.name)]
        task.group, task.workflow = group, workflow
