"""GET /api/kai/queues, POST /api/kai/podgroups/validate, POST /webhooks/podgroups/validate."""

from __future__ import annotations

import pytest
import yaml
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from pools import services as pool_services
from scheduler.kai.crd_validation import validate_manifest
from tests import factories
from tests.shared_data import kai_crds

pytestmark = pytest.mark.django_db

VALID_PODGROUP = {
    "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
    "metadata": {"name": "pg-ok", "namespace": "osmo"},
    "spec": {"queue": "osmo-pool-osmo-team.shared", "minSubGroup": 1,
             "subGroups": [{"name": "a", "minMember": 2}, {"name": "b", "minMember": 2}]},
}
INVALID_PODGROUP = {
    "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
    "metadata": {"name": "pg-bad"},
    "spec": {"minMember": 4, "minSubGroup": 3,
             "subGroups": [{"name": "a", "minMember": 2}, {"name": "b", "minMember": 2}]},
}


@pytest.fixture
def seed_002_pools():
    """Seed 002's example: team 100; a 30, b 40, c 20; d DELETING; e ARCHIVED; + other."""
    team = factories.pool("team", 100)
    for name, quota in (("a", 30), ("b", 40), ("c", 20), ("d", 5), ("e", 5)):
        factories.subpool(team, name, quota)
    d = team.subpools.get(subpool_name="d")
    factories.running_workflow(d, 1)
    pool_services.subpool_delete(actor=None, subpool=d)
    pool_services.subpool_delete(actor=None, subpool=team.subpools.get(subpool_name="e"))
    factories.pool("other", 8)
    gone = factories.pool("gone", 4)
    pool_services.pool_delete(actor=None, pool=gone)
    return team


def names(manifests) -> list[str]:
    return [m["metadata"]["name"] for m in manifests]


def gpu_quota(manifests) -> dict[str, int]:
    return {m["metadata"]["name"]: m["spec"]["resources"]["gpu"]["quota"] for m in manifests}


def test_admin_sees_the_whole_hierarchy(admin_client, seed_002_pools) -> None:
    with CaptureQueriesContext(connection) as queries:
        response = admin_client.get("/api/kai/queues")
    assert response.status_code == 200
    body = response.json()
    assert gpu_quota(body) == {
        "osmo-default-osmo": -1, "osmo-pool-osmo-other": 8, "osmo-pool-osmo-other.shared": 8,
        "osmo-pool-osmo-team": 100, "osmo-pool-osmo-team.shared": 10,
        "osmo-pool-osmo-team--a": 30, "osmo-pool-osmo-team--b": 40,
        "osmo-pool-osmo-team--c": 20, "osmo-pool-osmo-team--d": 0,
    }
    assert names(body)[0] == "osmo-default-osmo"
    for manifest in body:
        assert validate_manifest(manifest, crds_dir=kai_crds()) == []
    # auth (token + groups) and ONE query for the pools, however many there are
    pool_queries = [q for q in queries.captured_queries if '"pools"' in q["sql"]]
    assert len(pool_queries) == 1


def test_query_count_does_not_grow_with_pools(admin_client) -> None:
    factories.pool("p0", 1)
    admin_client.get("/api/kai/queues")  # warm the token path
    with CaptureQueriesContext(connection) as few:
        admin_client.get("/api/kai/queues")
    for index in range(1, 6):
        parent = factories.pool(f"p{index}", 10)
        factories.subpool(parent, "s", 2)
    with CaptureQueriesContext(connection) as many:
        response = admin_client.get("/api/kai/queues")
    assert len(response.json()) == 1 + 2 + 5 * 3
    assert len(many) == len(few)


def test_users_see_the_root_and_their_pools_only(client_for, seed_002_pools) -> None:
    user = client_for("alice", "osmo-team-user")
    assert names(user.get("/api/kai/queues").json()) == [
        "osmo-default-osmo", "osmo-pool-osmo-team", "osmo-pool-osmo-team.shared",
        "osmo-pool-osmo-team--a", "osmo-pool-osmo-team--b", "osmo-pool-osmo-team--c",
        "osmo-pool-osmo-team--d"]
    nobody = client_for("bob")
    assert names(nobody.get("/api/kai/queues").json()) == ["osmo-default-osmo"]
    wildcard = client_for("carol", "osmo-oth*-admin")
    assert names(wildcard.get("/api/kai/queues").json()) == [
        "osmo-default-osmo", "osmo-pool-osmo-other", "osmo-pool-osmo-other.shared"]


def test_namespace_parameter_and_yaml(admin_client, seed_002_pools) -> None:
    response = admin_client.get("/api/kai/queues?namespace=prod&format=yaml")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/yaml")
    documents = list(yaml.safe_load_all(response.content))
    assert names(documents)[:2] == ["osmo-default-prod", "osmo-pool-prod-other"]
    assert documents == admin_client.get("/api/kai/queues?namespace=prod").json()
    assert response.content.decode().count("\n---") + 1 == len(documents)
    accept = admin_client.get("/api/kai/queues", HTTP_ACCEPT="application/yaml")
    assert accept["Content-Type"].startswith("application/yaml")


def test_bad_namespace_and_no_token(admin_client) -> None:
    response = admin_client.get("/api/kai/queues?namespace=Not_OK")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert list(response.json()["errors"]) == ["namespace"]
    response = APIClient().get("/api/kai/queues")
    assert (response.status_code, response.json()["code"]) == (401, "not_authenticated")


def test_validate_endpoint(client_for) -> None:
    client = client_for("dave")
    response = client.post("/api/kai/podgroups/validate", VALID_PODGROUP, format="json")
    assert response.status_code == 200
    assert response.json() == {"allowed": True, "errors": [], "warnings": []}
    response = client.post("/api/kai/podgroups/validate", INVALID_PODGROUP, format="json")
    body = response.json()
    assert response.status_code == 200 and body["allowed"] is False
    assert [e["path"] for e in body["errors"]] == ["spec.minMember", "spec.minSubGroup"]
    assert "3" in body["errors"][1]["message"] and "2" in body["errors"][1]["message"]


def test_validate_endpoint_with_pods(client_for) -> None:
    client = client_for("erin")
    pods = [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "p0", "labels": {"kai.scheduler/subgroup-name": "zzz"},
                          "annotations": {"pod-group-name": "pg-ok"}}}]
    response = client.post("/api/kai/podgroups/validate",
                           {"podgroup": VALID_PODGROUP, "pods": pods}, format="json")
    body = response.json()
    assert body["allowed"] is False
    assert [e["path"] for e in body["errors"]] == [
        "pods[0].metadata.labels['kai.scheduler/subgroup-name']"]
    response = client.post("/api/kai/podgroups/validate",
                           {"podgroup": VALID_PODGROUP, "pods": "nope"}, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")
    response = client.post("/api/kai/podgroups/validate", [1], format="json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")
    assert APIClient().post("/api/kai/podgroups/validate", VALID_PODGROUP,
                            format="json").status_code == 401


def review(obj, uid="705ab4f5-6393-11e8-b7cc-42010a800002", operation="CREATE"):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "scheduling.run.ai", "version": "v2alpha2",
                             "kind": "PodGroup"},
        "resource": {"group": "scheduling.run.ai", "version": "v2alpha2",
                     "resource": "podgroups"},
        "namespace": "osmo", "operation": operation, "object": obj}}


def test_webhook_allows_a_valid_podgroup_without_a_token() -> None:
    response = APIClient().post("/webhooks/podgroups/validate", review(VALID_PODGROUP),
                                format="json")
    assert response.status_code == 200
    assert response.json() == {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True,
                     "status": {"message": "PodGroup pg-ok is valid"}}}


def test_webhook_denies_with_403_and_the_errors() -> None:
    response = APIClient().post("/webhooks/podgroups/validate",
                                review(INVALID_PODGROUP, uid="abc"), format="json")
    answer = response.json()["response"]
    assert (answer["uid"], answer["allowed"], answer["status"]["code"]) == ("abc", False, 403)
    assert answer["status"]["message"].startswith("PodGroup pg-bad is invalid: spec.minMember: ")
    assert "; spec.minSubGroup: " in answer["status"]["message"]
    assert all(isinstance(w, str) for w in answer.get("warnings", []))


def test_webhook_warnings_are_strings() -> None:
    unreachable = {**VALID_PODGROUP, "spec": {"minMember": 5}}
    answer = APIClient().post("/webhooks/podgroups/validate", review(unreachable),
                              format="json").json()["response"]
    assert answer["allowed"] is True and "warnings" not in answer
    coarser = {**VALID_PODGROUP, "spec": {
        "minSubGroup": 1, "subGroups": [{"name": "a", "minMember": 2},
                                        {"name": "b", "minMember": 2}],
        "topologyConstraint": {"requiredTopologyLevel": "rack",
                               "preferredTopologyLevel": "zone"}}}
    answer = APIClient().post("/webhooks/podgroups/validate", review(coarser),
                              format="json").json()["response"]
    assert answer["allowed"] is True
    assert answer["warnings"] and all(w.startswith("spec.topologyConstraint")
                                      for w in answer["warnings"])


def test_webhook_passes_other_objects_and_deletes() -> None:
    client = APIClient()
    deleted = review(None, uid="d1", operation="DELETE")
    deleted["request"]["oldObject"] = INVALID_PODGROUP
    answer = client.post("/webhooks/podgroups/validate", deleted, format="json").json()
    assert answer["response"]["uid"] == "d1" and answer["response"]["allowed"] is True
    other = review({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}, uid="o1")
    other["request"]["kind"] = {"group": "", "version": "v1", "kind": "Pod"}
    answer = client.post("/webhooks/podgroups/validate", other, format="json").json()
    assert answer["response"]["allowed"] is True


def test_webhook_rejects_malformed_reviews() -> None:
    client = APIClient()
    for body in ({"kind": "AdmissionReview"},
                 {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"object": VALID_PODGROUP}}):
        response = client.post("/webhooks/podgroups/validate", body, format="json")
        assert (response.status_code, response.json()["code"]) == (400, "invalid_request")


def test_openapi_documents_the_kai_endpoints_without_warnings(tmp_path) -> None:
    from django.core.management import call_command

    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
    schema = yaml.safe_load(target.read_text())
    assert {"/api/kai/queues", "/api/kai/podgroups/validate",
            "/webhooks/podgroups/validate"} <= set(schema["paths"])
    webhook = schema["paths"]["/webhooks/podgroups/validate"]["post"]
    assert webhook.get("security", []) in ([], [{}])  # no token
    queues = schema["paths"]["/api/kai/queues"]["get"]["responses"]["200"]["content"]
    assert set(queues) == {"application/json", "application/yaml"}
