"""GET /api/podgroups/{name} (API.md "KAI objects"), and given PodGroups keeping their names."""

from __future__ import annotations

import pytest

from tests.conftest import make_client
from tests.workflows.conftest import gpu_spec, submit
from tests.workflows.test_workloads import given_podgroup
from workflows import lifecycle
from workflows.models import Workflow

pytestmark = pytest.mark.django_db


def test_a_workflow_groups_podgroup(team, user, backend):
    created = submit(user, "team", gpu_spec(2, name="pgjob")).json()
    podgroup = created["groups"][0]["podgroup"]
    body = user.get(f"/api/podgroups/{podgroup}").json()
    assert body["manifest"]["kind"] == "PodGroup"
    assert body["manifest"]["metadata"]["name"] == podgroup
    assert body["status"] == {"phase": "Pending", "ready": False, "bound_pods": 0,
                              "min_member": 1, "reasons": [
                                  {"code": "not_yet_scheduled",
                                   "message": "Admitted; waiting for the next scheduling "
                                              "cycle."}]}
    kai = user.get(f"/api/workflow/{created['name']}/kai").json()["manifests"]
    pod_names = [m["metadata"]["name"] for m in kai if m["kind"] == "Pod"]
    assert [(p["name"], p["subgroup"], p["node"], p["phase"]) for p in body["pods"]] == [
        (pod_names[0], "default", None, "Pending")]
    assert (body["workflow"], body["group"]) == (created["name"],
                                                 created["groups"][0]["name"])

    task = created["groups"][0]["tasks"][0]["name"]
    response = backend.post(f"/api/workflow/{created['name']}/task/{task}/status",
                            {"status": "RUNNING", "node": "node-7"}, format="json")
    assert response.status_code == 200, response.json()
    body = user.get(f"/api/podgroups/{podgroup}").json()
    assert body["status"] == {"phase": "Running", "ready": True, "bound_pods": 1,
                              "min_member": 1, "reasons": []}
    assert [(p["node"], p["phase"]) for p in body["pods"]] == [("node-7", "Running")]


def test_same_visibility_as_the_workflow(team, user):
    created = submit(user, "team", gpu_spec(1)).json()
    podgroup = created["groups"][0]["podgroup"]
    stranger = make_client("stranger", "osmo-other-user")
    response = stranger.get(f"/api/podgroups/{podgroup}")
    assert response.status_code == 404
    assert response.json() == {"code": "podgroup_not_found",
                               "detail": f"PodGroup '{podgroup}' does not exist."}
    assert user.get("/api/podgroups/nope").status_code == 404
    admin = make_client("root", "osmo-admin")
    assert admin.get(f"/api/podgroups/{podgroup}").status_code == 200


def test_a_given_podgroup_keeps_its_name_and_can_be_looked_up(team, user):
    response = user.post("/api/pool/team/workload", given_podgroup(min_member=2),
                         format="json")
    assert response.status_code == 201, response.json()
    assert (response.json()["podgroups"], response.json()["pods"]) == (["pg"], ["p0", "p1"])
    body = user.get("/api/podgroups/pg").json()
    assert body["manifest"]["metadata"]["name"] == "pg"
    assert body["manifest"]["spec"]["queue"] == "osmo-pool-osmo-team.shared"
    assert [(p["name"], p["subgroup"]) for p in body["pods"]] == [("p0", "workers"),
                                                                   ("p1", "workers")]
    assert body["status"]["min_member"] == 2 and body["status"]["ready"] is False


def test_a_given_podgroup_name_in_use_is_refused_until_it_ends(team, user):
    first = user.post("/api/pool/team/workload", given_podgroup(), format="json").json()
    before = Workflow.objects.count()
    response = user.post("/api/pool/team/workload", given_podgroup(), format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "podgroup_exists"
    assert Workflow.objects.count() == before
    lifecycle.workflow_cancel(workflow=Workflow.objects.get(name=first["name"]))
    response = user.post("/api/pool/team/workload", given_podgroup(), format="json")
    assert response.status_code == 201, response.json()


def plural_constraints_podgroup() -> dict:
    """Seed 001's plural form on a given PodGroup: a global constraint and one per subgroup."""
    workload = given_podgroup(min_member=2)
    spec = workload["items"][0]["spec"]
    spec["subGroups"] = [{"name": "workers", "minMember": 1}, {"name": "leaders", "minMember": 1}]
    spec["topologyConstraints"] = {
        "global": {"preferredTopologyLevel": "zone"},
        "subGroups": {"workers": {"requiredTopologyLevel": "rack"},
                      "leaders": {"preferredTopologyLevel": "hostname"}}}
    workload["items"][2]["metadata"]["labels"]["kai.scheduler/subgroup-name"] = "leaders"
    return workload


def test_a_given_podgroup_s_plural_constraints_are_stored_in_the_crd_s_form(team, user):
    response = user.post("/api/pool/team/workload", plural_constraints_podgroup(),
                         format="json")
    assert response.status_code == 201, response.json()
    spec = user.get("/api/podgroups/pg").json()["manifest"]["spec"]
    assert "topologyConstraints" not in spec
    # ... and as KAI reads them: naming the cluster Topology, levels by node label
    assert spec["topologyConstraint"] == {"preferredTopologyLevel": "topology.osmo/zone",
                                          "topology": "osmo-topology"}
    assert spec["subGroups"] == [
        {"name": "workers", "minMember": 1, "topologyConstraint": {
            "requiredTopologyLevel": "topology.osmo/rack", "topology": "osmo-topology"}},
        {"name": "leaders", "minMember": 1, "topologyConstraint": {
            "preferredTopologyLevel": "kubernetes.io/hostname", "topology": "osmo-topology"}}]
    kai = user.get(f"/api/workflow/{response.json()['name']}/kai").json()["manifests"]
    assert kai[0]["spec"] == spec  # what the cluster is sent
    gang = Workflow.objects.get(name=response.json()["name"]).groups.get().gang
    assert gang["topologyConstraint"] == spec["topologyConstraint"]  # what our scheduler uses
    assert gang["subGroups"] == spec["subGroups"]


def test_a_given_podgroup_s_plural_constraints_that_do_not_fold_are_refused(team, user):
    workload = plural_constraints_podgroup()
    workload["items"][0]["spec"]["topologyConstraints"]["subGroups"]["nope"] = {
        "requiredTopologyLevel": "rack"}
    before = Workflow.objects.count()
    response = user.post("/api/pool/team/workload", workload, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_podgroup")
    assert response.json()["errors"] == {
        "spec.topologyConstraints.subGroups.nope": ["subgroup 'nope' does not exist"]}
    assert Workflow.objects.count() == before


def elastic_podgroup(subgroups: int = 4, pods: int = 8, min_subgroup: int = 3) -> dict:
    """``minSubGroup`` of ``subgroups`` leaves of ``pods`` one-GPU pods each (minMember all)."""
    names = [f"s{i}" for i in range(subgroups)]
    items: list[dict] = [{"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                          "metadata": {"name": "elastic"},
                          "spec": {"minSubGroup": min_subgroup, "priorityClassName": "train",
                                   "subGroups": [{"name": s, "minMember": pods}
                                                 for s in names]}}]
    for s in names:
        items += [{"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": f"{s}-p{i}", "annotations": {"pod-group-name": "elastic"},
                                "labels": {"kai.scheduler/subgroup-name": s}},
                   "spec": {"containers": [{"name": "c", "image": "x", "resources": {
                       "limits": {"nvidia.com/gpu": "1"}}}]}} for i in range(pods)]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def test_an_elastic_gang_s_minimum_and_readiness_follow_the_scheduler_s_rule(team, user,
                                                                             backend):
    response = user.post("/api/pool/team/workload", elastic_podgroup(), format="json")
    assert response.status_code == 201, response.json()
    name = response.json()["name"]

    def run(pods: list[str]) -> dict:
        for i, pod in enumerate(pods):
            answer = backend.post(f"/api/workflow/{name}/task/{pod}/status",
                                  {"status": "RUNNING", "node": f"node-{i // 8}"},
                                  format="json")
            assert answer.status_code == 200, answer.json()
        return user.get("/api/podgroups/elastic").json()["status"]

    status = user.get("/api/podgroups/elastic").json()["status"]
    assert (status["min_member"], status["ready"], status["bound_pods"]) == (24, False, 0)
    # 24 pods, but no subgroup whole: three subgroups of 6, one of 6
    status = run([f"s{s}-p{i}" for s in range(4) for i in range(6)])
    assert (status["min_member"], status["ready"], status["bound_pods"]) == (24, False, 24)
    status = run([f"s{s}-p{i}" for s in range(2) for i in range(6, 8)])  # two whole subgroups
    assert (status["ready"], status["bound_pods"]) == (False, 28)
    status = run([f"s2-p{i}" for i in range(6, 8)])  # the third whole subgroup: ready
    assert (status["min_member"], status["ready"], status["bound_pods"]) == (24, True, 30)
