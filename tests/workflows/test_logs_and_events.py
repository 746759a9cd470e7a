"""`GET /api/workflow/{name}/logs|error_logs|events` on the embedded cluster: the simulated
tasks' lines, following, bounds, a hostile query, visibility, and the events in words."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from django.core import signals
from django.db import close_old_connections
from django.utils import timezone

from scheduler.backends.embedded.sim_logs import SimulatedOutput
from tests import factories
from tests.conftest import make_client
from tests.scheduler.conftest import add_nodes, cycle, spec, submit
from tests.work import cpu_run
from workflows import lifecycle, logstore
from workflows.models import Task, TaskEvent, TaskLogChunk, Workflow

pytestmark = pytest.mark.django_db(transaction=False)

LINE = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[(?P<task>[^\]]+)\] (?P<text>.*)$")
EVENT = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00:00 \[(?P<source>[^\]]+)\] "
                   r"(?P<text>.*)$")


@pytest.fixture(autouse=True)
def short_follow(settings):
    settings.OSMO_LOG_FOLLOW_SECONDS = 5  # a test that forgets follow=false still ends


@pytest.fixture
def admin(db):
    return make_client("root", "osmo-admin")


@pytest.fixture
def alice(db):
    factories.pool("team", 64)
    return make_client("alice", "osmo-team-user")


def body(response) -> str:
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    return b"".join(response.streaming_content).decode()


def texts(text: str, pattern=LINE) -> list[tuple[str, str]]:
    found = []
    for line in text.splitlines():
        match = pattern.match(line)
        assert match, line
        found.append(tuple(match.groups()))
    return found


def next_lines(stream) -> str:
    """The next chunk with lines (a follower yields an empty one at each poll)."""
    return next(chunk for chunk in stream if chunk).decode()


def running(admin, alice, gpus: int = 2) -> str:
    add_nodes(admin, 1)
    name = submit(alice, "team", spec("train", gpus, command='[python, train.py, "--lr", "0.1"]'))
    assert cycle(admin)["bound"] == 1
    return name


def test_a_simulated_task_prints_where_it_runs_its_command_and_its_exit(admin, alice, settings):
    settings.OSMO_SIM_LOG_INTERVAL = 10
    name = running(admin, alice)
    output = SimulatedOutput()
    assert output.step() == 2
    log = body(alice.get(f"/api/workflow/{name}/logs", {"follow": "false"}))
    assert texts(log) == [("t0", "started on node node-0 with GPUs 0-1 (2 GPU(s))"),
                          ("t0", "$ python train.py --lr 0.1")]
    task = Task.objects.get(workflow__name=name)
    output.step(task.started_at + timedelta(seconds=30))  # 30 s of a 60 s task
    assert texts(body(alice.get(f"/api/workflow/{name}/logs", {"follow": "false"})))[-1] == (
        "t0", "progress: 50% (30 s elapsed)")
    lifecycle.task_report_status(workflow=task.workflow, task_name="t0", status="FAILED",
                                 exit_code=3)
    output.step()
    assert texts(body(alice.get(f"/api/workflow/{name}/logs",
                                {"task_name": "t0"})))[-1] == (
        "t0", "terminated: FAILED (no reason given)")


def test_second_task_on_a_node_gets_the_next_gpus(admin, alice):
    add_nodes(admin, 1)
    first = submit(alice, "team", spec("a", 3))
    second = submit(alice, "team", spec("b", 4))
    assert cycle(admin)["bound"] == 2
    SimulatedOutput().step()
    starts = {n: texts(body(alice.get(f"/api/workflow/{n}/logs", {"follow": "false"})))[0][1]
              for n in (first, second)}
    assert starts == {first: "started on node node-0 with GPUs 0-2 (3 GPU(s))",
                      second: "started on node node-0 with GPUs 3-6 (4 GPU(s))"}


def _append(task: Task, count: int, start: int = 0, width: int = 0) -> None:
    now = timezone.now()
    logstore.log_append(task=task, text="".join(
        logstore.format_line(now, task.name, f"line {i}{'x' * width}")
        for i in range(start, start + count)))


def test_last_n_lines_and_a_query(admin, alice):
    name = running(admin, alice)
    task = Task.objects.get(workflow__name=name)
    _append(task, 3000, width=200)  # several chunks
    assert TaskLogChunk.objects.filter(task=task).count() > 2
    tail = texts(body(alice.get(f"/api/workflow/{name}/logs",
                                {"last_n_lines": 5, "follow": "false"})))
    assert [t for _, t in tail] == [f"line {i}{'x' * 200}" for i in range(2995, 3000)]
    found = texts(body(alice.get(f"/api/workflow/{name}/logs",
                                 {"query": r"line 12\d\dx", "follow": "false"})))
    assert [t.split("x")[0] for _, t in found] == [f"line {i}" for i in range(1200, 1300)]


def test_a_hostile_query_is_linear_and_a_bad_one_is_refused(admin, alice):
    name = running(admin, alice)
    task = Task.objects.get(workflow__name=name)
    logstore.log_append(task=task, text=logstore.format_line(
        timezone.now(), "t0", "a" * 10_000 + "!") * 200)
    # CPU seconds of this thread, not wall-clock: the machine's load does not count in them.
    text, seconds = cpu_run(lambda: body(alice.get(f"/api/workflow/{name}/logs",
                                                   {"query": "(a+)+$", "follow": "false"})))
    assert text == ""  # catastrophic for a backtracking engine; RE2: 2 MB scanned
    assert seconds < 5
    for query, message in (("(unclosed", "Not a valid regular expression"),
                           (r"(\w)\1", "Not a valid regular expression"),
                           ("a" * 513, "Ensure this field has no more than 512 characters.")):
        response = alice.get(f"/api/workflow/{name}/logs", {"query": query})
        assert response.status_code == 400, query
        assert response.json()["code"] == "invalid_request"
        assert message in response.json()["errors"]["query"][0]


def test_a_dollar_matches_at_the_end_of_each_line(admin, alice):
    name = running(admin, alice)
    task = Task.objects.get(workflow__name=name)
    now = timezone.now()
    logstore.log_append(task=task, text="".join(
        logstore.format_line(now, "t0", text) for text in ("step 1", "step 2 done", "step 3")))
    found = texts(body(alice.get(f"/api/workflow/{name}/logs",
                                 {"query": "[0-9]$", "follow": "false"})))
    assert [t for _, t in found] == ["step 1", "step 3"]
    found = texts(body(alice.get(f"/api/workflow/{name}/logs",
                                 {"query": "^[^ ]+ [^ ]+ \\[t0\\] step 2 done$",
                                  "follow": "false"})))
    assert [t for _, t in found] == ["step 2 done"]


def test_a_costly_query_is_refused_or_bounded(admin, alice, monkeypatch):
    from workflows import logreads

    name = running(admin, alice)
    task = Task.objects.get(workflow__name=name)
    now = timezone.now()
    for _ in range(4):  # 2 MiB of lines
        logstore.log_append(task=task, text=logstore.format_line(now, "t0", "x" * 100) * 5000)
    nested = "(()*)*" * 66  # 396 characters of nested empty groups
    # the body is read inside the measure: a streamed response does its work as it is read
    text, seconds = cpu_run(lambda: body(alice.get(f"/api/workflow/{name}/logs",
                                                   {"query": nested, "follow": "false"})))
    assert len(text.splitlines()) == 20_000  # every line matches the empty pattern
    assert seconds < 0.4  # with captures, RE2 took 0.85 s of CPU here
    response = alice.get(f"/api/workflow/{name}/logs", {"query": "x{1000}x{1000}x{1000}"})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")
    assert response.json()["errors"]["query"][0].startswith("Too costly a regular expression")
    # the CPU budget of one read: used up, the read ends with a line that says so
    monkeypatch.setattr(logreads, "QUERY_SECONDS", 0.0001)
    lines = body(alice.get(f"/api/workflow/{name}/logs",
                           {"query": "x", "follow": "false"})).splitlines()
    assert len(lines) < 20_000
    assert lines[-1].endswith(f"[{name}][osmo] The query used up its 0.0001 s of matching; "
                              "the rest of the log is left out.")


def test_a_log_with_no_line_yet_answers_at_once(admin, alice, settings):
    settings.OSMO_LOG_FOLLOW_SECONDS = 2
    add_nodes(admin, 1)
    name = submit(alice, "team", spec("train", 2))  # no cycle yet: the task has not started
    status = Task.objects.get(workflow__name=name).status
    for params in ({"task_name": "t0"}, {}):
        response = alice.get(f"/api/workflow/{name}/logs", params)
        assert response.status_code == 200, response.json()
        started = time.monotonic()
        stream = iter(response.streaming_content)
        first = next(stream).decode()
        assert time.monotonic() - started < 1  # not once the follow ended, 2 s on
        source, what = ("t0", f"Task t0 has not started yet ({status}).") if params else (
            name, f"Workflow {name} has not started yet (PENDING).")
        assert re.fullmatch(rf"\d{{4}}/\d\d/\d\d \d\d:\d\d:\d\d \[{source}\]\[osmo\] "
                            rf"{re.escape(what)}\n", first), first
        assert b"".join(stream) == b""  # no line came while it followed
    assert cycle(admin)["bound"] == 1
    assert Task.objects.get(workflow__name=name).status == "RUNNING"
    # started, nothing written — and a query that matches nothing: an empty first chunk, at once
    for params in ({"task_name": "t0"}, {"query": "nothing like this"}):
        response = alice.get(f"/api/workflow/{name}/logs", params)
        started = time.monotonic()
        stream = iter(response.streaming_content)
        assert next(stream) == b""
        assert time.monotonic() - started < 1
        assert b"".join(stream) == b""


@pytest.mark.parametrize("params", [{"last_n_lines": 0}, {"last_n_lines": "x"},
                                    {"last_n_lines": 10**7}, {"retry_id": -1}])
def test_bad_parameters_are_refused(admin, alice, params):
    name = running(admin, alice)
    response = alice.get(f"/api/workflow/{name}/logs", params)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert list(response.json()["errors"]) == list(params)


def test_what_the_caller_cannot_see_is_404(admin, alice):
    name = running(admin, alice)
    other = make_client("eve", "osmo-other-user")
    for path in ("logs", "error_logs", "events"):
        response = other.get(f"/api/workflow/{name}/{path}")
        assert response.status_code == 404
        assert response.json()["code"] == "workflow_not_found"
        response = alice.get(f"/api/workflow/{name}/{path}", {"task_name": "nope"})
        assert (response.status_code, response.json()["code"]) == (404, "task_not_found")
        response = alice.get(f"/api/workflow/{name}/{path}", {"task_name": "t0",
                                                              "retry_id": 1})
        assert (response.status_code, response.json()["code"]) == (404, "task_not_found")


def test_a_task_log_is_bounded_and_drops_its_oldest_lines(admin, alice, settings):
    settings.OSMO_LOG_TASK_MAX_BYTES = 600 * 1024
    name = running(admin, alice)
    task = Task.objects.get(workflow__name=name)
    for batch in range(10):  # 10 appends of ~100 KiB, one chunk each
        _append(task, 1000, start=batch * 1000, width=60)
    sizes = list(TaskLogChunk.objects.filter(task=task).values_list("size", flat=True))
    assert sum(sizes) <= 600 * 1024 and len(sizes) == 6
    lines = texts(body(alice.get(f"/api/workflow/{name}/logs", {"follow": "false"})))
    assert lines[0][1].startswith("line 4000x") and lines[-1][1].startswith("line 9999x")
    assert len(lines) == 6000


def test_following_sends_new_lines_until_the_task_ends(admin, alice):
    name = running(admin, alice)
    task = Task.objects.get(workflow__name=name)
    _append(task, 2)
    response = alice.get(f"/api/workflow/{name}/logs", {"task_name": "t0"})
    assert response.status_code == 200
    stream = iter(response.streaming_content)
    assert [t for _, t in texts(next_lines(stream))] == ["line 0", "line 1"]
    _append(task, 1, start=2)
    assert [t for _, t in texts(next_lines(stream))] == ["line 2"]
    lifecycle.task_report_status(workflow=task.workflow, task_name="t0", status="COMPLETED",
                                 exit_code=0)
    _append(task, 1, start=3)  # the last lines, written as it ended
    assert [t for _, t in texts(b"".join(stream).decode())] == ["line 3"]


def test_following_is_bounded_in_time_and_bytes(admin, alice, settings):
    name = running(admin, alice)
    task = Task.objects.get(workflow__name=name)
    _append(task, 100)
    settings.OSMO_LOG_FOLLOW_SECONDS = 1
    started = time.monotonic()
    assert len(body(alice.get(f"/api/workflow/{name}/logs")).splitlines()) == 100
    # The task still runs, so only the time limit ends the stream: it followed for that long,
    # and far less than the default limit (600 s) — a bound load cannot reach.
    assert 1 <= time.monotonic() - started < 60
    settings.OSMO_LOG_RESPONSE_MAX_BYTES = 1000
    assert len(body(alice.get(f"/api/workflow/{name}/logs"))) == 1000


def test_followed_streams_per_process_are_bounded(admin, alice, settings):
    from osmo import streaming

    settings.OSMO_LOG_STREAMS_PER_PROCESS = 1
    streaming._slots = None
    name = running(admin, alice)
    held = alice.get(f"/api/workflow/{name}/logs")  # follows: the task runs
    refused = alice.get(f"/api/workflow/{name}/logs")
    assert (refused.status_code, refused.json()["code"]) == (429, "too_many_streams")
    snapshot = alice.get(f"/api/workflow/{name}/logs", {"follow": "false"})
    assert snapshot.status_code == 200  # a plain read needs no slot
    signals.request_finished.disconnect(close_old_connections)  # as the test client does
    try:
        held.close()  # never iterated: the slot comes back all the same
    finally:
        signals.request_finished.connect(close_old_connections)
    again = alice.get(f"/api/workflow/{name}/logs")
    assert again.status_code == 200
    again.close()
    streaming._slots = None


def test_followed_streams_per_user_are_bounded(admin, alice, settings):
    from datetime import timedelta

    from osmo.accounts.models import StreamLease

    settings.OSMO_LOG_STREAMS_PER_USER = 1
    name = running(admin, alice)
    held = alice.get(f"/api/workflow/{name}/logs")  # follows: the task runs
    assert held.status_code == 200
    refused = alice.get(f"/api/workflow/{name}/logs")
    assert (refused.status_code, refused.json()["code"]) == (429, "too_many_user_streams")
    assert refused.json()["detail"].startswith("You follow 1 logs already")
    assert StreamLease.objects.filter(user__username="alice").count() == 1  # nothing taken
    assert alice.get(f"/api/workflow/{name}/logs", {"follow": "false"}).status_code == 200
    root = admin.get(f"/api/workflow/{name}/logs")  # another user still follows
    assert root.status_code == 200
    assert StreamLease.objects.filter(user__username="root").count() == 1
    signals.request_finished.disconnect(close_old_connections)  # as the test client does
    try:
        held.close()
        root.close()
    finally:
        signals.request_finished.connect(close_old_connections)
    assert not StreamLease.objects.exists()  # each stream gave its lease back
    # a lease its process left behind (killed) stops counting once stale
    StreamLease.objects.create(user=held.wsgi_request.user,
                               renewed_at=timezone.now() - timedelta(minutes=2))
    again = alice.get(f"/api/workflow/{name}/logs", {"last_n_lines": 1})
    assert again.status_code == 200
    assert StreamLease.objects.filter(user__username="alice").count() == 1
    b"".join(again.streaming_content)
    assert not StreamLease.objects.exists()


def test_download_is_an_attachment_and_not_followed(admin, alice):
    name = running(admin, alice)
    SimulatedOutput().step()
    response = alice.get(f"/api/workflow/{name}/logs", {"download": "true", "task_name": "t0"})
    assert response["Content-Disposition"] == f'attachment; filename="{name}-t0.log"'
    assert len(body(response).splitlines()) == 2


def test_error_logs_table_and_the_failed_tasks_last_lines(admin, alice):
    add_nodes(admin, 1)
    name = submit(alice, "team", spec("pair", 1, tasks=2))
    cycle(admin)
    workflow = Workflow.objects.get(name=name)
    t0, t1 = Task.objects.filter(workflow=workflow).order_by("position")
    _append(t1, 150)
    lifecycle.task_report_status(workflow=workflow, task_name="t1", status="FAILED",
                                 exit_code=2)
    text = body(alice.get(f"/api/workflow/{name}/error_logs"))
    base = f"http://testserver/api/workflow/{name}/error_logs"
    assert text == ("Specify task for error logs.\n\n{\n"
                    f'    "t0 retry-0": null,\n'
                    f'    "t1 retry-0": "{base}?task_name=t1&retry_id=0"\n}}')
    tail = texts(body(alice.get(f"/api/workflow/{name}/error_logs", {"task_name": "t1"})))
    assert [t for _, t in tail] == [f"line {i}" for i in range(50, 150)]
    assert body(alice.get(f"/api/workflow/{name}/error_logs", {"task_name": "t0"})) == ""


def events(client, name: str, **params) -> list[tuple[str, str]]:
    return texts(body(client.get(f"/api/workflow/{name}/events", params)), EVENT)


def test_events_tell_a_workflows_life_in_words(admin, alice):
    add_nodes(admin, 1)
    name = submit(alice, "team", spec("life", 2))
    big = submit(alice, "team", spec("big", 8, tasks=2))  # 16 GPUs at once, one 8-GPU node
    cycle(admin)
    cycle(admin)  # reasons unchanged: no second line
    assert events(alice, big) == [
        (big, "Submitted: by alice to pool team at NORMAL priority, 2 GPU(s)".replace(
            "2 GPU", "16 GPU")),
        (big, "Admitted: within the quota of pool team; 1 group(s) queued"),
        (big, "Unschedulable: group g in queue osmo-pool-osmo-team.shared: " + _reason(big))]
    task = Task.objects.get(workflow__name=name)
    lifecycle.task_report_status(workflow=task.workflow, task_name="t0", status="FAILED",
                                 exit_code=137)
    assert events(alice, name, task_name="t0") == [
        (name, "Submitted: by alice to pool team at NORMAL priority, 2 GPU(s)"),
        (name, "Admitted: within the quota of pool team; 1 group(s) queued"),
        ("t0", "Bound: bound to node node-0"),
        ("t0", "Running: on node node-0"),
        ("t0", "Failed: exit code 137")]
    alice.post(f"/api/workflow/{big}/cancel")
    assert events(alice, big)[-3:] == [(big, "Canceled: by alice"),
                                       ("t0", "Canceled: the workflow was canceled"),
                                       ("t1", "Canceled: the workflow was canceled")]


def _reason(name: str) -> str:
    from scheduler.models import SchedulerCycle

    gang = next(g for g in SchedulerCycle.objects.get(backend="default").pending_gangs
                if g["workflow"] == name)
    return "; ".join(r["message"] for r in gang["reasons"])


def test_events_of_a_preemption_and_a_completion(admin):
    factories.pool("owner", 16)
    factories.pool("borrower", 16)
    owner = make_client("o", "osmo-owner-user")
    borrower = make_client("b", "osmo-borrower-user")
    add_nodes(admin, 4)
    low = [submit(borrower, "borrower", spec(f"low{i}", 8), "LOW") for i in range(4)]
    cycle(admin)
    mine = submit(owner, "owner", spec("mine", 8))
    cycle(admin)
    cycle(admin)
    preempted = next(n for n in low if Workflow.objects.get(name=n).status == "FAILED_PREEMPTED")
    last = events(borrower, preempted)[-1]
    assert last[0] == "t0"
    assert re.fullmatch(rf"Preempted: reclaimed by queue osmo-pool-osmo-owner\.shared "
                        rf"\(workflow {mine}\); off node node-\d", last[1]), last
    task = Task.objects.get(workflow__name=mine)
    lifecycle.tasks_complete_due(now=task.started_at + timedelta(hours=1), default_seconds=60,
                                 nodes=[task.node_name])
    assert events(owner, mine)[-1] == ("t0", "Completed: exit code 0")


def test_retention_purges_ended_workflows_logs_and_events(admin, alice, settings):
    settings.OSMO_LOG_RETENTION_DAYS = 7
    name = running(admin, alice)
    SimulatedOutput().step()
    workflow = Workflow.objects.get(name=name)
    lifecycle.workflow_cancel(workflow=workflow, by="alice")
    assert logstore.purge() == (0, 0)  # ended just now
    later = timezone.now() + timedelta(days=8)
    chunks = TaskLogChunk.objects.filter(workflow=workflow).count()
    count = TaskEvent.objects.filter(workflow=workflow).count()
    assert (chunks, count) != (0, 0)
    assert logstore.purge(now=later) == (chunks, count)
    assert not TaskEvent.objects.filter(workflow=workflow).exists()


def test_single_lines_are_trimmed_by_the_hourly_purge(admin, alice, settings):
    name = running(admin, alice)
    task = Task.objects.get(workflow__name=name)
    line = logstore.format_line(timezone.now(), "t0", "x" * 70)  # 96 bytes
    for _ in range(30):
        logstore.log_append_lines([(task.workflow_id, task.pk, line)])
    settings.OSMO_LOG_TASK_MAX_BYTES = 1000
    assert logstore.purge() == (0, 0)  # nothing ended; the log is trimmed all the same
    assert list(TaskLogChunk.objects.filter(task=task).values_list("size", flat=True)) == \
        [96] * 10  # the newest 960 bytes


def test_an_event_is_of_its_task_s_current_run_unless_it_names_one(db):
    from scheduler.backends.kubernetes.pod_logs import task_events

    workflow = factories.running_workflow(factories.pool("team", 8), 2, tasks=2)
    first, second = Task.objects.filter(workflow=workflow).order_by("position")
    Task.objects.filter(pk=second.pk).update(retry_id=2)
    second.refresh_from_db()
    pod_event = {"reason": "Pulled", "message": "image pulled", "source": {"component": "kubelet"},
                 "lastTimestamp": "2026-01-02T03:04:05Z"}
    logstore.events_record([
        logstore.Event(workflow.pk, first.pk, "A"), logstore.Event(workflow.pk, second.pk, "B"),
        logstore.Event(workflow.pk, second.pk, "C", retry_id=1),
        logstore.Event(workflow.pk, None, "D"), *task_events([pod_event], second)])
    logstore.events_record_tasks([first.pk, second.pk], "E", "both")
    rows = (TaskEvent.objects.filter(workflow=workflow, reason__in=list("ABCDE")).order_by("id")
            .values_list("reason", "task__name", "retry_id"))
    assert list(rows) == [("A", first.name, 0), ("B", second.name, 2), ("C", second.name, 1),
                          ("D", None, 0), ("E", first.name, 0), ("E", second.name, 2)]
    pulled = TaskEvent.objects.get(workflow=workflow, reason="Pulled")
    assert (pulled.task_id, pulled.retry_id, pulled.message) == (
        second.pk, 2, "image pulled (kubelet)")
