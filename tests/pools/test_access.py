"""Tokens and roles (API.md "Authentication and roles")."""

from __future__ import annotations

import hashlib

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from osmo.accounts.models import AccessToken
from tests import factories
from tests.conftest import make_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def pools(db):
    team = factories.pool("team", 10)
    factories.subpool(team, "a", 5)
    factories.pool("team2", 10)
    factories.pool("other", 10)


def visible(client) -> list[str]:
    names = []
    for pool in client.get("/api/configs/pool").json():
        names.append(pool["name"])
        names.extend(s["canonical_name"] for s in pool["subpools"])
    return names


def test_no_token_and_bad_token_are_401():
    for client in (APIClient(), APIClient(HTTP_AUTHORIZATION="Bearer nope"),
                   APIClient(HTTP_AUTHORIZATION="Bearer")):
        response = client.get("/api/configs/pool")
        assert response.status_code == 401
        assert response.json()["code"] == "not_authenticated"
        assert response["WWW-Authenticate"] == "Bearer"


def test_issue_token_prints_only_the_token_and_stores_only_its_digest(capsys):
    call_command("issue_token", "bob", "--group", "osmo-team-user", "--group", "osmo-x-admin")
    raw = capsys.readouterr().out.strip()
    assert "\n" not in raw and raw.startswith("osmo_")
    token = AccessToken.objects.get()
    assert token.digest == hashlib.sha256(raw.encode()).hexdigest()
    assert raw not in (token.digest, token.prefix)
    assert sorted(token.user.groups.values_list("name", flat=True)) == [
        "osmo-team-user", "osmo-x-admin"]
    whoami = APIClient(HTTP_AUTHORIZATION=f"Bearer {raw}").get("/api/whoami")
    assert whoami.status_code == 200 and whoami.json()["user"] == "bob"

    call_command("issue_token", "bob")  # a second token: both stay valid
    second = capsys.readouterr().out.strip()
    assert APIClient(HTTP_AUTHORIZATION=f"Bearer {second}").get("/api/whoami").status_code == 200
    assert APIClient(HTTP_AUTHORIZATION=f"Bearer {raw}").get("/api/whoami").status_code == 200

    call_command("issue_token", "bob", "--revoke-all")
    assert capsys.readouterr().out == ""
    for value in (raw, second):
        assert APIClient(HTTP_AUTHORIZATION=f"Bearer {value}").get(
            "/api/whoami").status_code == 401


def test_superuser_flag_makes_a_platform_admin(capsys):
    call_command("issue_token", "root-admin", "--superuser")
    raw = capsys.readouterr().out.strip()
    client = APIClient(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.put("/api/configs/pool/fresh", {"quota_gpus": 1},
                      format="json").status_code == 201


def test_prefix_patterns_cover_pools_and_their_subpools(pools):
    user = make_client("u", "osmo-team*-user")
    assert visible(user) == ["team", "team--a", "team2"]
    assert user.get("/api/configs/pool/other").status_code == 404
    assert user.get("/api/configs/pool/team--a").status_code == 200
    assert user.get("/api/whoami").json()["pools"] == {"team": "user", "team2": "user"}


def test_exact_role_and_inheritance_to_subpools(pools):
    user = make_client("u", "osmo-team-user")
    assert visible(user) == ["team", "team--a"]
    assert user.get("/api/configs/pool/team2").json()["code"] == "pool_not_found"


def test_subpool_specific_groups_grant_nothing(pools):
    user = make_client("u", "osmo-team--a-user", "osmo-team--a-admin")
    assert visible(user) == []
    assert user.get("/api/configs/pool/team--a").status_code == 404
    assert user.get("/api/pool_quota").json()["pools"] == []


def test_pool_admin_manages_only_its_own_subpools(pools):
    admin = make_client("pa", "osmo-team-admin")
    assert admin.post("/api/configs/pool/team/subpool", {"name": "b", "quota_gpus": 1},
                      format="json").status_code == 201
    # team2 is invisible to an admin of team: 404, not 403 (no existence leak).
    response = admin.post("/api/configs/pool/team2/subpool", {"name": "b", "quota_gpus": 1},
                          format="json")
    assert (response.status_code, response.json()["code"]) == (404, "pool_not_found")
    assert admin.get("/api/whoami").json()["pools"] == {"team": "admin"}


def test_wildcard_admin_and_platform_admin(pools):
    admin = make_client("pa", "osmo-team*-admin")
    assert admin.post("/api/configs/pool/team2/subpool", {"name": "b", "quota_gpus": 1},
                      format="json").status_code == 201
    platform = make_client("root", "osmo-admin")
    assert visible(platform) == ["other", "team", "team--a", "team2", "team2--b"]


def test_no_role_sees_nothing(pools):
    nobody = make_client("nobody")
    assert nobody.get("/api/configs/pool").json() == []
    assert nobody.get("/api/pool_quota").json() == {
        "pools": [], "node_sets": [],
        "resource_sum": {"total_quota_gpus": 0, "used_gpus": 0, "total_usage_gpus": 0,
                         "available_gpus": 0, "quota_used": 0, "quota_free": 0,
                         "quota_limit": 0, "total_usage": 0, "total_capacity": 0,
                         "total_free": 0}}
