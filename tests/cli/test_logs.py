"""`osmo workflow logs|events` against a live server."""

from __future__ import annotations

import datetime as dt

import pytest

from tests import factories
from workflows import lifecycle, logstore
from workflows.models import Task

pytestmark = pytest.mark.django_db(transaction=True)

AT = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


@pytest.fixture
def running(cli, monkeypatch):
    team = factories.pool("team", 16)
    workflow = factories.running_workflow(team, 4, tasks=2)
    for task in Task.objects.filter(workflow=workflow):
        logstore.log_append(task=task, text="".join(
            logstore.format_line(AT, task.name, f"step {i}") for i in range(3)))
    cli.as_user(monkeypatch, "ml-user", "osmo-team-user")
    return workflow


def test_logs_of_a_task_its_tail_and_a_query(cli, running):
    code, out, err = cli("workflow", "logs", running.name, "-t", "task-1", "-n", "2")
    assert (code, err) == (0, "")
    assert out == ("2026/01/02 03:04:05 [task-1] step 1\n"
                   "2026/01/02 03:04:05 [task-1] step 2\n")
    code, out, _ = cli("workflow", "logs", running.name, "--query", r"task-0\] step [02]")
    assert (code, out) == (0, "2026/01/02 03:04:05 [task-0] step 0\n"
                              "2026/01/02 03:04:05 [task-0] step 2\n")


def test_follow_prints_until_the_server_ends_the_stream(cli, running, settings):
    settings.OSMO_LOG_FOLLOW_SECONDS = 1  # the tasks keep running: the server's bound ends it
    code, out, _ = cli("workflow", "logs", running.name, "-f", "-t", "task-0")
    assert code == 0 and len(out.splitlines()) == 3


def test_events_and_errors(cli, running):
    lifecycle.workflow_cancel(workflow=running, by="ml-user")
    code, out, err = cli("workflow", "events", running.name, "-t", "task-0")
    assert (code, err) == (0, "")
    assert [line.split(" ", 2)[2] for line in out.splitlines()] == [
        f"[{running.name}] Canceled: by ml-user",
        "[task-0] Canceled: the workflow was canceled"]
    code, out, err = cli("workflow", "logs", "nope")
    assert (code, out) == (1, "")
    assert err == "error: Workflow 'nope' does not exist. (workflow_not_found)\n"
    code, _, err = cli("workflow", "logs", running.name, "--query", "(")
    assert code == 1 and "(invalid_request)" in err


def test_events_of_one_run_of_a_task(cli, running):
    task = Task.objects.get(workflow=running, name="task-0")
    logstore.events_record([logstore.Event(running.pk, task.pk, "Failed", "exit code 3", AT),
                            logstore.Event(running.pk, task.pk, "Rescheduled", "again", AT,
                                           retry_id=1)])
    Task.objects.filter(pk=task.pk).update(retry_id=1)
    code, out, err = cli("workflow", "events", running.name, "-t", "task-0", "--retry-id", "1")
    assert (code, err, out) == (0, "", "2026-01-02 03:04:05+00:00 [task-0 retry-1] "
                                       "Rescheduled: again\n")
    code, out, _ = cli("workflow", "events", running.name, "-t", "task-0", "--retry-id", "0")
    assert (code, out) == (0, "2026-01-02 03:04:05+00:00 [task-0] Failed: exit code 3\n")
    code, _, err = cli("workflow", "events", running.name, "-t", "task-0", "--retry-id", "2")
    assert (code, err) == (1, f"error: Workflow '{running.name}' has no task 'task-0' "
                              "(retry 2). (task_not_found)\n")
