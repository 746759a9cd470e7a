"""Pool request bodies and queries go through their serializers: a wrong shape is a 400 with the
contract's code, `errors` naming the field, and nothing written."""

from __future__ import annotations

import pytest

from pools.models import Pool
from tests import factories
from tests.conftest import make_client
from tests.pools.test_pool_api import db_state
from tests.shapes import refused

pytestmark = pytest.mark.django_db

INT32_MAX = 2**31 - 1


@pytest.fixture
def team(db):
    return factories.pool("team", 100)


@pytest.fixture
def team_admin(db):
    return make_client("lead", "osmo-team-admin")


@pytest.mark.parametrize(("body", "code", "field"), [
    ({"quota_gpus": "10"}, "invalid_quota", "quota_gpus"),            # a string for an int
    ({"quota_gpus": [10]}, "invalid_quota", "quota_gpus"),
    ({"quota_gpus": 1.0}, "invalid_quota", "quota_gpus"),             # a float, even whole
    ({}, "invalid_quota", "quota_gpus"),                              # missing
    ({"quota_gpus": INT32_MAX + 1}, "invalid_quota", "quota_gpus"),   # beyond the column
    ({"quota_gpus": 10, "limit_gpus": "none"}, "invalid_quota", "limit_gpus"),
    ({"quota_gpus": 10, "limit_gpus": -2}, "invalid_quota", "limit_gpus"),
    ({"quota_gpus": 10, "weight": -1}, "invalid_request", "weight"),
    ({"quota_gpus": 10, "weight": True}, "invalid_request", "weight"),
    ({"quota_gpus": 10, "priority": "high"}, "invalid_request", "priority"),
    ({"quota_gpus": 10, "status": "ASLEEP"}, "invalid_request", "status"),   # unknown enum
    ({"quota_gpus": 10, "status": None}, "invalid_request", "status"),
    ({"quota_gpus": 10, "description": {"text": "x"}}, "invalid_request", "description"),
    ({"quota_gpus": 10, "platforms": ["dgx"]}, "invalid_request", "platforms"),  # list for obj
    ({"quota_gpus": 10, "platforms": {"Bad_Name": {}}}, "invalid_request",
     "platforms.Bad_Name"),
    ({"quota_gpus": 10, "platforms": {"dgx": {"gpu": "h100"}}}, "invalid_request",
     "platforms.dgx.gpu"),
    ({"quota_gpus": 10, "platforms": {"dgx": {"node_selector": {"gpu": 1}}}},
     "invalid_request", "platforms.dgx.node_selector"),
    ({"quota_gpus": 10, "platforms": {"dgx": {"node_selector": {"bad key!": "x"}}}},
     "invalid_request", "platforms.dgx.node_selector"),
])
def test_pool_upsert_refuses_wrong_shapes(admin_client, team, body, code, field):
    before = db_state()
    refused(admin_client.put("/api/configs/pool/team", body, format="json"), code, field)
    refused(admin_client.put("/api/configs/pool/fresh", body, format="json"), code, field)
    assert db_state() == before


def test_pool_upsert_body_must_be_an_object(admin_client, team):
    before = db_state()
    response = admin_client.put("/api/configs/pool/team", [{"quota_gpus": 1}], format="json")
    refused(response, "invalid_request", "non_field_errors")
    assert db_state() == before


def test_the_first_wrong_field_decides_the_code(admin_client, team):
    before = db_state()
    response = admin_client.put("/api/configs/pool/team",
                                {"quota_gpus": -1, "weight": "heavy"}, format="json")
    refused(response, "invalid_quota", "quota_gpus")
    assert set(response.json()["errors"]) == {"quota_gpus", "weight"}
    # The path's name is checked before the body, as the service always did.
    response = admin_client.put("/api/configs/pool/Bad", {"quota_gpus": "x"}, format="json")
    assert response.json()["code"] == "invalid_name"
    assert db_state() == before


def test_validated_settings_reach_the_service(admin_client, team):
    response = admin_client.put("/api/configs/pool/team", {
        "quota_gpus": 100, "limit_gpus": None, "weight": 3, "priority": -5,
        "description": "  spaced  ", "status": "OFFLINE",
        "platforms": {"dgx": {"description": "H100", "node_selector": {"gpu": "h100"}}},
        "default_platform": "dgx"}, format="json")
    assert response.status_code == 200, response.json()
    team.refresh_from_db()
    assert (team.limit_gpus, team.weight, team.priority, team.description, team.status,
            team.platforms, team.default_platform) == (
        -1, 3, -5, "  spaced  ", "OFFLINE",
        {"dgx": {"description": "H100", "node_selector": {"gpu": "h100"}}}, "dgx")


@pytest.mark.parametrize(("body", "code", "field"), [
    ({"name": 7, "quota_gpus": 1}, "invalid_name", "name"),          # an int for a string
    ({"name": ["a"], "quota_gpus": 1}, "invalid_name", "name"),
    ({"quota_gpus": 1}, "invalid_name", "name"),                     # missing
    ({"name": "a", "quota_gpus": "1"}, "invalid_quota", "quota_gpus"),
    ({"name": "a", "quota_gpus": {"gpus": 1}}, "invalid_quota", "quota_gpus"),
    ({"name": "a"}, "invalid_quota", "quota_gpus"),
    ({"name": "a", "quota_gpus": INT32_MAX + 1}, "invalid_quota", "quota_gpus"),
])
def test_subpool_create_refuses_wrong_shapes(team_admin, team, body, code, field):
    before = db_state()
    refused(team_admin.post("/api/configs/pool/team/subpool", body, format="json"), code, field)
    assert db_state() == before


def test_subpool_create_checks_the_parent_before_the_body(team_admin, team):
    sub = factories.subpool(team, "a", 1)
    before = db_state()
    response = team_admin.post(f"/api/configs/pool/{sub.name}/subpool", {"name": 7},
                               format="json")
    assert (response.status_code, response.json()["code"]) == (400, "parent_is_subpool")
    response = team_admin.post("/api/configs/pool/ghost/subpool", "[]",
                               content_type="application/json")
    assert (response.status_code, response.json()["code"]) == (404, "pool_not_found")
    assert db_state() == before


@pytest.mark.parametrize("body", [{"quota_gpus": "5"}, {"quota_gpus": None}, {}, [5],
                                  {"quota_gpus": False}])
def test_subpool_update_refuses_wrong_shapes(team_admin, team, body):
    factories.subpool(team, "a", 10)
    before = db_state()
    response = team_admin.put("/api/configs/pool/team/subpool/a", body, format="json")
    refused(response, "invalid_quota" if isinstance(body, dict) else "invalid_request",
            "quota_gpus" if isinstance(body, dict) else "non_field_errors")
    assert db_state() == before


def test_list_queries_are_validated(admin_client, team):
    factories.subpool(team, "a", 1)
    response = admin_client.get("/api/configs/pool/team/subpool?state=active")
    refused(response, "invalid_request", "state")
    assert [s["name"] for s in
            admin_client.get("/api/configs/pool/team/subpool?state=ACTIVE").json()] == ["a"]
    refused(admin_client.get("/api/configs/pool/team/history?limit=ten"),
            "invalid_request", "limit")
    assert len(admin_client.get("/api/configs/pool/team/history?limit=0").json()) == 1
    refused(admin_client.get("/api/pool_quota?include_archived=maybe"),
            "invalid_request", "include_archived")
    assert admin_client.get("/api/pool_quota?include_archived=YES").status_code == 200


def test_the_admin_form_checks_types_with_the_same_serializer(client):
    from django.contrib.auth import get_user_model

    staff = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(staff)
    team = factories.pool("team", 100)
    before = db_state()
    response = client.post(f"/admin/pools/pool/{team.pk}/change/", {
        "quota_gpus": "100", "limit_gpus": "-1", "weight": "1", "priority": "100",
        "description": "", "platforms": '["not", "an", "object"]', "default_platform": "",
        "status": "ONLINE", "subpools-TOTAL_FORMS": "0", "subpools-INITIAL_FORMS": "0",
        "events-TOTAL_FORMS": "0", "events-INITIAL_FORMS": "0"})
    assert response.status_code == 200
    assert "Expected a dictionary" in response.content.decode()
    assert db_state() == before
    assert Pool.objects.get(pk=team.pk).platforms == {}
