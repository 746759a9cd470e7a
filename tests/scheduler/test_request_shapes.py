"""Cluster, scheduler and KAI requests go through their serializers: a wrong shape is a 400 with
the contract's code, `errors` naming the field, and nothing written."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from scheduler.models import ClusterTopology, Node
from tests.kai.test_api import VALID_PODGROUP, review
from tests.scheduler.conftest import add_nodes
from tests.shapes import refused

pytestmark = pytest.mark.django_db

NODE = {"name": "node-9", "gpus": 8, "cpu": 64, "memory": "512Gi", "labels": {"a": "b"}}


def cluster() -> tuple:
    return (list(Node.objects.order_by("pk").values()),
            list(ClusterTopology.objects.order_by("pk").values("name", "levels")))


@pytest.mark.parametrize(("changes", "field"), [
    ({"gpus": "8"}, "gpus"),                          # a string for an int
    ({"gpus": [8]}, "gpus"),
    ({"gpus": 2**31}, "gpus"),                        # beyond the column
    ({"gpus": None}, "gpus"),
    ({"name": 9}, "name"),
    ({"name": "x" * 254}, "name"),
    ({"cpu": True}, "cpu"),
    ({"cpu": "1e30"}, "cpu"),                          # beyond the bigint column
    ({"memory": {"size": "1Gi"}}, "memory"),
    ({"labels": ["a=b"]}, "labels"),                   # a list for an object
    ({"labels": {"a": None}}, "labels"),
])
def test_node_registration_shapes(admin, changes, field):
    add_nodes(admin, 1)
    before = cluster()
    refused(admin.post("/api/cluster/nodes", {**NODE, **changes}, format="json"),
            "invalid_request", field)
    assert cluster() == before


def test_node_registration_needs_name_and_gpus(admin):
    add_nodes(admin, 1)
    before = cluster()
    response = admin.post("/api/cluster/nodes", {"cpu": 1}, format="json")
    refused(response, "invalid_request", "name")
    assert set(response.json()["errors"]) == {"name", "gpus"}
    refused(admin.post("/api/cluster/nodes", [NODE], format="json"), "invalid_request",
            "non_field_errors")
    assert cluster() == before


def test_node_quantities_are_parsed_by_the_serializer(admin):
    response = admin.post("/api/cluster/nodes", {"name": "n", "gpus": 0, "cpu": "500m",
                                                 "memory": 1024}, format="json")
    assert response.status_code == 201, response.json()
    node = Node.objects.get(name="n")
    assert (node.cpu_millis, node.memory_bytes, node.labels) == (500, 1024, {})


@pytest.mark.parametrize("body", [{"schedulable": "false"}, {"schedulable": 0}, {}, [False]])
def test_cordon_needs_a_boolean(admin, body):
    add_nodes(admin, 1)
    before = cluster()
    response = admin.patch("/api/cluster/nodes/node-0", body, format="json")
    refused(response, "invalid_request",
            "schedulable" if isinstance(body, dict) else "non_field_errors")
    assert cluster() == before


def test_node_delete_force_is_a_flag(admin):
    add_nodes(admin, 1)
    before = cluster()
    refused(admin.delete("/api/cluster/nodes/node-0?force=perhaps"), "invalid_request", "force")
    assert cluster() == before
    assert admin.delete("/api/cluster/nodes/node-0?force=TRUE").status_code == 204


@pytest.mark.parametrize(("body", "field"), [
    ({"levels": "rack"}, "levels"),                                   # a string for a list
    ({"levels": {"alias": "rack", "nodeLabel": "r"}}, "levels"),      # an object for a list
    ({}, "levels"),                                                   # missing
    ({"levels": [{"alias": "rack"}]}, "levels.0.nodeLabel"),
    ({"levels": [{"nodeLabel": 5}]}, "levels.0.nodeLabel"),
    ({"levels": [{"alias": ["r"], "nodeLabel": "r"}]}, "levels.0.alias"),
    ({"levels": ["rack"]}, "levels.0.non_field_errors"),
    (["rack"], "non_field_errors"),
])
def test_topology_shapes_are_invalid_topology(admin, body, field):
    admin.put("/api/cluster/topology", {"levels": [{"nodeLabel": "r"}]}, format="json")
    before = cluster()
    refused(admin.put("/api/cluster/topology", body, format="json"), "invalid_topology", field)
    assert cluster() == before


def test_kai_queries_and_bodies(admin_client):
    refused(admin_client.get("/api/kai/queues?namespace=Not_OK"), "invalid_request",
            "namespace")
    refused(admin_client.get("/api/kai/queues?namespace=" + "a" * 64), "invalid_request",
            "namespace")
    assert admin_client.get("/api/kai/queues?namespace=").status_code == 200
    refused(admin_client.post("/api/kai/podgroups/validate",
                              {"podgroup": VALID_PODGROUP, "pods": [1]}, format="json"),
            "invalid_request", "pods.0")
    refused(admin_client.post("/api/kai/podgroups/validate",
                              {"podgroup": VALID_PODGROUP, "pods": {"p0": {}}}, format="json"),
            "invalid_request", "pods")
    response = admin_client.post("/api/kai/podgroups/validate", {"podgroup": None},
                                 format="json")
    assert (response.status_code, response.json()["allowed"]) == (200, False)
    response = admin_client.post("/api/kai/podgroups/validate",
                                 {"podgroup": VALID_PODGROUP, "pods": None}, format="json")
    assert response.json() == {"allowed": True, "errors": [], "warnings": []}


@pytest.mark.parametrize(("change", "field"), [
    ({"apiVersion": "admission.k8s.io/v2"}, "apiVersion"),     # an unknown enum
    ({"kind": "Review"}, "kind"),
    ({"request": "uid"}, "request.non_field_errors"),
    ({"request": {"uid": 7, "object": VALID_PODGROUP}}, "request.uid"),
    ({"request": {"uid": "u1", "kind": "PodGroup"}}, "request.kind"),
])
def test_webhook_review_shapes(change, field):
    response = APIClient().post("/webhooks/podgroups/validate",
                                {**review(VALID_PODGROUP), **change}, format="json")
    refused(response, "invalid_request", field)
