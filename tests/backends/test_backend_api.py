"""Backends through the REST API (API.md "Backends"): shapes and codes exact, and a refused
request changes nothing."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import override_settings
from django.utils import timezone

from pools.models import Pool, PoolEvent
from scheduler.models import Backend, ClusterBackendStatus, Node
from scheduler.services import node_register
from tests import factories
from tests.conftest import make_client

pytestmark = pytest.mark.django_db

BACKEND_KEYS = {"name", "kind", "placement", "description", "k8s_namespace", "k8s_uid",
                "version", "scheduler_settings", "status", "online", "last_heartbeat",
                "created_date", "nodes", "gpus", "gpus_free", "pools"}


def db_state() -> tuple:
    return (list(Backend.objects.order_by("pk").values()),
            list(Pool.objects.order_by("pk").values()), PoolEvent.objects.count(),
            list(Node.objects.order_by("pk").values()))


@pytest.fixture
def user_client(db):
    return make_client("someone", "osmo-user")


def create(client, name: str, **body):
    return client.post(f"/api/configs/backend/{name}", body, format="json")


# --- the default backend ----------------------------------------------------------------------

def test_the_migration_made_the_default_backend_from_the_settings(user_client):
    response = user_client.get("/api/configs/backend")
    assert response.status_code == 200
    [default] = response.json()["backends"]
    assert set(default) == BACKEND_KEYS
    assert default | {"created_date": None} == {
        "name": "default", "kind": "embedded", "placement": "kai", "description": "",
        "k8s_namespace": "osmo", "k8s_uid": None, "version": "",
        "scheduler_settings": {"scheduler_name": "kai-scheduler"}, "status": "ONLINE",
        "online": True, "last_heartbeat": None, "created_date": None, "nodes": 0, "gpus": 0,
        "gpus_free": 0, "pools": []}


def test_the_data_migration_follows_todays_settings():
    module = importlib.import_module("migrations.scheduler.0006_default_backend")
    state = MigrationExecutor(connection).loader.project_state(
        ("scheduler", "0006_default_backend"))
    Backend.objects.filter(name="default").delete()
    with override_settings(OSMO_CLUSTER_BACKEND="kubernetes", OSMO_NAMESPACE="gpu-jobs",
                           OSMO_PLACEMENT="osmo", OSMO_SCHEDULER_NAME="my-scheduler"):
        module.create_default(state.apps, None)
    assert list(Backend.objects.values_list("name", "kind", "placement", "k8s_namespace",
                                            "scheduler_name")) == [
        ("default", "kubernetes", "osmo", "gpu-jobs", "my-scheduler")]


def test_nodes_count_towards_their_backend(admin_client, user_client):
    for name, gpus in (("n1", 8), ("n2", 4)):
        assert admin_client.post("/api/cluster/nodes", {"name": name, "gpus": gpus},
                                 format="json").status_code == 201
    team = factories.pool("team", 10)
    factories.running_workflow(team, 3)  # its task is bound to node-0: not one of ours
    task = team.workflows.get().tasks.get()
    task.node_name = "n1"
    task.save()
    body = user_client.get("/api/configs/backend/default").json()
    assert (body["nodes"], body["gpus"], body["gpus_free"], body["pools"]) == (
        2, 12, 9, ["team"])
    nodes = user_client.get("/api/cluster/nodes").json()
    assert [(n["name"], n["backend"]) for n in nodes] == [("n1", "default"), ("n2", "default")]


# --- create, update, maintenance --------------------------------------------------------------

def test_create_then_update(admin_client):
    response = create(admin_client, "east", kind="kubernetes", k8s_namespace="jobs",
                      description="the east cluster",
                      scheduler_settings={"scheduler_name": "kai-east"})
    assert response.status_code == 201, response.json()
    body = response.json()
    assert set(body) == BACKEND_KEYS
    assert (body["kind"], body["placement"], body["k8s_namespace"], body["description"],
            body["scheduler_settings"], body["status"], body["online"]) == (
        "kubernetes", "kai", "jobs", "the east cluster", {"scheduler_name": "kai-east"},
        "OFFLINE", False)
    response = create(admin_client, "east", placement="osmo")
    assert response.status_code == 200
    assert (response.json()["placement"], response.json()["k8s_namespace"],
            response.json()["scheduler_settings"]) == ("osmo", "jobs",
                                                       {"scheduler_name": "kai-east"})
    assert Backend.objects.get(name="east").placement == "osmo"


def test_a_new_backend_takes_the_scheduler_of_its_placement(admin_client):
    body = create(admin_client, "west", kind="kubernetes", placement="osmo").json()
    assert body["scheduler_settings"] == {"scheduler_name": "osmo-scheduler"}


def test_a_kubernetes_backend_is_online_while_heartbeats_arrive_within_the_lease(admin_client):
    create(admin_client, "east", kind="kubernetes")
    Backend.objects.filter(name="east").update(last_heartbeat=timezone.now()
                                               - timedelta(seconds=10))
    assert admin_client.get("/api/configs/backend/east").json()["status"] == "ONLINE"
    with override_settings(OSMO_BACKEND_LEASE=5):
        body = admin_client.get("/api/configs/backend/east").json()
    assert (body["status"], body["online"]) == ("OFFLINE", False)


def test_maintenance_is_a_status_and_lifts(admin_client):
    response = admin_client.patch("/api/configs/backend/default", {"maintenance": True},
                                  format="json")
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["online"]) == ("MAINTENANCE", True)
    assert Backend.objects.get(name="default").maintenance is True
    response = admin_client.patch("/api/configs/backend/default", {"maintenance": False},
                                  format="json")
    assert response.json()["status"] == "ONLINE"


@pytest.mark.parametrize(("name", "body", "field"), [
    ("Bad_Name", {"kind": "embedded"}, "name"),
    ("-east", {"kind": "embedded"}, "name"),
    ("e" * 64, {"kind": "embedded"}, "name"),
    ("east", {}, "kind"),
    ("east", {"kind": "mainframe"}, "kind"),
    ("east", {"kind": "embedded", "placement": "slurm"}, "placement"),
    ("east", {"kind": "embedded", "k8s_namespace": "Not A Label"}, "k8s_namespace"),
    ("east", {"kind": "embedded", "scheduler_settings": {"scheduler_name": 7}},
     "scheduler_settings"),
    ("east", {"kind": "embedded", "colour": "red"}, "colour"),
    ("east", {"kind": "embedded", "description": "x" * 5000}, "description"),
])
def test_bad_bodies_are_400_invalid_backend(admin_client, name, body, field):
    before = db_state()
    response = create(admin_client, name, **body)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_backend"
    assert field in str(response.json()["errors"])
    assert db_state() == before


def test_unknown_backend_is_404(user_client, admin_client):
    for client, method in ((user_client, "get"), (admin_client, "patch"),
                           (admin_client, "delete")):
        response = getattr(client, method)("/api/configs/backend/nowhere",
                                           {"maintenance": True} if method == "patch" else None,
                                           format="json")
        assert response.status_code == 404
        assert response.json()["code"] == "backend_not_found"


@pytest.mark.parametrize(("method", "path", "body"), [
    ("post", "/api/configs/backend/east", {"kind": "embedded"}),
    ("post", "/api/configs/backend/default", {"description": "mine"}),
    ("patch", "/api/configs/backend/default", {"maintenance": True}),
    ("delete", "/api/configs/backend/default", None),
])
def test_writes_are_for_platform_admins(user_client, method, path, body):
    before = db_state()
    response = getattr(user_client, method)(path, body, format="json")
    assert response.status_code == 403
    assert db_state() == before


# --- delete -----------------------------------------------------------------------------------

def test_delete_is_refused_while_a_pool_names_the_backend(admin_client):
    create(admin_client, "east", kind="embedded")
    factories.pool("team", 10, backends=["east", "default"])
    before = db_state()
    response = admin_client.delete("/api/configs/backend/east")
    assert response.status_code == 409
    assert response.json()["code"] == "backend_in_use"
    assert "team" in response.json()["detail"]
    assert db_state() == before


def test_forced_delete_takes_the_name_out_of_the_pools(admin_client):
    create(admin_client, "east", kind="embedded")
    factories.pool("team", 10, backends=["east", "default"])
    admin_client.post("/api/cluster/nodes", {"name": "e1", "gpus": 8, "backend": "east"},
                      format="json")
    response = admin_client.delete("/api/configs/backend/east?force=true")
    assert response.status_code == 204
    assert not Backend.objects.filter(name="east").exists()
    assert Pool.objects.get(name="team").backends == ["default"]
    assert PoolEvent.objects.filter(pool__name="team", action="pool_updated").count() == 1
    assert not Node.objects.filter(name="e1").exists()


def test_delete_of_an_unused_backend(admin_client):
    create(admin_client, "east", kind="kubernetes")
    assert admin_client.delete("/api/configs/backend/east").status_code == 204
    assert list(Backend.objects.values_list("name", flat=True)) == ["default"]


# --- nodes ------------------------------------------------------------------------------------

def test_nodes_register_on_an_embedded_backend_and_filter_by_it(admin_client):
    create(admin_client, "lab", kind="embedded")
    factories.pool("team", 4)  # resources are the nodes a pool can use
    response = admin_client.post("/api/cluster/nodes",
                                 {"name": "l1", "gpus": 2, "backend": "lab"}, format="json")
    assert response.status_code == 201
    assert response.json()["backend"] == "lab"
    admin_client.post("/api/cluster/nodes", {"name": "d1", "gpus": 2}, format="json")
    assert [n["name"] for n in admin_client.get("/api/cluster/nodes?backend=lab").json()] == [
        "l1"]
    assert [n["name"] for n in admin_client.get("/api/cluster/nodes?backend=default").json()
            ] == ["d1"]
    assert [r["backend"] for r in admin_client.get("/api/resources").json()["resources"]] == [
        "default", "lab"]


@pytest.mark.parametrize(("backend", "code"), [("nowhere", "backend_not_found"),
                                               ("east", "invalid_backend")])
def test_nodes_refuse_an_unknown_or_kubernetes_backend(admin_client, backend, code):
    create(admin_client, "east", kind="kubernetes")
    before = db_state()
    response = admin_client.post("/api/cluster/nodes",
                                 {"name": "x1", "gpus": 2, "backend": backend}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == code
    assert db_state() == before


def test_delete_is_refused_while_tasks_are_bound_on_its_nodes_and_force_ends_them(
        admin_client):
    create(admin_client, "lab", kind="embedded")
    admin_client.post("/api/cluster/nodes", {"name": "l1", "gpus": 8, "backend": "lab"},
                      format="json")
    workflow = factories.running_workflow(factories.pool("team", 10), 2)
    workflow.tasks.update(node_name="l1")
    workflow.groups.update(backend="lab")  # as the loop records it at the bind
    elsewhere = factories.running_workflow(Pool.objects.get(name="team"), 2)
    before = db_state()
    response = admin_client.delete("/api/configs/backend/lab")
    assert (response.status_code, response.json()["code"]) == (409, "backend_in_use")
    assert "1 task(s) are bound on its nodes" in response.json()["detail"]
    assert db_state() == before
    assert admin_client.delete("/api/configs/backend/lab?force=true").status_code == 204
    assert list(workflow.tasks.values_list("status", "reason")) == [
        ("FAILED_BACKEND_ERROR", "backend_deleted")]
    workflow.refresh_from_db()
    assert workflow.status == "FAILED_BACKEND_ERROR"
    assert list(elsewhere.tasks.values_list("status", flat=True)) == ["RUNNING"]
    assert not Backend.objects.filter(name="lab").exists()
    assert not Node.objects.filter(backend="lab").exists()


def test_a_kubernetes_default_backend_still_takes_its_mirrored_nodes(admin_client):
    Backend.objects.filter(name="default").update(kind="kubernetes")
    node, created = node_register(name="k1", gpus=8, cpu_millis=0, memory_bytes=0, labels={})
    assert (created, node.backend) == (True, "default")
    response = admin_client.post("/api/cluster/nodes", {"name": "k2", "gpus": 8}, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_backend")
    assert list(Node.objects.values_list("name", flat=True)) == ["k1"]


def test_a_kubernetes_default_is_online_while_the_backend_process_reaches_its_cluster(
        user_client):
    Backend.objects.filter(name="default").update(kind="kubernetes")
    assert user_client.get("/api/configs/backend/default").json()["status"] == "OFFLINE"
    ClusterBackendStatus.objects.create(pk=1, ok=True, checked_at=timezone.now())
    body = user_client.get("/api/configs/backend/default").json()
    assert (body["status"], body["online"]) == ("ONLINE", True)
    ClusterBackendStatus.objects.filter(pk=1).update(ok=False)
    assert user_client.get("/api/configs/backend/default").json()["status"] == "OFFLINE"
    assert Backend.objects.get(name="default").last_heartbeat is None  # nothing written
