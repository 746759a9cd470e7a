"""Workflow and workload requests go through their serializers: a wrong shape is a 400 with the
contract's code, `errors` naming the field, and nothing written."""

from __future__ import annotations

import pytest

from tests.shapes import refused
from tests.workflows.conftest import gpu_spec, submit
from tests.workflows.test_workloads import job
from workflows.models import Task, Workflow, WorkflowGroup, WorkflowNameCounter

pytestmark = pytest.mark.django_db


def stored() -> tuple:
    return (list(Workflow.objects.order_by("pk").values_list("name", "status", "priority")),
            WorkflowGroup.objects.count(),
            list(Task.objects.order_by("pk").values_list("name", "status", "exit_code",
                                                         "node_name", "reason")),
            list(WorkflowNameCounter.objects.values_list("spec_name", "value")))


@pytest.mark.parametrize(("body", "code", "field"), [
    ({"file": 42}, "invalid_spec", "file"),                         # an int for a string
    ({"file": {"version": 2}}, "invalid_spec", "file"),             # an object for a string
    ({"file": "   "}, "invalid_spec", "file"),
    ({}, "invalid_spec", "file"),                                   # missing
    ({"file": gpu_spec(1), "set_variables": "a=b"}, "invalid_request", "set_variables"),
    ({"file": gpu_spec(1), "set_variables": [1]}, "invalid_request", "set_variables.0"),
    ({"file": gpu_spec(1), "set_string_variables": ["novalue"]}, "invalid_request",
     "set_string_variables.0"),
    ({"file": gpu_spec(1), "set_string_variables": {"a": "b"}}, "invalid_request",
     "set_string_variables"),
])
def test_submission_body_shapes(team, user, body, code, field):
    before = stored()
    refused(user.post("/api/pool/team/workflow", body, format="json"), code, field)
    assert stored() == before


def test_submission_body_must_be_an_object_or_yaml(team, user):
    before = stored()
    refused(user.post("/api/pool/team/workflow", [gpu_spec(1)], format="json"),
            "invalid_request", "non_field_errors")
    assert stored() == before


@pytest.mark.parametrize(("query", "field"), [
    ("priority=URGENT", "priority"),        # an unknown enum
    ("priority=1", "priority"),
    ("dry_run=maybe", "dry_run"),
    ("dry_run=true&priority=SOON", "priority"),
])
def test_submission_query_shapes(team, user, query, field):
    before = stored()
    response = user.post(f"/api/pool/team/workflow?{query}", {"file": gpu_spec(1)},
                         format="json")
    refused(response, "invalid_request", field)
    assert stored() == before


def test_valid_queries_keep_their_meaning(team, user):
    response = user.post("/api/pool/team/workflow?priority=high&dry_run=NO",
                         {"file": gpu_spec(1), "set_variables": None}, format="json")
    assert (response.status_code, response.json()["priority"]) == (201, "HIGH")
    before = stored()
    response = user.post("/api/pool/team/workflow?dry_run=1", {"file": gpu_spec(1)},
                         format="json")
    assert (response.status_code, response.json()["workflow"]["priority"]) == (200, "NORMAL")
    assert stored() == before


@pytest.mark.parametrize(("body", "field"), [
    ({"status": 3}, "status"),
    ({}, "status"),
    ({"status": "COMPLETED", "exit_code": "0"}, "exit_code"),      # a string for an int
    ({"status": "COMPLETED", "exit_code": 2**31}, "exit_code"),     # beyond the column
    ({"status": "COMPLETED", "exit_code": True}, "exit_code"),
    ({"status": "RUNNING", "node": ["node-0"]}, "node"),           # a list for a string
    ({"status": "FAILED", "reason": "x" * 61}, "reason"),
    (["RUNNING"], "non_field_errors"),
])
def test_task_status_report_shapes(team, user, backend, body, field):
    name = submit(user, "team", gpu_spec(1)).json()["name"]
    before = stored()
    response = backend.post(f"/api/workflow/{name}/task/main/status", body, format="json")
    refused(response, "invalid_request", field)
    assert stored() == before


def test_an_unknown_task_status_is_still_a_409(team, user, backend):
    name = submit(user, "team", gpu_spec(1)).json()["name"]
    before = stored()
    response = backend.post(f"/api/workflow/{name}/task/main/status", {"status": "ASLEEP"},
                            format="json")
    assert (response.status_code, response.json()["code"]) == (409, "invalid_transition")
    assert stored() == before


def test_workload_priority_is_validated(team, user):
    before = stored()
    refused(user.post("/api/pool/team/workload?priority=URGENT", job(), format="json"),
            "invalid_request", "priority")
    assert stored() == before
    response = user.post("/api/pool/team/workload?priority=normal", job(parallelism=1, gpus=1),
                         format="json")
    assert (response.status_code, Workflow.objects.get().priority) == (201, "NORMAL")


def test_workflow_list_filters_are_validated(team, user):
    submit(user, "team", gpu_spec(1))
    refused(user.get("/api/workflow?status=SLEEPING"), "invalid_request", "status")
    assert user.get("/api/workflow?status=PENDING").json()["count"] == 1
