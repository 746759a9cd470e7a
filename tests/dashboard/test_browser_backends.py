"""The backends page in a real headless Chromium: an operator finds it in the nav, reads each
backend's status and figures, and follows a backend to its nodes on the cluster page;
screenshots go to test-artifacts/dashboard/."""

from __future__ import annotations

from django.utils import timezone

from scheduler import services as scheduler_services
from scheduler.backends.default import default_backend_ensure
from scheduler.backends.services import backend_upsert
from scheduler.models import Backend
from tests import factories
from tests.dashboard.test_browser import (  # noqa: F401 - fixtures
    browser,
    expect,
    open_page,
    pytestmark,
    screenshot,
)


def row_cells(page, backend: str) -> list[str]:
    return page.locator(f'tr[data-backend="{backend}"]').locator("th, td").evaluate_all(
        "cells => cells.map(cell => cell.textContent.replace(/\\s+/g, ' ').trim())")


def test_an_operator_finds_the_fleet_and_follows_a_backend_to_its_nodes(open_page,
                                                                        live_server):
    factories.pool("team", 16)
    default_backend_ensure()  # a flushed database has lost the migration's row
    for index in range(2):
        scheduler_services.node_register(name=f"node-{index}", gpus=8, cpu_millis=64000,
                                         memory_bytes=2**40, labels={})
    backend_upsert(name="far", kind="kubernetes")
    Backend.objects.filter(name="far").update(
        last_heartbeat=timezone.now() - timezone.timedelta(minutes=5))
    page = open_page("viewer", "osmo-team-user")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Backends").click()
    expect(page).to_have_url(f"{live_server.url}/backends/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Backends (2)")
    default, far = row_cells(page, "default"), row_cells(page, "far")
    assert (default[0], default[1], default[4:7], default[8:]) == (
        "default", "ONLINE", ["2", "16", "16"], ["team", "0", "0"])
    assert (far[0], far[1], far[4:7], far[8:]) == ("far", "OFFLINE", ["0", "0", "0"],
                                                   ["-", "0", "0"])
    assert far[3].startswith("5 min") and far[3].endswith(" ago")
    screenshot(page, "backends")
    page.locator('tr[data-backend="default"]').get_by_role("link", name="default").click()
    expect(page).to_have_url(f"{live_server.url}/cluster/?backend=default&tables=on")
    expect(page.locator("tr[data-node] td.backend")).to_have_text(["default", "default"])
