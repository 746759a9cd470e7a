"""The OpenAPI document is served and describes the shapes the API really returns."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from osmo.accounts import services as accounts
from tests import factories

pytestmark = pytest.mark.django_db


def component(schema: dict, name: str) -> set[str]:
    return set(schema["components"]["schemas"][name]["properties"])


def test_schema_and_docs_are_served(admin_client):
    response = admin_client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    for path in ("/api/configs/pool", "/api/configs/pool/{name}",
                 "/api/configs/pool/{parent}/subpool",
                 "/api/configs/pool/{parent}/subpool/{subpool}",
                 "/api/configs/pool/{name}/history", "/api/pool_quota", "/api/health"):
        assert path in schema["paths"], path
    docs = APIClient().get("/api/docs")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()


def test_documented_shapes_match_real_responses(admin_client):
    schema = admin_client.get("/api/schema",
                              HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    team = factories.pool("team", 10)
    sub = factories.subpool(team, "a", 5)
    factories.running_workflow(sub, 1)
    admin_client.delete("/api/configs/pool/team/subpool/a")

    pool = admin_client.get("/api/configs/pool").json()[0]
    assert set(pool) == component(schema, "Pool")
    assert set(pool["subpools"][0]) == component(schema, "Subpool")  # DELETING: with drain
    report = admin_client.get("/api/pool_quota").json()
    assert set(report) == component(schema, "PoolQuota")
    assert set(report["pools"][0]) == component(schema, "ParentRow")
    assert set(report["pools"][0]["subpools"][0]) == component(schema, "SubRow")
    assert set(report["resource_sum"]) == component(schema, "ResourceSum")
    event = admin_client.get("/api/configs/pool/team/history").json()[0]
    assert set(event) == component(schema, "HistoryItem")


def test_errors_have_the_contract_shape(admin_client):
    response = admin_client.get("/api/no/such/thing")
    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "detail": "No such resource."}
    response = admin_client.patch("/api/pool_quota", {}, format="json")
    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"
    response = admin_client.put("/api/configs/pool/x", "[1, 2]", content_type="application/json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")
    response = admin_client.put("/api/configs/pool/x", "{not json",
                                content_type="application/json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")


def test_schema_generates_without_warnings(tmp_path):
    from django.core.management import call_command

    call_command("spectacular", "--validate", "--fail-on-warn", "--file",
                 str(tmp_path / "schema.yaml"))
    assert (tmp_path / "schema.yaml").read_text().startswith("openapi: 3")


# Path parameters for each read, from the data `test_every_read_...` makes.
PATH_VALUES = {
    "/api/configs/pool/{name}": {"name": "team"},
    "/api/configs/pool/{name}/history": {"name": "team"},
    "/api/configs/backend/{name}": {"name": "default"},
    "/api/configs/pool/{parent}/subpool": {"parent": "team"},
    "/api/podgroups/{name}": {"name": "{podgroup}"},
    "/api/workflow/{name}": {"name": "{workflow}"},
    "/api/workflow/{name}/explain": {"name": "{workflow}"},
    "/api/workflow/{name}/kai": {"name": "{workflow}"},
    "/api/workflow/{name}/spec": {"name": "{workflow}"},
    "/api/workflow/{name}/logs": {"name": "{workflow}"},
    "/api/workflow/{name}/error_logs": {"name": "{workflow}"},
    "/api/workflow/{name}/events": {"name": "{workflow}"},
    "/api/auth/access_token/{name}/roles": {"name": "{token}"},
    "/api/auth/user/{user_id}": {"user_id": "{user}"},
    "/api/auth/user/{user_id}/access_token": {"user_id": "{user}"},
    "/api/resources/{name}": {"name": "n1"},
    "/api/app/user/{name}": {"name": "schema-app"},
    "/api/app/user/{name}/spec": {"name": "schema-app"},
}

# Query parameters a read requires.
QUERY_VALUES = {
    "/api/configs/diff": {"config_type": "POOL", "first_revision": 1, "second_revision": 2},
}


def test_every_read_answers_as_its_schema_says_with_data_in_every_list(transactional_db,
                                                                         broker_url):
    """An empty list conforms to any item schema: each list here holds at least one item, so
    every item shape is checked against the document."""
    import schemathesis
    from schemathesis.specs.openapi.checks import response_schema_conformance

    from osmo.wsgi import application
    from tests.conftest import make_client

    admin = make_client("schema-admin", "osmo-admin")
    admin.post("/api/cluster/nodes", {"name": "n1", "gpus": 8}, format="json")
    factories.subpool(factories.pool("team", 10), "a", 5)
    spec = ("workflow:\n  name: w\n  tasks:\n  - {name: t, image: x, command: [sleep, '9'], "
            "resource: r}\n  resources:\n    r: {gpu: 1}\n")
    submitted = admin.post("/api/pool/team--a/workflow", {"file": spec}, format="json").json()
    accounts.token_issue(user=admin.user, name="schema-token")
    admin.post("/api/credentials/schema-cred", {"generic_credential": {"credential": {
        "k": "v"}}}, format="json")
    admin.post("/api/app/user/schema-app?description=d", spec, content_type="text/plain")
    values = {"{workflow}": submitted["name"], "{podgroup}": submitted["groups"][0]["podgroup"],
              "{token}": "schema-token", "{user}": admin.user.username}
    auth = {"Authorization": admin._credentials["HTTP_AUTHORIZATION"]}
    schema = schemathesis.openapi.from_wsgi("/api/schema", application)
    checked, failures = [], []
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.method.upper() != "GET":
            continue
        parameters = {key: values.get(value, value)
                      for key, value in PATH_VALUES.get(operation.path, {}).items()}
        # a log is followed while its task runs: read what is there
        query = {"follow": "false"} if operation.path.endswith("/logs") else QUERY_VALUES.get(
            operation.path)
        case = operation.Case(path_parameters=parameters, query=query)
        response = case.call(headers=auth)
        json_body = response.headers.get("Content-Type", "").startswith("application/json")
        body = response.json() if response.status_code == 200 and json_body else None
        items = body.get("results") if isinstance(body, dict) else body
        if response.status_code != 200 or (isinstance(items, list) and not items):
            failures.append(f"{operation.label}: {response.status_code}, no items to check")
            continue
        try:
            case.validate_response(response, checks=[response_schema_conformance])
        except (AssertionError, BaseExceptionGroup) as error:
            failures.append(f"{operation.label}: {error}"[:1500])
        checked.append(operation.path)
    assert failures == [], "\n\n".join(failures)
    assert set(PATH_VALUES) <= set(checked) and "/api/workflow" in checked


def test_a_token_named_by_digits_only_is_a_bad_name_not_a_bad_method(admin_client):
    from osmo.accounts.models import AccessToken

    before = AccessToken.objects.count()
    response = admin_client.post("/api/auth/access_token/0")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")
    assert list(response.json()["errors"]) == ["name"]
    assert AccessToken.objects.count() == before
    response = admin_client.delete("/api/auth/access_token/999999")  # by id, as before
    assert response.status_code == 404


@pytest.mark.parametrize("query", ["last_n_lines=", "follow=", "retry_id=", "query=",
                                   "task_name=", "download="])
def test_an_empty_query_value_is_refused(admin_client, query):
    factories.pool("team", 10)
    workflow = factories.running_workflow(factories.subpool(
        factories.pool("other", 10), "a", 5), 1)
    response = admin_client.get(f"/api/workflow/{workflow.name}/logs?{query}")
    assert response.status_code == 400, response
    body = response.json()
    assert body["code"] == "invalid_request"
    assert body["errors"] == {query[:-1]: [
        "May not be empty: give a value, or leave the parameter out."]}


def test_every_operation_is_filed_under_one_area_and_no_area_holds_a_third(admin_client):
    schema = admin_client.get("/api/schema",
                              HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    tags = [(f"{method.upper()} {path}", operation.get("tags", []))
            for path, operations in schema["paths"].items()
            for method, operation in operations.items()]
    assert len(tags) >= 59
    assert [op for op, tag in tags if len(tag) != 1] == []
    counts: dict[str, int] = {}
    for _, (tag,) in tags:
        counts[tag] = counts.get(tag, 0) + 1
    assert max(counts.values()) <= len(tags) // 3, counts
    declared = {tag["name"] for tag in schema["tags"]}
    assert set(counts) <= declared
    assert set(counts) >= {"pools", "workflows", "tasks", "logs", "cluster", "scheduler", "kai",
                           "auth", "profile"}
    by_op = dict(tags)
    assert (by_op["GET /api/workflow/{name}/logs"], by_op["POST /api/pool/{pool}/workflow"],
            by_op["GET /api/configs/pool"], by_op["POST /webhooks/podgroups/validate"]) == (
        ["logs"], ["workflows"], ["pools"], ["kai"])
