"""POST /api/pool/{pool}/workload: the pod grouper's PodGroups, tracked as workflows."""

from __future__ import annotations

import pytest

from tests.workflows.conftest import gpu_spec  # noqa: F401 - fixtures module
from workflows.models import Task, Workflow

pytestmark = pytest.mark.django_db


def job(name: str = "train", parallelism: int = 2, gpus: int = 2, **annotations) -> dict:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"parallelism": parallelism, "completions": parallelism, "template": {
            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {
                "limits": {"nvidia.com/gpu": str(gpus)}}}]}}},
    }


def given_podgroup(min_member: int = 2) -> dict:
    pods = [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"p{i}", "annotations": {"pod-group-name": "pg"},
                          "labels": {"kai.scheduler/subgroup-name": "workers"}},
             "spec": {"containers": [{"name": "c", "image": "x", "resources": {
                 "limits": {"nvidia.com/gpu": "1"}}}]}} for i in range(2)]
    podgroup = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                "metadata": {"name": "pg"},
                "spec": {"minMember": min_member, "priorityClassName": "train",
                         "subGroups": [{"name": "workers", "minMember": min_member}]}}
    return {"apiVersion": "v1", "kind": "List", "items": [podgroup, *pods]}


def test_a_job_with_batch_min_member_is_one_gang(team, user):
    response = user.post("/api/pool/team/workload",
                         job(**{"kai.scheduler/batch-min-member": "2"}), format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert len(body["podgroups"]) == 1 and len(body["pods"]) == 2
    workflow = Workflow.objects.get(name=body["name"])
    assert (workflow.kind, workflow.priority, workflow.gpus_requested) == ("workload", "LOW", 4)
    assert list(Task.objects.filter(workflow=workflow).values_list("gpus", flat=True)) == [2, 2]
    detail = user.get(f"/api/workflow/{body['name']}").json()
    assert detail["kind"] == "workload" and detail["status"] == "PENDING"
    kai = user.get(f"/api/workflow/{body['name']}/kai").json()
    assert [m["kind"] for m in kai["manifests"]] == ["PodGroup", "Pod", "Pod"]
    assert kai["manifests"][0]["spec"]["queue"] == "osmo-pool-osmo-team.shared"


def test_priority_from_the_query_and_quota_checks(team, user):
    response = user.post("/api/pool/team/workload?priority=HIGH",
                         job(parallelism=1, gpus=101), format="json")
    assert (response.status_code, response.json()["code"]) == (409, "exceeds_quota")
    assert not Workflow.objects.exists()
    response = user.post("/api/pool/team/workload?priority=HIGH", job(parallelism=1, gpus=8),
                         format="json")
    assert response.status_code == 201
    assert Workflow.objects.get().priority == "HIGH"


def test_a_given_podgroup_is_validated(team, user):
    response = user.post("/api/pool/team/workload", given_podgroup(), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["pods"] and response.json()["podgroups"]
    before = Workflow.objects.count()
    bad = given_podgroup()
    bad["items"][0]["spec"]["minSubGroup"] = 1  # minMember and minSubGroup together
    response = user.post("/api/pool/team/workload", bad, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_podgroup")
    assert response.json()["errors"]
    assert Workflow.objects.count() == before


def test_yaml_bodies_and_bad_input(team, user):
    text = """apiVersion: v1
kind: Pod
metadata: {name: solo}
spec:
  containers: [{name: c, image: x}]
"""
    response = user.post("/api/pool/team/workload", text, content_type="application/yaml")
    assert response.status_code == 201 and len(response.json()["pods"]) == 1
    for body in ("{", "- 1\n- 2\n"):
        response = user.post("/api/pool/team/workload", body, content_type="application/yaml")
        assert (response.status_code, response.json()["code"]) == (400, "invalid_spec"), body
