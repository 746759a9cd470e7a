"""The dashboard's workflow pages: a list with filters, search and pages (finished runs too),
and a workflow's page with its groups, tasks, times, why it waits, who preempted it, Cancel."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from tests import factories
from tests.dashboard.conftest import session_client
from tests.dashboard.test_cluster import last_cycle
from workflows.models import Task, Workflow, WorkflowStatus

pytestmark = pytest.mark.django_db


def names(html: str) -> list[str]:
    return re.findall(r'<tr data-workflow="([^"]+)"', html)


@pytest.fixture
def team():
    return factories.pool("team", 100)


def test_the_list_filters_searches_and_pages(team):
    other = factories.pool("other", 8)
    pending = factories.pending_workflow(team, 4)
    running = factories.running_workflow(team, 2, "HIGH")
    done = factories.running_workflow(team, 1)
    Workflow.objects.filter(pk=done.pk).update(status=WorkflowStatus.COMPLETED)
    hidden = factories.pending_workflow(other, 1)
    viewer = session_client("viewer", "osmo-team-user")
    html = viewer.get("/workflows/").content.decode()
    assert set(names(html)) == {pending.name, running.name, done.name}  # finished too
    assert hidden.name not in html
    assert f'href="/workflows/{done.name}/"' in html
    assert names(viewer.get("/workflows/?status=COMPLETED").content.decode()) == [done.name]
    assert set(names(viewer.get("/workflows/?status=PENDING&status=RUNNING")
                     .content.decode())) == {pending.name, running.name}
    assert names(viewer.get(f"/workflows/?q={running.name[-3:]}").content.decode()) == [
        running.name]
    assert names(viewer.get("/workflows/?pool=other").content.decode()) == []
    refused = viewer.get("/workflows/?status=SLEEPING").content.decode()
    assert "Select a valid choice" in refused and len(names(refused)) == 3


def test_pages_of_fifty(team):
    for _ in range(55):
        factories.pending_workflow(team, 1)
    viewer = session_client("viewer", "osmo-team-user")
    first = viewer.get("/workflows/").content.decode()
    second = viewer.get("/workflows/?page=2").content.decode()
    assert (len(names(first)), len(names(second))) == (50, 5)
    assert "Page 1 of 2" in first and "page=2" in first
    assert not set(names(first)) & set(names(second))


def test_a_workflow_page_shows_times_reasons_and_preemption(team):
    waiting = factories.pending_workflow(team, 16)
    group = waiting.groups.get()
    waiting.groups.update(status="SCHEDULING")  # released to the scheduler
    Task.objects.filter(workflow=waiting).update(status="SCHEDULING")
    last_cycle([{"podgroup": group.podgroup, "workflow": waiting.name, "group": group.name,
                 "queue": "q", "reasons": [{"code": "not_enough_gpus_in_rack",
                                            "message": "No rack has 16 free GPUs."}]}])
    preempted = factories.running_workflow(team, 2, "LOW")
    now = timezone.now()
    Task.objects.filter(workflow=preempted).update(
        status="FAILED_PREEMPTED", reason="preempted", preempted_by="pg-train-1-g",
        started_at=now - timezone.timedelta(minutes=3, seconds=5), finished_at=now)
    viewer = session_client("viewer", "osmo-team-user")
    html = viewer.get(f"/workflows/{waiting.name}/").content.decode()
    flat = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    assert "Why it waits No rack has 16 free GPUs. not_enough_gpus_in_rack" in flat
    html = viewer.get(f"/workflows/{preempted.name}/").content.decode()
    flat = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    assert "FAILED_PREEMPTED (preempted by pg-train-1-g )" in flat
    assert "3 min 05 s" in flat
    assert viewer.get("/workflows/no-such-1/").status_code == 404


def test_cancel_is_offered_to_the_submitter_and_pool_admins_only(team):
    owner = session_client("owner", "osmo-team-user")
    workflow = factories.pending_workflow(team, 1)
    Workflow.objects.filter(pk=workflow.pk).update(user=owner.user)
    viewer = session_client("viewer", "osmo-team-user")
    assert "Cancel workflow" not in viewer.get(f"/workflows/{workflow.name}/").content.decode()
    assert viewer.post(f"/workflows/{workflow.name}/cancel/").status_code == 403
    assert Workflow.objects.get(pk=workflow.pk).status == WorkflowStatus.PENDING
    assert viewer.get(f"/workflows/{workflow.name}/cancel/").status_code == 403
    page = owner.get(f"/workflows/{workflow.name}/").content.decode()
    # The page offers a link to a confirmation, no button that cancels at once.
    assert f'href="/workflows/{workflow.name}/cancel/">Cancel workflow…</a>' in page
    assert "/cancel/" not in "".join(re.findall(r"<form[^>]*>", page))
    confirm = owner.get(f"/workflows/{workflow.name}/cancel/").content.decode()
    assert f"Cancel workflow {workflow.name}?" in confirm
    assert "It holds no GPUs yet: it leaves the queue of pool team." in confirm
    assert Workflow.objects.get(pk=workflow.pk).status == WorkflowStatus.PENDING
    response = owner.post(f"/workflows/{workflow.name}/cancel/", follow=True)
    assert "canceled: its GPUs are released" in response.content.decode()
    assert Workflow.objects.get(pk=workflow.pk).status == WorkflowStatus.FAILED_CANCELED
    assert "Cancel workflow" not in response.content.decode()
    ended = owner.get(f"/workflows/{workflow.name}/cancel/").content.decode()
    assert "It already ended: it is <strong>FAILED_CANCELED</strong>." in ended
    assert "<form method=\"post\"" not in ended.split("<main")[1]


def test_the_confirmation_says_what_canceling_releases(team):
    workflow = factories.running_workflow(team, 8, tasks=2)
    admin = session_client("team-admin", "osmo-team-admin")
    confirm = " ".join(re.sub(r"<[^>]+>", " ", admin.get(
        f"/workflows/{workflow.name}/cancel/").content.decode()).split())
    assert ("Its running tasks stop and the 8 GPUs they hold in pool team are released."
            in confirm)
    assert Workflow.objects.get(pk=workflow.pk).status == WorkflowStatus.RUNNING


def test_pool_pages_link_to_workflow_pages(team):
    workflow = factories.pending_workflow(team, 1)
    viewer = session_client("viewer", "osmo-team-user")
    assert f'href="/workflows/{workflow.name}/"' in viewer.get("/pools/team/").content.decode()


def test_a_task_that_has_not_started_says_so_instead_of_an_empty_log(team):
    pending = factories.pending_workflow(team, 4)
    running = factories.running_workflow(team, 2)
    canceled = factories.pending_workflow(team, 1)
    Task.objects.filter(workflow=canceled).update(status="FAILED_CANCELED")
    viewer = session_client("viewer", "osmo-team-user")
    status = Task.objects.get(workflow=pending).status
    assert status in ("WAITING", "SCHEDULING")
    html = viewer.get(f"/workflows/{pending.name}/").content.decode()
    assert re.findall(r"<p class=\"log-note muted\" data-log-not-started>([^<]*)</p>", html) == [
        f"Not started yet: the task is {status}; its log begins when it runs."]
    assert "data-log-not-started" not in viewer.get(f"/workflows/{running.name}/").content.decode()
    html = viewer.get(f"/workflows/{canceled.name}/").content.decode()
    assert re.findall(r"data-log-not-started>([^<]*)</p>", html) == [
        "This task never started: it ended FAILED_CANCELED, so it has no log."]


def test_above_the_count_bound_the_pages_count_no_further(team, monkeypatch):
    monkeypatch.setattr("dashboard.paging.COUNT_BOUND", 10)
    for _ in range(55):
        factories.pending_workflow(team, 1)
    viewer = session_client("viewer", "osmo-team-user")
    first = viewer.get("/workflows/").content.decode()
    second = viewer.get("/workflows/?page=2").content.decode()
    assert (len(names(first)), len(names(second))) == (50, 5)
    assert "(more than 10)" in first and "Page 1</span>" in first and "page=2" in first
    assert "Page 2</span>" in second and "page=3" not in second
