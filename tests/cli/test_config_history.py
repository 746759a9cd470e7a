"""`osmo config list|show|history|diff|rollback` against a live server."""

from __future__ import annotations

import json
import re

import pytest

from pools.models import Pool
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?")


def _stamped(text: str) -> str:
    """Times vary run to run; the columns' widths do not (each stamp is as wide)."""
    return STAMP.sub(lambda m: "T" * len(m.group(0)), text)


@pytest.fixture
def team():
    team = factories.pool("team", 10)
    factories.subpool(team, "a", 8)
    a = Pool.objects.get(name="team--a")
    from pools import services

    services.subpool_update(actor=None, subpool=a, quota_gpus=3)
    return team


def test_history_show_diff_and_rollback(cli, monkeypatch, team):
    cli.as_user(monkeypatch, "root", "osmo-admin")
    code, out, err = cli("config", "history", "POOL")
    assert (code, err) == (0, "")
    lines = _stamped(out).splitlines()
    assert [line.split()[:3] for line in lines[2:]] == [
        ["POOL", "team", "1"], ["POOL", "team--a", "2"], ["POOL", "team--a", "3"]]
    assert lines[4].endswith("subpool_quota_changed  quota_gpus: 8 → 3  -")

    code, out, _ = cli("config", "show", "POOL:2", "team--a")
    assert code == 0
    assert json.loads(out) == {"name": "team--a", "subpool_name": "a", "state": "ACTIVE",
                               "quota_gpus": 8}

    code, out, _ = cli("config", "diff", "POOL:2", "POOL:3")
    assert (code, out) == (0, "team--a: quota_gpus: 8 → 3\n")
    code, out, _ = cli("config", "diff", "pool:3")
    assert (code, out) == (0, "No differences between POOL:3 and POOL:3.\n")

    code, out, err = cli("config", "rollback", "POOL:2", "--description", "undo",
                         "--tags", "incident-7")
    assert (code, err) == (0, "")
    assert out == "Rolled back to POOL:2: wrote POOL:4 (team--a: subpool_quota_changed).\n"
    assert Pool.objects.get(name="team--a").quota_gpus == 8

    code, out, _ = cli("config", "history", "POOL", "--tags", "incident-7", "-t", "json")
    [revision] = json.loads(out)["configs"]
    assert (revision["revision"], revision["username"], revision["description"]) == (
        4, "root", "Roll back POOL to r2: undo")

    code, out, _ = cli("config", "list")
    assert code == 0
    assert [line.split()[:3] for line in _stamped(out).splitlines()[2:]] == [
        ["BACKEND", "1", "(system)"], ["POOL", "4", "root"]]


def test_a_refused_rollback_exits_1_with_the_reason(cli, monkeypatch, team):
    from pools import services

    services.subpool_create(actor=None, parent=Pool.objects.get(name="team"),
                            subpool_name="b", quota_gpus=7)
    cli.as_user(monkeypatch, "root", "osmo-admin")
    code, out, err = cli("config", "rollback", "POOL:2")
    assert (code, out) == (1, "")
    assert err == ("error: Pool 'team' has 10 GPUs, 7 of them already in ACTIVE subpools: 3 "
                   "unallocated, 8 requested. (quota_exceeds_parent)\n")
    assert Pool.objects.get(name="team--a").quota_gpus == 3


def test_bad_revisions_are_usage_errors(cli, monkeypatch, team):
    cli.as_user(monkeypatch, "root", "osmo-admin")
    assert cli("config", "rollback", "POOL")[0:3:2] == (2, "error: give a revision: "
                                                          "POOL:<revision>\n")
    assert cli("config", "show", "SERVICE")[0:3:2] == (2, "error: unknown config type "
                                                          "'SERVICE': one of BACKEND, POOL\n")
    assert cli("config", "diff", "POOL:x")[0:3:2] == (2, "error: 'x' is not a revision "
                                                         "number (1, 2, ...)\n")


def test_a_change_made_with_the_cli_is_a_revision_of_its_user(cli, monkeypatch, team):
    cli.as_user(monkeypatch, "root", "osmo-admin")
    assert cli("pool", "subpool", "update", "team", "a", "--quota", "5")[0] == 0
    code, out, _ = cli("config", "history", "POOL", "--name", "team--a", "--order", "desc",
                       "--count", "1", "-t", "json")
    [revision] = json.loads(out)["configs"]
    assert (revision["revision"], revision["username"], revision["action"],
            revision["diff"]) == (4, "root", "subpool_quota_changed",
                                  {"quota_gpus": {"before": 3, "after": 5}})
