"""The status writes that update tasks by a list of ids look at each other task at most once
even when the table has no statistics yet (a fresh deployment's first burst: ANALYZE has not
run): the planner had every task scanned once per id of a small batch."""

from __future__ import annotations

import re

import pytest
from django.db import connection

from workflows import lifecycle
from workflows.models import Task, TaskEvent, TaskStatus, Workflow

from .conftest import gpu_spec, submit

pytestmark = pytest.mark.django_db

FILLER = 3000  # other tasks: the size at which the planner, without statistics, chose the scan


def _forget_statistics(table: str) -> None:
    """The table as the planner sees it before its first ANALYZE (rolled back with the test)."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM pg_statistic WHERE starelid = %s::regclass", [table])
        cursor.execute("UPDATE pg_class SET reltuples = -1, relpages = 0 "
                       "WHERE oid = %s::regclass", [table])


def test_observed_bindings_and_starts_look_at_each_task_once_without_statistics(
        team, user) -> None:
    names = [submit(user, "team", gpu_spec(1, f"obs{i}")).json()["name"] for i in range(20)]
    first = Task.objects.get(workflow__name=names[0])
    Task.objects.bulk_create([
        Task(group_id=first.group_id, workflow_id=first.workflow_id, pool_id=first.pool_id,
             priority=first.priority, name=f"filler-{i}", status=TaskStatus.COMPLETED)
        for i in range(FILLER)])
    _forget_statistics("workflows_task")
    plans: dict[str, str] = {}

    def explain(execute, sql, params, many, context):
        if sql.startswith(("WITH bound AS", "WITH started AS (UPDATE")):
            with connection.cursor() as cursor:  # run it for its plan's counts, then undo it
                cursor.execute("SAVEPOINT plan")
                cursor.execute("EXPLAIN (ANALYZE) " + sql, params)
                plans[sql.split(" AS", 1)[0]] = "\n".join(row[0] for row in cursor.fetchall())
                cursor.execute("ROLLBACK TO SAVEPOINT plan")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(explain):
        assert lifecycle.tasks_observed([
            lifecycle.TaskObservation(name, "main", TaskStatus.SCHEDULING, f"node-{i}")
            for i, name in enumerate(names)]) == 20
        assert lifecycle.tasks_observed([
            lifecycle.TaskObservation(name, "main", TaskStatus.RUNNING, f"node-{i}")
            for i, name in enumerate(names)]) == 20

    assert sorted(plans) == ["WITH bound", "WITH started"]
    for statement, plan in plans.items():  # 60,000 rows removed by a join filter before
        # Each other task once, and at most the batch against itself: a nested loop of the 20
        # ids over the 20 tasks found removes 380 by its join filter.
        removed = sum(map(int, re.findall(r"Rows Removed by (?:Join )?Filter: (\d+)", plan)))
        assert removed <= FILLER + len(names) ** 2, (statement, plan)
    tasks = Task.objects.filter(workflow__name__in=names, name="main")
    assert sorted((t.workflow.name, t.status, t.node_name) for t in tasks) == sorted(
        (name, TaskStatus.RUNNING, f"node-{i}") for i, name in enumerate(names))
    assert sorted(TaskEvent.objects.filter(task__in=tasks).values_list("reason", flat=True)) \
        == ["Bound"] * 20 + ["Running"] * 20
    assert set(Workflow.objects.filter(name__in=names).values_list("status", flat=True)) == {
        "RUNNING"}
    assert Task.objects.filter(status=TaskStatus.COMPLETED, name__startswith="filler-",
                               node_name="").count() == FILLER


def test_observed_batches_of_any_size_run_the_same_statements(team, user) -> None:
    """A batch's reads are one statement text whatever its size (arrays, not IN lists), so
    each is prepared once per connection instead of compiled and planned for every batch."""
    names = [submit(user, "team", gpu_spec(1, f"size{i}")).json()["name"] for i in range(4)]
    seen: list[list[str]] = []

    def record(execute, sql, params, many, context):
        if not sql.startswith(("SAVEPOINT", "RELEASE SAVEPOINT")):  # the test's transaction
            seen[-1].append(sql)
        return execute(sql, params, many, context)

    for batch in ([names[0]], names[1:]):
        seen.append([])
        with connection.execute_wrapper(record):
            assert lifecycle.tasks_observed([
                lifecycle.TaskObservation(name, "main", TaskStatus.SCHEDULING, "node-1")
                for name in batch]) == len(batch)
    assert seen[0] == seen[1] and len(seen[0]) == 3  # the lock, the tasks, the bindings
