"""`osmo config list|history|show|diff|rollback` as client 6.4.0 sends them (a replay: the
requests written from the client's 6.4.0 source and checked against the recorded transcript,
``replay.py``), for the POOL and BACKEND configs."""

from __future__ import annotations

import datetime as dt

import pytest

from pools import services
from pools.models import Pool, PoolEvent
from tests import factories

from .replay import user_zone_time

pytestmark = pytest.mark.django_db

OPERABLE = ["BACKEND", "BACKEND_TEST", "GROUP_TEMPLATE", "POD_TEMPLATE", "POOL",
            "RESOURCE_VALIDATION", "ROLE", "SERVICE", "WORKFLOW"]


@pytest.fixture
def team(db):
    team = factories.pool("team", 10)
    subpool = factories.subpool(team, "a", 8)  # POOL:2
    services.subpool_update(actor=None, subpool=subpool, quota_gpus=3)  # POOL:3
    return team


def history_table(body: dict) -> list[list[str]]:
    """`_run_history_command`'s rows: what it reads of each revision."""
    return [[c["config_type"], c["name"] or "-", str(c["revision"]), c["username"],
             user_zone_time(c["created_at"]), c["description"],
             ", ".join(sorted(c["tags"])) if c["tags"] else "-"] for c in body["configs"]]


def fetch_data(config_info):
    """`_fetch_data_from_config`: `show TYPE:REV NAME` indexes what this gives."""
    if isinstance(config_info, dict) and "backends" in config_info:
        config_info = config_info["backends"]
    if isinstance(config_info, dict) and "pools" in config_info:
        config_info = config_info["pools"]
    if (isinstance(config_info, list) and config_info and isinstance(config_info[0], dict)
            and "name" in config_info[0]):
        config_info = {item["name"]: item for item in config_info}
    return config_info


def test_config_list_asks_for_every_operable_type_and_gets_ours(osmo_as, team):
    osmo = osmo_as("root", "osmo-admin")
    body = osmo.request("GET", "api/configs/history", params={
        "config_types": OPERABLE, "omit_data": True,
        "at_timestamp": dt.datetime.now(dt.UTC).replace(tzinfo=None)})
    rows = sorted(body["configs"], key=lambda c: c["config_type"])
    assert [(c["config_type"], c["revision"], c["username"]) for c in rows] == [
        ("BACKEND", 1, "(system)"), ("POOL", 3, "(system)")]
    assert all(user_zone_time(c["created_at"]).endswith(" UTC") for c in rows)


def test_config_history_lists_a_pools_revisions(osmo_as, team):
    osmo = osmo_as("root", "osmo-admin")
    body = osmo.request("GET", "api/configs/history", params={
        "omit_data": True, "offset": 0, "limit": 20, "order": "ASC",
        "config_types": ["POOL"], "name": "team--a"})
    rows = history_table(body)
    assert [row[:4] + row[5:] for row in rows] == [
        ["POOL", "team--a", "2", "(system)", "Subpool created: team--a", "-"],
        ["POOL", "team--a", "3", "(system)", "Subpool quota changed: team--a", "-"]]
    # A type this service keeps no history of lists nothing (`osmo config history SERVICE`).
    empty = osmo.request("GET", "api/configs/history", params={
        "omit_data": True, "offset": 0, "limit": 20, "order": "ASC",
        "config_types": ["SERVICE"]})
    assert empty == {"configs": []}


def test_config_show_of_a_revision_indexes_its_data_by_name(osmo_as, team):
    osmo = osmo_as("root", "osmo-admin")
    body = osmo.request("GET", "api/configs/history", params={
        "config_types": ["POOL"], "omit_data": False, "revision": 2})
    data = fetch_data(body["configs"][0]["data"])
    assert data["team--a"] == {"name": "team--a", "subpool_name": "a", "state": "ACTIVE",
                               "quota_gpus": 8}
    assert data["team"]["quota_gpus"] == 10
    backends = osmo.request("GET", "api/configs/history", params={
        "config_types": ["BACKEND"], "omit_data": False, "revision": 1})
    assert fetch_data(backends["configs"][0]["data"])["default"]["kind"] == "embedded"


def test_config_diff_reads_both_whole_configs(osmo_as, team):
    osmo = osmo_as("root", "osmo-admin")
    body = osmo.request("GET", "api/configs/diff", params={
        "config_type": "POOL", "first_revision": "2", "second_revision": "3"})
    assert body["first_data"]["pools"]["team--a"]["quota_gpus"] == 8
    assert body["second_data"]["pools"]["team--a"]["quota_gpus"] == 3
    # With one revision given, the client asks for the latest first.
    latest = osmo.request("GET", "api/configs/history", params={
        "config_types": ["POOL"], "order": "DESC", "limit": 1})
    assert latest["configs"][0]["revision"] == 3


def test_config_rollback_and_its_refusal(osmo_as, team):
    osmo = osmo_as("root", "osmo-admin")
    result = osmo.request("POST", "api/configs/history/rollback", payload={
        "revision": 2, "config_type": "POOL", "description": "recorded rollback",
        "tags": ["undo"]})
    assert [(c["revision"], c["name"], c["tags"]) for c in result["configs"]] == [
        (4, "team--a", ["undo"])]
    assert Pool.objects.get(name="team--a").quota_gpus == 8
    services.subpool_update(actor=None, subpool=Pool.objects.get(name="team--a"),
                            quota_gpus=3)  # POOL:5
    factories.subpool(Pool.objects.get(name="team"), "b", 7)  # POOL:6
    refused = osmo.raw("POST", "api/configs/history/rollback", payload={
        "revision": 2, "config_type": "POOL", "description": "again"})
    assert refused.status_code == 409  # the client prints the body and exits
    assert refused.json()["code"] == "quota_exceeds_parent"
    assert Pool.objects.get(name="team--a").quota_gpus == 3


def test_config_tag_a_revision_or_the_latest(osmo_as, team):
    osmo = osmo_as("root", "osmo-admin")
    assert osmo.raw("POST", "api/configs/history/pool/revision/2/tags", payload={
        "set_tags": ["stable", "q4"], "delete_tags": ["old"]}).status_code == 200
    body = osmo.request("GET", "api/configs/history", params={
        "omit_data": True, "offset": 0, "limit": 20, "order": "ASC",
        "config_types": ["POOL"], "revision": 2})
    assert history_table(body)[0][-1] == "q4, stable"
    # `config tag POOL --set latest`: the latest revision first, then its tags.
    latest = osmo.request("GET", "api/configs/history", params={
        "config_types": ["POOL"], "order": "DESC", "limit": 1})["configs"][0]["revision"]
    assert latest == 3
    assert osmo.raw("POST", f"api/configs/history/pool/revision/{latest}/tags",
                    payload={"set_tags": ["latest"]}).status_code == 200
    assert PoolEvent.objects.get(revision=3).tags == ["latest"]


def test_config_update_of_a_pool_and_of_a_backend(osmo_as, team):
    osmo = osmo_as("root", "osmo-admin")
    # The client reads the live config, diffs the edited one against it, sends the change.
    current = fetch_data(osmo.request("GET", "api/configs/pool"))["team"]
    assert current["quota_gpus"] == 10
    osmo.request("PATCH", "api/configs/pool/team", payload={
        "configs_dict": {"quota_gpus": 110, "weight": 2}, "description": "grow team"})
    assert (Pool.objects.get(name="team").quota_gpus, Pool.objects.get(name="team").weight) == (
        110, 2)
    backend = fetch_data(osmo.request("GET", "api/configs/backend"))["default"]
    assert backend["description"] == ""
    osmo.request("POST", "api/configs/backend/default", payload={
        "configs": {"description": "edited"}, "description": "say what it is",
        "tags": ["doc"]})
    body = osmo.request("GET", "api/configs/history", params={
        "omit_data": True, "offset": 0, "limit": 2, "order": "DESC"})
    assert [row[:3] + row[5:] for row in history_table(body)] == [
        ["BACKEND", "default", "2", "say what it is", "doc"],
        ["POOL", "team", "4", "grow team", "-"]]
