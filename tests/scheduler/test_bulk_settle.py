"""One cycle ends the due tasks of several workflows and each settles by its own rules (the
set-based settle): a completed group releases the group that waits for it, a completed lead
ends its gang, independent groups complete the workflow — with their events."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.backends.embedded import cycle as embedded_cycle
from workflows.models import TaskEvent, Workflow

from .conftest import add_nodes, submit, workflow

pytestmark = pytest.mark.django_db

PIPELINE = """
workflow:
  name: pipeline
  groups:
  - name: first
    tasks: [{name: a, image: x, command: [sleep, '1'], resource: r}]
  - name: second
    tasks: [{name: b, image: x, command: [sleep, '100'], resource: r, inputs: [{task: a}]}]
  resources:
    r: {gpu: 1}
"""

LEAD = """
workflow:
  name: lead
  groups:
  - name: gang
    tasks:
    - {name: l, image: x, command: [sleep, '1'], resource: r, lead: true}
    - {name: w, image: x, command: [sleep, '100'], resource: r}
  resources:
    r: {gpu: 1}
"""

PAIR = """
workflow:
  name: pair
  groups:
  - name: x
    tasks: [{name: x, image: x, command: [sleep, '1'], resource: r}]
  - name: y
    tasks: [{name: y, image: x, command: [sleep, '1'], resource: r}]
  resources:
    r: {gpu: 1}
"""


def events(name: str) -> list[tuple[str, str]]:
    workflow_id = Workflow.objects.get(name=name).pk
    return list(TaskEvent.objects.filter(workflow_id=workflow_id, task__isnull=False)
                .order_by("at", "id").values_list("reason", "message"))


def test_one_cycle_settles_several_workflows_each_by_its_rules(admin, alice, team, settings):
    settings.OSMO_SIM_TASK_SECONDS = 60
    add_nodes(admin, 1)
    pipeline, lead, pair = (submit(alice, "team", text) for text in (PIPELINE, LEAD, PAIR))
    start = timezone.now()
    embedded_cycle.cycle_run(now=start)
    summary = embedded_cycle.cycle_run(now=start + timedelta(seconds=2))

    assert summary.completed == 4  # a, l, x, y (w ends with its lead, not as due)
    body = workflow(alice, pipeline)
    assert body["status"] == "RUNNING"
    assert [(g["status"], g["tasks"][0]["status"]) for g in body["groups"]] == [
        ("COMPLETED", "COMPLETED"), ("RUNNING", "RUNNING")]  # released, then bound
    body = workflow(alice, lead)
    assert (body["status"], body["groups"][0]["status"]) == ("COMPLETED", "COMPLETED")
    assert sorted((t["name"], t["status"], t["reason"]) for t in body["groups"][0]["tasks"]) \
        == [("l", "COMPLETED", None), ("w", "COMPLETED", "lead_completed")]
    body = workflow(alice, pair)
    assert (body["status"], [g["status"] for g in body["groups"]]) == (
        "COMPLETED", ["COMPLETED", "COMPLETED"])
    assert body["finished_at"] is not None
    assert events(lead)[-2:] == [
        ("Completed", "exit code 0"),
        ("Completed", "exit code 0 (its group's lead task completed)")]
    assert [event for event in events(pipeline) if event[0] == "Completed"] == [
        ("Completed", "exit code 0")]
