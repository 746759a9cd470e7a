"""Exit actions on the embedded cluster: a task's exit code reschedules its group, which the
loop places again as a gang; the other groups go on (real PostgreSQL, the real loop)."""

from __future__ import annotations

import pytest

from tests import factories
from tests.conftest import make_client
from tests.scheduler.conftest import add_nodes, cycle, submit, workflow
from workflows.models import Task, TaskEvent, TaskLogChunk, Workflow, WorkflowGroup

pytestmark = pytest.mark.django_db

TWO_GROUPS = """
workflow:
  name: {name}
  groups:
  - name: train
    tasks:
    - {{name: lead, image: x, command: [train], resource: r, lead: true{actions}}}
    - {{name: worker, image: x, command: [train], resource: r}}
  - name: side
    tasks:
    - {{name: eval, image: x, command: [eval], resource: r, lead: true}}
  resources:
    r: {{gpu: 4, cpu: 1, memory: 1Gi}}
"""
RESCHEDULE = ', exitActions: {RESCHEDULE: "1-5,10", COMPLETE: "0,16"}'


@pytest.fixture
def backend(db):
    return make_client("listener", "osmo-backend")


def report(backend, name: str, task: str, status: str, **extra):
    response = backend.post(f"/api/workflow/{name}/task/{task}/status",
                            {"status": status, **extra}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def tasks_of(client, name: str) -> dict[str, tuple]:
    return {t["name"]: (t["status"], t["retry_id"], t["node"] is not None)
            for g in workflow(client, name)["groups"] for t in g["tasks"]}


def test_a_reschedule_runs_the_group_again_as_a_gang(admin, alice, backend):
    factories.pool("team", 64, max_retries=2)
    add_nodes(admin, 2)  # 16 GPUs: the three 4-GPU tasks fit
    name = submit(alice, "team", TWO_GROUPS.format(name="ft", actions=RESCHEDULE))
    assert cycle(admin)["bound"] == 3
    body = report(backend, name, "lead", "FAILED", exit_code=3)
    assert body["status"] == "RUNNING"
    train, side = body["groups"]
    assert (train["status"], train["retry_id"], side["status"]) == ("SCHEDULING", 1, "RUNNING")
    assert tasks_of(alice, name) == {"lead": ("SCHEDULING", 1, False),
                                     "worker": ("SCHEDULING", 1, False),
                                     "eval": ("RUNNING", 0, True)}
    # The unbound gang holds no GPUs until the loop places it again.
    quota = alice.get("/api/pool_quota").json()["pools"][0]
    assert quota["used_gpus"] == 4
    assert cycle(admin)["bound"] == 2
    assert tasks_of(alice, name) == {"lead": ("RUNNING", 1, True),
                                     "worker": ("RUNNING", 1, True),
                                     "eval": ("RUNNING", 0, True)}
    listed = {t["task_name"]: t["retry_id"]
              for t in alice.get("/api/task", {"workflow_id": name}).json()["tasks"]}
    assert listed == {"lead": 1, "worker": 1, "eval": 0}
    events = b"".join(alice.get(f"/api/workflow/{name}/events").streaming_content).decode()
    rescheduled = [e for e in TaskEvent.objects.filter(reason="Rescheduled").order_by("id")
                   .values_list("task__name", "message")]
    assert rescheduled == [("lead", "exit code 3: its group runs again (retry 1 of 2)"),
                           ("worker", "its group runs again (retry 1)")]
    assert "exit code 3: its group runs again (retry 1 of 2)" in events
    # Exit code 16 is COMPLETE by the spec, though the report says FAILED.
    body = report(backend, name, "lead", "FAILED", exit_code=16)
    assert body["groups"][0]["status"] == "COMPLETED"
    report(backend, name, "eval", "COMPLETED", exit_code=0)
    assert workflow(alice, name)["status"] == "COMPLETED"


def test_retries_end_at_the_pools_maximum(admin, alice, backend):
    factories.pool("team", 64, max_retries=1)
    add_nodes(admin, 2)
    name = submit(alice, "team", TWO_GROUPS.format(name="ft", actions=RESCHEDULE))
    cycle(admin)
    report(backend, name, "lead", "FAILED", exit_code=10)
    cycle(admin)
    body = report(backend, name, "worker", "FAILED", exit_code=1)  # no exitActions: FAILED
    assert (body["status"], body["groups"][0]["retry_id"]) == ("FAILED", 1)
    name = submit(alice, "team", TWO_GROUPS.format(name="ft2", actions=RESCHEDULE))
    cycle(admin)
    report(backend, name, "lead", "FAILED", exit_code=4)
    cycle(admin)
    body = report(backend, name, "lead", "FAILED", exit_code=4)
    assert (body["status"], body["reason"]) == ("FAILED", "retries_exhausted")
    lead = Task.objects.get(workflow__name=name, name="lead")
    assert (lead.status, lead.exit_code, lead.retry_id) == ("FAILED", 4, 1)


def test_pool_default_exit_actions_apply_where_the_spec_says_nothing(admin, alice, backend):
    response = admin.put("/api/configs/pool/team", {
        "quota_gpus": 64, "default_exit_actions": {"RESCHEDULE": "137"}, "max_retries": 5},
        format="json")
    assert response.status_code in (200, 201), response.json()
    got = admin.get("/api/configs/pool/team").json()
    assert (got["default_exit_actions"], got["max_retries"]) == ({"RESCHEDULE": "137"}, 5)
    add_nodes(admin, 2)
    name = submit(alice, "team", TWO_GROUPS.format(name="ft", actions=""))
    cycle(admin)
    body = report(backend, name, "worker", "FAILED", exit_code=137)
    assert (body["groups"][0]["status"], body["groups"][0]["retry_id"]) == ("SCHEDULING", 1)
    body = report(backend, name, "eval", "FAILED", exit_code=2)  # not in the defaults
    assert (body["groups"][1]["status"], body["status"]) == ("FAILED", "FAILED")


@pytest.mark.parametrize("actions, where", [
    ('{RESCHEDULE: "1-"}', "exitActions.RESCHEDULE"),
    ('{RESCHEDULE: "5-1"}', "exitActions.RESCHEDULE"),
    ('{RETRY: "1"}', "exitActions.RETRY"),
    ('{RESCHEDULE: "1-5", FAIL: "3"}', "exitActions.FAIL"),
    ('"1-5"', "exitActions"),
])
def test_an_exit_code_range_that_does_not_parse_is_refused(admin, alice, actions, where):
    factories.pool("team", 64)
    text = TWO_GROUPS.format(name="bad", actions=f", exitActions: {actions}")
    response = alice.post("/api/pool/team/workflow", {"file": text}, format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    assert set(body) >= {"code", "detail", "errors"} and body["code"] == "invalid_spec"
    assert any(where in key for key in _keys(body["errors"])), body
    assert (Workflow.objects.count(), WorkflowGroup.objects.count()) == (0, 0)


def test_a_pool_default_that_does_not_parse_is_refused(admin):
    factories.pool("team", 64)
    response = admin.put("/api/configs/pool/team", {
        "quota_gpus": 64, "default_exit_actions": {"RESCHEDULE": "a-b"}}, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "invalid_request"
    assert admin.get("/api/configs/pool/team").json()["default_exit_actions"] == {}


def _keys(errors) -> list[str]:
    if isinstance(errors, dict):
        return list(errors) + [k for v in errors.values() for k in _keys(v)]
    if isinstance(errors, list):
        return [k for v in errors for k in _keys(v)] + [v for v in errors if isinstance(v, str)]
    return [str(errors)]


def test_a_group_on_an_agent_s_backend_runs_again_too(admin, alice, backend):
    from scheduler.models import Backend

    factories.pool("team", 64)
    add_nodes(admin, 2)
    name = submit(alice, "team", TWO_GROUPS.format(name="ft", actions=RESCHEDULE))
    cycle(admin)
    # An agent's work queue reruns it as the in-process backend does (tests/backends,
    # tests/kube_real/test_reschedule.py).
    Backend.objects.create(name="k8s", kind="kubernetes", k8s_uid="kube-system-uid")
    WorkflowGroup.objects.filter(workflow__name=name, name="train").update(backend="k8s")
    body = report(backend, name, "lead", "FAILED", exit_code=3)
    train, side = body["groups"]
    assert (train["status"], train["reason"], train["retry_id"], side["status"]) == (
        "SCHEDULING", "rescheduled", 1, "RUNNING")


def test_the_pool_history_tells_the_exit_settings_in_words():
    from dashboard.presenters import describe_change

    before = {"name": "team", "quota_gpus": 64}
    after = {**before, "default_exit_actions": {"RESCHEDULE": "137"}, "max_retries": 5}
    assert describe_change(before, after) == ("default exit actions none → RESCHEDULE 137; "
                                              "max retries 3 → 5")
    assert describe_change(after, before) == ("default exit actions RESCHEDULE 137 → none; "
                                              "max retries 5 → 3")
    assert describe_change(None, before) == "quota 64 GPUs"  # the defaults go unsaid
    assert describe_change(None, after) == ("quota 64 GPUs; default exit actions "
                                            "RESCHEDULE 137; max retries 5")


SIMULATED = """
workflow:
  name: sim
  tasks:
  - name: main
    image: x
    command: [sh, -c, "sleep 5; exit 3"]
    resource: r
    exitActions: {RESCHEDULE: "3"}
  resources:
    r: {gpu: 4, cpu: 1, memory: 1Gi}
"""


def test_the_embedded_cluster_ends_a_command_with_its_exit_code(admin, alice, settings):
    from datetime import timedelta

    from django.utils import timezone

    from scheduler.backends.embedded import cycle as embedded_cycle

    settings.OSMO_SIM_TASK_SECONDS = 60
    factories.pool("team", 64, max_retries=1)
    add_nodes(admin, 1)
    name = submit(alice, "team", SIMULATED)
    assert cycle(admin)["bound"] == 1
    task = Task.objects.get(workflow__name=name)
    assert (task.run_seconds, task.sim_exit_code) == (5, 3)
    later = timezone.now() + timedelta(seconds=6)
    assert embedded_cycle.complete_due_tasks(now=later) == 1
    assert tasks_of(alice, name) == {"main": ("SCHEDULING", 1, False)}
    assert cycle(admin)["bound"] == 1
    assert embedded_cycle.complete_due_tasks(now=later + timedelta(seconds=6)) == 1
    body = workflow(alice, name)
    assert (body["status"], body["reason"]) == ("FAILED", "retries_exhausted")
    assert Task.objects.get(workflow__name=name).exit_code == 3


def test_each_run_keeps_its_own_log_and_the_latest_is_the_default(admin, alice, settings):
    from datetime import timedelta

    from django.utils import timezone

    from scheduler.backends.embedded import cycle as embedded_cycle
    from scheduler.backends.embedded.sim_logs import SimulatedOutput

    settings.OSMO_SIM_TASK_SECONDS = 60
    settings.OSMO_SIM_LOG_INTERVAL = 0
    factories.pool("team", 64, max_retries=1)
    add_nodes(admin, 1)
    name = submit(alice, "team", SIMULATED)
    output = SimulatedOutput()
    assert cycle(admin)["bound"] == 1
    assert output.step() == 2  # where it runs, its command
    later = timezone.now() + timedelta(seconds=6)
    assert embedded_cycle.complete_due_tasks(now=later) == 1
    assert output.step(now=later) == 1  # the first run's last line
    assert cycle(admin)["bound"] == 1
    assert output.step() == 2

    def log(**query) -> tuple[int, list[str]]:
        response = alice.get(f"/api/workflow/{name}/logs", {"follow": "false", **query})
        text = b"".join(response.streaming_content).decode() if response.status_code == 200 \
            else ""
        return response.status_code, [line.split("] ", 1)[1] for line in text.splitlines()
                                      if "[osmo]" not in line]

    started = ["started on node node-0 with GPUs 0-3 (4 GPU(s))",
               "$ sh -c 'sleep 5; exit 3'"]
    first = (200, [*started, "stopped (rescheduled); it will start again"])
    assert log(task_name="main") == log(task_name="main", retry_id=1) == (200, started)
    assert log(task_name="main", retry_id=0) == first
    assert log() == (200, [*first[1], *started])  # the workflow's: every run, in order
    assert log(task_name="main", retry_id=2)[0] == 404
    errors = alice.get(f"/api/workflow/{name}/error_logs",
                       {"task_name": "main", "retry_id": 0})
    assert b"".join(errors.streaming_content).decode().splitlines()[-1].endswith(
        "stopped (rescheduled); it will start again")
    assert TaskLogChunk.objects.filter(task__workflow__name=name).values_list(
        "retry_id", flat=True).distinct().count() == 2


def test_a_run_that_ended_between_two_writes_of_the_output_still_ends_in_its_own_log(
        admin, alice, settings):
    from datetime import timedelta

    from django.utils import timezone

    from scheduler.backends.embedded import cycle as embedded_cycle
    from scheduler.backends.embedded.sim_logs import SimulatedOutput

    settings.OSMO_SIM_TASK_SECONDS = 60
    settings.OSMO_SIM_LOG_INTERVAL = 0
    factories.pool("team", 64, max_retries=1)
    add_nodes(admin, 1)
    name = submit(alice, "team", SIMULATED)
    output = SimulatedOutput()
    assert cycle(admin)["bound"] == 1
    assert output.step() == 2
    assert embedded_cycle.complete_due_tasks(now=timezone.now() + timedelta(seconds=6)) == 1
    assert cycle(admin)["bound"] == 1  # running again before the output looked
    assert output.step() == 3  # the first run's end, the second's start
    chunks = TaskLogChunk.objects.filter(task__workflow__name=name).order_by("id")
    by_run = {}
    for chunk in chunks:
        by_run.setdefault(chunk.retry_id, []).extend(
            line.split("] ", 1)[1] for line in chunk.text.splitlines())
    assert by_run == {0: ["started on node node-0 with GPUs 0-3 (4 GPU(s))",
                          "$ sh -c 'sleep 5; exit 3'",
                          "stopped (rescheduled); it will start again"],
                      1: ["started on node node-0 with GPUs 0-3 (4 GPU(s))",
                          "$ sh -c 'sleep 5; exit 3'"]}


def test_each_run_s_events_carry_its_retry_id_and_can_be_read_alone(admin, alice, backend):
    factories.pool("team", 64, max_retries=2)
    add_nodes(admin, 2)
    name = submit(alice, "team", TWO_GROUPS.format(name="ft", actions=RESCHEDULE))
    cycle(admin)
    report(backend, name, "lead", "FAILED", exit_code=3)
    cycle(admin)
    report(backend, name, "lead", "FAILED", exit_code=16)  # COMPLETE by the spec

    def events(**query) -> tuple[int, list[str]]:
        response = alice.get(f"/api/workflow/{name}/events", query)
        if response.status_code != 200:
            return response.status_code, []
        text = b"".join(response.streaming_content).decode()
        return 200, [line.split(" ", 2)[2] for line in text.splitlines()]  # without the time

    first = ["[lead] Bound: bound to node node-0", "[lead] Running: on node node-0"]
    second = ["[lead retry-1] Rescheduled: exit code 3: its group runs again (retry 1 of 2)",
              "[lead retry-1] Bound: bound to node node-0",
              "[lead retry-1] Running: on node node-0",
              "[lead retry-1] Completed: exit code 16"]
    assert events(task_name="lead", retry_id=0) == (200, first)
    assert events(task_name="lead", retry_id=1) == (200, second)
    assert events(task_name="lead", retry_id=2) == (404, [])
    everything = events(task_name="lead")[1]  # every run's, and the workflow's own
    assert [line for line in everything if line.startswith("[lead")] == first + second
    assert [line for line in everything if not line.startswith("[lead")] == [
        line for line in events()[1] if line.startswith(f"[{name}]")]
    worker = TaskEvent.objects.filter(task__workflow__name=name, task__name="worker")
    assert list(worker.order_by("id").values_list("retry_id", "reason")) == [
        (0, "Bound"), (0, "Running"), (1, "Rescheduled"), (1, "Bound"), (1, "Running"),
        (1, "Completed")]
    eval_runs = TaskEvent.objects.filter(task__workflow__name=name, task__name="eval")
    assert set(eval_runs.values_list("retry_id", flat=True)) == {0}  # the other group ran once
    assert set(TaskEvent.objects.filter(workflow__name=name, task__isnull=True)
               .values_list("retry_id", flat=True)) == {0}
