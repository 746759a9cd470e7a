"""Consolidation on the real API server (``OSMO_PLACEMENT=osmo``): a running preemptible pod
is moved — its replacement created and bound first, then the pod marked and deleted — so a
gang that fits the free GPUs in total but on no single node can run; the task is not failed."""

from __future__ import annotations

import pytest

from tests.k8s.conftest import spec, statuses, submit, workflow

from .conftest import wait_for
from .osmo_placement import create_gang, events_for, exists, make_queue, n, node_of, running

pytestmark = pytest.mark.django_db


def cordon(apiserver, node: str, value: bool = True) -> None:
    apiserver.request("PATCH", f"/api/v1/nodes/{node}", {"spec": {"unschedulable": value}},
                      content_type="application/merge-patch+json")


def fragment(sched, cluster, apiserver, namespace, place_first, place_second) -> None:
    """Two 4-GPU nodes, each made to hold one 2-GPU pod: ``place_first()`` runs while only
    node 2 takes pods, ``place_second()`` while only node 1 does.

    The pod placed second is the one a gang needing a whole node moves, whatever the clock:
    KAI's victim order takes the most recently started first, and pods started in the same
    second (timestamps have whole seconds) by name — so the tests place ``b`` first, ``a``
    second."""
    one, two = n(namespace, 1), n(namespace, 2)
    cluster.add_node(one, gpus=4)
    cluster.add_node(two, gpus=4)
    cordon(apiserver, one)
    place_first()
    cordon(apiserver, one, False)
    cordon(apiserver, two)
    place_second()
    cordon(apiserver, two, False)


def test_a_move_makes_room_for_a_gang(sched, cluster, apiserver, namespace, kubelet) -> None:
    q = make_queue(apiserver, namespace)
    one, two = n(namespace, 1), n(namespace, 2)

    def low(name):
        pods = create_gang(apiserver, namespace, name, q, pods=1, gpus=2,
                           priority_class="osmo-low")
        sched.until(lambda: running(apiserver, namespace, pods), what=f"{name} running")
        return pods

    placed = {}
    fragment(sched, cluster, apiserver, namespace, lambda: placed.update(b=low("b")),
             lambda: placed.update(a=low("a")))
    assert (node_of(apiserver, namespace, "a-0"), node_of(apiserver, namespace, "b-0")) == (
        one, two)
    kubelet.pause()  # the moved pod stays Terminating until the "kubelet" confirms
    big = create_gang(apiserver, namespace, "big", q, pods=1, gpus=4)
    sched.until(lambda: cluster.get("pods", "a-0")["metadata"].get("deletionTimestamp"),
                what="a-0 moved")
    moved = cluster.get("pods", "a-0")
    (condition,) = [c for c in moved["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert condition["reason"] == "ConsolidationByScheduler"
    assert f"to make room for gang {namespace}/big" in condition["message"]
    assert any(e["reason"] == "Moved" and two in e["message"]
               for e in events_for(apiserver, namespace, "a-0"))
    replacement = cluster.get("pods", "a-0-m1")
    assert replacement["metadata"]["annotations"]["osmo/moved-from"] == "a-0"
    assert replacement["metadata"]["labels"] == moved["metadata"]["labels"]
    assert replacement["spec"]["hostname"] == "a-0"  # peers still reach it by its old name
    assert replacement["spec"]["containers"] == moved["spec"]["containers"]
    sched.until(lambda: node_of(apiserver, namespace, "a-0-m1") == two, what="replacement")
    sched.settle(0.5)
    assert node_of(apiserver, namespace, big[0]) is None  # a-0's GPUs are not free yet
    assert "terminate" in str(sched.placement.reported.get(f"{namespace}/big"))
    kubelet.resume()
    sched.until(lambda: node_of(apiserver, namespace, big[0]) == one, what="big bound")
    sched.until(lambda: running(apiserver, namespace, ["a-0-m1", "b-0", big[0]]),
                what="all running")
    sched.settle(0.5)
    assert not exists(apiserver, namespace, "a-0")
    assert not exists(apiserver, namespace, "a-0-m2")  # moved once, not again
    totals = sched.placement.totals
    assert (totals["create"], totals["delete"]) == (1, 1)  # one move, nothing evicted


def test_an_orphaned_replacement_is_deleted(sched, cluster, apiserver, namespace) -> None:
    """The scheduler stopped between creating a replacement and marking its pod: the
    replacement must not run beside the pod."""
    from scheduler.backends.kubernetes.moves import replacement_of

    q = make_queue(apiserver, namespace)
    cluster.add_node(n(namespace, 1), gpus=4)
    pods = create_gang(apiserver, namespace, "solo", q, pods=1, gpus=2,
                       priority_class="osmo-low")
    sched.until(lambda: running(apiserver, namespace, pods), what="solo running")
    apiserver.create(replacement_of(cluster.get("pods", "solo-0")))
    wait_for(lambda: sched.cache.pods.get(f"{namespace}/solo-0-m1") is not None,
             what="cache sees the orphan")
    sched.until(lambda: not exists(apiserver, namespace, "solo-0-m1"), what="orphan deleted")
    assert node_of(apiserver, namespace, "solo-0") == n(namespace, 1)  # untouched
    assert sched.placement.totals["bind"] == 1


def test_a_moved_task_keeps_running_on_its_new_node(sched, backend, cluster, alice, team,
                                                    namespace, apiserver) -> None:
    names = {}

    def low(key):
        name = submit(alice, "team", spec(key, gpus=2), priority="LOW")
        backend.dispatch()
        sched.until(lambda: running(apiserver, namespace, [f"{name}-g-t0"]),
                    what=f"{key} running")
        names[key] = name

    fragment(sched, cluster, apiserver, namespace, lambda: low("b"), lambda: low("a"))
    wait_for(lambda: (backend.listen() or True) and all(
        statuses(alice, names[k]) == ("RUNNING", ["RUNNING"]) for k in "ab"),
        what="both RUNNING")
    before = {k: workflow(alice, names[k])["groups"][0]["tasks"][0]["node"] for k in "ab"}
    assert before == {"a": n(namespace, 1), "b": n(namespace, 2)}
    big = submit(alice, "team", spec("big", gpus=4))
    backend.dispatch()
    sched.until(lambda: node_of(apiserver, namespace, f"{big}-g-t0") == n(namespace, 1),
                what="big bound")
    wait_for(lambda: (backend.listen() or True) and statuses(alice, big) == (
        "RUNNING", ["RUNNING"]), what="big RUNNING")
    wait_for(lambda: (backend.listen() or True) and workflow(alice, names["a"])["groups"][0][
        "tasks"][0]["node"] == n(namespace, 2), what="a's task on its new node")
    task = workflow(alice, names["a"])["groups"][0]["tasks"][0]
    assert (task["status"], task["reason"]) == ("RUNNING", "consolidated")
    assert statuses(alice, names["a"]) == ("RUNNING", ["RUNNING"])
    assert statuses(alice, names["b"]) == ("RUNNING", ["RUNNING"])
    assert workflow(alice, names["b"])["groups"][0]["tasks"][0]["node"] == n(namespace, 2)
