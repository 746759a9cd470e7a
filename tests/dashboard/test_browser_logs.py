"""A workflow's task logs (tail, follow, download) and event timeline in a real headless
Chromium; screenshots go to test-artifacts/dashboard/."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from scheduler import services as scheduler_services
from scheduler.backends.embedded import cycle as embedded_cycle
from scheduler.backends.embedded.sim_logs import SimulatedOutput
from tests import factories
from tests.dashboard.test_browser import (  # noqa: F401 - fixtures
    browser,
    expect,
    open_page,
    pytestmark,
    screenshot,
)
from workflows import admission, logstore
from workflows.models import Task

SPEC = """workflow:
  name: train
  tasks:
  - {name: trainer, image: ubuntu, command: [python, train.py], resource: gpu}
  resources:
    gpu: {gpu: 4, cpu: 1, memory: 1Gi}
"""


@pytest.fixture
def running():
    team = factories.pool("team", 16)
    scheduler_services.node_register(name="node-0", gpus=8, cpu_millis=64000,
                                     memory_bytes=2**40, labels={})
    workflow = admission.workflow_submit(actor=None, pool=team, source=SPEC).workflow
    embedded_cycle.cycle_run()
    SimulatedOutput().step()
    return workflow


def test_task_log_tail_follow_download_and_events(open_page, live_server, running):
    page = open_page("viewer", "osmo-team-user")
    page.goto(f"{live_server.url}/workflows/{running.name}/")
    log = page.get_by_label("Log of task trainer")
    expect(log).to_contain_text("[trainer] started on node node-0 with GPUs 0-3 (4 GPU(s))")
    expect(log).to_contain_text("[trainer] $ python train.py")
    timeline = page.locator("ol.timeline li")
    expect(timeline).to_have_count(4)
    expect(timeline.nth(2)).to_contain_text("trainer Bound: bound to node node-0")
    download = page.get_by_role("link", name="Download")
    assert download.get_attribute("href") == (f"/api/workflow/{running.name}/logs?"
                                              "task_name=trainer&download=true")
    page.get_by_role("button", name="Follow").click()
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    expect(page.get_by_role("status")).to_have_text("following…")
    task = Task.objects.get(workflow=running)
    logstore.log_append(task=task, text=logstore.format_line(
        timezone.now(), "trainer", "epoch 1: loss 0.42"))
    expect(log).to_contain_text("[trainer] epoch 1: loss 0.42")  # streamed in, no reload
    screenshot(page, "workflow-logs")
    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_role("status")).to_have_text("stopped")
    with page.expect_download() as downloaded:
        download.click()
    text = open(downloaded.value.path()).read()  # noqa: SIM115 - a temporary file
    assert text.splitlines()[-1].endswith("[trainer] epoch 1: loss 0.42")
    assert downloaded.value.suggested_filename == f"{running.name}-trainer.log"


def test_logs_and_events_at_phone_width(open_page, live_server, running):
    page = open_page("viewer-phone", "osmo-team-user", width=390)
    task = Task.objects.get(workflow=running)
    logstore.log_append(task=task, text=logstore.format_line(
        dt.datetime.now(dt.UTC), "trainer", "x" * 400))  # a long line wraps
    page.goto(f"{live_server.url}/workflows/{running.name}/")
    expect(page.get_by_label("Log of task trainer")).to_contain_text("xxxx")
    screenshot(page, "workflow-logs-phone")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
