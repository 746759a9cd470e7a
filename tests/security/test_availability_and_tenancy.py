"""PostgreSQL down → 503 everywhere; tenants see only their own queues; a session made from a
token ends when the token is revoked."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client

from osmo.accounts import services as accounts
from osmo.embedded import free_port
from tests import factories
from tests.conftest import make_client


@pytest.fixture
def database_down(transactional_db):
    """The service's connection points at a port where no PostgreSQL listens."""
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT=str(free_port()))
    yield
    connection.close()
    connection.settings_dict.clear()
    connection.settings_dict.update(saved)


@pytest.mark.parametrize("method,path", [
    ("get", "/api/pool_quota"), ("get", "/api/workflow"), ("get", "/api/scheduler/status"),
    ("get", "/api/cluster/nodes"), ("post", "/api/pool/team/workflow"),
    ("post", "/login/token/"),  # a dashboard view, outside DRF
])
def test_database_down_is_503_everywhere(database_down, method, path):
    client = Client(raise_request_exception=False)
    response = getattr(client, method)(path, {"token": "t"} if "login" in path else None,
                                       HTTP_AUTHORIZATION="Bearer some-token")
    assert (response.status_code, response.json()["code"]) == (503, "database_unavailable")
    assert response["Retry-After"] == "5"


def test_health_says_503_with_the_database_down(database_down):
    response = Client(raise_request_exception=False).get("/api/health")
    assert response.status_code == 503


def _cycle_with_two_tenants(admin):
    team, other = factories.pool("team", 8), factories.pool("other", 8)
    factories.subpool(team, "a", 4)
    admin.post("/api/cluster/nodes", {"name": "n0", "gpus": 8}, format="json")
    factories.pending_workflow(team, 1)
    factories.pending_workflow(other, 1)
    assert admin.post("/api/scheduler/cycle").status_code == 200


def test_scheduler_status_shows_a_tenant_only_its_queues(db):
    admin = make_client("root", "osmo-admin")
    _cycle_with_two_tenants(admin)
    everything = {q["name"] for q in admin.get("/api/scheduler/status").json()["queues"]}
    assert {"osmo-pool-osmo-team", "osmo-pool-osmo-other"} <= everything
    alice = make_client("alice", "osmo-team-user")
    mine = {q["name"] for q in alice.get("/api/scheduler/status").json()["queues"]}
    assert mine == {"osmo-pool-osmo-team", "osmo-pool-osmo-team.shared",
                    "osmo-pool-osmo-team--a"}
    browser = Client()
    browser.force_login(alice.user)
    page = browser.get("/cluster/fragment/").content.decode()
    assert "osmo-pool-osmo-other" not in page and "osmo-pool-osmo-team" in page


def test_a_token_session_ends_when_its_token_is_revoked(db):
    user = accounts.user_ensure(username="alice", groups=["osmo-team-user"])
    factories.pool("team", 8)
    token = accounts.token_issue(user=user)
    browser = Client()
    assert browser.post("/login/token/", {"token": token}).status_code == 302
    assert browser.get("/").status_code == 200
    assert accounts.tokens_revoke_all(user=user) == 1
    response = browser.get("/")
    assert (response.status_code, response["Location"].split("?")[0]) == (302, "/login/")
    assert "_auth_user_id" not in browser.session
