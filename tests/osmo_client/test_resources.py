"""`osmo resource list|info` as client 6.4.0 sends them and reads the answers (a replay: requests
written by hand from the client's 6.4.0 source, not a recorded transcript — ``replay.py``): our
nodes, per visible pool and platform."""

from __future__ import annotations

import pytest

from scheduler import services as scheduler_services
from tests import factories
from workflows.models import Task

pytestmark = pytest.mark.django_db

H100 = {"h100": {"description": "H100 nodes", "node_selector": {"gpu": "h100"}},
        "l40": {"description": "L40 nodes", "node_selector": {"gpu": "l40"}}}
GIB = 1024**3


@pytest.fixture
def cluster():
    for name, gpus, kind in (("node-0", 8, "h100"), ("node-1", 4, "l40"),
                             ("node-2", 8, "h100")):
        scheduler_services.node_register(name=name, gpus=gpus, cpu_millis=64000,
                                         memory_bytes=512 * GIB, labels={"gpu": kind})
    scheduler_services.node_set_schedulable(
        node=scheduler_services.Node.objects.get(name="node-2"), schedulable=False)
    team = factories.pool("team", 12, platforms=H100, default_platform="h100")
    factories.subpool(team, "a", 4)
    factories.pool("hidden", 4)
    workflow = factories.running_workflow(team, 3)  # bound to node-0
    Task.objects.filter(workflow=workflow).update(cpu_millis=2000, memory_bytes=16 * GIB)
    return team


def resource_list(osmo, pools: list[str], *, all_pools: bool = False) -> dict:
    """`_cluster_resources`: the pools are checked against `GET //api/pool` first."""
    known = osmo.request("GET", "/api/pool", params={})["pools"]
    for name in pools:
        assert name in known.keys(), f"Pool {name} does not exist!"
    return osmo.request("GET", "api/resources", params={"pools": pools,
                                                        "all_pools": all_pools})


def rows(response: dict) -> list[tuple]:
    """What the client's table shows: node, pool, platform, type, GPU used/total."""
    out = []
    for resource in response["resources"]:
        for pool_platform in resource["exposed_fields"]["pool/platform"]:
            pool, platform = pool_platform.split("/")
            capacity = resource["allocatable_fields"]["gpu"]
            used = resource["usage_fields"]["gpu"]
            out.append((resource["exposed_fields"]["node"], pool, platform,
                        resource["resource_type"], f"{used}/{capacity}"))
    return out


def test_resource_list_per_pool_and_platform(osmo_as, cluster):
    osmo = osmo_as("alice", "osmo-team-user")
    assert rows(resource_list(osmo, ["team"])) == [
        ("node-0", "team", "h100", "SHARED", "3/8"), ("node-1", "team", "l40", "SHARED", "0/4")]
    assert rows(resource_list(osmo, ["team--a"])) == [
        ("node-0", "team--a", "h100", "SHARED", "3/8"),
        ("node-1", "team--a", "l40", "SHARED", "0/4")]
    everything = resource_list(osmo, [], all_pools=True)
    assert {pool for _, pool, *_ in rows(everything)} == {"team", "team--a"}  # not "hidden"
    node0 = everything["resources"][0]
    assert (node0["usage_fields"]["cpu"], node0["usage_fields"]["memory"],
            node0["allocatable_fields"]["memory"]) == (2.0, "16Gi", "512Gi")
    filtered = osmo.request("GET", "api/resources", params={"pools": ["team"],
                                                            "platforms": ["l40"]})
    assert rows(filtered) == [("node-1", "team", "l40", "SHARED", "0/4")]


def test_resource_info(osmo_as, cluster):
    osmo = osmo_as("alice", "osmo-team-user")
    resource = osmo.request("GET", "api/resources/node-1")["resources"][0]
    assert resource["pool_platform_labels"] == {"team": ["l40"], "team--a": ["l40"]}
    config = resource["config_fields"]["team"]["l40"]
    assert (config["host_network"], config["privileged"], config["default_mounts"]) == (
        False, False, [])
    for name in ("node-2", "nope"):  # cordoned, unknown
        response = osmo.raw("GET", f"api/resources/{name}")
        assert (response.status_code, response.json()["code"]) == (404, "resource_not_found")
    outsider = osmo_as("eve", "osmo-hidden-user")
    assert outsider.raw("GET", "api/resources/node-0").status_code == 200  # hidden runs anywhere
    assert outsider.request("GET", "api/resources/node-0")["resources"][0][
        "pool_platform_labels"] == {"hidden": ["default"]}
