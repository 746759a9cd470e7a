"""Timeouts on the Kubernetes backend against the real API server: a group past its
exec_timeout or queue_timeout ends, and the cleaner deletes its pods and PodGroup, as for any
ended group; our scheduler reads the PodGroup's exec_timeout."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scheduler import services
from scheduler.backends.kubernetes.reporter import pending_gangs
from scheduler.core.kai_names import EXEC_TIMEOUT_ANNOTATION
from tests.k8s.conftest import spec, statuses, submit
from workflows.models import WorkflowGroup

from .osmo_placement import bound, create_gang, make_queue, n, pod, podgroup, running

pytestmark = pytest.mark.django_db


@pytest.fixture
def node(cluster):
    """A node the test's pods run on, deleted after it."""
    cluster.add_node("timeout-node", gpus=8)
    yield "timeout-node"
    cluster.delete_node("timeout-node")


def test_a_running_group_past_its_exec_timeout_ends_and_its_pods_are_deleted(
        backend, cluster, alice, team, node) -> None:
    name = submit(alice, "team", spec("timed", tasks=2,
                                      extra="  timeout: {exec_timeout: 2m}\n"))
    backend.dispatch()
    podgroup = cluster.get("podgroups", f"{name}-g")
    assert podgroup["metadata"]["annotations"][EXEC_TIMEOUT_ANNOTATION] == "120"
    pods = [f"{name}-g-t0", f"{name}-g-t1"]
    for pod_name in pods:
        cluster.run(pod_name, node)
    backend.listen()
    assert statuses(alice, name) == ("RUNNING", ["RUNNING", "RUNNING"])
    started = WorkflowGroup.objects.get(workflow__name=name).started_at

    assert services.timeouts_enforce(now=started + timedelta(seconds=119)) == 0
    assert backend.cleanup() == 0
    assert services.timeouts_enforce(now=started + timedelta(seconds=120)) == 1
    assert statuses(alice, name) == ("FAILED_EXEC_TIMEOUT", ["FAILED_EXEC_TIMEOUT"] * 2)
    assert backend.cleanup() == 1
    for pod_name in pods:  # bound: Terminating until a kubelet confirms (none here)
        assert cluster.get("pods", pod_name)["metadata"]["deletionTimestamp"]
    assert cluster.get("podgroups", f"{name}-g") is None
    backend.listen()  # the pods' deletion changes nothing more
    assert statuses(alice, name) == ("FAILED_EXEC_TIMEOUT", ["FAILED_EXEC_TIMEOUT"] * 2)


def test_a_group_that_never_got_a_node_ends_at_its_queue_timeout(backend, cluster, alice,
                                                                 team) -> None:
    name = submit(alice, "team", spec("queued", extra="  timeout: {queue_timeout: 30s}\n"))
    other = submit(alice, "team", spec("patient"))
    backend.dispatch()
    queued_at = WorkflowGroup.objects.get(workflow__name=name).scheduling_at
    assert services.timeouts_enforce(now=queued_at + timedelta(seconds=29)) == 0
    assert services.timeouts_enforce(now=queued_at + timedelta(seconds=31)) == 1
    assert statuses(alice, name) == ("FAILED_QUEUE_TIMEOUT", ["FAILED_QUEUE_TIMEOUT"])
    assert backend.cleanup() == 1
    assert cluster.names("pods") == [f"{other}-g-t0"]  # unbound: gone at once
    assert cluster.names("podgroups") == [f"{other}-g"]


def test_our_scheduler_reserves_nodes_and_the_podgroup_status_says_when_it_starts(
        sched, cluster, apiserver, namespace) -> None:
    sched.placement.config = replace(sched.placement.config, reserve_after_seconds=0)
    q = make_queue(apiserver, namespace)
    cluster.add_node(n(namespace, 1), gpus=8)
    short = podgroup(namespace, "short", q, min_member=2)
    short["metadata"]["annotations"] = {EXEC_TIMEOUT_ANNOTATION: "3600",
                                        "osmo/workflow-name": "short-1"}
    apiserver.create(short)
    names = [f"short-{i}" for i in range(2)]
    for name in names:
        apiserver.create(pod(namespace, name, "short", q, gpus=3))
    sched.until(lambda: running(apiserver, namespace, names), what="short running")
    create_gang(apiserver, namespace, "big", q, pods=1, gpus=8)

    def reserved():
        group = cluster.get("podgroups", "big")
        conditions = (group.get("status") or {}).get("schedulingConditions") or []
        return [r for c in conditions for r in c.get("reasons") or []
                if r.get("reason") == "reserved_start"]

    (reason,) = sched.until(reserved, what="the reservation in the PodGroup's status")
    assert reason["message"].startswith(f"reserved nodes {n(namespace, 1)}; expected start "
                                        "in ")
    assert reason["message"].endswith("when workflow 'short-1' reaches its exec_timeout")
    (row,) = [r for r in pending_gangs(sched.placement) if r.podgroup == "big"]
    assert row.estimate["reserved_nodes"] == [n(namespace, 1)]
    assert row.estimate["waits_for"] == ["workflow 'short-1'"]
    start = datetime.fromisoformat(row.estimate["expected_start_at"].replace("Z", "+00:00"))
    assert 3500 < (start - datetime.now(UTC)).total_seconds() <= 3600
    # 2 GPUs are free now, but held for big: a fresh 1-GPU gang without a timeout waits
    create_gang(apiserver, namespace, "fresh", q, pods=1, gpus=1)
    sched.settle(0.5)
    assert bound(apiserver, namespace, ["fresh-0"]) == {"fresh-0": None}
    codes = {r.code for r in sched.placement.last_result.explanation(f"{namespace}/fresh")}
    assert "reserved_for_other" in codes
