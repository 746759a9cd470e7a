"""The embedded loop's database work per cycle is set-based: the statements a cycle sends do not
grow with the tasks it ends and binds (a 512-node cluster of 20 s jobs ends and starts about 200
tasks a second); and its capacity check still refuses a double-booked GPU."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduler.backends.embedded import cycle as embedded_cycle
from scheduler.backends.embedded.sim_logs import SimulatedOutput
from scheduler.core.results import Binding
from workflows.models import Task, TaskEvent, TaskLogChunk, Workflow, WorkflowGroup

from .conftest import add_nodes, nodes_of, spec, submit, workflow

pytestmark = pytest.mark.django_db

GROUPS = 4  # independent 1-GPU groups a workflow, each its own gang


def small(name: str) -> str:
    groups = "\n".join(f"  - name: g{i}\n    tasks:\n    - {{name: t{i}, image: x, command: "
                       f"[sleep, '5'], resource: r}}" for i in range(GROUPS))
    return (f"workflow:\n  name: {name}\n  groups:\n{groups}\n  resources:\n"
            f"    r: {{gpu: 1, cpu: 1, memory: 1Gi}}\n")


def test_a_cycles_statements_do_not_grow_with_the_tasks_it_ends_and_binds(
        admin, alice, team, settings):
    settings.OSMO_SIM_TASK_SECONDS = 60
    add_nodes(admin, 4)  # 32 GPUs
    start = timezone.now()

    def cycle_at(seconds: int):
        with CaptureQueriesContext(connection) as queries:
            summary = embedded_cycle.cycle_run(now=start + timedelta(seconds=seconds))
        return summary, len(queries)

    first = [submit(alice, "team", small(f"a{i}")) for i in range(2)]
    cycle_at(0)
    second = [submit(alice, "team", small(f"b{i}")) for i in range(2)]
    summary, few = cycle_at(10)  # ends 2 workflows (8 tasks), binds 2 (8 tasks)
    assert (summary.completed, summary.bound) == (8, 8)
    third = [submit(alice, "team", small(f"c{i}")) for i in range(6)]
    summary, _ = cycle_at(20)
    assert (summary.completed, summary.bound) == (8, 24)
    fourth = [submit(alice, "team", small(f"d{i}")) for i in range(6)]
    summary, many = cycle_at(30)  # ends 6 workflows (24 tasks), binds 6 (24 tasks)
    assert (summary.completed, summary.bound) == (24, 24)

    assert many == few
    ended = first + second + third
    assert [workflow(alice, name)["status"] for name in ended] == ["COMPLETED"] * len(ended)
    assert [workflow(alice, name)["status"] for name in fourth] == ["RUNNING"] * 6
    assert set(WorkflowGroup.objects.filter(workflow__name__in=ended)
               .values_list("status", flat=True)) == {"COMPLETED"}
    assert Task.objects.filter(workflow__name__in=fourth, status="RUNNING").count() == 24
    ids = Workflow.objects.filter(name__in=ended).values_list("pk", flat=True)
    assert TaskEvent.objects.filter(workflow_id__in=ids, reason="Completed").count() == 40


def test_a_cycle_that_would_double_book_a_gpu_commits_nothing(admin, alice, team, monkeypatch):
    """The capacity check before commit (one query through the GPU holders' index): a
    decision that over-commits a node rolls the whole cycle back."""
    add_nodes(admin, 1)  # 8 GPUs
    full = submit(alice, "team", spec("full", 8))
    embedded_cycle.cycle_run()
    late = submit(alice, "team", spec("late", 1))
    group = WorkflowGroup.objects.get(workflow__name=late)
    decide = embedded_cycle.run_cycle

    def double_booking(snapshot):
        result = decide(snapshot)
        assert result.bindings == ()  # the core leaves it pending: the node is full
        return replace(result, bindings=(Binding(pod=f"{late}/t0", gang=group.podgroup,
                                                 node="node-0"),))

    monkeypatch.setattr(embedded_cycle, "run_cycle", double_booking)
    with pytest.raises(embedded_cycle.OverCommitError, match="node-0"):
        embedded_cycle.cycle_run()
    task = Task.objects.get(workflow__name=late)
    assert (task.status, task.node_name, task.started_at) == ("SCHEDULING", "", None)
    assert workflow(alice, late)["status"] == "PENDING"
    assert not TaskEvent.objects.filter(task=task).exists()
    assert nodes_of(alice, full) == ["node-0"]


def test_simulated_output_of_new_tasks_takes_a_fixed_number_of_statements(admin, alice, team):
    add_nodes(admin, 4)  # 32 GPUs
    output = SimulatedOutput()
    counts = []
    for prefix, workflows in (("a", 1), ("b", 6)):
        for i in range(workflows):
            submit(alice, "team", small(f"{prefix}{i}"))
        embedded_cycle.cycle_run()
        with CaptureQueriesContext(connection) as queries:
            written = output.step()
        assert written == 2 * GROUPS * workflows  # where it runs, and its command
        counts.append(len(queries))
    assert counts[0] == counts[1]
    commands = TaskLogChunk.objects.filter(text__contains="] $ sleep 5").count()
    assert commands == 7 * GROUPS


def test_the_record_is_written_without_reading_it_and_read_back_only_after_another_writer(
        admin, alice, team):
    """Thousands of pending gangs make the cycle's record megabytes: a cycle compares its
    gangs' reasons with the record this process wrote last, kept in memory, and writes the
    new one with one UPDATE. When another writer (the Kubernetes backend) replaced the record
    meanwhile, the cycle reads it back: a gang whose reasons are unchanged gets no second
    event, one whose reasons that writer changed gets one."""
    from scheduler import cycle_record
    from scheduler.cycle_figures import CycleRecord, PendingGang
    from scheduler.models import SchedulerCycle

    waiting = submit(alice, "team", spec("waiting", 8))  # no nodes: pending
    embedded_cycle.cycle_run()
    reasons = SchedulerCycle.objects.get(backend="default").pending_gangs[0]["reasons"]

    def unschedulable() -> int:
        return TaskEvent.objects.filter(workflow__name=waiting, reason="Unschedulable").count()

    with CaptureQueriesContext(connection) as queries:
        embedded_cycle.cycle_run()
    cycle_rows = [q["sql"] for q in queries.captured_queries
                  if "scheduler_schedulercycle" in q["sql"]]
    assert len(cycle_rows) == 2, cycle_rows  # is the stored record ours? then the UPDATE
    assert '"pending_gangs"' not in cycle_rows[0].split("FROM")[0]
    assert cycle_rows[1].startswith('UPDATE "scheduler_schedulercycle"')
    assert unschedulable() == 1

    group = WorkflowGroup.objects.get(workflow__name=waiting)
    other = PendingGang(podgroup=group.podgroup, workflow=waiting, group=group.name,
                        queue="q", reasons=reasons)
    for written in (other, replace(other, reasons=[{"code": "x", "message": "elsewhere"}])):
        cycle_record.cycle_record_write(CycleRecord(at=timezone.now(), duration_ms=0.0,
                                                    pending_gangs=(written,)))
        cycle_record._last_written = ("", None, {})  # as another process wrote it
        with CaptureQueriesContext(connection) as queries:
            embedded_cycle.cycle_run()
        assert sum(q["sql"].startswith("SELECT") and '"pending_gangs"' in q["sql"]
                   for q in queries.captured_queries) == 1
    assert unschedulable() == 2  # not after the unchanged reasons; after "elsewhere"
