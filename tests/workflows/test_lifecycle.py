"""Task status reports, group/workflow settlement, dependencies, cancel, usage."""

from __future__ import annotations

import pytest

from pools.models import Pool
from tests import factories
from tests.conftest import make_client
from tests.workflows.conftest import example, gpu_spec, submit
from workflows.models import Task, Workflow

pytestmark = pytest.mark.django_db


def report(backend, workflow: str, task: str, status: str, **extra):
    return backend.post(f"/api/workflow/{workflow}/task/{task}/status",
                        {"status": status, **extra}, format="json")


def quota_row(client, name: str = "team") -> tuple[int, int]:
    rows = client.get("/api/pool_quota").json()["pools"]
    row = next(r for r in rows if r["name"] == name)
    return row["used_gpus"], row["total_usage_gpus"]


def test_running_tasks_count_as_usage_until_they_end(team, user, backend):
    normal = submit(user, "team", gpu_spec(4, "n")).json()["name"]
    low = submit(user, "team", gpu_spec(3, "l"), "LOW").json()["name"]
    assert quota_row(user) == (0, 0)
    assert report(backend, normal, "main", "RUNNING", node="node-1").status_code == 200
    assert report(backend, low, "main", "RUNNING").status_code == 200
    assert quota_row(user) == (4, 7)
    body = user.get(f"/api/workflow/{normal}").json()
    assert (body["status"], body["groups"][0]["status"]) == ("RUNNING", "RUNNING")
    assert body["groups"][0]["tasks"][0]["node"] == "node-1"
    assert body["started_at"] is not None
    response = report(backend, normal, "main", "COMPLETED", exit_code=0)
    assert response.json()["status"] == "COMPLETED"
    assert response.json()["groups"][0]["tasks"][0]["exit_code"] == 0
    assert quota_row(user) == (0, 3)
    report(backend, low, "main", "FAILED_PREEMPTED")
    assert quota_row(user) == (0, 0)
    body = user.get(f"/api/workflow/{low}").json()
    assert (body["status"], body["reason"]) == ("FAILED_PREEMPTED", "preempted")


def test_only_forward_moves(team, user, backend):
    name = submit(user, "team", gpu_spec(1)).json()["name"]
    report(backend, name, "main", "RUNNING")

    def state():
        return list(Task.objects.values_list("status", "exit_code")), list(
            Workflow.objects.values_list("status", flat=True))

    before = state()
    for status in ("RUNNING", "SCHEDULING", "WAITING", "BOGUS"):
        response = report(backend, name, "main", status)
        assert (response.status_code, response.json()["code"]) == (409, "invalid_transition")
    assert state() == before
    report(backend, name, "main", "FAILED", exit_code=3)
    before = state()
    response = report(backend, name, "main", "COMPLETED")
    assert (response.status_code, response.json()["code"]) == (409, "invalid_transition")
    assert state() == before
    assert Workflow.objects.get().status == "FAILED"


def test_a_final_status_may_follow_directly(team, user, backend):
    name = submit(user, "team", gpu_spec(1)).json()["name"]
    assert report(backend, name, "main", "COMPLETED").json()["status"] == "COMPLETED"


def test_only_backends_and_admins_report(team, user, backend, admin_client):
    name = submit(user, "team", gpu_spec(1)).json()["name"]
    response = report(user, name, "main", "RUNNING")
    assert (response.status_code, response.json()["code"]) == (403, "forbidden")
    assert Task.objects.get().status == "SCHEDULING"
    assert report(admin_client, name, "main", "RUNNING").status_code == 200
    response = report(backend, name, "nope", "RUNNING")
    assert (response.status_code, response.json()["code"]) == (404, "task_not_found")
    response = report(backend, "ghost-1", "main", "RUNNING")
    assert (response.status_code, response.json()["code"]) == (404, "workflow_not_found")
    bad = report(backend, name, "main", "COMPLETED", exit_code="zero")
    assert (bad.status_code, bad.json()["code"]) == (400, "invalid_request")


def test_gang_semantics_in_a_group(team, user, backend):
    name = submit(user, "team", example("group_tasks.yaml")).json()["name"]
    tasks = [t["name"] for t in user.get(f"/api/workflow/{name}").json()["groups"][0]["tasks"]]
    for task in tasks:
        report(backend, name, task, "RUNNING")
    report(backend, name, tasks[1], "FAILED", exit_code=1)
    body = user.get(f"/api/workflow/{name}").json()
    group = body["groups"][0]
    assert group["status"] == "FAILED"
    assert sorted((t["status"], t["reason"]) for t in group["tasks"]) == sorted([
        ("FAILED", None), ("FAILED_CANCELED", "group_failed"),
        ("FAILED_CANCELED", "group_failed")])
    assert body["status"] == "FAILED" and body["finished_at"] is not None


def test_the_lead_completing_ends_the_group(team, user, backend):
    spec = example("group_tasks.yaml")
    name = submit(user, "team", spec).json()["name"]
    workflow = Workflow.objects.get(name=name)
    group = workflow.groups.get()
    lead = group.lead_task
    for task in group.tasks.all():
        report(backend, name, task.name, "RUNNING")
    report(backend, name, lead, "COMPLETED", exit_code=0)
    body = user.get(f"/api/workflow/{name}").json()
    assert body["status"] == "COMPLETED"
    assert sorted(t["reason"] or "" for t in body["groups"][0]["tasks"]) == [
        "", "lead_completed", "lead_completed"]


def test_preempted_outranks_failed_in_the_workflow_status(team, user, backend):
    spec = example("parallel_tasks.yaml")
    name = submit(user, "team", spec).json()["name"]
    groups = user.get(f"/api/workflow/{name}").json()["groups"]
    tasks = [g["tasks"][0]["name"] for g in groups]
    report(backend, name, tasks[0], "FAILED")
    body = user.get(f"/api/workflow/{name}").json()
    # the failure cancels the other groups
    assert [g["status"] for g in body["groups"]] == [
        "FAILED", "FAILED_CANCELED", "FAILED_CANCELED"]
    assert body["status"] == "FAILED"
    name = submit(user, "team", spec).json()["name"]
    report(backend, name, tasks[1], "FAILED_PREEMPTED")
    body = user.get(f"/api/workflow/{name}").json()
    assert (body["status"], body["reason"]) == ("FAILED_PREEMPTED", "preempted")


def test_groups_run_in_dependency_order(team, user, backend):
    name = submit(user, "team", example("combination_workflow_simple.yaml")).json()["name"]
    groups = user.get(f"/api/workflow/{name}").json()["groups"]
    assert [(g["status"], g["depends_on"]) for g in groups] == [
        ("SCHEDULING", []), ("WAITING", [groups[0]["name"]])]
    assert {t["status"] for t in groups[1]["tasks"]} == {"WAITING"}
    for task in groups[0]["tasks"]:
        report(backend, name, task["name"], "COMPLETED")
    groups = user.get(f"/api/workflow/{name}").json()["groups"]
    assert [g["status"] for g in groups] == ["COMPLETED", "SCHEDULING"]
    assert {t["status"] for t in groups[1]["tasks"]} == {"SCHEDULING"}
    for task in groups[1]["tasks"]:
        report(backend, name, task["name"], "COMPLETED")
    assert user.get(f"/api/workflow/{name}").json()["status"] == "COMPLETED"


def test_cancel_releases_gpus(team, user, backend):
    name = submit(user, "team", gpu_spec(5)).json()["name"]
    report(backend, name, "main", "RUNNING")
    assert quota_row(user) == (5, 5)
    response = user.post(f"/api/workflow/{name}/cancel")
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["reason"]) == ("FAILED_CANCELED", "canceled_by_user")
    assert body["groups"][0]["tasks"][0]["status"] == "FAILED_CANCELED"
    assert quota_row(user) == (0, 0)
    again = user.post(f"/api/workflow/{name}/cancel")
    assert (again.status_code, again.json()["code"]) == (409, "invalid_transition")


def test_who_may_cancel(team, user):
    name = submit(user, "team", gpu_spec(1)).json()["name"]
    colleague = make_client("colleague", "osmo-team-user")
    response = colleague.post(f"/api/workflow/{name}/cancel")
    assert (response.status_code, response.json()["code"]) == (403, "forbidden")
    assert Workflow.objects.get().status == "PENDING"
    stranger = make_client("stranger", "osmo-x-user")
    assert stranger.post(f"/api/workflow/{name}/cancel").status_code == 404
    pool_admin = make_client("pa", "osmo-team-admin")
    assert pool_admin.post(f"/api/workflow/{name}/cancel").status_code == 200


def test_deleting_a_subpool_cancels_what_has_not_started(team, user, backend):
    sub = factories.subpool(team, "a", 20)
    running = submit(user, sub.name, gpu_spec(2, "r")).json()["name"]
    waiting = submit(user, sub.name, gpu_spec(2, "w")).json()["name"]
    report(backend, running, "main", "RUNNING")
    admin = make_client("adm", "osmo-team-admin")
    response = admin.delete("/api/configs/pool/team/subpool/a")
    assert (response.status_code, response.json()["state"]) == (202, "DELETING")
    body = user.get(f"/api/workflow/{waiting}").json()
    assert (body["status"], body["reason"]) == ("FAILED_CANCELED", "subpool_deleted")
    assert user.get(f"/api/workflow/{running}").json()["status"] == "RUNNING"
    report(backend, running, "main", "COMPLETED")
    from pools.services import subpool_archive_if_drained

    assert subpool_archive_if_drained(subpool_id=sub.pk) is True
    assert Pool.objects.get(pk=sub.pk).subpool_state == "ARCHIVED"
