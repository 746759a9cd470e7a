"""GET /api/task by cursor: `next_cursor` walks every visible task once in the client's order
(by start time, ties by id, tasks not started last), and a cursor it did not give is a 400."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from tests import factories
from tests.conftest import make_client
from workflows.models import Task, TaskStatus, Workflow, WorkflowGroup, WorkflowStatus

pytestmark = pytest.mark.django_db

ROWS = 17


@pytest.fixture
def tasks(db):
    """ROWS one-task workflows; tasks 0-3 share a start time, 14-16 never started."""
    team = factories.pool("team", 10)
    owner = make_client("owner", "osmo-team-user").user
    now = timezone.now()
    workflows = Workflow.objects.bulk_create(
        Workflow(name=f"w-{i}", pool=team, user=owner, status=WorkflowStatus.COMPLETED)
        for i in range(ROWS))
    groups = WorkflowGroup.objects.bulk_create(
        WorkflowGroup(workflow=w, name="main", status=TaskStatus.COMPLETED) for w in workflows)
    Task.objects.bulk_create(
        Task(group=g, workflow=w, pool=team, priority="NORMAL", name="main",
             status=TaskStatus.COMPLETED,
             started_at=None if i >= 14 else now - timedelta(minutes=max(i, 3) % 7))
        for i, (w, g) in enumerate(zip(workflows, groups, strict=True)))
    return make_client("platform-admin", "osmo-admin")


def expected(order: str) -> list[str]:
    time = F("started_at").desc(nulls_last=True) if order == "DESC" else \
        F("started_at").asc(nulls_last=True)
    return list(Task.objects.order_by(time, "id").values_list("workflow__name", flat=True))


@pytest.mark.parametrize("order", ["ASC", "DESC"])
@pytest.mark.parametrize("limit", [1, 4, 7])
def test_next_cursor_walks_every_task_once_in_order(tasks, order, limit):
    got, params, pages = [], {"all_users": "true", "limit": limit, "order": order}, 0
    while True:
        response = tasks.get("/api/task", params)
        assert response.status_code == 200, response.content
        body = response.json()
        got += [t["workflow_id"] for t in body["tasks"]]
        pages += 1
        if body["next_cursor"] is None:
            break
        params = {**params, "cursor": body["next_cursor"]}
    assert got == expected(order)
    assert pages == -(-ROWS // limit)


def test_an_offset_page_gives_the_cursor_after_it(tasks):
    body = tasks.get("/api/task", {"all_users": "true", "limit": 5, "offset": 5}).json()
    after = tasks.get("/api/task", {"all_users": "true", "limit": 5,
                                    "cursor": body["next_cursor"]}).json()
    assert [t["workflow_id"] for t in body["tasks"] + after["tasks"]] == expected("ASC")[5:15]


def encoded(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize("params", [
    {"cursor": "not-a-cursor"}, {"cursor": encoded("v1|A|B|1|1")},
    {"cursor": encoded("v1|D|F|1|1")}, {"cursor": "a" * 200},
    {"cursor": encoded("v1|A|F|1|1"), "offset": 0},
])
def test_a_cursor_it_did_not_give_is_a_400(tasks, params):
    response = tasks.get("/api/task", {"all_users": "true", **params})
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid_request" and list(body["errors"]) == ["cursor"], body
