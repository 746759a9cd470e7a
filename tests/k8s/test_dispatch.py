"""Submission path: admitted groups become a PodGroup, pods (and a Service, Secrets) on the
cluster, exactly as `/kai` shows them, through the real client, idempotently."""

from __future__ import annotations

import base64
import copy

import pytest

from scheduler.kai.crd_validation import validate_manifest
from scheduler.models import GroupDispatch
from tests.shared_data import kai_crds
from workflows.models import Task, WorkflowGroup

from .conftest import spec, statuses, strip_server_fields, submit

pytestmark = pytest.mark.django_db

QUEUE = "osmo-pool-osmo-team.shared"
OWNED = {"app.kubernetes.io/managed-by": "osmo"}


def kai_manifests(client, name: str) -> list[dict]:
    response = client.get(f"/api/workflow/{name}/kai")
    assert response.status_code == 200
    return response.json()["manifests"]


def test_one_task_group_is_applied_exactly_as_kai_shows_it(backend, cluster, alice,
                                                           team) -> None:
    name = submit(alice, "team", spec("train", gpus=4))
    summary = backend.dispatch()
    assert summary.applied == [f"{name}-g"]
    expected = kai_manifests(alice, name)
    for manifest in expected:
        manifest["metadata"]["labels"] = {**manifest["metadata"]["labels"], **OWNED}
    podgroup = strip_server_fields(cluster.get("podgroups", f"{name}-g"))
    pod = strip_server_fields(cluster.get("pods", f"{name}-g-t0"))
    assert [podgroup, pod] == expected
    assert validate_manifest(podgroup, crds_dir=kai_crds()) == []
    assert pod["spec"]["schedulerName"] == "kai-scheduler"
    assert pod["metadata"]["labels"]["kai.scheduler/queue"] == QUEUE
    assert pod["metadata"]["annotations"]["pod-group-name"] == f"{name}-g"
    assert pod["metadata"]["annotations"]["kai.scheduler/skip-podgrouper"] == "true"
    # The queue was missing: the whole hierarchy was synced before the PodGroup pointed at it.
    assert QUEUE in cluster.names("queues")
    writes = cluster.writes()
    assert writes.index(("POST", "queues", QUEUE)) < writes.index(("POST", "podgroups",
                                                                   f"{name}-g"))
    assert writes[-2:] == [("POST", "podgroups", f"{name}-g"), ("POST", "pods", f"{name}-g-t0")]
    for queue in cluster.names("queues"):
        assert validate_manifest(strip_server_fields(cluster.get("queues", queue)),
                                 crds_dir=kai_crds()) == []
    assert cluster.names("services") == [] and cluster.names("secrets") == []
    assert GroupDispatch.objects.get().applied_at is not None
    assert statuses(alice, name) == ("PENDING", ["SCHEDULING"])
    cluster.requests.clear()
    assert backend.dispatch().applied == []  # nothing runnable is left: no call at all
    assert cluster.requests == []


def test_multi_task_group_gets_a_headless_service_files_and_resolved_hosts(
        backend, cluster, alice, team) -> None:
    extra = """    - name: launcher
      image: nvcr.io/x:1
      command: [bash, /opt/run.sh, "{{host:t0}}", "{{host:w}}"]
      resource: r
      environment: {MASTER: "{{host:w-1}}:29500"}
      files:
      - path: /opt/run.sh
        contents: "echo hello"
      - path: conf/a.yaml
        contents: "a: 1"
    - {name: w, image: nvcr.io/x:1, command: [work], resource: r, replicas: 2}
"""
    name = submit(alice, "team", spec("mpi", gpus=1, extra=extra))
    backend.dispatch()
    service = f"{name}-g"
    assert cluster.names("pods") == sorted(f"{name}-g-{t}" for t in ("t0", "launcher", "w-0",
                                                                     "w-1"))
    svc = cluster.get("services", service)
    assert svc["spec"] == {"clusterIP": "None", "publishNotReadyAddresses": True,
                           "selector": {**OWNED, "osmo.workflow": name, "osmo.group": "g"}}
    for pod_name in cluster.names("pods"):
        pod = cluster.get("pods", pod_name)
        assert pod["spec"]["subdomain"] == service
        assert all(svc["spec"]["selector"][k] == v for k, v in pod["metadata"]["labels"].items()
                   if k in svc["spec"]["selector"])
    launcher = cluster.get("pods", f"{name}-g-launcher")
    container = launcher["spec"]["containers"][0]
    assert container["command"] == ["bash", "/opt/run.sh", f"{name}-g-t0.{service}",
                                    f"{name}-g-w-0.{service}"]
    assert container["env"] == [{"name": "MASTER", "value": f"{name}-g-w-1.{service}:29500"}]
    secret = cluster.get("secrets", f"{name}-g-launcher-files")
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {
        "file-0": "echo hello", "file-1": "a: 1"}
    assert launcher["spec"]["volumes"] == [{"name": "osmo-files", "secret": {
        "secretName": f"{name}-g-launcher-files", "defaultMode": 0o755}}]
    assert container["volumeMounts"] == [
        {"name": "osmo-files", "mountPath": "/opt/run.sh", "subPath": "file-0",
         "readOnly": True},
        {"name": "osmo-files", "mountPath": "/conf/a.yaml", "subPath": "file-1",
         "readOnly": True}]
    assert "volumes" not in cluster.get("pods", f"{name}-g-w-0")["spec"]
    # Creation order: what pods mount and resolve, then the PodGroup, then its pods.
    kinds = [kind for method, kind, _ in cluster.writes() if kind != "queues"
             and kind != "topologies"]
    assert kinds == ["secrets", "services", "podgroups", "pods", "pods", "pods", "pods"]
    assert validate_manifest(strip_server_fields(cluster.get("podgroups", f"{name}-g")),
                             crds_dir=kai_crds()) == []


def test_a_retry_after_a_lost_answer_creates_nothing_twice(backend, cluster, alice,
                                                           team) -> None:
    name = submit(alice, "team", spec("retry", tasks=2))
    group = WorkflowGroup.objects.get(workflow__name=name)
    # The earlier attempt created everything, then crashed before recording it.
    backend.dispatcher.dispatch(group)
    before = {(kind, n): copy.deepcopy(cluster.get(kind, n))
              for kind in ("pods", "podgroups", "services") for n in cluster.names(kind)}
    cluster.requests.clear()
    assert backend.dispatch().applied == [f"{name}-g"]
    after = {(kind, n): cluster.get(kind, n)
             for kind in ("pods", "podgroups", "services") for n in cluster.names(kind)}
    assert after == before  # adopted as they were, same resourceVersions
    assert sorted(set(cluster.writes())) == sorted(
        {("POST", "services", f"{name}-g"), ("POST", "podgroups", f"{name}-g"),
         ("POST", "pods", f"{name}-g-t0"), ("POST", "pods", f"{name}-g-t1")})
    assert GroupDispatch.objects.get().applied_at is not None


def test_an_adopted_podgroup_with_a_stale_spec_is_replaced(backend, cluster, alice,
                                                           team) -> None:
    name = submit(alice, "team", spec("stale"))
    group = WorkflowGroup.objects.get(workflow__name=name)
    backend.dispatcher.dispatch(group)
    podgroup = cluster.get("podgroups", f"{name}-g")
    podgroup["spec"]["minMember"] = 7  # as an older attempt might have left it
    cluster._store("podgroups", "osmo", podgroup, "MODIFIED")
    cluster.fail_next("PUT", "podgroups", 409)  # a concurrent writer: re-read, retry
    backend.dispatch()
    assert cluster.get("podgroups", f"{name}-g")["spec"]["minMember"] == 1


def test_a_foreign_object_with_our_name_fails_the_group(backend, cluster, alice, team) -> None:
    name = submit(alice, "team", spec("clash"))
    cluster._store("pods", "osmo", {"apiVersion": "v1", "kind": "Pod",
                                    "metadata": {"name": f"{name}-g-t0", "namespace": "osmo"},
                                    "spec": {}}, "ADDED")
    summary = backend.dispatch()
    assert summary.failed == [f"{name}-g"]
    assert statuses(alice, name) == ("FAILED", ["FAILED"])
    assert Task.objects.get().reason == "submission_failed"
    assert "not this workflow's" in GroupDispatch.objects.get().last_error
    backend.cleanup()  # our PodGroup goes; the foreign pod stays
    assert cluster.names("podgroups") == [] and cluster.names("pods") == [f"{name}-g-t0"]


def test_an_invalid_object_fails_the_group_and_a_forbidden_one_is_retried(
        backend, cluster, alice, team) -> None:
    bad = submit(alice, "team", spec("bad"))
    cluster.fail_next("POST", "podgroups", 422)
    assert backend.dispatch().failed == [f"{bad}-g"]
    assert statuses(alice, bad)[0] == "FAILED"

    later = submit(alice, "team", spec("later"))
    cluster.fail_next("POST", "pods", 403)
    assert backend.dispatch().deferred == [f"{later}-g"]
    row = GroupDispatch.objects.get(group__workflow__name=later)
    assert row.attempts == 1 and row.next_attempt_at is not None and "403" in row.last_error
    assert statuses(alice, later) == ("PENDING", ["SCHEDULING"])
    GroupDispatch.objects.filter(pk=row.pk).update(next_attempt_at=None)  # backoff elapsed
    assert backend.dispatch().applied == [f"{later}-g"]


def test_a_workload_is_dispatched_with_our_labels_and_scheduler(backend, cluster, alice,
                                                               team) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "etl"},
           "spec": {"parallelism": 2, "template": {"spec": {"containers": [{
               "name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
               "schedulerName": "other"}}}}
    response = alice.post("/api/pool/team/workload", job, format="json")
    assert response.status_code == 201, response.json()
    backend.dispatch()
    pods = response.json()["pods"]
    assert cluster.names("pods") == sorted(pods)
    for pod_name in pods:
        pod = cluster.get("pods", pod_name)
        assert pod["spec"]["schedulerName"] == "kai-scheduler"
        assert pod["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "osmo"
        assert pod["metadata"]["annotations"]["osmo/task-name"] == pod_name
    for podgroup in response.json()["podgroups"]:
        assert validate_manifest(strip_server_fields(cluster.get("podgroups", podgroup)),
                                 crds_dir=kai_crds()) == []
