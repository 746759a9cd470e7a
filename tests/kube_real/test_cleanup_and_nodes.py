"""Cleanup and node inventory against the real API server: bound pods stay Terminating after a
graceful delete (no kubelet confirms it), as on a node that was lost."""

from __future__ import annotations

import pytest

from scheduler.backends.kubernetes.nodes import inventory
from scheduler.models import GroupDispatch, Node
from tests.k8s.conftest import spec, statuses, submit

pytestmark = pytest.mark.django_db


def test_sweeps_do_not_delete_terminating_pods_again(backend, cluster, alice, team,
                                                     monkeypatch) -> None:
    name = submit(alice, "team", spec("lost", tasks=2))
    backend.dispatch()
    backend.listen()
    pods = [f"{name}-g-t0", f"{name}-g-t1"]
    cluster.add_node("gone-node", gpus=8)
    for pod in pods:
        cluster.run(pod, "gone-node")
    cluster.delete_node("gone-node")  # its node is lost: nobody will confirm a delete
    backend.listen()
    assert alice.post(f"/api/workflow/{name}/cancel").status_code == 200
    assert backend.cleanup() == 1
    for pod in pods:  # graceful deletes of bound pods: Terminating until a kubelet says so
        assert cluster.get("pods", pod)["metadata"]["deletionTimestamp"]
    assert cluster.names("podgroups") == cluster.names("services") == []

    deletes = []
    real_delete = backend.cleaner._delete
    monkeypatch.setattr(backend.cleaner, "_delete",
                        lambda kind, obj: deletes.append((kind, obj)) or real_delete(kind, obj))
    GroupDispatch.objects.all().delete()  # a lost record: only the sweep can see them
    for _resync in range(3):
        assert backend.cleaner.sweep() == 0
        assert backend.cleaner.sweep_pool("team") == 0
    assert deletes == []
    backend.listen()  # Terminating pods change nothing either
    assert statuses(alice, name) == ("FAILED_CANCELED", ["FAILED_CANCELED"] * 2)


def test_sweeps_remove_leftovers_of_ended_or_unknown_groups_only(backend, cluster, alice,
                                                                 team) -> None:
    alive = submit(alice, "team", spec("alive"))
    ended = submit(alice, "team", spec("ended"))
    backend.dispatch()
    assert alice.post(f"/api/workflow/{ended}/cancel").status_code == 200
    GroupDispatch.objects.filter(group__workflow__name=ended).delete()  # a lost record
    assert backend.cleanup() == 0
    assert backend.cleaner.sweep() == 2  # its PodGroup and its (unbound) pod
    assert cluster.names("pods") == [f"{alive}-g-t0"]
    assert cluster.names("podgroups") == [f"{alive}-g"]


@pytest.fixture
def nodes(cluster):
    made: list[str] = []

    def add(name: str, **kwargs) -> None:
        cluster.add_node(name, **kwargs)
        made.append(name)

    yield add
    for name in made:
        try:
            cluster.delete_node(name)
        except Exception:  # noqa: BLE001 - the test deleted it already
            pass


def test_nodes_come_from_node_objects(backend, cluster, admin, nodes) -> None:
    nodes("gpu-1", gpus=8, cpu="63500m", memory="1048576Ki",
          labels={"topology.osmo/rack": "r1", "topology.osmo/zone": "z1"})
    nodes("gpu-2", gpus=4, unschedulable=True)
    nodes("cpu-1", gpus=0, ready=False)
    summary = inventory(backend.kube)
    assert sorted(summary.registered) == ["cpu-1", "gpu-1", "gpu-2"]
    listed = {n["name"]: n for n in admin.get("/api/cluster/nodes").json()}
    assert listed["gpu-1"] == {"name": "gpu-1", "backend": "default", "gpus": 8,
                               "gpus_free": 8, "cpu": 63.5,
                               "memory": "1Gi", "schedulable": True,
                               "labels": {"kubernetes.io/hostname": "gpu-1",
                                          "topology.osmo/rack": "r1",
                                          "topology.osmo/zone": "z1"}}
    assert (listed["gpu-2"]["schedulable"], listed["cpu-1"]["schedulable"]) == (False, False)
    assert inventory(backend.kube).registered == []  # unchanged: nothing written
    cluster.delete_node("gpu-2")
    assert inventory(backend.kube).removed == ["gpu-2"]
    assert sorted(Node.objects.values_list("name", flat=True)) == ["cpu-1", "gpu-1"]


def test_a_node_without_ready_or_tainted_is_not_schedulable(backend, admin, nodes) -> None:
    """The Node table reads a Node as the scheduler does: one that states no Ready condition
    yet, or carries a NoSchedule taint, offers no capacity."""
    nodes("fresh", gpus=8, ready=None)
    nodes("broken", gpus=8, taints=[{"key": "gpu-broken", "effect": "NoSchedule"}])
    nodes("spot", gpus=8, taints=[{"key": "spot", "effect": "PreferNoSchedule"}])
    assert sorted(inventory(backend.kube).registered) == ["broken", "fresh", "spot"]
    listed = {n["name"]: n["schedulable"] for n in admin.get("/api/cluster/nodes").json()}
    assert listed == {"broken": False, "fresh": False, "spot": True}
    assert sorted(Node.objects.filter(schedulable=True).values_list("name", flat=True)) == [
        "spot"]
