"""Ends that arrive in one batch of pod events: a lead's end settles its group, and the other
task's own end in the same batch is then no move — not an error that drops the batch."""

from __future__ import annotations

import pytest

from tests.k8s.conftest import spec
from workflows import lifecycle
from workflows.models import Task, TaskStatus

from .conftest import submit

pytestmark = pytest.mark.django_db


def test_both_tasks_ending_in_one_batch_after_the_lead(team, user) -> None:
    response = submit(user, "team", spec("pair", gpus=1, tasks=2))
    assert response.status_code == 201, response.json()
    name = response.json()["name"]
    assert lifecycle.tasks_observed([
        lifecycle.TaskObservation(name, task, TaskStatus.RUNNING, "n1")
        for task in ("t0", "t1")]) == 2
    changed = lifecycle.tasks_observed([
        lifecycle.TaskObservation(name, task, TaskStatus.COMPLETED, "n1", 0)
        for task in ("t0", "t1")])  # t0 is the lead
    assert changed == 1  # the lead's end; it ended t1 with its group
    tasks = dict(Task.objects.filter(workflow__name=name).values_list("name", "status"))
    assert tasks == {"t0": TaskStatus.COMPLETED, "t1": TaskStatus.COMPLETED}
