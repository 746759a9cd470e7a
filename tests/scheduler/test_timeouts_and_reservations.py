"""Timeouts (OSMO's per-group exec_timeout / queue_timeout), reservations and start estimates
on the embedded cluster, through the API and the loop (real PostgreSQL). Time is moved by
running cycles at chosen instants (`cycle_run(now=...)`)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.presenters import workflow_groups
from pools.models import PoolUsageSample
from scheduler.backends.embedded import cycle as embedded_cycle
from scheduler.selectors import explain
from scheduler.usage import queue_usage
from tests import factories
from tests.conftest import make_client
from tests.scheduler.conftest import add_nodes, submit, workflow
from workflows.models import Workflow, WorkflowGroup

pytestmark = pytest.mark.django_db


def timed(name: str, gpus: int, *, groups: int = 1, exec_timeout: str | None = None,
          queue_timeout: str | None = None, sleep: int = 3600) -> str:
    """Independent groups of one task each, `sleep N` long, with the given timeouts."""
    timeout = {key: value for key, value in (("exec_timeout", exec_timeout),
                                             ("queue_timeout", queue_timeout)) if value}
    lines = "\n".join(f"  - name: g{i}\n    tasks:\n    - {{name: t{i}, image: x, command: "
                      f"[sleep, '{sleep}'], resource: r}}" for i in range(groups))
    block = f"  timeout: {timeout}\n" if timeout else ""
    return (f"workflow:\n  name: {name}\n{block}  groups:\n{lines}\n  resources:\n"
            f"    r: {{gpu: {gpus}, cpu: 1, memory: 1Gi}}\n")


def groups_of(client, name: str) -> dict[str, tuple[str, str | None, list[str]]]:
    return {g["name"]: (g["status"], g["reason"], [t["status"] for t in g["tasks"]])
            for g in workflow(client, name)["groups"]}


def test_exec_timeout_ends_the_group_from_its_running_transition_and_siblings_go_on(
        admin, alice, team):
    add_nodes(admin, 1)  # one 8-GPU node: g0 runs first, g1 waits for it
    name = submit(alice, "team", timed("train", 8, groups=2, exec_timeout="1m"))
    start = timezone.now()
    embedded_cycle.cycle_run(now=start)
    assert groups_of(alice, name)["g0"][0] == "RUNNING"
    embedded_cycle.cycle_run(now=start + timedelta(seconds=59))
    assert groups_of(alice, name)["g0"][0] == "RUNNING"

    embedded_cycle.cycle_run(now=start + timedelta(seconds=61))  # g0's minute is up; g1 starts
    groups = groups_of(alice, name)
    assert groups["g0"] == ("FAILED_EXEC_TIMEOUT", "exec_timeout", ["FAILED_EXEC_TIMEOUT"])
    assert groups["g1"] == ("RUNNING", None, ["RUNNING"])
    assert workflow(alice, name)["status"] == "RUNNING"
    assert workflow(alice, name)["groups"][1]["tasks"][0]["node"] == "node-0"

    embedded_cycle.cycle_run(now=start + timedelta(seconds=120))  # g1's own minute is not up yet
    assert groups_of(alice, name)["g1"][0] == "RUNNING"
    embedded_cycle.cycle_run(now=start + timedelta(seconds=122))
    body = workflow(alice, name)
    assert (body["status"], body["reason"]) == ("FAILED_EXEC_TIMEOUT", "exec_timeout")
    assert body["exec_timeout_seconds"] == 60


def test_queue_timeout_ends_a_group_that_never_got_a_node(admin, alice, team):
    add_nodes(admin, 1)
    blocker = submit(alice, "team", timed("blocker", 8))
    start = timezone.now()
    embedded_cycle.cycle_run(now=start)
    name = submit(alice, "team", timed("late", 4, queue_timeout="30s"))
    embedded_cycle.cycle_run(now=start + timedelta(seconds=20))
    assert groups_of(alice, name)["g0"][0] == "SCHEDULING"
    embedded_cycle.cycle_run(now=timezone.now() + timedelta(seconds=31))
    assert groups_of(alice, name)["g0"] == ("FAILED_QUEUE_TIMEOUT", "queue_timeout",
                                           ["FAILED_QUEUE_TIMEOUT"])
    assert workflow(alice, name)["status"] == "FAILED_QUEUE_TIMEOUT"
    assert workflow(alice, blocker)["status"] == "RUNNING"  # no queue_timeout: untouched


def test_platform_default_and_maximum_exec_timeout(admin, alice, team, settings):
    settings.OSMO_DEFAULT_EXEC_TIMEOUT = 3 * 3600
    settings.OSMO_MAX_EXEC_TIMEOUT = 3600
    defaulted = submit(alice, "team", timed("plain", 1))
    assert workflow(alice, defaulted)["exec_timeout_seconds"] == 3600  # capped by the maximum
    asked = submit(alice, "team", timed("asked", 1, exec_timeout="30m"))
    assert workflow(alice, asked)["exec_timeout_seconds"] == 1800
    before = Workflow.objects.count()
    response = alice.post("/api/pool/team/workflow", {"file": timed("long", 1,
                                                                    exec_timeout="2h")},
                          format="json")
    assert response.status_code == 400
    assert response.json() == {
        "code": "invalid_spec",
        "detail": "The workflow spec is not valid: workflow.timeout.exec_timeout: 7200 s is "
                  "above this platform's maximum exec_timeout of 3600 s (OSMO_MAX_EXEC_TIMEOUT)",
        "errors": {"workflow.timeout.exec_timeout": [
            "7200 s is above this platform's maximum exec_timeout of 3600 s "
            "(OSMO_MAX_EXEC_TIMEOUT)"]}}
    assert Workflow.objects.count() == before
    settings.OSMO_DEFAULT_EXEC_TIMEOUT = None
    settings.OSMO_MAX_EXEC_TIMEOUT = None
    assert workflow(alice, submit(alice, "team", timed("free", 1)))["exec_timeout_seconds"] \
        is None


def test_a_gang_that_waited_reserves_nodes_and_explain_gives_its_expected_start(
        admin, alice, team):
    add_nodes(admin, 2)
    start = timezone.now()
    small = [submit(alice, "team", timed(f"small{i}", 1, exec_timeout="1m")) for i in range(16)]
    embedded_cycle.cycle_run(now=start)
    assert all(workflow(alice, s)["status"] == "RUNNING" for s in small)
    big = submit(alice, "team", timed("big", 8, exec_timeout="10m"))
    embedded_cycle.cycle_run(now=start + timedelta(seconds=5))  # waited too little: no reservation
    assert alice.get(f"/api/workflow/{big}/explain").json()["groups"][0]["estimate"] is None

    embedded_cycle.cycle_run(now=timezone.now() + timedelta(seconds=11))
    group = alice.get(f"/api/workflow/{big}/explain").json()["groups"][0]
    deadline = WorkflowGroup.objects.get(workflow__name=small[0]).started_at \
        + timedelta(seconds=60)
    assert group["estimate"]["expected_start_at"] == \
        deadline.isoformat(timespec="microseconds").replace("+00:00", "Z")
    assert group["estimate"]["reserved_gpus"] == 8
    assert group["estimate"]["reserved_nodes"] in (["node-0"], ["node-1"])
    assert group["estimate"]["untimed"] == []
    message = group["reasons"][0]["message"]
    assert group["reasons"][0]["code"] == "reserved_start"
    assert message.startswith(f"reserved nodes {group['estimate']['reserved_nodes'][0]}; "
                              "expected start in ")
    assert "when workflow 'small" in message and "reaches its exec_timeout" in message
    status = alice.get("/api/scheduler/status").json()
    assert [p["estimate"] for p in status["pending"] if p["workflow"] == big] == [
        group["estimate"]]
    queue = next(q for q in status["queues"] if q["name"] == "osmo-pool-osmo-team.shared")
    assert queue["reserved_gpus"] == 8

    found = Workflow.objects.get(name=big)
    (view,) = workflow_groups(found, explain(found), timezone.now())
    assert view.estimate == group["estimate"]


def test_usage_decays_with_the_half_life_and_lowers_the_over_quota_share(admin, settings):
    add_nodes(admin, 1)  # 8 GPUs
    busy, idle = factories.pool("busy", 0), factories.pool("idle", 0)
    now = timezone.now()
    for age in (0, 3600):  # now and one half-life ago: busy held the whole cluster
        PoolUsageSample.objects.create(pool=busy, at=now - timedelta(seconds=age), used_gpus=8,
                                       low_gpus=0, quota_gpus=0)
        PoolUsageSample.objects.create(pool=idle, at=now - timedelta(seconds=age), used_gpus=0,
                                       low_gpus=0, quota_gpus=0)
    settings.OSMO_USAGE_HALF_LIFE = None
    assert queue_usage(now=now, namespace="osmo") == {}
    settings.OSMO_USAGE_HALF_LIFE = 3600
    usage = queue_usage(now=now, namespace="osmo")
    assert usage == {"osmo-pool-osmo-busy.shared": pytest.approx(1.0)}  # (8+4) / (1.5*8)
    user = make_client("u", "osmo-busy-user", "osmo-idle-user")
    for pool in ("busy", "idle"):
        submit(user, pool, timed(f"{pool}-job", 8), priority="LOW")
    embedded_cycle.cycle_run(now=now)
    shares = {q["name"]: q["fair_share_gpus"]
              for q in admin.get("/api/scheduler/status").json()["queues"]}
    # equal weights, but busy's usage (1.0) is twice its normalized weight (0.5): KAI's
    # max(0, 0.5 + (0.5 - 1.0)) = 0 of what is over quota
    assert (shares["osmo-pool-osmo-busy"], shares["osmo-pool-osmo-idle"]) == (0, 8)
    settings.OSMO_USAGE_HALF_LIFE = None
    embedded_cycle.cycle_run(now=now)
    shares = {q["name"]: q["fair_share_gpus"]
              for q in admin.get("/api/scheduler/status").json()["queues"]}
    assert (shares["osmo-pool-osmo-busy"], shares["osmo-pool-osmo-idle"]) == (4, 4)


def test_groups_waiting_for_a_timed_out_group_are_canceled(admin, alice, team):
    add_nodes(admin, 1)
    text = """
workflow:
  name: chain
  timeout: {exec_timeout: 30s}
  groups:
  - name: first
    tasks:
    - {name: a, image: x, command: [sleep, '3600'], resource: r}
  - name: second
    tasks:
    - {name: b, image: x, command: [sleep, '5'], resource: r, inputs: [{task: a}]}
  resources:
    r: {gpu: 1, cpu: 1, memory: 1Gi}
"""
    name = submit(alice, "team", text)
    start = timezone.now()
    embedded_cycle.cycle_run(now=start)
    embedded_cycle.cycle_run(now=start + timedelta(seconds=31))
    groups = groups_of(alice, name)
    assert groups["first"] == ("FAILED_EXEC_TIMEOUT", "exec_timeout", ["FAILED_EXEC_TIMEOUT"])
    assert groups["second"] == ("FAILED_CANCELED", "upstream_failed", ["FAILED_CANCELED"])
    assert workflow(alice, name)["status"] == "FAILED_EXEC_TIMEOUT"
