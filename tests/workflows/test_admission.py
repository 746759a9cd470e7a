"""Admission through POST /api/pool/{pool}/workflow: every rule and error code, with "nothing
changed" checks."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from osmo.cli.localfiles import inline_local_files
from pools.models import Pool
from tests import factories
from tests.conftest import make_client
from tests.shared_data import osmo_examples
from tests.workflows.conftest import example, gpu_spec, submit
from workflows.models import Task, Workflow, WorkflowGroup, WorkflowNameCounter

pytestmark = pytest.mark.django_db

# The examples README: GPUs of each file.
EXAMPLE_GPUS = {
    "hello_world.yaml": 0, "resources_basic.yaml": 0, "resources_multiple.yaml": 1,
    "resources_platforms.yaml": 1, "parallel_tasks.yaml": 0, "group_tasks.yaml": 0,
    "combination_workflow_simple.yaml": 0, "template_hello_world.yaml": 0, "verify-gpu.yaml": 1,
}


def stored() -> tuple:
    return (list(Workflow.objects.values_list("name", "status")),
            WorkflowGroup.objects.count(), Task.objects.count(),
            list(WorkflowNameCounter.objects.values_list("spec_name", "value")))


def train_spec() -> str:
    return inline_local_files(example("train.yaml"), lambda path: "print('training')\n")


@pytest.mark.parametrize("name", sorted(EXAMPLE_GPUS))
def test_every_example_is_admitted(team, user, name):
    response = submit(user, "team", example(name))
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["status"], body["pool"], body["priority"], body["user"], body["kind"]) == (
        "PENDING", "team", "NORMAL", "ml-user", "workflow")
    assert body["gpus_requested"] == EXAMPLE_GPUS[name]
    assert Workflow.objects.get(name=body["name"]).spec == example(name)


def test_the_examples_folder_holds_the_ten_files():
    assert len(list(osmo_examples().glob("*.yaml"))) == 10


def test_train_needs_16_gpus_in_one_group(team, user):
    body = submit(user, "team", train_spec(), set_variables=["storage_url=s3://b"]).json()
    assert body["gpus_requested"] == 16
    assert [(g["name"], g["gpus"], [t["name"] for t in g["tasks"]]) for g in body["groups"]] == [
        ("training", 16, ["master", "worker"])]


def test_train_over_quota_at_normal_is_refused_and_low_is_admitted(user):
    factories.pool("small", 10)
    client = make_client("u2", "osmo-small-user")
    before = stored()
    response = submit(client, "small", train_spec(), "NORMAL")
    assert response.status_code == 409
    assert response.json()["code"] == "exceeds_quota"
    assert "16 GPUs" in response.json()["detail"] and "10 GPUs" in response.json()["detail"]
    assert stored() == before
    assert submit(client, "small", train_spec(), "HIGH").json()["code"] == "exceeds_quota"
    low = submit(client, "small", train_spec(), "LOW")
    assert (low.status_code, low.json()["priority"]) == (201, "LOW")


def test_the_admitted_event_says_low_runs_over_quota_and_is_preemptible(user):
    from workflows.models import TaskEvent

    factories.pool("small", 10)
    client = make_client("u2", "osmo-small-user")
    low = submit(client, "small", train_spec(), "LOW").json()["name"]
    normal = submit(client, "small", gpu_spec(1), "NORMAL").json()["name"]
    admitted = dict(TaskEvent.objects.filter(reason="Admitted").values_list(
        "workflow__name", "message"))
    assert admitted == {
        low: "at LOW priority, without a quota check: it may run beyond the quota of pool "
             "small and is preemptible; 1 group(s) queued",
        normal: "within the quota of pool small; 1 group(s) queued"}


def test_localpath_without_contents_is_invalid(team, user):
    before = stored()
    response = submit(user, "team", example("train.yaml"))
    assert (response.status_code, response.json()["code"]) == (400, "invalid_spec")
    assert any("localpath" in path for path in response.json()["errors"])
    assert stored() == before


def test_invalid_specs_are_400_with_field_paths(team, user):
    before = stored()
    for spec in ("workflow: [", "version: 3\nworkflow: {name: x, tasks: []}",
                 gpu_spec(1).replace("resource: gpu", "resource: missing"),
                 "just text"):
        response = submit(user, "team", spec)
        assert (response.status_code, response.json()["code"]) == (400, "invalid_spec"), spec
        assert response.json()["errors"]
    assert stored() == before
    missing = user.post("/api/pool/team/workflow", {}, format="json")
    assert (missing.status_code, missing.json()["code"]) == (400, "invalid_spec")


def test_a_misspelled_task_field_is_refused_and_nothing_is_stored(team, user):
    before = stored()
    spec = example("hello_world.yaml").replace("command:", "comand:")
    response = submit(user, "team", spec)
    assert (response.status_code, response.json()["code"]) == (400, "invalid_spec")
    assert response.json()["errors"] == {"workflow.tasks[0].comand": [
        "unknown task field 'comand', did you mean 'command'? (known: name, image, command, "
        "args, lead, resource, inputs, outputs, files, environment, replicas, subGroup, "
        "credentials, exitActions)"]}
    assert stored() == before


def test_unknown_platform_is_invalid(user):
    factories.pool("bare", 10)
    client = make_client("b", "osmo-bare-user")
    response = submit(client, "bare", example("resources_platforms.yaml"))
    assert (response.status_code, response.json()["code"]) == (400, "invalid_spec")


def test_yaml_body_and_template_variables(team, user):
    response = user.post("/api/pool/team/workflow?priority=HIGH",
                         example("template_hello_world.yaml"),
                         content_type="application/yaml")
    assert (response.status_code, response.json()["priority"]) == (201, "HIGH")
    default_name = response.json()["name"]
    response = submit(user, "team", example("template_hello_world.yaml"),
                      set_variables=["workflow_name=custom"])
    assert response.json()["name"].startswith("custom-")
    assert not default_name.startswith("custom-")
    bad = submit(user, "team", gpu_spec(1), set_variables=["novalue"])
    assert (bad.status_code, bad.json()["code"]) == (400, "invalid_request")


def test_names_are_unique_per_spec_name(team, user):
    names = [submit(user, "team", gpu_spec(1, "same")).json()["name"] for _ in range(3)]
    assert names == ["same-1", "same-2", "same-3"]


def test_unknown_pool_no_access_and_no_token(team):
    before = stored()
    stranger = make_client("stranger", "osmo-other-user")
    response = submit(stranger, "ghost", gpu_spec(1))
    assert (response.status_code, response.json()["code"]) == (404, "pool_not_found")
    response = submit(stranger, "team", gpu_spec(1))
    assert (response.status_code, response.json()["code"]) == (403, "forbidden")
    response = submit(APIClient(), "team", gpu_spec(1))
    assert (response.status_code, response.json()["code"]) == (401, "not_authenticated")
    assert stored() == before


def test_subpool_not_active(team, user):
    deleting = factories.subpool(team, "a", 10)
    factories.running_workflow(deleting, 1)
    make_client("adm", "osmo-team-admin").delete("/api/configs/pool/team/subpool/a")
    archived = factories.subpool(team, "b", 10)
    make_client("adm2", "osmo-team-admin").delete("/api/configs/pool/team/subpool/b")
    assert Pool.objects.get(pk=archived.pk).subpool_state == "ARCHIVED"
    before = stored()
    for target in ("team--a", "team--b"):
        for priority in ("NORMAL", "LOW"):
            response = submit(user, target, gpu_spec(1), priority)
            assert (response.status_code, response.json()["code"]) == (
                409, "subpool_not_active"), (target, priority)
    assert stored() == before


def test_parent_with_subpools_admits_high_normal_only_within_unallocated(team, user):
    factories.subpool(team, "a", 30)
    factories.subpool(team, "b", 40)
    factories.subpool(team, "c", 20)
    before = stored()
    response = submit(user, "team", gpu_spec(11), "HIGH")
    assert (response.status_code, response.json()["code"]) == (409, "exceeds_unallocated")
    detail = response.json()["detail"]
    assert "11 GPUs" in detail and "10 unallocated" in detail
    assert "subpool" in detail and "LOW" in detail and "team--a" in detail
    assert stored() == before
    assert submit(user, "team", gpu_spec(10), "NORMAL").status_code == 201
    assert submit(user, "team", gpu_spec(50), "LOW").status_code == 201
    # A subpool admits groups up to its own quota.
    assert submit(user, "team--a", gpu_spec(30)).status_code == 201
    response = submit(user, "team--a", gpu_spec(31))
    assert (response.status_code, response.json()["code"]) == (409, "exceeds_quota")


def test_exceeds_unallocated_counts_all_groups_exceeds_quota_one_group(team, user):
    factories.subpool(team, "a", 94)  # unallocated 6
    two_groups = """
workflow:
  name: pair
  groups:
  - name: first
    tasks:
    - {name: a, image: x, command: [x], resource: four}
  - name: second
    tasks:
    - {name: b, image: x, command: [x], resource: four, inputs: [{task: a}]}
  resources:
    four: {gpu: 4, cpu: 1, memory: 1Gi}
"""
    response = submit(user, "team", two_groups)
    assert (response.status_code, response.json()["code"]) == (409, "exceeds_unallocated")
    factories.pool("solo", 6)
    solo = make_client("s", "osmo-solo-user")
    assert submit(solo, "solo", two_groups).status_code == 201  # no subpools: per group


def test_dry_run_runs_every_check_and_writes_nothing(team, user):
    before = stored()
    response = user.post("/api/pool/team/workflow?dry_run=true&priority=LOW",
                         {"file": example("group_tasks.yaml")}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["workflow"]["status"] == "PENDING" and body["workflow"]["priority"] == "LOW"
    assert [m["kind"] for m in body["manifests"]] == ["PodGroup", "Pod", "Pod", "Pod"]
    podgroup = body["manifests"][0]
    assert podgroup["spec"]["queue"] == "osmo-pool-osmo-team.shared"
    assert podgroup["spec"]["priorityClassName"] == "osmo-low"
    assert podgroup["spec"]["minMember"] == 3
    assert stored() == before
    factories.subpool(team, "a", 95)
    response = user.post("/api/pool/team/workflow?dry_run=true",
                         {"file": gpu_spec(6)}, format="json")
    assert (response.status_code, response.json()["code"]) == (409, "exceeds_unallocated")
    assert user.post("/api/pool/team/workflow?dry_run=maybe", {"file": gpu_spec(1)},
                     format="json").json()["code"] == "invalid_request"


def test_invalid_priority(team, user):
    before = stored()
    response = submit(user, "team", gpu_spec(1), "URGENT")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")
    assert stored() == before


def test_pools_that_are_not_online_take_no_work(team, user, admin_client):
    admin_client.put("/api/configs/pool/team", {"quota_gpus": 100, "status": "MAINTENANCE"},
                     format="json")
    before = stored()
    response = submit(user, "team", gpu_spec(1))
    assert (response.status_code, response.json()["code"]) == (409, "pool_not_online")
    assert stored() == before


def test_an_accepted_submission_survives_a_broker_outage(team, user, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    response = submit(user, "team", gpu_spec(2))
    assert response.status_code == 201
    assert Workflow.objects.filter(name=response.json()["name"], status="PENDING").exists()


def test_the_pool_is_checked_before_the_body(team):
    stranger = make_client("stranger", "osmo-other-user")
    member = make_client("member", "osmo-team-user")
    assert member.post("/api/pool/ghost/workflow", {}, format="json").json()["code"] == (
        "pool_not_found")
    assert stranger.post("/api/pool/team/workflow", {}, format="json").json()["code"] == (
        "forbidden")
    assert submit(member, "ghost", gpu_spec(1), "URGENT").json()["code"] == "pool_not_found"
    assert submit(stranger, "team", "workflow: [", "URGENT").json()["code"] == "forbidden"
    assert submit(member, "team", "workflow: [", "URGENT").json()["code"] == "invalid_request"


ELASTIC_GANG = """
workflow:
  name: elastic
  groups:
  - name: g
    scheduling:
      subGroups:
      - name: a
        minMember: 1
      - name: b
        minMember: 1
    tasks:
    - name: a
      lead: true
      image: ubuntu
      command: [sleep, "1"]
      resource: gpu
      replicas: 2
      subGroup: a
    - name: b
      image: ubuntu
      command: [sleep, "1"]
      resource: gpu
      replicas: 2
      subGroup: b
  resources:
    gpu:
      gpu: 1
      cpu: 1
      memory: 1Gi
"""


def test_exceeds_quota_compares_the_gangs_minimum(user):
    # KAI starts an elastic gang with its minimum (two subgroups of minMember 1 -> 2 pods) and
    # preempts for that much, so check 5 compares the minimum, not all 4 pods, with the quota.
    factories.pool("pair", 2)
    client = make_client("u3", "osmo-pair-user")
    response = submit(client, "pair", ELASTIC_GANG, "NORMAL")
    assert response.status_code == 201, response.json()
    assert response.json()["gpus_requested"] == 4
    factories.pool("one", 1)
    refused = submit(make_client("u4", "osmo-one-user"), "one", ELASTIC_GANG, "NORMAL")
    assert (refused.status_code, refused.json()["code"]) == (409, "exceeds_quota")
    assert "2 GPUs" in refused.json()["detail"]
