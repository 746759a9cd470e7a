"""A submission is a few statements: the token with its user's roles, the pool family's lock,
and one insert that writes the workflow's rows and its first events. Inside a caller's
transaction (as in these tests) that insert also numbers the workflow, so the name counter's
row, which every submission of the same spec name then waits for until its holder commits, is
held for that one statement and the commit; on its own a submission takes its number on the
numbering connection instead (tests/workflows/test_numbering.py)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler.core.kai_names import podgroup_name
from tests.conftest import make_client
from workflows.models import TaskEvent, Workflow, WorkflowGroup, WorkflowNameCounter

from .conftest import gpu_spec, submit

pytestmark = pytest.mark.django_db


def test_a_submission_is_three_statements_and_its_savepoint(team) -> None:
    alice = make_client("alice", "osmo-team-user")
    assert submit(alice, "team", gpu_spec(1, "same")).status_code == 201  # the pool read
    with CaptureQueriesContext(connection) as queries:
        response = submit(alice, "team", gpu_spec(1, "same"))
    assert response.status_code == 201, response.json()
    statements = [q["sql"] for q in queries.captured_queries]
    assert len(statements) == 5, statements  # token, SAVEPOINT, lock, insert, RELEASE
    counter = [s for s in statements if "workflows_workflownamecounter" in s]
    assert len(counter) == 1 and "INSERT INTO workflows_workflow " in counter[0]
    body = response.json()
    assert body["name"] == "same-2"
    group = WorkflowGroup.objects.get(workflow__name="same-2")
    assert group.podgroup == podgroup_name("same-2", group.name)
    assert list(TaskEvent.objects.filter(workflow__name="same-2").order_by("id").values_list(
        "reason", flat=True)) == ["Submitted", "Admitted"]
    assert WorkflowNameCounter.objects.get(spec_name="same").value == 2


def test_a_name_too_long_for_a_plain_podgroup_name_is_numbered_first(team) -> None:
    alice = make_client("alice", "osmo-team-user")
    long = "a" * 55  # with its number and group, longer than a DNS label: hashed
    for number in (1, 2):
        response = submit(alice, "team", gpu_spec(1, long))
        assert response.status_code == 201, response.json()
        name = f"{long}-{number}"
        assert response.json()["name"] == name
        group = WorkflowGroup.objects.get(workflow__name=name)
        assert group.podgroup == podgroup_name(name, group.name) != f"{name}-{group.name}"
    assert Workflow.objects.count() == 2
