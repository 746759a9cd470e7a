"""A refused submission changes nothing, not even the counter that numbers workflow names; an
admitted one takes the next number, also when several race for it."""

from __future__ import annotations

import pytest

from tests.races import all_together
from tests.security.conftest import stored
from tests.workflows.conftest import gpu_spec, submit
from tests.workflows.test_workloads import job
from workflows.models import Task, Workflow, WorkflowNameCounter


def counters() -> dict[str, int]:
    return dict(WorkflowNameCounter.objects.values_list("spec_name", "value"))


def pod(gpus) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "x",
                                     "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}


@pytest.mark.django_db
@pytest.mark.parametrize(("manifest", "status", "code"), [
    ({"hello": "world"}, 400, "invalid_spec"),
    (pod(10**30), 400, "invalid_request"),
    (job("train") | {"metadata": {"name": "train", "labels": {
        "kai.scheduler/preemptibility": "sometimes"}}}, 400, "invalid_spec"),
    (job("train", parallelism=1_001, gpus=0), 400, "too_many_pods"),
], ids=["not-a-workload", "gpus-beyond-the-column", "grouper-refuses-a-label", "too-many-pods"])
def test_a_refused_workload_leaves_the_name_counter_as_it_was(team, user, manifest, status,
                                                              code):
    assert user.post("/api/pool/team/workload", job("train"), format="json").status_code == 201
    assert user.post("/api/pool/team/workload", pod(1), format="json").status_code == 201
    before, numbers = stored(), counters()
    response = user.post("/api/pool/team/workload", manifest, format="json")
    assert (response.status_code, response.json()["code"]) == (status, code), response.json()
    assert counters() == numbers and stored() == before
    second = user.post("/api/pool/team/workload", job("train"), format="json").json()
    assert second["name"] == "job-train-2"  # no gap in the numbering


@pytest.mark.django_db
def test_a_workload_over_quota_leaves_the_name_counter_as_it_was(team, user):
    before, numbers = stored(), counters()
    response = user.post("/api/pool/team/workload?priority=HIGH", job(gpus=101), format="json")
    assert (response.status_code, response.json()["code"]) == (409, "exceeds_quota")
    assert counters() == numbers == {} and stored() == before


@pytest.mark.django_db
@pytest.mark.parametrize(("spec", "status", "code"), [
    ("workflow: {name: job}\n", 400, "invalid_spec"),
    (gpu_spec(101), 409, "exceeds_quota"),
    (gpu_spec(1).replace("cpu: 1", "cpu: 99999999999999999"), 400, "invalid_spec"),
    (gpu_spec(1).replace("gpu: 1\n", 'gpu: "\uff18"\n'), 400, "invalid_spec"),
    (gpu_spec(1).replace("image: ubuntu", "image: \"{{ 'a' * 10**9 }}\""), 400,
     "template_too_large"),
], ids=["invalid", "over-quota", "cpu-beyond-the-column", "full-width-digit",
                 "costly-template"])
def test_a_refused_workflow_leaves_the_name_counter_as_it_was(team, user, spec, status, code):
    assert submit(user, "team", gpu_spec(1)).status_code == 201
    before, numbers = stored(), counters()
    response = submit(user, "team", spec)
    assert (response.status_code, response.json()["code"]) == (status, code), response.json()
    assert counters() == numbers == {"job": 1} and stored() == before


@pytest.mark.django_db(transaction=True)
def test_racing_workloads_of_one_name_get_distinct_numbers_and_pods_named_after_them(team,
                                                                                      user):
    all_together([lambda: user.post("/api/pool/team/workload", job("train"), format="json")
                  for _ in range(4)])
    names = sorted(Workflow.objects.values_list("name", flat=True))
    assert names == [f"job-train-{n}" for n in (1, 2, 3, 4)]
    for workflow in Workflow.objects.all():
        pods = Task.objects.filter(workflow=workflow).values_list("name", flat=True)
        assert len(pods) == 2 and all(p.startswith(workflow.name) for p in pods), list(pods)
    assert counters() == {"job-train": 4}
