"""Status path: the test moves pods as KAI and the kubelet would; tasks, workflows, usage and
`explain` follow through LIST + WATCH; ended groups leave the cluster."""

from __future__ import annotations

import pytest

from scheduler.backends.kubernetes.dispatch import ClusterUnavailable
from scheduler.backends.kubernetes.status import pending_publish
from scheduler.models import GroupDispatch, Node
from workflows.models import Task

from .conftest import spec, statuses, submit, workflow

pytestmark = pytest.mark.django_db


def quota_row(client, pool: str = "team") -> dict:
    return next(row for row in client.get("/api/pool_quota").json()["pools"]
                if row["name"] == pool)


def test_a_gang_runs_and_completes_as_its_pods_do(backend, cluster, alice, admin,
                                                  team) -> None:
    name = submit(alice, "team", spec("train", gpus=4, tasks=2))
    backend.dispatch()
    backend.listen()  # the first LIST
    message = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    cluster.unschedulable(f"{name}-g-t0", message)
    backend.listen()
    assert backend.listener.reasons_changed
    pending_publish()  # what the runner does after the listener saw new reasons
    explain = alice.get(f"/api/workflow/{name}/explain").json()
    assert explain["groups"][0]["reasons"] == [{"code": "unschedulable", "message": message}]
    assert admin.get("/api/scheduler/status").json()["pending"][0]["reasons"][0][
        "message"] == message
    assert quota_row(alice)["used_gpus"] == 0

    cluster.bind(f"{name}-g-t0", "node-a")  # KAI bound it: it holds its GPUs from now on
    cluster.bind(f"{name}-g-t1", "node-b")
    backend.listen()
    assert statuses(alice, name) == ("PENDING", ["SCHEDULING", "SCHEDULING"])
    assert quota_row(alice)["used_gpus"] == 8

    cluster.run(f"{name}-g-t0", "node-a")
    cluster.run(f"{name}-g-t1", "node-b")
    backend.listen()
    body = workflow(alice, name)
    assert body["status"] == "RUNNING"
    assert [(t["status"], t["node"]) for t in body["groups"][0]["tasks"]] == [
        ("RUNNING", "node-a"), ("RUNNING", "node-b")]
    assert quota_row(alice)["used_gpus"] == 8

    cluster.finish(f"{name}-g-t1", 0)
    backend.listen()
    assert statuses(alice, name) == ("RUNNING", ["RUNNING", "COMPLETED"])
    cluster.finish(f"{name}-g-t0", 0)
    backend.listen()
    assert statuses(alice, name) == ("COMPLETED", ["COMPLETED", "COMPLETED"])
    assert Task.objects.filter(exit_code=0).count() == 2
    assert quota_row(alice)["used_gpus"] == 0
    assert backend.cleanup() == 1
    assert cluster.names("pods") == cluster.names("podgroups") == cluster.names("services") == []
    assert GroupDispatch.objects.get().cleaned_at is not None


def test_a_failed_pod_fails_the_gang_with_its_exit_code(backend, cluster, alice, team) -> None:
    name = submit(alice, "team", spec("crash", tasks=2))
    backend.dispatch()
    backend.listen()
    cluster.run(f"{name}-g-t0", "n1")
    cluster.run(f"{name}-g-t1", "n1")
    cluster.finish(f"{name}-g-t1", 137)
    backend.listen()
    body = workflow(alice, name)
    assert body["status"] == "FAILED"
    assert [(t["status"], t["exit_code"]) for t in body["groups"][0]["tasks"]] == [
        ("FAILED_CANCELED", None), ("FAILED", 137)]
    backend.cleanup()  # the still-running peer is stopped
    assert cluster.names("pods") == []


def test_preemption_is_recognised_and_the_gang_ends_preempted(backend, cluster, alice,
                                                              team) -> None:
    name = submit(alice, "team", spec("opportunist", tasks=2), priority="LOW")
    backend.dispatch()
    backend.listen()
    cluster.run(f"{name}-g-t0", "n1")
    cluster.run(f"{name}-g-t1", "n2")
    backend.listen()
    assert quota_row(alice)["total_usage_gpus"] == 4 and quota_row(alice)["used_gpus"] == 0
    cluster.preempt(f"{name}-g-t0")
    backend.listen()
    body = workflow(alice, name)
    assert (body["status"], body["reason"]) == ("FAILED_PREEMPTED", "preempted")
    assert [t["status"] for t in body["groups"][0]["tasks"]] == ["FAILED_PREEMPTED",
                                                                 "FAILED_CANCELED"]
    assert quota_row(alice)["total_usage_gpus"] == 0
    backend.cleanup()
    assert cluster.names("pods") == cluster.names("podgroups") == []


def test_a_deleted_pod_evicts_its_task_whether_watched_or_found_by_a_relist(
        backend, cluster, alice, team) -> None:
    watched = submit(alice, "team", spec("watched"))
    unseen = submit(alice, "team", spec("unseen"))
    backend.dispatch()
    backend.listen()
    cluster.run(f"{watched}-g-t0", "n1")
    cluster.run(f"{unseen}-g-t0", "n1")
    backend.listen()
    cluster.delete("pods", f"{watched}-g-t0")
    backend.listen()
    assert statuses(alice, watched) == ("FAILED_EVICTED", ["FAILED_EVICTED"])
    assert Task.objects.get(workflow__name=watched).reason == "pod_deleted"
    # Deleted while nobody watched, and the watch history is gone: the next LIST finds it.
    cluster.delete("pods", f"{unseen}-g-t0")
    cluster.compact()
    backend.listen()  # 410 Gone
    assert statuses(alice, unseen) == ("RUNNING", ["RUNNING"])
    backend.listen()  # re-LIST
    assert statuses(alice, unseen) == ("FAILED_EVICTED", ["FAILED_EVICTED"])


def test_cancel_removes_the_objects(backend, cluster, alice, team) -> None:
    name = submit(alice, "team", spec("cancel-me", tasks=2))
    backend.dispatch()
    backend.listen()
    cluster.run(f"{name}-g-t0", "n1")
    backend.listen()
    assert alice.post(f"/api/workflow/{name}/cancel").status_code == 200
    assert backend.cleanup() == 1
    assert [cluster.names(k) for k in ("pods", "podgroups", "services", "secrets")] == [[]] * 4
    backend.listen()  # the deletions come back as events: nothing changes any more
    assert statuses(alice, name) == ("FAILED_CANCELED", ["FAILED_CANCELED"] * 2)


def test_a_group_waiting_for_inputs_is_dispatched_when_they_complete(backend, cluster, alice,
                                                                     team) -> None:
    text = """
workflow:
  name: pipeline
  groups:
  - name: prep
    tasks:
    - {name: p, image: x, command: [prep], resource: r}
  - name: train
    tasks:
    - {name: t, image: x, command: [train], resource: r, inputs: [{task: p}]}
  resources:
    r: {gpu: 1}
"""
    name = submit(alice, "team", text)
    backend.dispatch()
    assert cluster.names("podgroups") == [f"{name}-prep"]
    backend.listen()
    cluster.run(f"{name}-prep-p", "n1")
    cluster.finish(f"{name}-prep-p")
    backend.listen()
    backend.dispatch()
    backend.cleanup()
    assert cluster.names("podgroups") == [f"{name}-train"]
    assert cluster.names("pods") == [f"{name}-train-t"]


def test_an_api_outage_loses_nothing_and_converges(backend, cluster, alice, team) -> None:
    first = submit(alice, "team", spec("first"))
    cluster.outage = 500
    with pytest.raises(ClusterUnavailable):
        backend.dispatch()
    with pytest.raises(Exception) as raised:
        backend.listen()
    assert getattr(raised.value, "status", None) == 500
    second = submit(alice, "team", spec("second"))
    cluster.outage = None
    assert backend.dispatch().applied == [f"{first}-g", f"{second}-g"]
    backend.listen()
    # The server goes away entirely while pods move on; the listener resumes where it was.
    cluster.run(f"{first}-g-t0", "n1")
    cluster.stop()
    with pytest.raises(Exception):  # noqa: B017 - connection refused, whatever its class
        backend.listen()
    cluster.finish(f"{first}-g-t0")
    cluster.run(f"{second}-g-t0", "n2")
    cluster.start()
    backend.listen()
    assert statuses(alice, first) == ("COMPLETED", ["COMPLETED"])
    assert statuses(alice, second) == ("RUNNING", ["RUNNING"])


def test_nodes_come_from_the_cluster(backend, cluster, admin) -> None:
    from scheduler.backends.kubernetes.nodes import inventory

    cluster.add_node("gpu-1", gpus=8, cpu="63500m", memory="1048576Ki",
                     labels={"topology.osmo/rack": "r1", "topology.osmo/zone": "z1"})
    cluster.add_node("gpu-2", gpus=4, unschedulable=True)
    cluster.add_node("cpu-1", gpus=0, ready=False)
    summary = inventory(backend.kube)
    assert sorted(summary.registered) == ["cpu-1", "gpu-1", "gpu-2"]
    nodes = {n["name"]: n for n in admin.get("/api/cluster/nodes").json()}
    assert nodes["gpu-1"] == {"name": "gpu-1", "gpus": 8, "gpus_free": 8, "cpu": 63.5,
                              "memory": "1Gi", "schedulable": True,
                              "labels": {"kubernetes.io/hostname": "gpu-1",
                                         "topology.osmo/rack": "r1",
                                         "topology.osmo/zone": "z1"}}
    assert (nodes["gpu-2"]["schedulable"], nodes["cpu-1"]["schedulable"]) == (False, False)
    assert inventory(backend.kube).registered == []  # unchanged: nothing written
    cluster.delete("nodes", "gpu-2")
    assert inventory(backend.kube).removed == ["gpu-2"]
    assert sorted(Node.objects.values_list("name", flat=True)) == ["cpu-1", "gpu-1"]


def test_the_embedded_loop_places_nothing_on_the_kubernetes_backend(backend, admin, alice,
                                                                    team) -> None:
    admin.post("/api/cluster/nodes", {"name": "n1", "gpus": 8, "cpu": 8, "memory": "8Gi",
                                      "labels": {}}, format="json")
    name = submit(alice, "team", spec("not-here"))
    assert admin.post("/api/scheduler/cycle").json()["bound"] == 0
    assert statuses(alice, name) == ("PENDING", ["SCHEDULING"])
    assert Task.objects.get().node_name == ""


def test_explain_shows_why_the_cluster_has_not_accepted_a_group(backend, cluster, alice,
                                                                team) -> None:
    name = submit(alice, "team", spec("refused"))
    cluster.fail_next("POST", "pods", 403)
    backend.dispatch()
    pending_publish()
    reasons = alice.get(f"/api/workflow/{name}/explain").json()["groups"][0]["reasons"]
    assert [r["code"] for r in reasons] == ["dispatch_failed"]
    assert "403" in reasons[0]["message"]


def test_sweeps_remove_leftovers_of_ended_or_unknown_groups_only(backend, cluster, alice,
                                                                 team) -> None:
    from pools import services as pool_services
    from tests import factories

    sub = factories.subpool(team, "a", 8)
    alive = submit(alice, "team", spec("alive"))
    ended = submit(alice, "team--a", spec("ended"))
    backend.dispatch()
    assert alice.post(f"/api/workflow/{ended}/cancel").status_code == 200
    GroupDispatch.objects.filter(group__workflow__name=ended).delete()  # a lost record
    orphan = cluster.get("pods", f"{alive}-g-t0")
    orphan["metadata"].update(name="left-over", annotations={
        **orphan["metadata"]["annotations"], "osmo/workflow-name": "gone-1"})
    cluster._store("pods", "osmo", orphan, "ADDED")
    assert backend.cleanup() == 0  # no record: only a sweep can find them
    pool_services.subpool_delete(actor=None, subpool=sub)  # archived at once
    assert backend.cleaner.sweep_pool("team--a") == 2  # its PodGroup and pod
    assert sorted(cluster.names("pods")) == sorted([f"{alive}-g-t0", "left-over"])
    assert backend.cleaner.sweep() == 1  # the pod whose workflow this database never knew
    assert cluster.names("pods") == [f"{alive}-g-t0"]
    assert cluster.names("podgroups") == [f"{alive}-g"]
