"""The OpenAPI document is served and describes the shapes the API really returns."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

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
