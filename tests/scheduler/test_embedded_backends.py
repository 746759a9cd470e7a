"""Several embedded backends side by side: each its own nodes and its own cycle. A group of a
pool is placed only on nodes of a backend its pool names (subpools inherit), the first that
the fleet pass chose for it (where it starts soonest); a gang never spans two backends; every
backend has its cycle row."""

from __future__ import annotations

import pytest

from pools.models import Pool
from scheduler.models import SchedulerCycle
from tests import factories
from workflows.models import Task, WorkflowGroup

from .conftest import add_nodes, cycle, spec, submit

pytestmark = pytest.mark.django_db


def embedded_backend(admin, name: str, gpus: int = 8) -> None:
    response = admin.post(f"/api/configs/backend/{name}", {"kind": "embedded"}, format="json")
    assert response.status_code == 201, response.json()
    response = admin.post("/api/cluster/nodes", {"name": f"{name}-0", "gpus": gpus, "cpu": 64,
                                                 "memory": "512Gi", "backend": name},
                          format="json")
    assert response.status_code == 201, response.json()


def pool_on(name: str, *backends: str) -> None:
    factories.pool(name, 64)
    Pool.objects.filter(name=name, parent__isnull=True).update(backends=list(backends))


def placed(name: str) -> tuple[str | None, list[str]]:
    """(the group's backend, its tasks' nodes)."""
    group = WorkflowGroup.objects.get(workflow__name=name)
    return group.backend, list(Task.objects.filter(group=group).order_by("position")
                               .values_list("node_name", flat=True))


@pytest.fixture
def fleet(admin):
    embedded_backend(admin, "a")
    embedded_backend(admin, "b")
    pool_on("team-a", "a")
    pool_on("team-b", "b")
    pool_on("team-c", "a", "b")
    pool_on("team-d", "b", "a")


def pending_on(backend: str) -> list[str]:
    return [gang["workflow"] for gang in
            SchedulerCycle.objects.get(backend=backend).pending_gangs]


def test_gangs_land_only_on_the_backends_their_pool_names(admin, alice, fleet):
    on_a = submit(alice, "team-a", spec("full-a", 8))
    also_a = submit(alice, "team-a", spec("more-a", 4))  # a is full; b is free but not A's
    on_c = submit(alice, "team-c", spec("gang-c", 4, tasks=2))  # a full: the next, b
    assert cycle(admin)["bound"] == 3
    assert placed(on_a) == ("a", ["a-0"])
    assert placed(on_c) == ("b", ["b-0", "b-0"])
    assert placed(also_a) == (None, [""])
    # a's room was held for full-a (older): the fleet sent C to b, a never saw it.
    assert pending_on("a") == [also_a]
    assert pending_on("b") == []
    assert set(SchedulerCycle.objects.values_list("backend", flat=True)) == {"a", "b",
                                                                            "default"}
    assert cycle(admin)["bound"] == 0  # nothing moves on the next round
    assert placed(also_a) == (None, [""])
    assert pending_on("a") == [also_a]  # C's gang is b's now: a no longer considers it


def test_the_scheduler_status_of_each_backend(admin, alice, fleet):
    submit(alice, "team-a", spec("full-a", 8))
    waits = submit(alice, "team-a", spec("more-a", 4))  # a is full: it waits there
    cycle(admin)
    on_a = admin.get("/api/scheduler/status?backend=a").json()
    assert [p["workflow"] for p in on_a["pending"]] == [waits]
    assert admin.get("/api/scheduler/status?backend=b").json()["pending"] == []
    assert admin.get("/api/scheduler/status").json()["pending"] == []  # `default`'s
    missing = admin.get("/api/scheduler/status?backend=nope")
    assert (missing.status_code, missing.json()["code"]) == (404, "backend_not_found")
    too_long = admin.get("/api/scheduler/status?backend=" + "x" * 64)
    assert too_long.status_code == 400


def test_a_pool_on_both_takes_the_first_in_its_order_on_a_tie(admin, alice, fleet):
    first_a = submit(alice, "team-c", spec("c-first", 4))
    first_b = submit(alice, "team-d", spec("d-first", 4))
    assert cycle(admin)["bound"] == 2
    assert placed(first_a) == ("a", ["a-0"])
    assert placed(first_b) == ("b", ["b-0"])


def test_a_gang_is_never_split_across_backends(admin, alice, fleet):
    submit(alice, "team-a", spec("half-a", 4))
    submit(alice, "team-b", spec("half-b", 4))
    assert cycle(admin)["bound"] == 2
    # 4 GPUs free on each backend: 8 in all, but no one backend has them.
    gang = submit(alice, "team-c", spec("gang", 4, tasks=2))
    for _ in range(3):
        assert cycle(admin)["bound"] == 0
    # No backend starts it now: it waits in one (a: equal free GPUs, first in the order).
    assert placed(gang) == ("a", ["", ""])
    assert gang in pending_on("a") and gang not in pending_on("b")


def test_a_subpool_inherits_its_parents_backends(admin, alice, fleet):
    parent = Pool.objects.get(name="team-b", parent__isnull=True)
    factories.subpool(parent, "child", 8)
    name = submit(alice, "team-b--child", spec("child", 2))
    assert cycle(admin)["bound"] == 1
    assert placed(name) == ("b", ["b-0"])


def test_the_default_backend_places_nothing_of_a_pool_that_does_not_name_it(admin, alice,
                                                                              fleet):
    admin.post("/api/cluster/nodes", {"name": "d-0", "gpus": 8, "cpu": 64, "memory": "512Gi"},
               format="json")
    name = submit(alice, "team-a", spec("a-only", 8))
    other = submit(alice, "team-a", spec("a-next", 8))  # a full, default free: stays pending
    assert cycle(admin)["bound"] == 1
    assert placed(name) == ("a", ["a-0"])
    assert placed(other) == (None, [""])
    assert pending_on("default") == []


def test_a_task_on_a_real_clusters_node_is_not_simulated(admin, alice, team, settings):
    """Beside an agent's cluster, the embedded loop ends and prints only its own tasks: a task
    on the cluster's node ends when its pod does, whatever the simulated run time."""
    from datetime import timedelta

    from django.utils import timezone

    from scheduler.backends.embedded import cycle as embedded_cycle
    from scheduler.backends.embedded.sim_logs import SimulatedOutput
    from scheduler.models import Node
    from workflows.models import TaskLogChunk

    settings.OSMO_SIM_TASK_SECONDS = 60
    settings.OSMO_SIM_LOG_INTERVAL = 0
    response = admin.post("/api/configs/backend/k", {"kind": "kubernetes"}, format="json")
    assert response.status_code == 201, response.json()
    Node.objects.create(name="k-0", gpus=8, backend="k")  # as the agent's inventory writes it
    add_nodes(admin, 1)
    here, there = submit(alice, "team", spec("here", 4)), submit(alice, "team", spec("there", 4))
    assert cycle(admin)["bound"] == 2
    WorkflowGroup.objects.filter(workflow__name=there).update(backend="k")
    Task.objects.filter(workflow__name=there).update(node_name="k-0")
    assert SimulatedOutput().step() == 2  # where "here" runs, its command; nothing of "there"
    assert set(TaskLogChunk.objects.values_list("workflow__name", flat=True)) == {here}
    later = timezone.now() + timedelta(minutes=5)
    assert embedded_cycle.complete_due_tasks(now=later) == 1
    assert dict(Task.objects.values_list("workflow__name", "status")) == {
        here: "COMPLETED", there: "RUNNING"}
