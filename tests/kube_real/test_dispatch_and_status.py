"""Dispatch and status against the real API server: PodGroups, pods, Services and Secrets go
through the real schemas and admission (Priority, ServiceAccount), and pods moved as KAI and the
kubelet move them become task statuses."""

from __future__ import annotations

import base64

import pytest

from scheduler.backends.kubernetes.reasons import pending_publish
from scheduler.models import GroupDispatch
from tests.k8s.conftest import spec, statuses, submit, workflow
from tests.workflows.test_podgroups import plural_constraints_podgroup
from workflows.models import Task

pytestmark = pytest.mark.django_db

OWNED = {"app.kubernetes.io/managed-by": "osmo", "osmo.retry": "0"}


def kai_manifests(client, name: str) -> list[dict]:
    response = client.get(f"/api/workflow/{name}/kai")
    assert response.status_code == 200
    return response.json()["manifests"]


def test_a_group_is_accepted_as_kai_shows_it(backend, cluster, alice, team, namespace) -> None:
    name = submit(alice, "team", spec("train", gpus=4))
    assert backend.dispatch().applied == [f"{name}-g"]
    expected = {m["kind"]: m for m in kai_manifests(alice, name)}
    podgroup = cluster.get("podgroups", f"{name}-g")
    assert podgroup["spec"] == expected["PodGroup"]["spec"]  # pruning dropped nothing
    assert podgroup["metadata"]["labels"] == {**expected["PodGroup"]["metadata"]["labels"],
                                              **OWNED}
    pod = cluster.get("pods", f"{name}-g-t0")
    sent = expected["Pod"]
    assert pod["metadata"]["labels"] == {**sent["metadata"]["labels"], **OWNED}
    assert pod["metadata"]["annotations"] == sent["metadata"]["annotations"]
    assert pod["spec"]["schedulerName"] == "kai-scheduler"
    assert pod["spec"]["containers"][0]["resources"] == \
        sent["spec"]["containers"][0]["resources"]
    # Admission resolved the PriorityClass and the ServiceAccount.
    assert (pod["spec"]["priorityClassName"], pod["spec"]["priority"]) == ("osmo-normal", 100)
    assert pod["spec"]["serviceAccountName"] == "default"
    queue = podgroup["spec"]["queue"]
    assert queue == f"osmo-pool-{namespace}-team.shared" and queue in cluster.queues()
    assert statuses(alice, name) == ("PENDING", ["SCHEDULING"])
    assert backend.dispatch().applied == []


def test_multi_task_group_gets_its_service_secret_and_hosts(backend, cluster, alice,
                                                          team) -> None:
    extra = """    - name: launcher
      image: nvcr.io/x:1
      command: [bash, /opt/run.sh, "{{host:t0}}", "{{host:w}}"]
      resource: r
      environment: {MASTER: "{{host:w-1}}:29500", _A.b-1: x, -dash: y}
      files:
      - path: /opt/run.sh
        contents: "echo hello"
      - path: conf/a.yaml
        contents: "a: 1"
    - {name: w, image: nvcr.io/x:1, command: [work], resource: r, replicas: 2}
"""
    name = submit(alice, "team", spec("mpi", gpus=1, extra=extra), priority="HIGH")
    assert backend.dispatch().applied == [f"{name}-g"]
    service = f"{name}-g"
    assert cluster.names("pods") == sorted(f"{name}-g-{t}" for t in ("t0", "launcher", "w-0",
                                                                     "w-1"))
    svc = cluster.get("services", service)
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"]
    launcher = cluster.get("pods", f"{name}-g-launcher")
    container = launcher["spec"]["containers"][0]
    assert container["command"] == ["bash", "/opt/run.sh", f"{name}-g-t0.{service}",
                                    f"{name}-g-w-0.{service}"]
    assert {e["name"]: e["value"] for e in container["env"]} == {
        "MASTER": f"{name}-g-w-1.{service}:29500", "_A.b-1": "x", "-dash": "y"}
    assert launcher["spec"]["subdomain"] == service
    assert launcher["spec"]["priority"] == 125
    secret = cluster.get("secrets", f"{name}-g-launcher-files")
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {
        "file-0": "echo hello", "file-1": "a: 1"}
    mounts = [m for m in container["volumeMounts"] if m["name"] == "osmo-files"]
    assert [(m["mountPath"], m["subPath"]) for m in mounts] == [
        ("/opt/run.sh", "file-0"), ("/conf/a.yaml", "file-1")]


def test_a_workload_is_accepted(backend, cluster, alice, team) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "etl"},
           "spec": {"parallelism": 2, "template": {"spec": {"containers": [{
               "name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}},
               "ports": [{"containerPort": 8080}]}]}}}}
    response = alice.post("/api/pool/team/workload", job, format="json")
    assert response.status_code == 201, response.json()
    assert backend.dispatch().failed == []
    assert cluster.names("pods") == sorted(response.json()["pods"])
    assert cluster.names("podgroups") == sorted(response.json()["podgroups"])


def test_a_given_podgroup_s_plural_constraints_reach_the_cluster(backend, cluster, alice,
                                                                  team) -> None:
    """Seed 001's plural topologyConstraints is no field of the CRD: the API server would
    prune it. What the cluster stores holds every constraint, in the singular form."""
    response = alice.post("/api/pool/team/workload", plural_constraints_podgroup(),
                          format="json")
    assert response.status_code == 201, response.json()
    assert backend.dispatch().failed == []
    spec = cluster.get("podgroups", "pg")["spec"]
    assert "topologyConstraints" not in spec
    # As KAI reads them: naming the cluster Topology, levels by node label.
    assert spec["topologyConstraint"] == {"preferredTopologyLevel": "topology.osmo/zone",
                                          "topology": "osmo-topology"}
    assert {s["name"]: s.get("topologyConstraint") for s in spec["subGroups"]} == {
        "workers": {"requiredTopologyLevel": "topology.osmo/rack", "topology": "osmo-topology"},
        "leaders": {"preferredTopologyLevel": "kubernetes.io/hostname",
                    "topology": "osmo-topology"}}
    assert spec == alice.get("/api/podgroups/pg").json()["manifest"]["spec"]


def test_pods_become_task_statuses(backend, cluster, alice, admin, team) -> None:
    name = submit(alice, "team", spec("train", gpus=4, tasks=2))
    backend.dispatch()
    backend.listen()  # the first LIST
    message = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    cluster.unschedulable(f"{name}-g-t0", message)
    backend.listen()
    pending_publish()
    explain = alice.get(f"/api/workflow/{name}/explain").json()
    assert explain["groups"][0]["reasons"] == [{"code": "unschedulable", "message": message}]

    cluster.add_node("node-a", gpus=4)
    cluster.add_node("node-b", gpus=4)
    cluster.bind(f"{name}-g-t0", "node-a")  # KAI placed it: it holds its GPUs from now on
    backend.listen()
    assert Task.objects.get(name="t0").node_name == "node-a"
    cluster.run(f"{name}-g-t0")
    cluster.run(f"{name}-g-t1", "node-b")
    backend.listen()
    body = workflow(alice, name)
    assert body["status"] == "RUNNING"
    assert [(t["status"], t["node"]) for t in body["groups"][0]["tasks"]] == [
        ("RUNNING", "node-a"), ("RUNNING", "node-b")]
    cluster.finish(f"{name}-g-t1")
    backend.listen()
    assert statuses(alice, name) == ("RUNNING", ["RUNNING", "COMPLETED"])
    cluster.finish(f"{name}-g-t0")
    backend.listen()
    assert statuses(alice, name) == ("COMPLETED", ["COMPLETED", "COMPLETED"])
    assert backend.cleanup() == 1
    assert cluster.names("pods") == cluster.names("podgroups") == cluster.names("services") \
        == []


def test_a_failed_pod_fails_the_gang_with_its_exit_code(backend, cluster, alice,
                                                        team) -> None:
    name = submit(alice, "team", spec("crash", tasks=2))
    cluster.add_node("n1", gpus=8)
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
    backend.cleanup()  # the still-running peer is asked to stop
    pod = cluster.get("pods", f"{name}-g-t0")
    assert pod is None or pod["metadata"].get("deletionTimestamp")


def test_preemption_is_recognised_as_kai_reports_it(backend, cluster, alice, team) -> None:
    name = submit(alice, "team", spec("opportunist", tasks=2), priority="LOW")
    cluster.add_node("n1", gpus=8)
    cluster.add_node("n2", gpus=8)
    backend.dispatch()
    backend.listen()
    cluster.run(f"{name}-g-t0", "n1")
    cluster.run(f"{name}-g-t1", "n2")
    backend.listen()
    cluster.preempt(f"{name}-g-t0")  # condition, then a graceful delete: Terminating
    backend.listen()
    body = workflow(alice, name)
    assert (body["status"], body["reason"]) == ("FAILED_PREEMPTED", "preempted")
    assert [t["status"] for t in body["groups"][0]["tasks"]] == ["FAILED_PREEMPTED",
                                                                 "FAILED_CANCELED"]


KAI_CONSOLIDATION = ("Pod {pod} was preempted and rescheduled due to bin packing (resource "
                     "consolidation) procedure")


def test_kai_s_consolidation_recreates_the_pod_and_the_task_goes_on(backend, cluster, alice,
                                                                    team, namespace) -> None:
    name = submit(alice, "team", spec("packed", tasks=2))
    cluster.add_node("n1", gpus=8)
    cluster.add_node("n2", gpus=8)
    cluster.add_node("n3", gpus=8)
    backend.dispatch()
    backend.listen()
    cluster.run(f"{name}-g-t0", "n1")
    cluster.run(f"{name}-g-t1", "n2")
    backend.listen()
    moved = f"{name}-g-t0"
    original = cluster.get("pods", moved)
    cluster.preempt(moved, KAI_CONSOLIDATION.format(pod=f"{namespace}/{moved}"))
    backend.listen()
    replacement = cluster.get("pods", f"{moved}-m1")
    assert replacement is not None, "the owner recreates what KAI consolidated"
    assert replacement["metadata"]["annotations"]["osmo/moved-from"] == moved
    assert replacement["spec"]["schedulerName"] == original["spec"]["schedulerName"]
    assert "nodeName" not in replacement["spec"]  # KAI places it
    assert replacement["spec"]["containers"] == original["spec"]["containers"]
    assert statuses(alice, name) == ("RUNNING", ["RUNNING", "RUNNING"])
    cluster.delete_pod(moved, final=True)  # the kubelet confirms the old pod is gone
    backend.listen()
    backend.listener.relist_requested = True  # a re-list neither loses nor repeats it
    backend.listen()
    assert cluster.get("pods", f"{moved}-m2") is None
    assert statuses(alice, name) == ("RUNNING", ["RUNNING", "RUNNING"])
    cluster.run(f"{moved}-m1", "n3")  # KAI binds it where it made room
    backend.listen()
    task = workflow(alice, name)["groups"][0]["tasks"][0]
    assert (task["status"], task["node"], task["reason"]) == ("RUNNING", "n3", "consolidated")
    assert statuses(alice, name) == ("RUNNING", ["RUNNING", "RUNNING"])


def test_kai_s_consolidation_of_an_ended_task_recreates_nothing(backend, cluster, alice, team,
                                                                namespace) -> None:
    name = submit(alice, "team", spec("ended"))
    cluster.add_node("n1", gpus=8)
    backend.dispatch()
    backend.listen()
    pod = f"{name}-g-t0"
    cluster.run(pod, "n1")
    cluster.finish(pod)
    backend.listen()
    assert statuses(alice, name) == ("COMPLETED", ["COMPLETED"])
    cluster.preempt(pod, KAI_CONSOLIDATION.format(pod=f"{namespace}/{pod}"))
    backend.listen()
    assert cluster.get("pods", f"{pod}-m1") is None
    assert statuses(alice, name) == ("COMPLETED", ["COMPLETED"])


def test_a_pod_our_scheduler_released_waits_again_in_its_replacement(backend, cluster, alice,
                                                                     team) -> None:
    """Our scheduler (``OSMO_PLACEMENT=osmo``) makes a released pod's replacement before the
    release; when that create failed, the listener makes it from the marked pod. The task
    gives back its node and waits: never failed, it runs in the replacement."""
    name = submit(alice, "team", spec("released"))
    cluster.add_node("n1", gpus=8)
    backend.dispatch()
    backend.listen()
    pod = f"{name}-g-t0"
    cluster.bind(pod, "n1")
    backend.listen()
    assert workflow(alice, name)["groups"][0]["tasks"][0]["node"] == "n1"
    cluster.preempt(pod, "osmo-scheduler: another binder left no room", reason="BindingConflict")
    backend.listen()
    replacement = cluster.get("pods", f"{pod}-m1")
    assert replacement is not None and "nodeName" not in replacement["spec"]
    cluster.delete_pod(pod, final=True)  # the kubelet confirms the released pod is gone
    backend.listen()
    task = workflow(alice, name)["groups"][0]["tasks"][0]
    assert (task["status"], task["node"]) == ("SCHEDULING", None)
    cluster.run(f"{pod}-m1", "n1")
    backend.listen()
    task = workflow(alice, name)["groups"][0]["tasks"][0]
    assert (task["status"], task["node"], task["reason"]) == ("RUNNING", "n1", None)
    assert cluster.get("pods", f"{pod}-m2") is None


def test_a_deleted_pod_evicts_its_task_watched_or_relisted(backend, cluster, alice,
                                                           team) -> None:
    watched = submit(alice, "team", spec("watched"))
    unseen = submit(alice, "team", spec("unseen"))
    cluster.add_node("n1", gpus=8)
    backend.dispatch()
    backend.listen()
    cluster.run(f"{watched}-g-t0", "n1")
    cluster.run(f"{unseen}-g-t0", "n1")
    backend.listen()
    cluster.delete_pod(f"{watched}-g-t0", final=True)
    backend.listen()
    assert statuses(alice, watched) == ("FAILED_EVICTED", ["FAILED_EVICTED"])
    assert Task.objects.get(workflow__name=watched).reason == "pod_deleted"
    cluster.delete_pod(f"{unseen}-g-t0", final=True)
    backend.listener.relist_requested = True  # as at every resync
    backend.listen()
    assert statuses(alice, unseen) == ("FAILED_EVICTED", ["FAILED_EVICTED"])


def test_cancel_removes_the_objects(backend, cluster, alice, team) -> None:
    name = submit(alice, "team", spec("cancel-me", tasks=2))
    backend.dispatch()
    backend.listen()
    assert alice.post(f"/api/workflow/{name}/cancel").status_code == 200
    assert backend.cleanup() == 1
    assert [cluster.names(k) for k in ("pods", "podgroups", "services", "secrets")] == \
        [[]] * 4  # unbound pods go at once
    backend.listen()
    assert statuses(alice, name) == ("FAILED_CANCELED", ["FAILED_CANCELED"] * 2)
    assert GroupDispatch.objects.get().cleaned_at is not None


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
    cluster.add_node("n1", gpus=8)
    backend.listen()
    cluster.run(f"{name}-prep-p", "n1")
    cluster.finish(f"{name}-prep-p")
    backend.listen()
    backend.dispatch()
    backend.cleanup()
    assert cluster.names("podgroups") == [f"{name}-train"]
    assert cluster.names("pods") == [f"{name}-train-t"]  # a finished pod goes at once


def test_a_foreign_object_with_our_name_fails_the_group(backend, cluster, alice, team,
                                                        namespace) -> None:
    name = submit(alice, "team", spec("clash"))
    cluster.server.create({"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": f"{name}-g-t0", "namespace": namespace},
                           "spec": {"containers": [{"name": "c", "image": "x"}]}})
    assert backend.dispatch().failed == [f"{name}-g"]
    assert statuses(alice, name) == ("FAILED", ["FAILED"])
    assert Task.objects.get().reason == "submission_failed"
    assert "not this workflow's" in GroupDispatch.objects.get().last_error
    backend.cleanup()  # our PodGroup goes; the foreign pod stays
    assert cluster.names("podgroups") == [] and cluster.names("pods") == [f"{name}-g-t0"]
