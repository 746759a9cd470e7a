from __future__ import annotations

import pytest

from pools.models import Pool, PoolEvent
from scheduler.models import Node
from tests import factories
from tests.conftest import make_client
from workflows.models import Task, Workflow, WorkflowNameCounter


@pytest.fixture
def team(db):
    return factories.pool("team", 100)


@pytest.fixture
def user(team):
    return make_client("alice", "osmo-team-user")


@pytest.fixture
def admin(db):
    return make_client("root", "osmo-admin")


def stored() -> tuple:
    """Everything a refused request must leave as it was, the name counters included."""
    return (list(Pool.objects.order_by("pk").values()), PoolEvent.objects.count(),
            list(Workflow.objects.values_list("name", "status")), Task.objects.count(),
            list(Node.objects.values()),
            list(WorkflowNameCounter.objects.order_by("pk").values()))


def refused(response, status: int, code: str) -> dict:
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    body = response.json()
    assert (response.status_code, body["code"]) == (status, code), body
    return body
