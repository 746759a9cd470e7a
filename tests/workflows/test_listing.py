"""GET /api/workflow: filters, pagination, visibility, a fixed number of queries."""

from __future__ import annotations

import pytest

from tests import factories
from tests.conftest import make_client
from tests.workflows.conftest import gpu_spec, submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_pools(team):
    factories.pool("other", 10)
    alice = make_client("alice", "osmo-team-user")
    bob = make_client("bob", "osmo-other-user", "osmo-team-user")
    names = {
        "a1": submit(alice, "team", gpu_spec(1, "a")).json()["name"],
        "a2": submit(alice, "team", gpu_spec(1, "a"), "LOW").json()["name"],
        "b1": submit(bob, "other", gpu_spec(1, "b")).json()["name"],
    }
    return alice, bob, names


def names(response) -> list[str]:
    return [w["name"] for w in response.json()["results"]]


def test_visibility_follows_pool_roles(two_pools):
    alice, bob, n = two_pools
    assert names(alice.get("/api/workflow")) == [n["a2"], n["a1"]]  # newest first
    assert sorted(names(bob.get("/api/workflow"))) == sorted(n.values())
    assert alice.get(f"/api/workflow/{n['b1']}").json()["code"] == "workflow_not_found"
    nobody = make_client("nobody")
    assert nobody.get("/api/workflow").json()["count"] == 0


def test_filters_and_pagination(two_pools):
    alice, bob, n = two_pools
    page = bob.get("/api/workflow?limit=2")
    body = page.json()
    # the contract's page, and the same page as the OSMO client reads it
    assert set(body) == {"count", "count_is_estimate", "next", "previous", "results",
                         "workflows", "more_entries"}
    assert body["count"] == 3 and len(body["results"]) == 2 and body["next"]
    assert names(bob.get("/api/workflow?pool=other")) == [n["b1"]]
    assert sorted(names(bob.get("/api/workflow?user=alice"))) == sorted([n["a1"], n["a2"]])
    assert bob.get("/api/workflow?status=RUNNING").json()["count"] == 0
    assert bob.get("/api/workflow?status=PENDING").json()["count"] == 3
    bad = bob.get("/api/workflow?status=SLEEPING")
    assert (bad.status_code, bad.json()["code"]) == (400, "invalid_request")


def test_list_uses_a_fixed_number_of_queries(team, django_assert_num_queries):
    alice = make_client("alice", "osmo-team-user")
    for count in (2, 9):
        while alice.get("/api/workflow").json()["count"] < count:
            submit(alice, "team", gpu_spec(1))
        # the token with its user's groups, count, page, groups, tasks, the scheduler's
        # reasons for the page's waiting workflows
        with django_assert_num_queries(6):
            assert alice.get("/api/workflow").json()["count"] == count


def test_whoami(team):
    client = make_client("carol", "osmo-team-admin", "osmo-backend")
    factories.pool("team2", 1)
    body = client.get("/api/whoami").json()
    assert body == {"user": "carol", "roles": ["osmo-backend", "osmo-team-admin"],
                    "pools": {"team": "admin"}}
