"""`osmo workflow logs [--error]` and `osmo workflow events` as client 6.4.0 sends them: a streamed
GET whose lines it prints after a heading (a replay: requests written by hand from the client's
6.4.0 source, not a recorded transcript — ``replay.py``)."""

from __future__ import annotations

import datetime as dt

import pytest

from tests import factories
from workflows import lifecycle, logstore
from workflows.models import Task

pytestmark = pytest.mark.django_db

AT = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def streamed(osmo, endpoint: str, params: dict) -> list[str]:
    """`mode=STREAMING` then `result.iter_lines()`: the body's lines, decoded."""
    response = osmo.raw("GET", endpoint, params=params)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return b"".join(response.streaming_content).decode().splitlines()


def workflow_logs(osmo, name: str, *, task=None, retry_id=None, error=False,
                  last_n_lines=None) -> list[str]:
    """`_workflow_logs`: what it prints."""
    params = {}
    if last_n_lines:
        params["last_n_lines"] = last_n_lines
    if task:
        params["task_name"] = task
    if retry_id:
        params["retry_id"] = retry_id
    path = "error_logs" if error else "logs"
    heading = f"Workflow {name} has {'error logs' if error else 'logs'}:"
    return [heading, *streamed(osmo, f"api/workflow/{name}/{path}", params)]


def workflow_events(osmo, name: str, *, task=None) -> list[str]:
    params = {"task_name": task} if task else {}
    return [f"Workflow {name} has events:", *streamed(osmo, f"api/workflow/{name}/events",
                                                      params)]


@pytest.fixture
def ended(db):
    """A workflow of two tasks: one completed, one failed with its last words."""
    team = factories.pool("team", 8)
    workflow = factories.running_workflow(team, 2, tasks=2)
    first, second = Task.objects.filter(workflow=workflow).order_by("position")
    for task, words in ((first, ["hello", "done"]), (second, ["hello", "boom"])):
        logstore.log_append(task=task, text="".join(
            logstore.format_line(AT, task.name, w) for w in words))
    lifecycle.task_report_status(workflow=workflow, task_name="task-0", status="COMPLETED",
                                 exit_code=0)
    lifecycle.task_report_status(workflow=workflow, task_name="task-1", status="FAILED",
                                 exit_code=1)
    return workflow


def test_logs_of_the_workflow_and_of_a_task(osmo_as, ended):
    osmo = osmo_as("alice", "osmo-team-user")
    assert workflow_logs(osmo, ended.name) == [
        f"Workflow {ended.name} has logs:",
        "2026/01/02 03:04:05 [task-0] hello", "2026/01/02 03:04:05 [task-0] done",
        "2026/01/02 03:04:05 [task-1] hello", "2026/01/02 03:04:05 [task-1] boom"]
    assert workflow_logs(osmo, ended.name, task="task-1", last_n_lines=1) == [
        f"Workflow {ended.name} has logs:", "2026/01/02 03:04:05 [task-1] boom"]
    assert workflow_logs(osmo, ended.name, last_n_lines=3) == [  # `logs W -n 3`
        f"Workflow {ended.name} has logs:", "2026/01/02 03:04:05 [task-0] done",
        "2026/01/02 03:04:05 [task-1] hello", "2026/01/02 03:04:05 [task-1] boom"]


def test_error_logs(osmo_as, ended):
    osmo = osmo_as("alice", "osmo-team-user")
    assert workflow_logs(osmo, ended.name, task="task-1", error=True) == [
        f"Workflow {ended.name} has error logs:",
        "2026/01/02 03:04:05 [task-1] hello", "2026/01/02 03:04:05 [task-1] boom"]
    # Without a task the client refuses by itself; the service answers OSMO's table.
    lines = streamed(osmo, f"api/workflow/{ended.name}/error_logs", {})
    assert lines[:2] == ["Specify task for error logs.", ""]
    assert "\n".join(lines[2:]) == (
        '{\n    "task-0 retry-0": null,\n    "task-1 retry-0": "http://testserver/api/'
        f'workflow/{ended.name}/error_logs?task_name=task-1&retry_id=0"\n}}')


def test_events(osmo_as, ended):
    osmo = osmo_as("alice", "osmo-team-user")
    lines = workflow_events(osmo, ended.name, task="task-1")
    assert lines[0] == f"Workflow {ended.name} has events:"
    assert [line.split(" ", 2)[2] for line in lines[1:]] == ["[task-1] Failed: exit code 1"]


def test_unknown_task_and_retry_are_404(osmo_as, ended):
    osmo = osmo_as("alice", "osmo-team-user")
    for params in ({"task_name": "nope"}, {"task_name": "task-1", "retry_id": 1}):
        response = osmo.raw("GET", f"api/workflow/{ended.name}/logs", params=params)
        assert (response.status_code, response.json()["code"]) == (404, "task_not_found")
    other = osmo_as("eve", "osmo-other-user")
    response = other.raw("GET", f"api/workflow/{ended.name}/events")
    assert (response.status_code, response.json()["code"]) == (404, "workflow_not_found")
