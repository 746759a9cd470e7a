"""``OSMO_PLACEMENT=osmo`` on the real API server: our scheduler's cache (LIST + WATCH), the
pure core's decisions, bindings through ``pods/binding``, evictions, PodGroup status and
Events — with a kubelet stand-in that starts bound pods and removes deleted ones."""

from __future__ import annotations

import pytest

from tests.k8s.conftest import spec, statuses, submit

from .conftest import wait_for
from .osmo_placement import (
    SCHEDULER,
    Kubelet,
    Scheduler,
    delete_all_nodes,
    events_for,
    install_rbac,
    node_of,
    pod,
    podgroup,
    queue,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def osmo_settings(k8s_settings):
    k8s_settings.OSMO_PLACEMENT = "osmo"
    k8s_settings.OSMO_SCHEDULER_NAME = SCHEDULER
    return k8s_settings


@pytest.fixture
def kubelet(apiserver, namespace):
    stand_in = Kubelet(apiserver, namespace).start()
    yield stand_in
    stand_in.stop()


@pytest.fixture
def sched(apiserver, namespace, osmo_settings, kubelet):
    install_rbac(apiserver, namespace)
    delete_all_nodes(apiserver)  # nodes are cluster-wide: this test's cluster starts empty
    scheduler = Scheduler(apiserver, namespace)
    yield scheduler
    scheduler.stop()
    delete_all_nodes(apiserver)


def n(namespace: str, i: int) -> str:
    """Node names are cluster-wide and pods of earlier tests stay bound to theirs: one set of
    names per test."""
    return f"{namespace}-n{i}"


def bound(apiserver, namespace, names) -> dict[str, str | None]:
    return {name: node_of(apiserver, namespace, name) for name in names}


def all_bound(apiserver, namespace, names) -> bool:
    return all(bound(apiserver, namespace, names).values())


# --- the end-to-end path -------------------------------------------------------------------

def test_a_workflow_is_placed_bound_and_running(sched, backend, cluster, alice, team,
                                                namespace, apiserver) -> None:
    cluster.add_node(n(namespace, 1), gpus=8)
    name = submit(alice, "team", spec("e2e", gpus=2, tasks=2))
    backend.dispatch()
    pods = [f"{name}-g-t0", f"{name}-g-t1"]
    assert {cluster.get("pods", p)["spec"]["schedulerName"] for p in pods} == {SCHEDULER}
    sched.until(lambda: all_bound(apiserver, namespace, pods), what="bound")
    assert set(bound(apiserver, namespace, pods).values()) == {n(namespace, 1)}
    wait_for(lambda: (backend.listen() or True) and statuses(alice, name) == (
        "RUNNING", ["RUNNING", "RUNNING"]), what="tasks running")
    figures = sched.placement.totals
    assert figures["bind"] == 2  # one bind per pod, nothing else needed
    assert set(figures) == {"bind"}


def test_a_gang_is_all_or_nothing_and_explained(sched, cluster, apiserver, namespace) -> None:
    apiserver.create(queue(f"{namespace}-q"), exist_ok=True)
    q = f"{namespace}-q"
    cluster.add_node(n(namespace, 1), gpus=4)
    cluster.add_node(n(namespace, 2), gpus=4)
    apiserver.create(podgroup(namespace, "big", q, min_member=3))
    names = [f"big-{i}" for i in range(3)]
    for name in names:
        apiserver.create(pod(namespace, name, "big", q, gpus=4))
    sched.until(lambda: sched.placement.reported.get(f"{namespace}/big"), what="explained")
    sched.settle(0.3)
    assert bound(apiserver, namespace, names) == dict.fromkeys(names)  # none of them
    group = cluster.get("podgroups", "big")
    (condition,) = group["status"]["schedulingConditions"]
    assert condition["type"] == "UnschedulableOnNodePool" and condition["status"] == "True"
    assert condition["reasons"] and "GPU" in condition["message"].upper()
    assert any(e["reason"] == "Unschedulable" for e in events_for(apiserver, namespace, "big"))
    assert any(e["reason"] == "FailedScheduling"
               for e in events_for(apiserver, namespace, "big-0"))
    cluster.add_node(n(namespace, 3), gpus=4)
    sched.until(lambda: all_bound(apiserver, namespace, names), what="the whole gang")
    assert sorted(bound(apiserver, namespace, names).values()) == [n(namespace, i)
                                                                   for i in (1, 2, 3)]
    wait_for(lambda: not cluster.get("podgroups", "big")["status"].get(
        "schedulingConditions"), what="condition cleared")
