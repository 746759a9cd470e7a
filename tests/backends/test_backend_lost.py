"""A lost cluster (API.md "Backends", OSMO_BACKEND_LOST_TIMEOUT): the groups that started on a
kubernetes backend silent past its lease and lost timeout end FAILED_BACKEND_ERROR; nothing
else changes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from pools.models import Pool
from scheduler.backends.lost import backends_lost_pass
from scheduler.models import Backend
from tests import factories
from tests.conftest import make_client
from workflows.models import Task, TaskEvent

pytestmark = pytest.mark.django_db

LEASE, LOST = 30, 600


def on(backend: str, workflow):
    workflow.groups.update(backend=backend)
    return workflow


@pytest.fixture
def fleet():
    now = timezone.now()
    Backend.objects.create(name="gone", kind="kubernetes",
                           last_heartbeat=now - timedelta(seconds=LEASE + LOST + 1))
    Backend.objects.create(name="late", kind="kubernetes",  # offline, not yet lost
                           last_heartbeat=now - timedelta(seconds=LEASE + LOST - 60))
    Backend.objects.create(name="new", kind="kubernetes")  # never connected
    Backend.objects.create(name="sim", kind="embedded")
    return now


@override_settings(OSMO_BACKEND_LEASE=LEASE, OSMO_BACKEND_LOST_TIMEOUT=LOST)
def test_started_groups_of_a_lost_backend_end_and_nothing_else_changes(fleet):
    team = factories.pool("team", 64)
    lost = on("gone", factories.running_workflow(team, 4, tasks=2))
    waiting = on("gone", factories.pending_workflow(team, 2))  # dispatched, not on a node
    late = on("late", factories.running_workflow(team, 2))
    sim = on("sim", factories.running_workflow(team, 2))
    untouched = [(w.pk, list(w.tasks.values_list("status", "reason", "finished_at")))
                 for w in (waiting, late, sim)]

    assert backends_lost_pass(fleet) == {"gone": 1}
    assert sorted(lost.tasks.values_list("name", "status", "reason")) == [
        ("task-0", "FAILED_BACKEND_ERROR", "backend_lost"),
        ("task-1", "FAILED_BACKEND_ERROR", "backend_lost")]
    lost.refresh_from_db()
    assert (lost.status, lost.reason) == ("FAILED_BACKEND_ERROR", "backend_lost")
    assert sorted(TaskEvent.objects.filter(workflow=lost).values_list("reason", "message")) == [
        ("BackendError", "its cluster sent nothing for longer than the lost timeout")] * 2
    assert [(w.pk, list(w.tasks.values_list("status", "reason", "finished_at")))
            for w in (waiting, late, sim)] == untouched
    # Idempotent: a second pass finds nothing more to end.
    assert backends_lost_pass(fleet) == {}
    assert Task.objects.filter(status="FAILED_BACKEND_ERROR").count() == 2


@override_settings(OSMO_BACKEND_LEASE=LEASE, OSMO_BACKEND_LOST_TIMEOUT=LOST)
def test_a_heartbeat_in_time_keeps_the_work(fleet):
    team = factories.pool("team", 8)
    lost = on("gone", factories.running_workflow(team, 2))
    Backend.objects.filter(name="gone").update(last_heartbeat=fleet)
    assert backends_lost_pass(fleet) == {}
    assert list(lost.tasks.values_list("status", flat=True)) == ["RUNNING"]


@override_settings(OSMO_BACKEND_LEASE=LEASE, OSMO_BACKEND_LOST_TIMEOUT=LOST)
def test_work_of_a_pool_whose_backends_are_all_down_is_admitted_and_says_why(fleet, admin_client):
    team = factories.pool("team", 16)
    Pool.objects.filter(pk=team.pk).update(backends=["gone", "new"])
    Backend.objects.filter(name="gone").update(maintenance=False)
    client = make_client("ann", "osmo-team-user")
    spec = ("workflow:\n  name: w\n  tasks:\n  - {name: t, image: x, command: [a], "
            "resource: r}\n  resources:\n    r: {gpu: 1}\n")
    answer = client.post("/api/pool/team/workflow", {"file": spec}, format="json")
    assert answer.status_code == 201
    name = answer.json()["name"]
    reasons = client.get(f"/api/workflow/{name}/explain").json()["groups"][0]["reasons"]
    assert reasons[0] == {
        "code": "backends_unavailable",
        "message": f"No backend of pool team can take work now: gone is OFFLINE (no heartbeat "
                   f"for {LEASE + LOST + 1} s); new is OFFLINE (its agent never connected). The "
                   "workflow stays admitted and starts once one is back."}
    # One backend back: the reason goes.
    Backend.objects.filter(name="new").update(last_heartbeat=timezone.now())
    reasons = client.get(f"/api/workflow/{name}/explain").json()["groups"][0]["reasons"]
    assert [r["code"] for r in reasons] == ["not_yet_scheduled"]


@override_settings(OSMO_BACKEND_LEASE=LEASE, OSMO_BACKEND_LOST_TIMEOUT=LOST)
def test_a_lost_group_whose_exit_actions_ask_runs_again_and_the_others_end_with_3001(fleet):
    """OSMO's infra exit code 3001 (backend error): RESCHEDULE over it, in the task's exit
    actions or the pool's defaults, runs the group again (unbound, the next retry) instead
    of ending it; without it, or with no retry left, the tasks end FAILED_BACKEND_ERROR with
    exit code 3001."""
    team = factories.pool("team", 64)
    asks = on("gone", factories.running_workflow(team, 4, tasks=2))
    asks.tasks.filter(name="task-1").update(exit_actions={"RESCHEDULE": "3001"})
    plain = on("gone", factories.running_workflow(team, 2))
    by_pool = factories.pool("bypool", 64)
    Pool.objects.filter(pk=by_pool.pk).update(default_exit_actions={"RESCHEDULE": "3000-3006"},
                                              max_retries=1)
    again = on("gone", factories.running_workflow(by_pool, 2))
    spent = on("gone", factories.running_workflow(by_pool, 2))
    spent.groups.update(retry_id=1)  # its one retry was used

    assert backends_lost_pass(fleet) == {"gone": 4}
    for workflow in (asks, again):
        workflow.refresh_from_db()
        assert workflow.status not in ("FAILED_BACKEND_ERROR", "COMPLETED")
        assert workflow.groups.get().status == "SCHEDULING"
        assert workflow.groups.get().retry_id == 1
        assert set(workflow.tasks.values_list("status", "retry_id", "node_name", "exit_code",
                                              "finished_at")) == {("SCHEDULING", 1, "", None,
                                                                   None)}
    assert sorted(TaskEvent.objects.filter(workflow=asks).values_list("message", flat=True)) \
        == ["exit code 3001: its group runs again (retry 1 of 3)",
            "its group runs again (retry 1)"]
    for workflow in (plain, spent):
        workflow.refresh_from_db()
        assert (workflow.status, workflow.reason) == ("FAILED_BACKEND_ERROR", "backend_lost")
        assert set(workflow.tasks.values_list("status", "exit_code")) == {
            ("FAILED_BACKEND_ERROR", 3001)}
    # Run again, unbound: nothing of theirs started there, so a second pass ends nothing.
    assert backends_lost_pass(fleet) == {}
