"""The backends page: each backend's status, heartbeat age, nodes, GPUs total and free, the
pools it serves and its pending and running gangs; and the backend on the cluster page's node
tables (filter `?backend=`)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from dashboard import queries
from scheduler.models import Backend
from tests import factories
from tests.conftest import make_client
from tests.dashboard.conftest import session_client
from tests.scheduler.conftest import add_nodes, cycle, spec, submit

pytestmark = pytest.mark.django_db


def rows(html: str) -> dict[str, list[str]]:
    """Backend → its row's cells as text."""
    found = {}
    for name, body in re.findall(r'<tr id="backend-[^"]+" data-backend="([^"]+)"[^>]*>(.*?)</tr>',
                                 html, re.S):
        cells = re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", body, re.S)
        found[name] = [" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in cells]
    return found


@pytest.fixture
def fleet(db):
    """`default` (embedded): 2 nodes of 8 GPUs, one 8-GPU workflow running and one of 16
    pending; `lab` (embedded): 1 node of 4 GPUs; `far` (kubernetes): last heartbeat 90 s ago."""
    admin = make_client("root", "osmo-admin")
    alice = make_client("alice", "osmo-team-user")
    factories.pool("team", 64)
    add_nodes(admin, 2)
    for name, kind in (("lab", "embedded"), ("far", "kubernetes")):
        response = admin.post(f"/api/configs/backend/{name}", {"kind": kind}, format="json")
        assert response.status_code == 201, response.json()
    response = admin.post("/api/cluster/nodes", {"name": "lab-0", "gpus": 4, "cpu": 64,
                                                 "memory": "512Gi", "backend": "lab"},
                          format="json")
    assert response.status_code == 201, response.json()
    now = timezone.now()
    Backend.objects.filter(name="far").update(last_heartbeat=now - timedelta(seconds=90))
    running = submit(alice, "team", spec("small", 8))
    pending = submit(alice, "team", spec("large", 8, tasks=2))  # 16 GPUs: 8 are free
    assert cycle(admin)["bound"] == 1
    return now, running, pending


def test_the_backends_figures_as_of_a_time(fleet):
    now, _, _ = fleet
    figures = {row.name: (row.status, row.heartbeat_age_seconds, row.nodes, row.gpus,
                          row.gpus_free, row.pools, row.pending, row.running)
               for row in queries.backends_overview(now=now)}
    assert figures == {
        "default": ("ONLINE", None, 2, 16, 8, ["team"], 1, 1),
        "far": ("OFFLINE", 90.0, 0, 0, 0, [], 0, 0),
        "lab": ("ONLINE", None, 1, 4, 4, [], 0, 0),
    }


def test_the_backends_page_shows_each_backend_and_is_in_the_nav(fleet):
    viewer = session_client("viewer", "osmo-team-user")
    response = viewer.get("/backends/")
    assert response.status_code == 200
    html = response.content.decode()
    assert '<a href="/backends/" aria-current="page">Backends</a>' in html
    found = rows(html)
    assert list(found) == ["default", "far", "lab"]
    # Backend, status, kind, heartbeat, nodes, GPUs, free, usage, pools, pending, running
    assert found["default"] == ["default", "ONLINE", "embedded · kai", "not needed", "2", "16",
                                "8", "", "team", "1", "1"]
    assert found["lab"] == ["lab", "ONLINE", "embedded · kai", "not needed", "1", "4", "4", "",
                            "-", "0", "0"]
    status, heartbeat = found["far"][1], found["far"][3]
    assert status == "OFFLINE" and re.fullmatch(r"1 min 3\d s ago", heartbeat), found["far"]
    assert found["far"][4:] == ["0", "0", "0", "", "-", "0", "0"]


def test_the_backends_page_needs_a_sign_in(db):
    response = Client().get("/backends/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_the_node_tables_show_each_nodes_backend_and_filter_by_it(fleet):
    viewer = session_client("viewer", "osmo-team-user")
    html = viewer.get("/cluster/?tables=on").content.decode()
    backends = dict(re.findall(r'<tr data-node="([^"]+)">\s*<th scope="row">[^<]+</th>\s*'
                               r'<td class="backend"><a [^>]+>([^<]+)</a>', html))
    assert backends == {"node-0": "default", "node-1": "default", "lab-0": "lab"}
    html = viewer.get("/cluster/?tables=on&backend=lab").content.decode()
    assert re.findall(r'<tr data-node="([^"]+)"', html) == ["lab-0"]
