"""Pools and subpools through the REST API (API.md "Pools"), every error code with a
"nothing changed" check."""

from __future__ import annotations

import pytest

from pools.models import Pool, PoolEvent
from tests import factories
from tests.conftest import make_client
from workflows.models import Workflow

pytestmark = pytest.mark.django_db


def db_state() -> tuple:
    """Everything a pool request could change."""
    pools = list(Pool.objects.order_by("pk").values())
    events = PoolEvent.objects.count()
    workflows = list(Workflow.objects.order_by("pk").values_list("name", "status", "reason"))
    return pools, events, workflows


@pytest.fixture
def team(db):
    return factories.pool("team", 100)


@pytest.fixture
def team_admin(db):
    return make_client("team-admin", "osmo-team-admin")


# --- the seed's own example --------------------------------------------------------------------

def test_seed_002_example_figures(admin_client, team):
    for name, gpus in (("a", 30), ("b", 40), ("c", 20)):
        response = admin_client.post("/api/configs/pool/team/subpool",
                                     {"name": name, "quota_gpus": gpus}, format="json")
        assert response.status_code == 201, response.json()
    subpools = {p.subpool_name: p for p in Pool.objects.filter(parent=team)}
    factories.running_workflow(team, 50, "NORMAL")
    factories.running_workflow(team, 8, "LOW")
    factories.running_workflow(subpools["a"], 5, "HIGH")
    factories.running_workflow(subpools["b"], 10, "NORMAL")
    factories.running_workflow(subpools["b"], 3, "LOW")

    report = admin_client.get("/api/pool_quota").json()
    assert report["pools"] == [{
        "name": "team", "status": "ONLINE", "subpool_state": None,
        "total_quota_gpus": 100, "quota_gpus": 10, "used_gpus": 50, "total_usage_gpus": 58,
        "available_gpus": -40,
        "subpools": [
            {"name": "team--a", "status": "ONLINE", "subpool_state": "ACTIVE", "quota_gpus": 30,
             "used_gpus": 5, "total_usage_gpus": 5, "available_gpus": 25},
            {"name": "team--b", "status": "ONLINE", "subpool_state": "ACTIVE", "quota_gpus": 40,
             "used_gpus": 10, "total_usage_gpus": 13, "available_gpus": 30},
            {"name": "team--c", "status": "ONLINE", "subpool_state": "ACTIVE", "quota_gpus": 20,
             "used_gpus": 0, "total_usage_gpus": 0, "available_gpus": 20},
        ],
    }]
    assert report["resource_sum"] == {"total_quota_gpus": 100, "used_gpus": 65,
                                      "total_usage_gpus": 76, "available_gpus": 35,
                                      # the OSMO client's keys (no nodes registered here)
                                      "quota_used": 65, "quota_free": 35, "quota_limit": 100,
                                      "total_usage": 76, "total_capacity": 0, "total_free": 0}


def test_pending_and_finished_tasks_hold_no_gpus(admin_client, team):
    factories.pending_workflow(team, 7)
    finished = factories.running_workflow(team, 4)
    finished.groups.get().tasks.update(status="COMPLETED")
    row = admin_client.get("/api/pool_quota").json()["pools"][0]
    assert (row["used_gpus"], row["total_usage_gpus"], row["available_gpus"]) == (0, 0, 100)


# --- top-level pools ---------------------------------------------------------------------------

def test_put_creates_then_updates_a_pool(admin_client):
    created = admin_client.put("/api/configs/pool/research", {
        "quota_gpus": 64, "description": "Research", "limit_gpus": 96, "weight": 2,
        "priority": 120, "platforms": {"dgx-h100": {"description": "H100",
                                                    "node_selector": {"gpu": "h100"}}},
        "default_platform": "dgx-h100"}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert {k: body[k] for k in ("name", "parent", "subpool_name", "subpool_state",
                                 "quota_gpus", "limit_gpus", "weight", "priority",
                                 "default_platform", "status", "subpools")} == {
        "name": "research", "parent": None, "subpool_name": None, "subpool_state": None,
        "quota_gpus": 64, "limit_gpus": 96, "weight": 2, "priority": 120,
        "default_platform": "dgx-h100", "status": "ONLINE", "subpools": []}

    updated = admin_client.put("/api/configs/pool/research", {"quota_gpus": 80},
                               format="json")
    assert updated.status_code == 200
    assert (updated.json()["quota_gpus"], updated.json()["description"],
            updated.json()["weight"]) == (80, "Research", 2)
    history = admin_client.get("/api/configs/pool/research/history").json()
    assert [e["action"] for e in history] == ["pool_updated", "pool_created"]
    assert history[0]["actor"] == "platform-admin"
    assert (history[0]["before"]["quota_gpus"], history[0]["after"]["quota_gpus"]) == (64, 80)


@pytest.mark.parametrize("name", ["team--x", "Team", "-team", "team-", "a" * 41, "te_am", ""])
def test_put_rejects_invalid_names(admin_client, name):
    before = db_state()
    response = admin_client.put(f"/api/configs/pool/{name}", {"quota_gpus": 1}, format="json")
    if name == "":
        assert response.status_code == 404  # no such route
    else:
        assert response.status_code == 400
        assert response.json()["code"] == "invalid_name"
    assert db_state() == before


@pytest.mark.parametrize("quota", [-1, 1.5, "10", None, True])
def test_put_rejects_invalid_quota(admin_client, team, quota):
    before = db_state()
    response = admin_client.put("/api/configs/pool/team", {"quota_gpus": quota}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_quota"
    assert "quota_gpus" in response.json()["errors"]
    assert db_state() == before


def test_put_rejects_a_default_platform_that_is_not_defined(admin_client, team):
    before = db_state()
    response = admin_client.put("/api/configs/pool/team",
                                {"quota_gpus": 100, "default_platform": "nope"}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert list(response.json()["errors"]) == ["default_platform"]
    assert db_state() == before


def test_lowering_pool_quota_below_its_subpools_is_refused(admin_client, team):
    factories.subpool(team, "a", 60)
    before = db_state()
    response = admin_client.put("/api/configs/pool/team", {"quota_gpus": 59}, format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "quota_exceeds_parent"
    assert db_state() == before
    assert admin_client.put("/api/configs/pool/team", {"quota_gpus": 60},
                            format="json").status_code == 200


def test_only_platform_admins_change_top_level_pools(team, team_admin):
    before = db_state()
    assert team_admin.put("/api/configs/pool/team", {"quota_gpus": 5},
                          format="json").json()["code"] == "forbidden"
    assert team_admin.put("/api/configs/pool/new", {"quota_gpus": 5},
                          format="json").status_code == 403
    assert team_admin.delete("/api/configs/pool/team").status_code == 403
    assert db_state() == before


def test_delete_pool_refused_while_in_use_then_archived_and_reactivated(admin_client, team):
    sub = factories.subpool(team, "a", 10)
    before = db_state()
    response = admin_client.delete("/api/configs/pool/team")
    assert response.status_code == 409 and response.json()["code"] == "pool_in_use"
    assert "team--a" in response.json()["detail"]
    assert db_state() == before

    admin_client.delete("/api/configs/pool/team/subpool/a")
    workflow = factories.running_workflow(team, 2)
    before = db_state()
    response = admin_client.delete("/api/configs/pool/team")
    assert response.status_code == 409 and response.json()["code"] == "pool_in_use"
    assert db_state() == before

    Workflow.objects.filter(pk=workflow.pk).update(status="COMPLETED")
    assert admin_client.delete("/api/configs/pool/team").status_code == 204
    assert Pool.objects.filter(pk=team.pk).exists()  # never hard-deleted
    assert admin_client.get("/api/configs/pool/team").status_code == 404
    assert admin_client.get("/api/configs/pool").json() == []
    assert admin_client.get("/api/pool_quota").json()["pools"] == []
    assert admin_client.get(f"/api/configs/pool/{sub.name}").status_code == 404

    again = admin_client.put("/api/configs/pool/team", {"quota_gpus": 8}, format="json")
    assert again.status_code == 200
    actions = [e["action"] for e in admin_client.get("/api/configs/pool/team/history").json()]
    assert actions == ["pool_reactivated", "pool_archived", "subpool_archived",
                       "subpool_created", "pool_created"]


def test_delete_of_a_subpool_through_the_pool_path_points_to_the_right_one(admin_client, team):
    factories.subpool(team, "a", 10)
    before = db_state()
    response = admin_client.delete("/api/configs/pool/team--a")
    assert response.status_code == 400
    assert "/api/configs/pool/team/subpool/a" in response.json()["detail"]
    assert db_state() == before


def test_unknown_pool_is_404(admin_client):
    for path in ("/api/configs/pool/ghost", "/api/configs/pool/ghost/history",
                 "/api/configs/pool/ghost/subpool"):
        response = admin_client.get(path)
        assert response.status_code == 404
        assert response.json()["code"] == "pool_not_found"
    assert admin_client.delete("/api/configs/pool/ghost").json()["code"] == "pool_not_found"


# --- subpools ---------------------------------------------------------------------------------

def test_create_subpool_returns_the_subpool_object(team_admin, team):
    response = team_admin.post("/api/configs/pool/team/subpool", {"name": "a", "quota_gpus": 30},
                               format="json")
    assert response.status_code == 201
    body = response.json()
    assert {k: v for k, v in body.items() if k not in ("created_at", "updated_at")} == {
        "name": "a", "canonical_name": "team--a", "parent": "team", "quota_gpus": 30,
        "configured_quota_gpus": 30, "state": "ACTIVE", "used_gpus": 0, "total_usage_gpus": 0,
        "available_gpus": 30}
    pool = team_admin.get("/api/configs/pool/team--a").json()
    assert (pool["parent"], pool["subpool_name"], pool["subpool_state"], pool["quota_gpus"]) == (
        "team", "a", "ACTIVE", 30)


def test_subpools_inherit_every_parent_setting(admin_client):
    factories.pool("team", 100, description="Team pool", weight=3, priority=130,
                   platforms={"ovx": {"description": "L40", "node_selector": {"gpu": "l40"}}},
                   default_platform="ovx", limit_gpus=120)
    parent = Pool.objects.get(name="team")
    factories.subpool(parent, "a", 10)
    admin_client.put("/api/configs/pool/team", {"quota_gpus": 100, "status": "MAINTENANCE",
                                                "description": "Changed"}, format="json")
    sub = admin_client.get("/api/configs/pool/team--a").json()
    assert {k: sub[k] for k in ("description", "limit_gpus", "weight", "priority", "platforms",
                                "default_platform", "status")} == {
        "description": "Changed", "limit_gpus": 120, "weight": 3, "priority": 130,
        "platforms": {"ovx": {"description": "L40", "node_selector": {"gpu": "l40"}}},
        "default_platform": "ovx", "status": "MAINTENANCE"}


@pytest.mark.parametrize("name", ["a--b", "A", "-a", "x" * 41, 7])
def test_create_subpool_rejects_invalid_names(team_admin, team, name):
    before = db_state()
    response = team_admin.post("/api/configs/pool/team/subpool", {"name": name, "quota_gpus": 1},
                               format="json")
    assert response.status_code == 400 and response.json()["code"] == "invalid_name"
    assert db_state() == before


@pytest.mark.parametrize("quota", [-5, 2.5, "3", None])
def test_create_subpool_rejects_invalid_quota(team_admin, team, quota):
    before = db_state()
    response = team_admin.post("/api/configs/pool/team/subpool",
                               {"name": "a", "quota_gpus": quota}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "invalid_quota"
    assert db_state() == before


def test_create_subpool_error_codes(team_admin, admin_client, team):
    sub = factories.subpool(team, "a", 30)
    cases = [
        ("/api/configs/pool/ghost/subpool", {"name": "b", "quota_gpus": 1}, 404,
         "pool_not_found"),
        (f"/api/configs/pool/{sub.name}/subpool", {"name": "b", "quota_gpus": 1}, 400,
         "parent_is_subpool"),
        ("/api/configs/pool/team/subpool", {"name": "a", "quota_gpus": 1}, 409,
         "subpool_exists"),
        ("/api/configs/pool/team/subpool", {"name": "b", "quota_gpus": 71}, 409,
         "quota_exceeds_parent"),
    ]
    for path, body, status, code in cases:
        before = db_state()
        response = team_admin.post(path, body, format="json")
        assert (response.status_code, response.json()["code"]) == (status, code), path
        assert db_state() == before
    detail = team_admin.post("/api/configs/pool/team/subpool", {"name": "b", "quota_gpus": 71},
                             format="json").json()["detail"]
    assert "70 unallocated" in detail and "71 requested" in detail
    assert team_admin.post("/api/configs/pool/team/subpool", {"name": "b", "quota_gpus": 70},
                           format="json").status_code == 201


def test_a_deleting_subpool_name_is_taken_and_its_quota_is_free(admin_client, team):
    sub = factories.subpool(team, "a", 60)
    factories.running_workflow(sub, 4)
    assert admin_client.delete("/api/configs/pool/team/subpool/a").status_code == 202
    before = db_state()
    response = admin_client.post("/api/configs/pool/team/subpool", {"name": "a",
                                                                    "quota_gpus": 1},
                                 format="json")
    assert (response.status_code, response.json()["code"]) == (409, "subpool_exists")
    assert db_state() == before
    # DELETING counts as quota 0: the parent got its 60 GPUs back at once.
    assert admin_client.post("/api/configs/pool/team/subpool", {"name": "b", "quota_gpus": 100},
                             format="json").status_code == 201


def test_users_cannot_manage_subpools(team):
    user = make_client("ml-user", "osmo-team-user")
    before = db_state()
    response = user.post("/api/configs/pool/team/subpool", {"name": "a", "quota_gpus": 1},
                         format="json")
    assert (response.status_code, response.json()["code"]) == (403, "forbidden")
    factories.subpool(team, "a", 5)
    before = db_state()
    assert user.put("/api/configs/pool/team/subpool/a", {"quota_gpus": 1},
                    format="json").status_code == 403
    assert user.delete("/api/configs/pool/team/subpool/a").status_code == 403
    assert db_state() == before
    assert user.get("/api/configs/pool/team/subpool").status_code == 200


def test_reactivating_an_archived_subpool(team_admin, team):
    factories.subpool(team, "a", 30)
    assert team_admin.delete("/api/configs/pool/team/subpool/a").json()["state"] == "ARCHIVED"
    response = team_admin.post("/api/configs/pool/team/subpool", {"name": "a", "quota_gpus": 12},
                               format="json")
    assert response.status_code == 200
    assert (response.json()["state"], response.json()["quota_gpus"]) == ("ACTIVE", 12)
    assert Pool.objects.filter(parent=team).count() == 1
    actions = [e["action"] for e in team_admin.get("/api/configs/pool/team--a/history").json()]
    assert actions == ["subpool_reactivated", "subpool_archived", "subpool_created"]


def test_update_subpool_quota_soft_decrease(team_admin, team):
    sub = factories.subpool(team, "a", 30)
    factories.running_workflow(sub, 20, "HIGH")
    response = team_admin.put("/api/configs/pool/team/subpool/a", {"quota_gpus": 10},
                              format="json")
    assert response.status_code == 200
    body = response.json()
    assert (body["quota_gpus"], body["used_gpus"], body["available_gpus"]) == (10, 20, -10)
    assert Workflow.objects.get().status == "RUNNING"  # nothing is evicted
    event = team_admin.get("/api/configs/pool/team--a/history").json()[0]
    assert (event["action"], event["before"]["quota_gpus"], event["after"]["quota_gpus"]) == (
        "subpool_quota_changed", 30, 10)


def test_update_subpool_error_codes(team_admin, team):
    factories.subpool(team, "a", 30)
    factories.subpool(team, "b", 60)
    deleting = factories.subpool(team, "d", 5)
    factories.running_workflow(deleting, 1)
    team_admin.delete("/api/configs/pool/team/subpool/d")
    factories.subpool(team, "z", 1)
    team_admin.delete("/api/configs/pool/team/subpool/z")
    cases = [
        ("a", {"quota_gpus": 41}, 409, "quota_exceeds_parent"),
        ("d", {"quota_gpus": 1}, 409, "subpool_not_active"),
        ("z", {"quota_gpus": 1}, 409, "subpool_not_active"),
        ("nope", {"quota_gpus": 1}, 404, "subpool_not_found"),
        ("a", {"quota_gpus": -1}, 400, "invalid_quota"),
        ("a", {"quota_gpus": 0.5}, 400, "invalid_quota"),
    ]
    for name, body, status, code in cases:
        before = db_state()
        response = team_admin.put(f"/api/configs/pool/team/subpool/{name}", body, format="json")
        assert (response.status_code, response.json()["code"]) == (status, code), name
        assert db_state() == before
    assert team_admin.put("/api/configs/pool/team/subpool/a", {"quota_gpus": 40},
                          format="json").status_code == 200
    before = db_state()
    response = team_admin.delete("/api/configs/pool/team/subpool/nope")
    assert (response.status_code, response.json()["code"]) == (404, "subpool_not_found")
    assert db_state() == before


def test_delete_idle_subpool_archives_at_once(team_admin, team):
    factories.subpool(team, "a", 30)
    response = team_admin.delete("/api/configs/pool/team/subpool/a")
    assert response.status_code == 200
    assert (response.json()["state"], response.json()["quota_gpus"],
            response.json()["configured_quota_gpus"]) == ("ARCHIVED", 0, 30)
    assert Pool.objects.get(name="team--a").subpool_state == "ARCHIVED"


def test_delete_with_running_work_drains_and_cancels_what_has_not_started(team_admin, team):
    sub = factories.subpool(team, "a", 30)
    running = factories.running_workflow(sub, 6, tasks=2)
    waiting = factories.pending_workflow(sub, 4)
    response = team_admin.delete("/api/configs/pool/team/subpool/a")
    assert response.status_code == 202
    body = response.json()
    assert (body["state"], body["quota_gpus"], body["used_gpus"], body["available_gpus"]) == (
        "DELETING", 0, 6, -6)
    assert body["drain"] == {"running_workflows": 1, "gpus_held": 6}
    running.refresh_from_db()
    waiting.refresh_from_db()
    assert (running.status, running.reason) == ("RUNNING", None)
    assert (waiting.status, waiting.reason) == ("FAILED_CANCELED", "subpool_deleted")
    assert set(waiting.groups.get().tasks.values_list("status", flat=True)) == {
        "FAILED_CANCELED"}

    listed = team_admin.get("/api/configs/pool/team/subpool?state=DELETING").json()
    assert [(s["name"], s["drain"]) for s in listed] == [
        ("a", {"running_workflows": 1, "gpus_held": 6})]
    assert team_admin.get("/api/configs/pool/team/subpool?state=ACTIVE").json() == []

    # Idempotent: deleting again reports the current state.
    before = db_state()
    again = team_admin.delete("/api/configs/pool/team/subpool/a")
    assert (again.status_code, again.json()["state"]) == (200, "DELETING")
    assert db_state() == before


def test_delete_with_only_unstarted_work_cancels_it_and_archives(team_admin, team):
    sub = factories.subpool(team, "a", 30)
    waiting = factories.pending_workflow(sub, 4)
    response = team_admin.delete("/api/configs/pool/team/subpool/a")
    assert (response.status_code, response.json()["state"]) == (200, "ARCHIVED")
    waiting.refresh_from_db()
    assert (waiting.status, waiting.reason) == ("FAILED_CANCELED", "subpool_deleted")


def test_subpool_list_filters_and_rejects_unknown_states(team_admin, team):
    factories.subpool(team, "a", 1)
    factories.subpool(team, "b", 1)
    team_admin.delete("/api/configs/pool/team/subpool/b")
    assert [s["name"] for s in team_admin.get("/api/configs/pool/team/subpool").json()] == [
        "a", "b"]
    assert [s["name"] for s in
            team_admin.get("/api/configs/pool/team/subpool?state=ARCHIVED").json()] == ["b"]
    response = team_admin.get("/api/configs/pool/team/subpool?state=GONE")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")


def test_pool_quota_hides_archived_subpools_unless_asked(admin_client, team):
    factories.subpool(team, "a", 1)
    factories.subpool(team, "b", 2)
    admin_client.delete("/api/configs/pool/team/subpool/b")
    rows = admin_client.get("/api/pool_quota").json()["pools"][0]["subpools"]
    assert [r["name"] for r in rows] == ["team--a"]
    rows = admin_client.get("/api/pool_quota?include_archived=true").json()["pools"][0][
        "subpools"]
    assert [(r["name"], r["subpool_state"], r["quota_gpus"]) for r in rows] == [
        ("team--a", "ACTIVE", 1), ("team--b", "ARCHIVED", 0)]


def test_pool_list_carries_subpools(admin_client, team):
    factories.subpool(team, "a", 10)
    factories.pool("other", 5)
    listed = admin_client.get("/api/configs/pool").json()
    assert [(p["name"], p["unallocated_gpus"], [s["canonical_name"] for s in p["subpools"]])
            for p in listed] == [("other", 5, []), ("team", 90, ["team--a"])]


@pytest.mark.parametrize("parents", [1, 12])
def test_list_endpoints_use_a_fixed_number_of_queries(admin_client, django_assert_num_queries,
                                                      parents):
    for index in range(parents):
        parent = factories.pool(f"p{index}", 100)
        for sub in range(3):
            factories.running_workflow(factories.subpool(parent, f"s{sub}", 10), 2)
    # the token with its user's groups + pools + one usage aggregate (+ the nodes with their
    # usage for the quota report's node sets), whatever the size
    with django_assert_num_queries(4):
        assert len(admin_client.get("/api/pool_quota").json()["pools"]) == parents
    with django_assert_num_queries(3):
        assert len(admin_client.get("/api/configs/pool").json()) == parents
    with django_assert_num_queries(4):  # + the parent's lookup
        assert len(admin_client.get("/api/configs/pool/p0/subpool").json()) == 3


def test_an_unchanged_subpool_quota_is_a_no_op(team_admin, team):
    factories.subpool(team, "a", 30)
    before = db_state()
    response = team_admin.put("/api/configs/pool/team/subpool/a", {"quota_gpus": 30},
                              format="json")
    assert (response.status_code, response.json()["quota_gpus"]) == (200, 30)
    assert db_state() == before  # no audit event for a change that changes nothing


def test_the_database_refuses_subpools_beyond_the_parent_quota(team):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        Pool.objects.filter(pk=team.pk).update(allocated_gpus=101)
