"""`osmo pool list`, `osmo profile list|set pool` and `osmo version` as client 6.4.0 sends them (a
replay: requests written by hand from the client's 6.4.0 source, not a recorded transcript —
``replay.py``)."""

from __future__ import annotations

import pytest

from scheduler import services as scheduler_services
from tests import factories

pytestmark = pytest.mark.django_db

H100 = {"h100": {"description": "H100 nodes", "node_selector": {"gpu": "h100"}}}


@pytest.fixture
def cluster():
    """Three schedulable nodes and a cordoned one; work bound to node-0."""
    for name, gpus, kind in (("node-0", 8, "h100"), ("node-1", 8, "h100"), ("node-2", 4, "l40"),
                             ("node-3", 8, "h100")):
        scheduler_services.node_register(name=name, gpus=gpus, cpu_millis=1000,
                                         memory_bytes=2**30, labels={"gpu": kind})
    scheduler_services.node_set_schedulable(
        node=scheduler_services.Node.objects.get(name="node-3"), schedulable=False)
    team = factories.pool("team", 12, platforms=H100, default_platform="h100",
                          description="Team pool")
    other = factories.pool("other", 4, description="Everything")
    sub = factories.subpool(team, "a", 4)
    factories.running_workflow(team, 3)  # every factory task is bound to node-0
    factories.running_workflow(sub, 2, "HIGH")
    factories.running_workflow(other, 1, "LOW")
    return team


def pool_list(osmo, pools: list[str]):
    """`pool.list_pools(service_client, args.pool, quota=True)`."""
    return osmo.request("GET", "/api/pool_quota", params={"pools": pools,
                                                           "all_pools": not pools})


def print_rows(response: dict, free_mode: bool) -> list[list]:
    """The table `_list_pool` prints (the fields it indexes)."""
    rows = []
    for nodeset in response["node_sets"]:
        for index, pool in enumerate(nodeset["pools"]):
            usage = pool["resource_usage"]
            row = [pool["name"], pool["description"], pool["status"]]
            shared = "" if index == 0 else " (shared)"
            if free_mode:
                row += [usage["quota_free"], f"{usage['total_free']}{shared}"]
            else:
                row += [usage["quota_used"], usage["quota_limit"], usage["total_usage"],
                        f"{usage['total_capacity']}{shared}"]
            rows.append(row)
    total = response["resource_sum"]
    keys = (("quota_free", "total_free") if free_mode else
            ("quota_used", "quota_limit", "total_usage", "total_capacity"))
    rows.append([""] * 3 + [str(total[key]) for key in keys])
    return rows


def test_pool_list_used_and_free(osmo_as, cluster):
    osmo = osmo_as("alice", "osmo-team-user", "osmo-other-user")
    response = pool_list(osmo, [])
    assert print_rows(response, free_mode=False) == [
        ["other", "Everything", "ONLINE", 0, 4, 1, "20"],        # all three schedulable nodes
        ["team", "Team pool", "ONLINE", 3, 8, 3, "16"],          # the two h100 nodes
        ["team--a", "Team pool", "ONLINE", 2, 4, 2, "16 (shared)"],
        ["", "", "", "5", "16", "6", "20"],
    ]
    assert print_rows(response, free_mode=True) == [
        ["other", "Everything", "ONLINE", 4, "14"],
        ["team", "Team pool", "ONLINE", 5, "10"],
        ["team--a", "Team pool", "ONLINE", 2, "10 (shared)"],
        ["", "", "", "11", "14"],
    ]
    # The figures are JSON integers; OSMO's own model reads numbers as strings (it coerces).
    usage = response["node_sets"][1]["pools"][0]["resource_usage"]
    assert usage == {"quota_used": 3, "quota_free": 5, "quota_limit": 8, "total_usage": 3,
                     "total_capacity": 16, "total_free": 10}
    # The contract's own rows are still there.
    assert [row["name"] for row in response["pools"]] == ["other", "team"]


def test_pool_list_named_pools(osmo_as, cluster):
    osmo = osmo_as("alice", "osmo-team-user", "osmo-other-user")
    response = pool_list(osmo, ["team--a"])
    assert print_rows(response, free_mode=False) == [
        ["team--a", "Team pool", "ONLINE", 2, 4, 2, "16"],
        ["", "", "", "2", "4", "2", "16"],
    ]
    assert [row["name"] for row in response["pools"]] == ["team"]
    both = pool_list(osmo, ["other", "team--a"])
    assert [[p["name"] for p in s["pools"]] for s in both["node_sets"]] == [["other"],
                                                                            ["team--a"]]


def test_pool_list_unknown_or_invisible_pool_is_empty(osmo_as, cluster):
    osmo = osmo_as("bob", "osmo-other-user")
    assert pool_list(osmo, ["team"])["node_sets"] == []  # "Pools team not found"
    assert [s["pools"][0]["name"] for s in pool_list(osmo, [])["node_sets"]] == ["other"]


def test_profile_list_and_set_default_pool(osmo_as, cluster):
    osmo = osmo_as("alice", "osmo-team-user")
    result = osmo.request("GET", "api/profile/settings")
    assert result == {
        "profile": {"username": "alice", "email_notification": False,
                    "slack_notification": False, "email": None, "slack_webhook_set": False,
                    "pool": None},
        "pools": ["team", "team--a"],
        "roles": ["osmo-team-user"],
    }
    # `osmo profile set pool team--a`
    osmo.request("POST", "api/profile/settings", payload={"pool": "team--a"}, params={})
    result = osmo.request("GET", "api/profile/settings")
    assert result["profile"].get("pool", None) == "team--a"  # what fetch_default_pool reads


def test_profile_set_refuses_a_pool_the_user_cannot_see(osmo_as, cluster):
    osmo = osmo_as("bob", "osmo-other-user")
    response = osmo.raw("POST", "api/profile/settings", payload={"pool": "team"}, params={})
    assert response.status_code == 404
    assert response.json()["code"] == "pool_not_found"
    assert osmo.request("GET", "api/profile/settings")["profile"]["pool"] is None


def test_profile_set_notifications(osmo_as, cluster):
    osmo = osmo_as("bob", "osmo-other-user")
    # `osmo profile set notifications email true` with no address known: refused, unchanged
    response = osmo.raw("POST", "api/profile/settings",
                        payload={"email_notification": True}, params={})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert osmo.request("GET", "api/profile/settings")["profile"]["email_notification"] is False
    osmo.request("POST", "api/profile/settings", payload={"email": "bob@example.com"},
                 params={})
    osmo.request("POST", "api/profile/settings", payload={"email_notification": True},
                 params={})
    # `osmo profile set notifications slack false`
    osmo.request("POST", "api/profile/settings", payload={"slack_notification": False},
                 params={})
    profile = osmo.request("GET", "api/profile/settings")["profile"]
    assert (profile["email_notification"], profile["slack_notification"],
            profile["email"]) == (True, False, "bob@example.com")


def test_version(osmo_as):
    osmo = osmo_as("alice")
    result = osmo.request("GET", "api/version", version_header=False)
    # `version.Version.from_dict` needs major, minor and revision.
    assert set(result) == {"major", "minor", "revision", "hash"}
    assert all(isinstance(result[key], str) and result[key].isdigit()
               for key in ("major", "minor", "revision"))


@pytest.mark.parametrize(("platforms", "default", "nodes"), [
    ({}, "", ["node-0", "node-1", "node-2"]),                           # no platforms
    (H100, "", ["node-0", "node-1", "node-2"]),                         # tasks may omit one
    (H100, "h100", ["node-0", "node-1"]),
    ({**H100, "any": {"description": "", "node_selector": {}}}, "h100",
     ["node-0", "node-1", "node-2"]),                                   # an empty selector
    ({**H100, "l40": {"description": "", "node_selector": {"gpu": "l40"}}}, "l40",
     ["node-0", "node-1", "node-2"]),                                   # a union
])
def test_how_pools_map_to_nodes(cluster, platforms, default, nodes):
    from pools import node_sets

    usable = node_sets.nodes_for(platforms, default, node_sets.schedulable_nodes())
    assert sorted(usable) == nodes  # node-3 is cordoned: never usable
