"""Nodes, topology and the scheduler endpoints."""

from __future__ import annotations

import pytest

from scheduler.models import Node
from tests.conftest import make_client
from tests.scheduler.conftest import add_nodes, cycle, spec, submit, workflow

pytestmark = pytest.mark.django_db


def test_register_list_cordon_and_replace_nodes(admin):
    add_nodes(admin, 2)
    nodes = admin.get("/api/cluster/nodes").json()
    assert nodes[0] == {"name": "node-0", "gpus": 8, "gpus_free": 8, "cpu": 64,
                        "memory": "512Gi", "schedulable": True, "backend": "default",
                        "labels": {"topology.osmo/zone": "z1", "topology.osmo/rack": "z1-r0",
                                   "kubernetes.io/hostname": "node-0"}}
    response = admin.post("/api/cluster/nodes", {"name": "node-0", "gpus": 4, "cpu": 0.5,
                                                  "memory": "1Gi", "labels": {}}, format="json")
    assert response.status_code == 200
    assert (response.json()["gpus"], response.json()["cpu"]) == (4, 0.5)
    response = admin.patch("/api/cluster/nodes/node-1", {"schedulable": False}, format="json")
    assert response.json()["schedulable"] is False


@pytest.mark.parametrize("body,field", [
    ({"name": "Bad_Name", "gpus": 1}, "name"), ({"name": "n", "gpus": -1}, "gpus"),
    ({"name": "n", "gpus": 1.5}, "gpus"), ({"name": "n", "gpus": 1, "memory": "lots"}, "memory"),
    ({"name": "n", "gpus": 1, "labels": {"a": 1}}, "labels")])
def test_bad_nodes_are_refused(admin, body, field):
    response = admin.post("/api/cluster/nodes", body, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")
    assert list(response.json()["errors"]) == [field]
    assert not Node.objects.exists()


def test_only_platform_admins_manage_nodes(admin, alice):
    add_nodes(admin, 1)
    before = list(Node.objects.values())
    assert alice.post("/api/cluster/nodes", {"name": "x", "gpus": 1},
                      format="json").status_code == 403
    assert alice.patch("/api/cluster/nodes/node-0", {"schedulable": False},
                       format="json").status_code == 403
    assert alice.delete("/api/cluster/nodes/node-0").status_code == 403
    assert alice.post("/api/scheduler/cycle").status_code == 403
    assert list(Node.objects.values()) == before
    assert alice.get("/api/cluster/nodes").status_code == 200


def test_delete_node_in_use_then_force(admin, alice, team):
    add_nodes(admin, 1)
    name = submit(alice, "team", spec("job", 2))
    assert cycle(admin)["bound"] == 1
    response = admin.delete("/api/cluster/nodes/node-0")
    assert (response.status_code, response.json()["code"]) == (409, "node_in_use")
    assert Node.objects.filter(name="node-0").exists()
    assert workflow(alice, name)["status"] == "RUNNING"
    assert admin.delete("/api/cluster/nodes/node-0?force=true").status_code == 204
    body = workflow(alice, name)
    assert (body["status"], body["groups"][0]["tasks"][0]["status"]) == (
        "FAILED_EVICTED", "FAILED_EVICTED")
    assert admin.delete("/api/cluster/nodes/node-0").json()["code"] == "node_not_found"


def test_cordoned_nodes_keep_their_work_and_take_no_new_work(admin, alice, team):
    add_nodes(admin, 1)
    first = submit(alice, "team", spec("a", 4))
    cycle(admin)
    admin.patch("/api/cluster/nodes/node-0", {"schedulable": False}, format="json")
    second = submit(alice, "team", spec("b", 4))
    assert cycle(admin)["bound"] == 0
    assert workflow(alice, first)["status"] == "RUNNING"
    assert workflow(alice, second)["status"] == "PENDING"


def test_topology_get_put_and_validation(admin, alice):
    assert admin.get("/api/cluster/topology").json()["levels"][0] == {
        "alias": "zone", "nodeLabel": "topology.osmo/zone"}
    levels = [{"alias": "rack", "nodeLabel": "topology.osmo/rack"},
              {"alias": "hostname", "nodeLabel": "kubernetes.io/hostname"}]
    response = admin.put("/api/cluster/topology", {"levels": levels}, format="json")
    assert (response.status_code, response.json()["levels"]) == (200, levels)
    for bad in ([], [{"nodeLabel": "a"}] * 2,
                [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "x"}],
                [{"alias": "a", "nodeLabel": "x"}, {"alias": "a", "nodeLabel": "y"}],
                [{"nodeLabel": f"l{i}"} for i in range(17)], "rack"):
        response = admin.put("/api/cluster/topology", {"levels": bad}, format="json")
        assert (response.status_code, response.json()["code"]) == (400, "invalid_topology"), bad
    assert admin.get("/api/cluster/topology").json()["levels"] == levels
    assert alice.put("/api/cluster/topology", {"levels": levels},
                     format="json").status_code == 403


def test_status_and_explain(admin, alice, team):
    add_nodes(admin, 1)
    fits = submit(alice, "team", spec("fits", 8))
    too_big = submit(alice, "team", spec("big", 8, tasks=2))
    assert alice.get(f"/api/workflow/{too_big}/explain").json()["groups"][0]["reasons"][0][
        "code"] == "not_yet_scheduled"
    summary = cycle(admin)
    assert (summary["bound"], summary["evicted"], summary["pending"]) == (1, 0, 1)
    status = alice.get("/api/scheduler/status").json()
    assert status["last_cycle"]["bound"] == 1 and status["last_cycle"]["pending"] == 1
    shared = next(q for q in status["queues"] if q["name"] == "osmo-pool-osmo-team.shared")
    assert (shared["deserved_gpus"], shared["allocated_gpus"], shared["requested_gpus"]) == (
        64, 8, 24)
    assert [p["workflow"] for p in status["pending"]] == [too_big]
    explain = alice.get(f"/api/workflow/{too_big}/explain").json()
    reasons = explain["groups"][0]["reasons"]
    assert reasons and all(set(r) >= {"code", "message"} for r in reasons)
    assert {r["code"] for r in reasons} & {"insufficient_gpus", "no_node_fits"}
    assert alice.get(f"/api/workflow/{fits}/explain").json()["groups"][0]["reasons"] == []
    outsider = make_client("outsider", "osmo-x-user")
    assert outsider.get("/api/scheduler/status").json()["pending"] == []


@pytest.mark.parametrize("size", [1, 6])
def test_snapshot_takes_a_fixed_number_of_queries(admin, alice, team, size,
                                                  django_assert_num_queries):
    from django.utils import timezone

    from scheduler.backends.embedded.snapshot import build_snapshot

    add_nodes(admin, size)
    for index in range(size):
        submit(alice, "team", spec(f"w{index}", 1, tasks=2))
    cycle(admin)
    for index in range(size):
        submit(alice, "team", spec(f"p{index}", 8, tasks=3))
    # nodes, topology, pool tree, gangs, tasks
    with django_assert_num_queries(5):
        snapshot, _ = build_snapshot(now=timezone.now())
    assert len(snapshot.gangs) == 2 * size and len(snapshot.nodes) == size


def test_the_kai_topology_follows_the_cluster_topology(admin):
    levels = [{"alias": "rack", "nodeLabel": "topology.osmo/rack"}]
    admin.put("/api/cluster/topology", {"levels": levels}, format="json")
    from scheduler.kai.selectors import topology_manifest

    assert topology_manifest(namespace="osmo")["spec"]["levels"] == levels


def test_admission_and_validation_follow_the_stored_topology(admin, alice, team):
    admin.put("/api/cluster/topology", {"levels": [
        {"alias": "rack", "nodeLabel": "topology.osmo/rack"},
        {"alias": "hostname", "nodeLabel": "kubernetes.io/hostname"}]}, format="json")
    zoned = spec("zoned", 1, scheduling=(
        "    scheduling:\n      topologyConstraint: {requiredTopologyLevel: zone}\n"))
    response = alice.post("/api/pool/team/workflow", {"file": zoned}, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_spec")
    assert any("zone" in m for ms in response.json()["errors"].values() for m in ms)
    racked = zoned.replace("zone", "rack")
    assert alice.post("/api/pool/team/workflow", {"file": racked},
                      format="json").status_code == 201
    podgroup = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                "metadata": {"name": "pg"},
                "spec": {"queue": "q", "minMember": 1,
                         "topologyConstraint": {"requiredTopologyLevel": "zone"}}}
    body = alice.post("/api/kai/podgroups/validate", podgroup, format="json").json()
    assert body["allowed"] is False
