"""The workflow pages and the scalable cluster page in a real headless Chromium, at desktop
and phone (390 px) widths; screenshots go to test-artifacts/dashboard/."""

from __future__ import annotations

import pytest
from django.utils import timezone

from pools import services as pool_services
from scheduler import services as scheduler_services
from tests.dashboard.test_browser import (  # noqa: F401 - fixtures
    browser,
    expect,
    open_page,
    pytestmark,
    screenshot,
    seed_team,
)
from workflows.models import Task, Workflow


@pytest.fixture
def cluster(seed_team):
    """Two zones × two racks × eight nodes (32 nodes, 256 GPUs), one cordoned, some busy, and
    an hour of usage samples."""
    for index in range(32):
        zone, rack = f"z{index // 16}", f"z{index // 16}-r{index // 8 % 2}"
        scheduler_services.node_register(
            name=f"node-{index:02d}", gpus=8, cpu_millis=64000, memory_bytes=2**40,
            labels={"topology.osmo/zone": zone, "topology.osmo/rack": rack})
    scheduler_services.node_set_schedulable(
        node=scheduler_services.Node.objects.get(name="node-31"), schedulable=False)
    for index, task in enumerate(Task.objects.filter(status="RUNNING").order_by("pk")):
        Task.objects.filter(pk=task.pk).update(node_name=f"node-{index:02d}")
    now = timezone.now()
    for minutes in range(60, 0, -10):
        pool_services.usage_samples_record(now=now - timezone.timedelta(minutes=minutes),
                                           retention_hours=48)
    return seed_team


def test_workflow_list_and_page_at_desktop_and_phone(open_page, live_server, seed_team):
    page = open_page("viewer", "osmo-team-user")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Workflows").click()
    expect(page.get_by_role("heading", name="Workflows (5)")).to_be_visible()
    screenshot(page, "workflows")
    page.get_by_label("Name").fill("wf")
    page.get_by_role("checkbox", name="RUNNING").check()
    page.get_by_role("button", name="Show").click()
    expect(page.locator("tr[data-workflow]")).to_have_count(5)
    first = Workflow.objects.order_by("submitted_at").first()
    page.get_by_role("link", name=first.name, exact=True).click()
    expect(page.get_by_role("heading", name=f"Workflow {first.name}")).to_be_visible()
    expect(page.locator("table.tasks tbody tr")).to_have_count(first.tasks.count())
    screenshot(page, "workflow")

    phone = open_page("viewer-phone", "osmo-team-user", width=390)
    phone.goto(f"{live_server.url}/workflows/")
    screenshot(phone, "workflows-phone")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    name_cell = phone.locator("tr[data-workflow] th").first
    assert name_cell.evaluate("e => getComputedStyle(e).position") == "sticky"
    phone.goto(f"{live_server.url}/workflows/{first.name}/")
    screenshot(phone, "workflow-phone")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390


def test_cancel_asks_first_without_javascript(open_page, live_server, seed_team):
    page = open_page("team-admin", "osmo-team-admin", javascript=False)
    workflow = Workflow.objects.order_by("submitted_at").first()
    page.goto(f"{live_server.url}/workflows/{workflow.name}/")
    page.get_by_role("link", name="Cancel workflow…").click()
    expect(page.get_by_role("heading", name=f"Cancel workflow {workflow.name}?")).to_be_visible()
    expect(page.get_by_text("Its running tasks stop and the 50 GPUs they hold in pool team "
                            "are released.")).to_be_visible()
    screenshot(page, "workflow-cancel-confirm")
    assert Workflow.objects.get(pk=workflow.pk).status == "RUNNING"  # asking changed nothing
    page.get_by_role("link", name="Keep it").click()
    expect(page.get_by_role("heading", name=f"Workflow {workflow.name} RUNNING")).to_be_visible()
    assert Workflow.objects.get(pk=workflow.pk).status == "RUNNING"

    page.get_by_role("link", name="Cancel workflow…").click()
    page.get_by_role("button", name=f"Cancel {workflow.name}").click()
    expect(page.get_by_text("canceled: its GPUs are released")).to_be_visible()
    expect(page.get_by_role("heading", name=f"Workflow {workflow.name} FAILED_CANCELED"))\
        .to_be_visible()
    assert Workflow.objects.get(pk=workflow.pk).status == "FAILED_CANCELED"


def test_cluster_heat_map_and_usage_chart(open_page, live_server, cluster):
    page = open_page("viewer", "osmo-team-user")
    page.goto(f"{live_server.url}/cluster/")
    cells = page.locator("a.cell")
    expect(cells).to_have_count(32)
    assert page.locator("table.nodes").count() == 0  # tables on demand
    chart = page.locator('figure.usage-chart[data-pool="team"]')
    expect(chart.locator("path")).to_have_count(3)
    # The peak is the most GPUs held, not the chart's scale (the quota, 100).
    expect(chart.locator("figcaption")).to_have_text(
        "team · now 65 GPUs used + 11 LOW · peak 76 GPUs · quota 100")
    assert chart.locator("path.area-total").evaluate(
        "path => path.getBBox().height") == pytest.approx(76 / 100 * 120, abs=.1)
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 1800, height  # 32 nodes no longer take 3,600 px
    screenshot(page, "cluster-heatmap")
    page.locator('a.cell[data-node="node-31"]').click()  # a node: its table
    expect(page.locator('table.nodes tr[data-node="node-31"]')).to_contain_text("cordoned")
    screenshot(page, "cluster-node")

    phone = open_page("viewer-phone", "osmo-team-user", width=390)
    phone.goto(f"{live_server.url}/cluster/")
    screenshot(phone, "cluster-phone")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
