"""Config history (OSMO's `/api/configs/history`, `/api/configs/diff`, the rollback) for POOL
and BACKEND: every change through the API and the services is a revision; a rollback goes
through the same services and is refused as their updates are, with nothing changed."""

from __future__ import annotations

import pytest

from pools.models import Pool, PoolEvent
from scheduler.models import Backend, BackendEvent
from tests import factories
from tests.conftest import make_client

pytestmark = pytest.mark.django_db


def history(client, **params) -> list[dict]:
    response = client.get("/api/configs/history", params)
    assert response.status_code == 200, response.content
    return response.json()["configs"]


def db_state() -> tuple:
    return (list(Pool.objects.order_by("pk").values()), PoolEvent.objects.count(),
            list(Backend.objects.order_by("pk").values()), BackendEvent.objects.count())


@pytest.fixture
def team(admin_client):
    response = admin_client.put("/api/configs/pool/team", {"quota_gpus": 10}, format="json")
    assert response.status_code == 201
    for name, gpus in (("a", 8), ("b", 2)):
        response = admin_client.post("/api/configs/pool/team/subpool",
                                     {"name": name, "quota_gpus": gpus}, format="json")
        assert response.status_code == 201
    return Pool.objects.get(name="team")


def test_every_pool_change_is_a_revision_with_who_what_and_the_config(admin_client, team):
    admin_client.put("/api/configs/pool/team/subpool/a", {"quota_gpus": 3}, format="json")
    rows = history(admin_client, config_types="POOL", omit_data="True", order="DESC")
    assert [(r["revision"], r["name"], r["action"]) for r in rows] == [
        (4, "team--a", "subpool_quota_changed"), (3, "team--b", "subpool_created"),
        (2, "team--a", "subpool_created"), (1, "team", "pool_created")]
    latest = rows[0]
    assert latest["config_type"] == "POOL"
    assert latest["username"] == "platform-admin"
    assert latest["description"] == "Subpool quota changed: team--a"
    assert latest["tags"] == []
    assert latest["diff"] == {"quota_gpus": {"before": 8, "after": 3}}
    assert latest["after"] == {"name": "team--a", "subpool_name": "a", "state": "ACTIVE",
                               "quota_gpus": 3}
    assert latest["data"] is None

    [with_data] = history(admin_client, config_types="POOL", revision=2)
    assert sorted(with_data["data"]["pools"]) == ["team", "team--a"]
    assert with_data["data"]["pools"]["team--a"]["quota_gpus"] == 8
    assert with_data["data"]["pools"]["team"]["quota_gpus"] == 10


def test_backend_changes_are_revisions_and_deleted_backends_stay_in_history(admin_client):
    assert admin_client.post("/api/configs/backend/east", {"kind": "kubernetes"},
                             format="json").status_code == 201
    assert admin_client.patch("/api/configs/backend/east", {"maintenance": True},
                              format="json").status_code == 200
    assert admin_client.delete("/api/configs/backend/east").status_code == 204
    rows = history(admin_client, config_types="BACKEND", name="east", omit_data="true")
    assert [(r["revision"], r["action"]) for r in rows] == [
        (2, "backend_created"), (3, "backend_maintenance_set"), (4, "backend_deleted")]
    assert rows[1]["diff"] == {"maintenance": {"before": False, "after": True}}
    assert rows[2]["after"] is None
    # Revision 1 is the `default` backend every installation has.
    [first] = history(admin_client, config_types="BACKEND", revision=1)
    assert first["name"] == "default" and first["username"] == "(system)"
    [created] = history(admin_client, config_types="BACKEND", revision=2)
    assert [b["name"] for b in created["data"]] == ["default", "east"]
    [deleted] = history(admin_client, config_types="BACKEND", revision=4)
    assert [b["name"] for b in deleted["data"]] == ["default"]


def test_diff_between_two_revisions(admin_client, team):
    admin_client.put("/api/configs/pool/team/subpool/a", {"quota_gpus": 3}, format="json")
    response = admin_client.get("/api/configs/diff", {"config_type": "POOL",
                                                      "first_revision": 2,
                                                      "second_revision": 4})
    assert response.status_code == 200
    body = response.json()
    assert sorted(body["first_data"]["pools"]) == ["team", "team--a"]
    assert sorted(body["second_data"]["pools"]) == ["team", "team--a", "team--b"]
    assert body["diff"]["team--a"] == {"quota_gpus": {"before": 8, "after": 3}}
    assert body["diff"]["team--b"]["quota_gpus"] == {"before": None, "after": 2}
    assert "team" not in body["diff"]
    missing = admin_client.get("/api/configs/diff", {"config_type": "POOL",
                                                     "first_revision": 2,
                                                     "second_revision": 99})
    assert missing.status_code == 404
    assert missing.json()["code"] == "revision_not_found"


def test_rollback_restores_through_the_services_as_a_new_revision(admin_client, team):
    admin_client.put("/api/configs/pool/team/subpool/a", {"quota_gpus": 3}, format="json")
    response = admin_client.post("/api/configs/history/rollback",
                                 {"config_type": "POOL", "revision": 2,
                                  "description": "back to 8", "tags": ["undo"]},
                                 format="json")
    assert response.status_code == 200, response.content
    [written] = response.json()["configs"]
    assert written["revision"] == 5
    assert written["name"] == "team--a"
    assert written["action"] == "subpool_quota_changed"
    assert written["description"] == "Roll back POOL to r2: back to 8"
    assert written["tags"] == ["undo"]
    assert written["diff"] == {"quota_gpus": {"before": 3, "after": 8}}
    assert Pool.objects.get(name="team--a").quota_gpus == 8
    assert Pool.objects.get(name="team").allocated_gpus == 10
    assert history(admin_client, tags="undo", omit_data="true")[0]["revision"] == 5


def test_rollback_above_the_parents_unallocated_share_is_refused_and_changes_nothing(
        admin_client, team):
    admin_client.put("/api/configs/pool/team/subpool/a", {"quota_gpus": 3}, format="json")
    admin_client.put("/api/configs/pool/team/subpool/b", {"quota_gpus": 7}, format="json")
    before = db_state()
    response = admin_client.post("/api/configs/history/rollback",
                                 {"config_type": "POOL", "revision": 2}, format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "quota_exceeds_parent"
    assert db_state() == before


def test_rollback_of_a_pool_quota_below_its_subpools_is_refused(admin_client):
    admin_client.put("/api/configs/pool/team", {"quota_gpus": 4}, format="json")
    admin_client.put("/api/configs/pool/team", {"quota_gpus": 10}, format="json")
    admin_client.post("/api/configs/pool/team/subpool", {"name": "a", "quota_gpus": 8},
                      format="json")
    before = db_state()
    response = admin_client.post("/api/configs/history/rollback",
                                 {"config_type": "POOL", "revision": 1}, format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "quota_exceeds_parent"
    assert db_state() == before


def test_rollback_of_a_deleted_subpool_archives_it_and_of_its_creation_brings_it_back(
        admin_client, team):
    admin_client.delete("/api/configs/pool/team/subpool/b")
    assert Pool.objects.get(name="team--b").subpool_state == "ARCHIVED"
    response = admin_client.post("/api/configs/history/rollback",
                                 {"config_type": "POOL", "revision": 3}, format="json")
    assert response.status_code == 200
    assert [r["action"] for r in response.json()["configs"]] == ["subpool_reactivated"]
    assert Pool.objects.get(name="team--b").subpool_state == "ACTIVE"
    response = admin_client.post("/api/configs/history/rollback",
                                 {"config_type": "POOL", "revision": 4}, format="json")
    assert [r["action"] for r in response.json()["configs"]] == ["subpool_archived"]
    assert Pool.objects.get(name="team--b").subpool_state == "ARCHIVED"


def test_rollback_to_the_current_config_writes_nothing(admin_client, team):
    before = db_state()
    response = admin_client.post("/api/configs/history/rollback",
                                 {"config_type": "POOL", "revision": 3}, format="json")
    assert response.status_code == 200
    assert response.json() == {"configs": []}
    assert db_state() == before


def test_rollback_of_a_backend_delete_is_refused_while_a_pool_names_it(admin_client):
    admin_client.post("/api/configs/backend/east", {"kind": "kubernetes"}, format="json")
    admin_client.delete("/api/configs/backend/east")
    response = admin_client.post("/api/configs/history/rollback",
                                 {"config_type": "BACKEND", "revision": 2}, format="json")
    assert response.status_code == 200
    assert Backend.objects.filter(name="east").exists()
    factories.pool("team", 4, backends=["east"])
    before = db_state()
    response = admin_client.post("/api/configs/history/rollback",
                                 {"config_type": "BACKEND", "revision": 3}, format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "backend_in_use"
    assert db_state() == before


def test_history_is_paginated_and_bounded(admin_client):
    for quota in range(1, 31):
        factories.pool("team", quota)
    page = history(admin_client, config_types="POOL", omit_data="true", limit=10, offset=5,
                   order="DESC")
    assert [r["revision"] for r in page] == list(range(25, 15, -1))
    ascending = history(admin_client, config_types="POOL", omit_data="true", limit=3)
    assert [r["revision"] for r in ascending] == [28, 29, 30]  # the newest, oldest first
    assert len(history(admin_client, config_types="POOL")) == 20  # the default page
    for params, field in (({"limit": 1001, "omit_data": "true"}, "limit"),
                          ({"limit": 21}, "limit"), ({"limit": 0}, "limit"),
                          ({"offset": -1}, "offset"), ({"config_types": "NOPE"},
                                                       "config_types"),
                          ({"at_timestamp": "2026-01-01T00:00:00Z",
                            "created_after": "2025-01-01T00:00:00Z"}, "at_timestamp")):
        response = admin_client.get("/api/configs/history", params)
        assert response.status_code == 400, params
        body = response.json()
        assert body["code"] == "invalid_request"
        assert [key.split(".")[0] for key in body["errors"]] == [field], body


def test_osmos_other_config_types_filter_to_nothing(admin_client, team):
    assert history(admin_client, config_types=["SERVICE", "ROLE"]) == []
    rows = history(admin_client, config_types=["SERVICE", "POOL"], omit_data="true")
    assert {r["config_type"] for r in rows} == {"POOL"}


def test_at_timestamp_gives_each_types_revision_in_force(admin_client, team):
    rows = history(admin_client, omit_data="true", at_timestamp="2999-01-01T00:00:00Z")
    assert sorted((r["config_type"], r["revision"]) for r in rows) == [("BACKEND", 1),
                                                                       ("POOL", 3)]
    assert history(admin_client, at_timestamp="2000-01-01T00:00:00Z") == []


def test_only_platform_admins_read_and_roll_back(team, admin_client):
    pool_admin = make_client("team-admin", "osmo-team-admin")
    before = db_state()
    for response in (pool_admin.get("/api/configs/history"),
                     pool_admin.get("/api/configs/diff", {"config_type": "POOL",
                                                          "first_revision": 1,
                                                          "second_revision": 2}),
                     pool_admin.post("/api/configs/history/rollback",
                                     {"config_type": "POOL", "revision": 2}, format="json")):
        assert response.status_code == 403
        assert response.json()["code"] == "forbidden"
    assert db_state() == before


def test_bad_rollback_bodies_are_400_and_change_nothing(admin_client, team):
    before = db_state()
    for body in ({"config_type": "SERVICE", "revision": 1}, {"config_type": "POOL"},
                 {"config_type": "POOL", "revision": 0},
                 {"config_type": "POOL", "revision": "2"},
                 {"config_type": "POOL", "revision": 2, "tags": ["not a tag"]},
                 {"config_type": "POOL", "revision": 2, "description": "x" * 1001}):
        response = admin_client.post("/api/configs/history/rollback", body, format="json")
        assert response.status_code == 400, body
        assert response.json()["code"] == "invalid_request"
    response = admin_client.post("/api/configs/history/rollback",
                                 {"config_type": "POOL", "revision": 99}, format="json")
    assert response.status_code == 404
    assert response.json()["code"] == "revision_not_found"
    assert db_state() == before


def test_admin_edits_are_revisions_too(team):
    from django.test import Client

    from osmo.accounts import services as accounts

    accounts.user_ensure(username="root", superuser=True, groups=[])
    browser = Client()
    browser.force_login(accounts.user_ensure(username="root", superuser=True, groups=[]))
    response = browser.post("/admin/scheduler/backend/add/", {
        "name": "west", "kind": "embedded", "placement": "osmo", "k8s_namespace": "osmo",
        "scheduler_name": "", "description": "", "maintenance": "on"})
    assert response.status_code == 302, response.content[:2000]
    [event] = BackendEvent.objects.filter(backend_name="west")
    assert event.action == "backend_created" and event.actor_name == "root"
    assert event.after["maintenance"] is True


def test_tags_are_set_and_deleted_on_a_revision(admin_client, team):
    url = "/api/configs/history/pool/revision/2/tags"
    response = admin_client.post(url, {"set_tags": ["stable", "q4"]}, format="json")
    assert response.status_code == 200
    assert response.json()["tags"] == ["q4", "stable"]
    response = admin_client.post(url, {"delete_tags": ["q4"]}, format="json")
    assert response.json()["tags"] == ["stable"]
    assert PoolEvent.objects.get(revision=2).tags == ["stable"]
    before = db_state()
    for path, body, status, code in (
            (url, {}, 400, "invalid_request"),
            (url, {"set_tags": ["bad tag"]}, 400, "invalid_request"),
            (url, {"set_tags": [f"t{i}" for i in range(16)]}, 400, "invalid_request"),
            ("/api/configs/history/service/revision/2/tags", {"set_tags": ["x"]}, 400,
             "invalid_request"),
            ("/api/configs/history/pool/revision/99/tags", {"set_tags": ["x"]}, 404,
             "revision_not_found"),
            ("/api/configs/history/pool/revision/99999999999999999999/tags",
             {"set_tags": ["x"]}, 404, "revision_not_found")):
        response = admin_client.post(path, body, format="json")
        assert (response.status_code, response.json()["code"]) == (status, code), path
    assert db_state() == before
    assert PoolEvent.objects.get(revision=2).tags == ["stable"]


def test_osmos_config_update_shapes_change_with_their_description(admin_client, team):
    response = admin_client.patch("/api/configs/pool/team", {
        "configs_dict": {"quota_gpus": 12, "weight": 3}, "description": "grow",
        "tags": ["q4"]}, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["quota_gpus"], response.json()["weight"]) == (12, 3)
    [revision] = history(admin_client, config_types="POOL", order="DESC", limit=1,
                         omit_data="true")
    assert (revision["description"], revision["tags"], revision["diff"]) == (
        "grow", ["q4"], {"quota_gpus": {"before": 10, "after": 12},
                         "weight": {"before": 1, "after": 3}})
    admin_client.post("/api/configs/backend/east", {"kind": "kubernetes"}, format="json")
    response = admin_client.post("/api/configs/backend/east", {
        "configs": {"description": "the east cluster"}, "description": "say what it is"},
        format="json")
    assert response.status_code == 200, response.content
    assert Backend.objects.get(name="east").description == "the east cluster"
    [revision] = history(admin_client, config_types="BACKEND", order="DESC", limit=1,
                         omit_data="true")
    assert (revision["description"], revision["diff"]) == (
        "say what it is", {"description": {"before": "", "after": "the east cluster"}})


def test_osmos_config_update_refusals_change_nothing(admin_client, team):
    before = db_state()
    for method, path, body, status, code in (
            ("patch", "/api/configs/pool/team", {"configs_dict": {"used_gpus": 3}}, 400,
             "invalid_request"),
            ("patch", "/api/configs/pool/team", {"configs_dict": {"quota_gpus": 9}}, 409,
             "quota_exceeds_parent"),
            ("patch", "/api/configs/pool/team", {"configs_dict": {"quota_gpus": -1}}, 400,
             "invalid_quota"),
            ("patch", "/api/configs/pool/team", {"quota_gpus": 12}, 400, "invalid_request"),
            ("patch", "/api/configs/pool/team--a", {"configs_dict": {"quota_gpus": 1}}, 400,
             "invalid_request"),
            ("patch", "/api/configs/pool/nope", {"configs_dict": {"quota_gpus": 1}}, 404,
             "pool_not_found"),
            ("post", "/api/configs/backend/default", {"configs": {"status": "x"}}, 400,
             "invalid_backend"),
            ("post", "/api/configs/backend/default", {"configs": {}, "tags": ["a b"]}, 400,
             "invalid_backend")):
        response = getattr(admin_client, method)(path, body, format="json")
        assert (response.status_code, response.json()["code"]) == (status, code), (path, body)
    assert db_state() == before
    pool_admin = make_client("team-admin", "osmo-team-admin")
    response = pool_admin.patch("/api/configs/pool/team", {"configs_dict": {"weight": 2}},
                                format="json")
    assert response.status_code == 403
    assert db_state() == before


def test_a_forced_backend_delete_is_a_revision_of_each_pool_it_leaves_and_of_itself(
        admin_client):
    admin_client.post("/api/configs/backend/east", {"kind": "kubernetes"}, format="json")
    factories.pool("lab", 4, backends=["east", "default"])
    factories.pool("team", 4, backends=["east"])
    response = admin_client.delete("/api/configs/backend/east?force=true")
    assert response.status_code == 204
    pools = history(admin_client, config_types="POOL", order="DESC", limit=2, omit_data="true")
    assert sorted((r["name"], r["action"], r["username"]) for r in pools) == [
        ("lab", "pool_updated", "platform-admin"), ("team", "pool_updated", "platform-admin")]
    assert {r["name"]: r["diff"]["backends"]["after"] for r in pools} == {
        "lab": ["default"], "team": []}
    [deleted] = history(admin_client, config_types="BACKEND", order="DESC", limit=1)
    assert (deleted["name"], deleted["action"], deleted["after"]) == (
        "east", "backend_deleted", None)
    assert [b["name"] for b in deleted["data"]] == ["default"]
    # Rolled back, the backend comes back; the pools keep what they have now.
    response = admin_client.post("/api/configs/history/rollback",
                                 {"config_type": "BACKEND", "revision": 2}, format="json")
    assert [r["action"] for r in response.json()["configs"]] == ["backend_created"]
    assert Pool.objects.get(name="lab").backends == ["default"]


def test_history_query_values_out_of_shape_are_400(admin_client):
    for params in ({"created_before": "yesterday"}, {"name": "x" * 83},
                   {"tags": "t" * 64}, {"revision": "0"}, {"order": "sideways"},
                   {"omit_data": "maybe"}, {"limit": "٣"}):
        response = admin_client.get("/api/configs/history", params)
        assert (response.status_code, response.json()["code"]) == (400, "invalid_request"), \
            params


def test_a_history_page_costs_the_same_queries_for_10_or_100_revisions(admin_client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for quota in range(1, 101):
        factories.pool("team", quota)

    def statements(limit: int) -> int:
        with CaptureQueriesContext(connection) as captured:
            rows = history(admin_client, omit_data="true", limit=limit)
        assert len(rows) == limit
        return len(captured.captured_queries)

    assert statements(10) == statements(100)
