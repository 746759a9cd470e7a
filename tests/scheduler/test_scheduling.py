"""Submitted workflows through the loop over the embedded cluster (real PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from pools.models import Pool
from pools.services import subpool_archive_if_drained
from scheduler.backends.embedded import cycle as embedded_cycle
from tests import factories
from tests.conftest import make_client
from tests.scheduler.conftest import add_nodes, cycle, nodes_of, spec, submit, workflow

pytestmark = pytest.mark.django_db

PREFILL = """
    scheduling:
      minSubGroup: 3
      subGroups:
      - {name: p0, minMember: 8}
      - {name: p1, minMember: 8}
      - {name: p2, minMember: 8}
      - {name: p3, minMember: 8}
"""


def prefill_spec(name: str = "prefill") -> str:
    tasks = "\n".join(f"    - {{name: p{i}, image: vllm, command: [serve], resource: r, "
                      f"replicas: 8{', lead: true' if i == 0 else ''}}}" for i in range(4))
    return (f"workflow:\n  name: {name}\n  groups:\n  - name: g\n{PREFILL}    tasks:\n{tasks}\n"
            f"  resources:\n    r: {{gpu: 1, cpu: 1, memory: 1Gi}}\n")


def test_a_gang_binds_all_or_nothing(admin, alice, team):
    add_nodes(admin, 2)
    name = submit(alice, "team", spec("gang", 8, tasks=3))
    assert cycle(admin)["bound"] == 0
    assert nodes_of(alice, name) == [None, None, None]
    assert workflow(alice, name)["status"] == "PENDING"
    add_nodes(admin, 1, prefix="extra")
    assert cycle(admin)["bound"] == 3
    body = workflow(alice, name)
    assert body["status"] == "RUNNING" and body["groups"][0]["status"] == "RUNNING"
    assert sorted(nodes_of(alice, name)) == ["extra-0", "node-0", "node-1"]
    quota = alice.get("/api/pool_quota").json()["pools"][0]
    assert (quota["used_gpus"], quota["available_gpus"]) == (24, 40)


def test_elastic_min_subgroup_runs_three_of_four_replicas(admin, alice, team):
    add_nodes(admin, 3)  # room for 3 replicas of 8 single-GPU pods
    name = submit(alice, "team", prefill_spec())
    assert cycle(admin)["bound"] == 24
    tasks = workflow(alice, name)["groups"][0]["tasks"]
    running = {t["name"].rsplit("-", 1)[0] for t in tasks if t["node"]}
    assert len(running) == 3 and sum(1 for t in tasks if t["node"]) == 24
    assert workflow(alice, name)["status"] == "RUNNING"


def test_elastic_min_subgroup_binds_nothing_with_room_for_two(admin, alice, team):
    add_nodes(admin, 2)
    name = submit(alice, "team", prefill_spec())
    assert cycle(admin)["bound"] == 0
    assert set(nodes_of(alice, name)) == {None}


def test_rack_required_placement(admin, alice, team):
    add_nodes(admin, 4, rack_size=2)  # racks z1-r0 (node-0, node-1), z1-r1 (node-2, node-3)
    blocker = submit(alice, "team", spec("blocker", 4))
    cycle(admin)
    blocked_node = nodes_of(alice, blocker)[0]
    rack_spec = spec("racked", 8, tasks=2, scheduling=(
        "    scheduling:\n      topologyConstraint: {requiredTopologyLevel: rack}\n"))
    name = submit(alice, "team", rack_spec)
    assert cycle(admin)["bound"] == 2
    placed = nodes_of(alice, name)
    racks = {admin.get("/api/cluster/nodes").json()[int(n.split("-")[1])]["labels"][
        "topology.osmo/rack"] for n in placed}
    assert len(racks) == 1 and blocked_node not in placed


def test_normal_work_never_exceeds_quota(admin, alice):
    factories.pool("small", 16)
    client = make_client("s", "osmo-small-user")
    add_nodes(admin, 4)
    names = [submit(client, "small", spec(f"n{i}", 8)) for i in range(3)]
    assert cycle(admin)["bound"] == 2
    assert [workflow(client, n)["status"] for n in names] == ["RUNNING", "RUNNING", "PENDING"]
    reasons = client.get(f"/api/workflow/{names[2]}/explain").json()["groups"][0]["reasons"]
    assert reasons[0]["code"] == "queue_over_quota"
    assert "osmo-pool-osmo-small.shared" in reasons[0]["message"] or reasons[0].get("queue")


def test_a_waiting_workflow_gives_one_reason_in_lists_and_detail(admin, alice):
    factories.pool("small", 16)
    client = make_client("s", "osmo-small-user")
    add_nodes(admin, 4)
    names = [submit(client, "small", spec(f"n{i}", 8)) for i in range(3)]
    before = {w["name"]: w for w in client.get("/api/workflow").json()["results"]}
    assert before[names[2]]["reason"] is None  # no cycle yet: nothing to say
    cycle(admin)
    first = client.get(f"/api/workflow/{names[2]}/explain").json()["groups"][0]["reasons"][0]
    expected = {"group": "g", "code": first["code"], "message": first["message"]}
    listed = {w["name"]: w for w in client.get("/api/workflow").json()["results"]}
    detail = client.get(f"/api/workflow/{names[2]}").json()
    for body in (listed[names[2]], detail):
        assert (body["reason"], body["pending_reason"]) == ("queue_over_quota", expected)
    # The running ones wait for nothing.
    assert [(listed[n]["reason"], listed[n]["pending_reason"]) for n in names[:2]] == [
        (None, None), (None, None)]


def test_low_borrows_idle_quota_and_is_reclaimed(admin):
    factories.pool("owner", 16)
    factories.pool("borrower", 16)
    owner = make_client("o", "osmo-owner-user")
    borrower = make_client("b", "osmo-borrower-user")
    add_nodes(admin, 4)  # 32 GPUs
    low = [submit(borrower, "borrower", spec(f"low{i}", 8), "LOW") for i in range(4)]
    assert cycle(admin)["bound"] == 4  # LOW borrows the owner's idle 16 GPUs
    mine = submit(owner, "owner", spec("mine", 8))
    first = cycle(admin)
    second = cycle(admin)
    assert first["evicted"] + second["evicted"] == 1
    assert workflow(owner, mine)["status"] == "RUNNING"
    statuses = sorted(workflow(borrower, n)["status"] for n in low)
    assert statuses == ["FAILED_PREEMPTED", "RUNNING", "RUNNING", "RUNNING"]
    preempted = next(workflow(borrower, n) for n in low
                     if workflow(borrower, n)["status"] == "FAILED_PREEMPTED")
    assert preempted["reason"] == "preempted"
    from workflows.models import Task, Workflow

    winner = Workflow.objects.get(name=mine).groups.get().podgroup
    assert list(Task.objects.filter(workflow__name=preempted["name"])
                .values_list("preempted_by", flat=True)) == [winner]  # by whom, on its page
    quota = {r["name"]: r for r in admin.get("/api/pool_quota").json()["pools"]}
    assert (quota["owner"]["used_gpus"], quota["borrower"]["total_usage_gpus"]) == (8, 24)


def test_tasks_complete_on_the_embedded_cluster(admin, alice, team, settings):
    settings.OSMO_SIM_TASK_SECONDS = 60
    add_nodes(admin, 1)
    quick = submit(alice, "team", spec("quick", 1, command="[sleep, '5']"))
    slow = submit(alice, "team", spec("slow", 1))
    cycle(admin)
    now = timezone.now()
    embedded_cycle.cycle_run(now=now + timedelta(seconds=10))
    assert workflow(alice, quick)["status"] == "COMPLETED"
    assert workflow(alice, slow)["status"] == "RUNNING"
    embedded_cycle.cycle_run(now=now + timedelta(seconds=61))
    assert workflow(alice, slow)["status"] == "COMPLETED"
    assert alice.get("/api/pool_quota").json()["pools"][0]["total_usage_gpus"] == 0


def test_never_completes_by_itself_when_sim_seconds_is_zero(admin, alice, team, settings):
    settings.OSMO_SIM_TASK_SECONDS = 0
    add_nodes(admin, 1)
    name = submit(alice, "team", spec("forever", 1, command="[sleep, '1']"))
    cycle(admin)
    embedded_cycle.cycle_run(now=timezone.now() + timedelta(days=1))
    assert workflow(alice, name)["status"] == "RUNNING"


def test_groups_are_scheduled_in_dependency_order(admin, alice, team, settings):
    settings.OSMO_SIM_TASK_SECONDS = 60
    add_nodes(admin, 1)
    text = """
workflow:
  name: pipeline
  groups:
  - name: first
    tasks: [{name: a, image: x, command: [sleep, '1'], resource: r}]
  - name: second
    tasks: [{name: b, image: x, command: [sleep, '1'], resource: r, inputs: [{task: a}]}]
  resources:
    r: {gpu: 1}
"""
    name = submit(alice, "team", text)
    cycle(admin)
    groups = workflow(alice, name)["groups"]
    assert [(g["status"], g["tasks"][0]["node"]) for g in groups] == [
        ("RUNNING", "node-0"), ("WAITING", None)]
    now = timezone.now()
    # one cycle: a completes first, which releases b, which then binds
    embedded_cycle.cycle_run(now=now + timedelta(seconds=2))
    assert [g["status"] for g in workflow(alice, name)["groups"]] == ["COMPLETED", "RUNNING"]
    embedded_cycle.cycle_run(now=now + timedelta(seconds=10))
    assert workflow(alice, name)["status"] == "COMPLETED"


def test_subpool_delete_drains_then_archives(admin, alice, team):
    factories.subpool(team, "a", 16)
    add_nodes(admin, 1)
    running = submit(alice, "team--a", spec("run", 4))
    cycle(admin)
    waiting = submit(alice, "team--a", spec("wait", 8))
    pool_admin = make_client("pa", "osmo-team-admin")
    response = pool_admin.delete("/api/configs/pool/team/subpool/a")
    assert (response.status_code, response.json()["state"]) == (202, "DELETING")
    assert response.json()["drain"] == {"running_workflows": 1, "gpus_held": 4}
    assert workflow(alice, waiting)["status"] == "FAILED_CANCELED"
    sub = Pool.objects.get(name="team--a")
    assert subpool_archive_if_drained(subpool_id=sub.pk) is False
    backend = make_client("listener", "osmo-backend")
    backend.post(f"/api/workflow/{running}/task/t0/status", {"status": "COMPLETED"},
                 format="json")
    assert subpool_archive_if_drained(subpool_id=sub.pk) is True
    assert Pool.objects.get(pk=sub.pk).subpool_state == "ARCHIVED"


def test_cancel_releases_gpus_at_once(admin, alice, team):
    add_nodes(admin, 1)
    first = submit(alice, "team", spec("first", 8))
    second = submit(alice, "team", spec("second", 8))
    cycle(admin)
    assert workflow(alice, second)["status"] == "PENDING"
    alice.post(f"/api/workflow/{first}/cancel")
    assert admin.get("/api/cluster/nodes").json()[0]["gpus_free"] == 8
    assert cycle(admin)["bound"] == 1
    assert workflow(alice, second)["status"] == "RUNNING"


def test_reclaimed_elastic_surplus_returns_to_pending(admin):
    # KAI pkg/scheduler/actions/integration_tests/reclaim/reclaim_test.go: "Reclaim only over
    # quota task from elastic Job" - the surplus pods are evicted and wait to run again, the
    # gang keeps running on its required core.
    factories.pool("owner", 16)
    factories.pool("borrower", 16)
    owner = make_client("o", "osmo-owner-user")
    borrower = make_client("b", "osmo-borrower-user")
    add_nodes(admin, 4)  # 32 GPUs
    elastic = submit(borrower, "borrower",
                     prefill_spec("elastic").replace("minSubGroup: 3", "minSubGroup: 1"), "LOW")
    assert cycle(admin)["bound"] == 32
    mine = submit(owner, "owner", spec("mine", 8))
    evicted = cycle(admin)["evicted"] + cycle(admin)["evicted"]
    assert evicted == 8
    assert workflow(owner, mine)["status"] == "RUNNING"
    body = workflow(borrower, elastic)
    assert body["status"] == "RUNNING" and body["groups"][0]["status"] == "RUNNING"
    requeued = [t for t in body["groups"][0]["tasks"] if t["status"] == "SCHEDULING"]
    assert len(requeued) == 8
    assert {(t["node"], t["reason"]) for t in requeued} == {(None, "preempted_requeued")}


# A constraint that names a Topology but no level constrains nothing: such a gang is moved too.
@pytest.mark.parametrize("scheduling", [
    "", "    scheduling:\n      topologyConstraint: {topology: osmo-topology}\n"])
def test_consolidation_moves_a_running_task_instead_of_failing_it(admin, alice, team,
                                                                   scheduling):
    # KAI pkg/scheduler/actions/integration_tests/consolidation/consolidation_test.go: "1 train
    # job of 1 GPU running on node0, 1 train job of 1 GPU running on node 0, 1 pending job of 2
    # GPUs - consolidate" (here 4 + 4 GPUs on two 8-GPU nodes, then an 8-GPU job).
    add_nodes(admin, 2)
    names = [submit(alice, "team", spec(f"low{i}", 4, scheduling=scheduling), "LOW")
             for i in range(4)]
    assert cycle(admin)["bound"] == 4
    by_node = {}
    for name in names:
        by_node.setdefault(nodes_of(alice, name)[0], []).append(name)
    keep = [group[0] for group in by_node.values()]
    for group in by_node.values():
        assert alice.post(f"/api/workflow/{group[1]}/cancel").status_code == 200
    wide = submit(alice, "team", spec("wide", 8), "LOW")
    summary = cycle(admin)
    assert (summary["bound"], summary["evicted"]) == (1, 0)
    assert workflow(alice, wide)["status"] == "RUNNING"
    tasks = [workflow(alice, name)["groups"][0]["tasks"][0] for name in keep]
    assert all(t["status"] == "RUNNING" for t in tasks)
    assert tasks[0]["node"] == tasks[1]["node"] != nodes_of(alice, wide)[0]
    assert sorted(t["reason"] or "" for t in tasks) == ["", "consolidated"]


def test_refused_reclaim_is_explained(admin):
    factories.pool("owner", 4)
    factories.pool("other", 6)
    owner = make_client("o", "osmo-owner-user")
    other = make_client("t", "osmo-other-user")
    add_nodes(admin, 1)  # 8 GPUs: the quotas add up to more than the cluster
    submit(other, "other", spec("borrow", 6), "LOW")
    assert cycle(admin)["bound"] == 1
    mine = submit(owner, "owner", spec("mine", 4))
    assert cycle(admin)["evicted"] == 0
    reasons = owner.get(f"/api/workflow/{mine}/explain").json()["groups"][0]["reasons"]
    protected = [r for r in reasons if r["code"] == "reclaim_victim_protected"]
    assert protected, reasons
    assert "osmo-pool-osmo-other" in protected[0]["message"]
    assert "deserved quota of 6 GPUs" in protected[0]["message"]
