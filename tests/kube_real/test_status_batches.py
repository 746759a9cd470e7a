"""Pod statuses reach the database in batches, on the real API server: a re-list of many
running pods is a few statements, not a transaction per pod, and a burst of watch events lands
the same statuses and events as one pod at a time would."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.k8s.conftest import spec, submit
from workflows.models import Task, TaskEvent, Workflow

pytestmark = pytest.mark.django_db

PODS = 12


def _running(alice, backend, cluster) -> list[str]:
    names = [submit(alice, "team", spec(f"b{index}", gpus=1)) for index in range(PODS)]
    while backend.dispatch().applied:
        pass
    for node in ("node-a", "node-b"):
        cluster.add_node(node, gpus=8)
    for index, name in enumerate(names):
        cluster.bind(f"{name}-g-t0", "node-a" if index < 8 else "node-b")
        cluster.run(f"{name}-g-t0")
    return names


def test_a_relist_of_many_running_pods_is_a_few_statements(backend, cluster, alice,
                                                           team) -> None:
    names = _running(alice, backend, cluster)
    with CaptureQueriesContext(connection) as queries:
        assert backend.listen() == PODS  # the first LIST: every task changed once
    # lock the workflows, read their tasks, start them (with their events), their groups and
    # workflows, and the vanished-pod check: the same whatever the number of pods
    assert len(queries) <= 10, [q["sql"][:80] for q in queries.captured_queries]
    assert sorted(Workflow.objects.filter(name__in=names).values_list("status", flat=True)) == \
        ["RUNNING"] * PODS
    assert sorted(Task.objects.values_list("status", "node_name")) == \
        [("RUNNING", "node-a")] * 8 + [("RUNNING", "node-b")] * 4
    assert TaskEvent.objects.filter(reason="Running").count() == PODS
    assert backend.listen() == 0  # a re-delivery changes nothing


def test_a_burst_of_watch_events_lands_every_status_once(backend, cluster, alice,
                                                         team) -> None:
    names = [submit(alice, "team", spec(f"w{index}", gpus=1)) for index in range(PODS)]
    while backend.dispatch().applied:
        pass
    backend.listen()  # the first LIST: nothing bound yet
    cluster.add_node("node-a", gpus=16)
    for name in names:  # bound, then Running: two events a pod, in one watch
        cluster.bind(f"{name}-g-t0", "node-a")
    for name in names:
        cluster.run(f"{name}-g-t0")
    assert backend.listen() == 2 * PODS  # the node recorded, then the start
    assert sorted(Task.objects.values_list("status", "node_name")) == \
        [("RUNNING", "node-a")] * PODS
    assert sorted(TaskEvent.objects.filter(task__isnull=False).values_list(
        "reason", flat=True)) == ["Bound"] * PODS + ["Running"] * PODS
