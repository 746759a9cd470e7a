from __future__ import annotations

import pytest
from django.test import Client

from osmo.accounts import services as accounts
from pools.models import Pool
from tests import factories


def session_client(username: str, *groups: str) -> Client:
    """A browser-like client with a session (the dashboard does not take tokens)."""
    client = Client()
    user = accounts.user_ensure(username=username, groups=list(groups))
    client.force_login(user)
    client.user = user
    return client


@pytest.fixture
def seed_team(db):
    """Seed 002's example: team 100 GPUs; a 30, b 40, c 20; team runs 50 at NORMAL (more than
    its 10 unallocated), a 5 at HIGH, b 10 at NORMAL; LOW work on team (8) and b (3)."""
    team = factories.pool("team", 100)
    subpools = {name: factories.subpool(team, name, gpus)
                for name, gpus in (("a", 30), ("b", 40), ("c", 20))}
    factories.running_workflow(team, 50, "NORMAL")
    factories.running_workflow(team, 8, "LOW")
    factories.running_workflow(subpools["a"], 5, "HIGH")
    factories.running_workflow(subpools["b"], 10, "NORMAL")
    factories.running_workflow(subpools["b"], 3, "LOW")
    return team


@pytest.fixture
def team_admin(db):
    return session_client("team-admin", "osmo-team-admin")


@pytest.fixture
def team_user(db):
    return session_client("team-user", "osmo-team-user")


def pool_state() -> tuple:
    """Everything a dashboard write could change."""
    from pools.models import PoolEvent
    from workflows.models import Workflow

    return (list(Pool.objects.order_by("pk").values()), PoolEvent.objects.count(),
            list(Workflow.objects.order_by("pk").values_list("name", "status")))
