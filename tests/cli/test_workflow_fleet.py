"""Where a waiting gang of a pool naming several backends goes, and why each other backend
was passed over: `osmo workflow query` and `explain`, and the workflow page."""

from __future__ import annotations

import pytest
from django.utils import timezone

from scheduler import services as scheduler_services
from scheduler.backends.fleet import fleet_pass
from scheduler.models import Backend
from tests import factories
from tests.conftest import make_client
from tests.dashboard.conftest import session_client
from tests.k8s.conftest import spec, submit

pytestmark = pytest.mark.django_db(transaction=True)

EAST = ("backend east: its nodes could never hold the gang, even empty: it has 1 node(s) of "
        "8 GPUs; the gang needs 2 whole one(s) [insufficient_gpus]")


@pytest.fixture
def big():
    for name, nodes in (("east", 1), ("west", 2)):
        Backend.objects.create(name=name, kind="kubernetes", last_heartbeat=timezone.now())
        for index in range(nodes):
            scheduler_services.node_register(name=f"{name}-{index}", gpus=8, cpu_millis=64000,
                                             memory_bytes=512 << 30, labels={}, backend=name)
    factories.pool("team", 256, backends=["east", "west"])
    name = submit(make_client("alice", "osmo-team-user"), "team", spec("big", gpus=8, tasks=2))
    assert fleet_pass().chosen == 1
    return name


def test_query_and_explain_name_the_backend_and_the_one_passed_over(cli, monkeypatch, big):
    cli.as_user(monkeypatch, "alice", "osmo-team-user")
    code, out, _ = cli("workflow", "query", big)
    assert code == 0
    assert f"Backends:\ng:\n  backend: west\n  - {EAST}\n" in out
    code, out, _ = cli("workflow", "explain", big)
    assert code == 0
    assert f"  backend: west\n  - {EAST}\n" in out


def test_the_workflow_page_lists_the_backends_passed_over(big):
    page = session_client("alice", "osmo-team-user").get(f"/workflows/{big}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-backend="west"' in html
    assert ('<li data-passed-over="east">' + EAST.replace(" [insufficient_gpus]", "")
            + ' <code class="muted">insufficient_gpus</code></li>') in html
