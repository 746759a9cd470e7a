"""`osmo backend list` against a live server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from osmo.cli.backend import heartbeat_age
from scheduler.backends import services
from scheduler.backends.default import default_backend_ensure
from scheduler.models import Backend
from scheduler.services import node_register
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


def test_backend_list_prints_the_table(cli, monkeypatch):
    default_backend_ensure()
    services.backend_upsert(name="east", kind="kubernetes", placement="osmo")
    Backend.objects.filter(name="east").update(
        last_heartbeat=datetime.now(UTC) - timedelta(minutes=5, seconds=3))
    node_register(name="n1", gpus=8, cpu_millis=0, memory_bytes=0, labels={})
    factories.pool("team", 4)
    factories.pool("lab", 4, backends=["east", "default"])
    cli.as_user(monkeypatch, "alice", "osmo-team-user")
    code, out, err = cli("backend", "list")
    assert (code, err) == (0, "")
    assert out == (
        "Backend  Kind        Placement  Status   Heartbeat  Nodes  GPUs (free/total)  Pools\n"
        "-------  ----------  ---------  -------  ---------  -----  -----------------  ---------\n"
        "default  embedded    kai        ONLINE   -          1      8/8                lab, team\n"
        "east     kubernetes  osmo       OFFLINE  5m         0      0/0                lab\n")


def test_heartbeat_age_units():
    now = datetime(2026, 1, 2, tzinfo=UTC)
    assert [heartbeat_age((now - timedelta(seconds=s)).isoformat(), now)
            for s in (0, 59, 60, 3599, 3600, 86400 * 2)] == ["0s", "59s", "1m", "59m", "1h",
                                                            "2d"]
    assert heartbeat_age(None, now) == "-"
