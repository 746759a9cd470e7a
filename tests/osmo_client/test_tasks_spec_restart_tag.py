"""`osmo task list`, `workflow spec`, `workflow restart` and `workflow tag` as client 6.4.0 sends
them and reads the answers (a replay: requests written by hand from the client's 6.4.0 source, not
a recorded transcript — ``replay.py``)."""

from __future__ import annotations

import pytest
import yaml

from scheduler import services as scheduler_services
from scheduler.backends.embedded import cycle as embedded_cycle
from tests import factories
from workflows import lifecycle
from workflows.models import Task, Workflow

from .test_workflows import SPEC, TEMPLATED, submit

pytestmark = pytest.mark.django_db

DEFAULT_STATUSES = ["PROCESSING", "SCHEDULING", "INITIALIZING", "RUNNING"]


@pytest.fixture
def team():
    team = factories.pool("team", 20)
    factories.subpool(team, "a", 8)
    scheduler_services.node_register(name="node-0", gpus=8, cpu_millis=64000,
                                     memory_bytes=2**40, labels={})
    return team


def task_list(osmo, **extra):
    """`_list_tasks` with the client's defaults (count 20, offset 0, order asc, all pools)."""
    params = {"limit": 20, "offset": 0, "all_users": False, "workflow_id": None, "nodes": [],
              "statuses": DEFAULT_STATUSES, "order": "ASC", "all_pools": True}
    params.update(extra)
    return osmo.request("GET", "api/task", params=params)


def test_task_list_rows_and_sums(osmo_as, team):
    osmo = osmo_as("alice", "osmo-team-user")
    name = submit(osmo, SPEC, pool="team--a")["name"]
    embedded_cycle.cycle_run()
    rows = task_list(osmo)["tasks"]
    task = Task.objects.get(workflow__name=name)
    assert rows == [{
        "user": "alice", "workflow_id": name, "workflow_uuid": str(task.workflow_id),
        "task_name": "trainer", "retry_id": 0, "pool": "team--a", "node": "node-0",
        "start_time": task.started_at.replace(tzinfo=None).isoformat(), "end_time": None,
        "status": "RUNNING", "overview": f"http://testserver/workflows/{name}/",
        "logs": f"http://testserver/api/workflow/{name}/logs?task_name=trainer",
        "error_logs": None, "storage": 0, "cpu": 1, "memory": 1.0, "gpu": 2,
        "priority": "NORMAL"}]
    assert task_list(osmo, statuses=["COMPLETED"])["tasks"] == []
    assert task_list(osmo, summary=True)["summaries"] == [
        {"user": "alice", "pool": "team--a", "priority": "NORMAL", "storage": 0, "cpu": 1,
         "memory": 1.0, "gpu": 2}]
    assert task_list(osmo, aggregate_by_workflow=True)["summaries"][0]["workflow_id"] == name
    assert task_list(osmo_as("eve", "osmo-other-user"))["tasks"] == []  # not visible
    response = osmo.raw("GET", "api/task", params={"limit": 0})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")


def test_workflow_spec_rendered_and_templated(osmo_as, team):
    osmo = osmo_as("alice", "osmo-team-user")
    name = submit(osmo, TEMPLATED, pool="team", set_variables=["message=hi"])["name"]
    response = osmo.raw("GET", f"api/workflow/{name}/spec", params={"use_template": False})
    rendered = yaml.safe_load(b"".join(response.streaming_content))
    assert rendered["workflow"]["tasks"][0]["args"] == ["hi"]
    response = osmo.raw("GET", f"api/workflow/{name}/spec", params={"use_template": True})
    assert b"".join(response.streaming_content).decode() == \
        Workflow.objects.get(name=name).spec


def test_restart_a_failed_workflow(osmo_as, team):
    osmo = osmo_as("alice", "osmo-team-user")
    name = submit(osmo, SPEC, pool="team--a", labels=["stage=dev"])["name"]
    response = osmo.raw("POST", f"api/pool/team--a/workflow/{name}/restart")
    assert (response.status_code, response.json()["code"]) == (409, "invalid_transition")
    lifecycle.workflow_cancel(workflow=Workflow.objects.get(name=name), by="alice")
    # `_restart_workflow`: the pool from the workflow, then the restart endpoint
    pool = osmo.request("GET", f"api/workflow/{name}")["pool"]
    result = osmo.request("POST", f"api/pool/{pool}/workflow/{name}/restart")
    assert result["name"] == "train-2" and result["warnings"] == []
    assert result["overview"] == "http://testserver/workflows/train-2/"
    again = Workflow.objects.get(name="train-2")
    assert (again.pool.name, again.labels, again.status) == ("team--a", {"stage": "dev"},
                                                             "PENDING")
    other = osmo_as("eve", "osmo-other-user")
    response = other.raw("POST", f"api/pool/team--a/workflow/{name}/restart")
    assert response.status_code == 404
    assert Workflow.objects.count() == 2


def test_tags(osmo_as, team, settings):
    osmo = osmo_as("alice", "osmo-team-user")
    name = submit(osmo, SPEC, pool="team--a")["name"]
    assert osmo.request("GET", "api/tag") == {"tags": []}  # "No tags have been set by admins."
    settings.OSMO_WORKFLOW_TAGS = ["golden", "debug"]
    assert osmo.request("GET", "api/tag") == {"tags": ["golden", "debug"]}
    osmo.request("POST", f"api/workflow/{name}/tag", params={"add": ["golden", "debug"],
                                                              "remove": []})
    osmo.request("POST", f"api/workflow/{name}/tag", params={"add": [], "remove": ["debug"]})
    assert osmo.request("GET", f"api/workflow/{name}")["tags"] == ["golden"]
    response = osmo.raw("POST", f"api/workflow/{name}/tag", params={"add": ["nope"]})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")
    viewer = osmo_as("bob", "osmo-team-user")  # sees it, did not submit it
    response = viewer.raw("POST", f"api/workflow/{name}/tag", params={"add": ["debug"]})
    assert response.status_code == 403
    assert Workflow.objects.get(name=name).tags == ["golden"]
