"""`osmo user list|get` and `osmo token set|list|delete` as client 6.4.0 sends them (a replay:
requests written by hand from the client's 6.4.0 source, not a recorded transcript —
``replay.py``): tokens known by name, with an expiry; users with their roles."""

from __future__ import annotations

import datetime as dt

import pytest

from osmo.accounts import services as accounts
from osmo.accounts.models import AccessToken

from .replay import OsmoClient

pytestmark = pytest.mark.django_db


def in_days(days: int) -> str:
    return (dt.datetime.now(dt.UTC) + dt.timedelta(days=days)).strftime("%Y-%m-%d")


def token_set(osmo, name: str, *, user=None, **params):
    """`_set_token`: POST with only query parameters; the answer is the raw token."""
    params.setdefault("expires_at", in_days(31))
    path = f"api/auth/user/{user}/access_token/{name}" if user else \
        f"api/auth/access_token/{name}"
    return osmo.raw("POST", path, params=params)


def test_set_list_use_and_delete_a_named_token(osmo_as, api_client=None):
    osmo = osmo_as("alice", "osmo-team-user")
    response = token_set(osmo, "ci-runner", description="for CI")
    assert response.status_code == 200
    raw = response.json()
    assert raw.startswith("osmo_")
    assert OsmoClient(osmo.api.__class__(), raw).name == "alice"  # it signs in
    listed = osmo.request("GET", "api/auth/access_token")
    mine = next(t for t in listed if t["token_name"] == "ci-runner")
    assert (mine["description"], mine["expires_at"], mine["roles"]) == (
        "for CI", f"{in_days(31)}T00:00:00", ["osmo-team-user"])
    roles = osmo.request("GET", "api/auth/access_token/ci-runner/roles")  # `token roles`
    assert (roles["token_name"], roles["user_name"], roles["roles"]) == (
        "ci-runner", "alice",
        [{"role_name": "osmo-team-user", "assigned_by": None, "assigned_at": None}])
    again = token_set(osmo, "ci-runner")
    assert (again.status_code, again.json()["code"]) == (409, "token_exists")
    assert osmo.raw("DELETE", "api/auth/access_token/ci-runner").status_code == 200
    assert AccessToken.objects.get(name="ci-runner").revoked_at is not None
    gone = osmo.raw("DELETE", "api/auth/access_token/ci-runner")
    assert (gone.status_code, gone.json()["code"]) == (404, "token_not_found")


def test_an_expired_token_no_longer_signs_in(osmo_as):
    osmo = osmo_as("alice", "osmo-team-user")
    raw = token_set(osmo, "short", expires_at=in_days(1)).json()
    assert accounts.token_lookup(raw) is not None
    AccessToken.objects.filter(name="short").update(
        expires_at=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1))
    assert accounts.token_lookup(raw) is None
    listed = osmo.request("GET", "api/auth/access_token")
    assert "short" not in [t["token_name"] for t in listed]


@pytest.mark.parametrize("name, params, field", [
    ("1abc", {}, "name"), ("bad name", {}, "name"),
    ("ok", {"expires_at": "2001-01-01"}, "expires_at"),
    ("ok", {"expires_at": "tomorrow"}, "expires_at"),
    ("ok", {"roles": ["osmo-admin"]}, "roles")])
def test_refused_token_requests_change_nothing(osmo_as, name, params, field):
    osmo = osmo_as("alice", "osmo-team-user")
    before = AccessToken.objects.count()
    response = token_set(osmo, name, **params)
    assert response.status_code == 400
    assert (response.json()["code"], list(response.json()["errors"])) == (
        "invalid_request", [field])
    assert AccessToken.objects.count() == before


def test_admin_manages_another_users_tokens_and_others_cannot(osmo_as):
    admin = osmo_as("root", "osmo-admin")
    alice = osmo_as("alice", "osmo-team-user")
    assert token_set(admin, "for-alice", user="alice").status_code == 200
    assert [t["token_name"] for t in admin.request("GET", "api/auth/user/alice/access_token")
            if t["token_name"]] == ["for-alice"]
    assert token_set(alice, "x", user="root").status_code == 403
    assert alice.raw("DELETE", "api/auth/user/alice/access_token/for-alice").status_code == 200
    assert not AccessToken.objects.live().filter(name="for-alice").exists()


def test_user_list_and_get(osmo_as):
    admin = osmo_as("root", "osmo-admin")
    osmo_as("alice", "osmo-team-user", "osmo-other-user")
    listed = admin.request("GET", "api/auth/user", params={"count": 10, "id_prefix": "al"})
    assert [u["id"] for u in listed["users"]] == ["alice"] and listed["total_results"] == 1
    by_role = admin.request("GET", "api/auth/user", params={"count": 10,
                                                            "roles": ["osmo-admin"]})
    assert [u["id"] for u in by_role["users"]] == ["root"]
    alice = osmo_as("alice")
    got = alice.request("GET", "api/auth/user/alice")
    assert got["id"] == "alice" and got["created_by"] is None
    assert [r["role_name"] for r in got["roles"]] == ["osmo-other-user", "osmo-team-user"]
    assert alice.raw("GET", "api/auth/user", params={"count": 10}).status_code == 403
    assert alice.raw("GET", "api/auth/user/root").status_code == 404  # no existence leak
