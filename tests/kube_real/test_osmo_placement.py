"""``OSMO_PLACEMENT=osmo`` on the real API server: our scheduler's cache (LIST + WATCH), the
pure core's decisions, bindings through ``pods/binding``, evictions, PodGroup status and
Events — with a kubelet stand-in that admits bound pods as kubelet does and removes deleted
ones; every test fails if a node's bound pods ever request more than its allocatable."""

from __future__ import annotations

import pytest

from scheduler.backends.kubernetes import placement as placement_module
from tests.k8s.conftest import spec, statuses, submit, workflow

from .conftest import wait_for
from .kubelet import overcommitted
from .osmo_placement import (
    SCHEDULER,
    Scheduler,
    all_bound,
    bound,
    create_gang,
    delete_all_nodes,
    events_for,
    exists,
    install_rbac,
    make_queue,
    n,
    node_of,
    pod,
    podgroup,
    queue,
    running,
    uninstall_cluster_rbac,
)

pytestmark = pytest.mark.django_db


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


# --- gangs: elastic, minSubGroup, topology ---------------------------------------------------

def test_an_elastic_gang_starts_at_its_minimum_and_grows(sched, cluster, apiserver,
                                                         namespace) -> None:
    q = make_queue(apiserver, namespace)
    for i in (1, 2, 3):
        cluster.add_node(n(namespace, i), gpus=4)
    names = create_gang(apiserver, namespace, "elastic", q, pods=4, gpus=4, min_member=2)
    sched.until(lambda: sum(1 for v in bound(apiserver, namespace, names).values() if v) == 3,
                what="three of four")
    sched.settle(0.3)
    assert sum(1 for v in bound(apiserver, namespace, names).values() if v) == 3
    cluster.add_node(n(namespace, 4), gpus=4)
    sched.until(lambda: all_bound(apiserver, namespace, names), what="grown to four")


def test_min_subgroup_starts_with_whole_subgroups_and_grows_by_whole_subgroups(
        sched, cluster, apiserver, namespace) -> None:
    """minSubGroup 2 of 3 subgroups of two 2-GPU pods (minMember 2 each), on 4 + 4 + 2 GPUs:
    room for the minimum (8 GPUs) and one pod more, but not for a third whole subgroup."""
    q = make_queue(apiserver, namespace)
    for i, gpus in ((1, 4), (2, 4), (3, 2)):
        cluster.add_node(n(namespace, i), gpus=gpus)
    subgroups = ("a", "b", "c")
    apiserver.create(podgroup(namespace, "sub", q, minSubGroup=2, subGroups=[
        {"name": s, "minMember": 2} for s in subgroups]))
    members = {s: [f"sub-{s}-{i}" for i in range(2)] for s in subgroups}
    for s, names in members.items():
        for name in names:
            apiserver.create(pod(namespace, name, "sub", q, gpus=2, subgroup=s))

    def placed() -> dict[str, int]:
        return {s: sum(1 for v in bound(apiserver, namespace, names).values() if v)
                for s, names in members.items()}

    sched.until(lambda: sum(placed().values()) >= 4, what="the minimum")
    sched.settle(0.3)
    assert sorted(placed().values()) == [0, 2, 2]  # two whole subgroups, nothing of the third
    cluster.add_node(n(namespace, 4), gpus=2)
    sched.until(lambda: placed() == dict.fromkeys(subgroups, 2), what="the third subgroup")


def test_a_required_rack_counts_other_schedulers_pods(sched, cluster, apiserver,
                                                      namespace) -> None:
    q = make_queue(apiserver, namespace)
    rack = "topology.osmo/rack"
    for i, r in ((1, "r1"), (2, "r1"), (3, "r2"), (4, "r2")):
        cluster.add_node(n(namespace, i), gpus=4, labels={rack: r})
    # Another scheduler's pod holds half of one r2 node: r2 cannot take two 4-GPU pods.
    apiserver.create(pod(namespace, "foreign", "none", q, gpus=2, scheduler="default-scheduler"))
    cluster.bind("foreign", n(namespace, 3))
    wait_for(lambda: running(apiserver, namespace, ["foreign"]), what="foreign pod running")
    cluster.delete_node(n(namespace, 1))  # and r1 has one node left
    names = create_gang(apiserver, namespace, "rack", q, pods=2, gpus=4, min_member=2,
                        topologyConstraint={"requiredTopologyLevel": rack})
    sched.until(lambda: sched.placement.reported.get(f"{namespace}/rack"), what="explained")
    sched.settle(0.3)
    assert not any(bound(apiserver, namespace, names).values())
    cluster.add_node(n(namespace, 5), gpus=4, labels={rack: "r1"})
    sched.until(lambda: all_bound(apiserver, namespace, names), what="rack r1")
    assert set(bound(apiserver, namespace, names).values()) == {n(namespace, 2),
                                                                n(namespace, 5)}
    assert node_of(apiserver, namespace, "foreign") == n(namespace, 3)  # not ours: untouched


# --- evictions -------------------------------------------------------------------------------

def test_preempt_evicts_real_pods_and_waits_for_them(sched, cluster, apiserver, namespace,
                                                     kubelet) -> None:
    q = make_queue(apiserver, namespace)
    cluster.add_node(n(namespace, 1), gpus=4)
    low = create_gang(apiserver, namespace, "low", q, pods=2, gpus=2, min_member=2,
                      priority_class="osmo-low")
    sched.until(lambda: running(apiserver, namespace, low), what="low running")
    kubelet.pause()  # victims stay Terminating until the "kubelet" confirms
    high = create_gang(apiserver, namespace, "high", q, pods=1, gpus=4,
                       priority_class="osmo-high")
    sched.until(lambda: all(cluster.get("pods", p)["metadata"].get("deletionTimestamp")
                            for p in low), what="victims deleted")
    for victim in low:
        conditions = {c["type"]: c for c in cluster.get("pods", victim)["status"]["conditions"]}
        assert conditions["DisruptionTarget"]["reason"] == "PreemptionByScheduler"
        assert any(e["reason"] == "Preempted" for e in events_for(apiserver, namespace, victim))
    sched.settle(0.5)
    assert node_of(apiserver, namespace, high[0]) is None  # the GPUs are not free yet
    assert "terminate" in str(sched.placement.reported.get(f"{namespace}/high"))
    kubelet.resume()
    sched.until(lambda: all_bound(apiserver, namespace, high), what="preemptor bound")
    assert sched.placement.totals["delete"] == 2


def test_reclaim_takes_back_a_queue_s_quota(sched, cluster, apiserver, namespace) -> None:
    parent = make_queue(apiserver, namespace, "parent")
    qa = make_queue(apiserver, namespace, "a", parent=parent, quota=2)
    qb = make_queue(apiserver, namespace, "b", parent=parent, quota=2)
    cluster.add_node(n(namespace, 1), gpus=4)
    a1 = create_gang(apiserver, namespace, "a1", qa, pods=1, gpus=2, priority_class="osmo-low")
    a2 = create_gang(apiserver, namespace, "a2", qa, pods=1, gpus=2, priority_class="osmo-low")
    sched.until(lambda: running(apiserver, namespace, a1 + a2), what="queue a over quota")
    b = create_gang(apiserver, namespace, "b1", qb, pods=1, gpus=2, priority_class="osmo-low")
    sched.until(lambda: all_bound(apiserver, namespace, b), what="reclaimed")
    survivors = [p for p in a1 + a2 if exists(apiserver, namespace, p)]
    assert len(survivors) == 1
    (victim,) = set(a1 + a2) - set(survivors)
    assert any(e["reason"] == "Preempted" and "reclaimed" in e["message"]
               for e in events_for(apiserver, namespace, victim))


# --- the cluster changes under the scheduler ------------------------------------------------

def test_a_cordoned_then_deleted_node(sched, cluster, apiserver, namespace) -> None:
    q = make_queue(apiserver, namespace)
    cluster.add_node(n(namespace, 1), gpus=4)
    cluster.add_node(n(namespace, 2), gpus=4)
    apiserver.request("PATCH", f"/api/v1/nodes/{n(namespace, 1)}",
                      {"spec": {"unschedulable": True}},
                      content_type="application/merge-patch+json")
    first = create_gang(apiserver, namespace, "first", q, pods=1, gpus=4)
    sched.until(lambda: all_bound(apiserver, namespace, first), what="first bound")
    assert node_of(apiserver, namespace, first[0]) == n(namespace, 2)
    cluster.delete_node(n(namespace, 2))
    second = create_gang(apiserver, namespace, "second", q, pods=1, gpus=4)
    sched.until(lambda: sched.placement.reported.get(f"{namespace}/second"), what="explained")
    sched.settle(0.3)
    assert node_of(apiserver, namespace, second[0]) is None
    apiserver.request("PATCH", f"/api/v1/nodes/{n(namespace, 1)}",
                      {"spec": {"unschedulable": False}},
                      content_type="application/merge-patch+json")
    sched.until(lambda: all_bound(apiserver, namespace, second), what="uncordoned")
    assert node_of(apiserver, namespace, second[0]) == n(namespace, 1)


def test_only_our_scheduler_name_is_scheduled(sched, cluster, apiserver, namespace) -> None:
    q = make_queue(apiserver, namespace)
    cluster.add_node(n(namespace, 1), gpus=8)
    apiserver.create(podgroup(namespace, "theirs", q))
    apiserver.create(pod(namespace, "theirs-0", "theirs", q, scheduler="kai-scheduler"))
    mine = create_gang(apiserver, namespace, "mine", q, pods=1, gpus=1)
    sched.until(lambda: all_bound(apiserver, namespace, mine), what="ours bound")
    sched.settle(0.3)
    assert node_of(apiserver, namespace, "theirs-0") is None


# --- conflicts -------------------------------------------------------------------------------

def intercept_bind(sched, pod_name: str, action) -> None:
    """Run ``action`` once, just before ``pod_name`` is bound: between decision and bind."""
    original = sched.placement.applier._bind
    done = []

    def bind(figures, pod_key, node):
        if not done and pod_key.endswith(f"/{pod_name}"):
            done.append(True)
            action()
        return original(figures, pod_key, node)

    sched.placement.applier._bind = bind


def race_bind(monkeypatch, sched, cluster, pod_name: str, choose) -> dict[str, str]:
    """Another binder binds ``pod_name`` to ``choose(plan)`` just before our bind of it (plan:
    this cycle's pod name → node). Returns the plan once the cycle has decided."""
    plan: dict[str, str] = {}
    decide = placement_module.run_cycle

    def deciding(snapshot):
        result = decide(snapshot)
        plan.update({b.pod.split("/", 1)[1]: b.node for b in result.bindings})
        return result

    monkeypatch.setattr(placement_module, "run_cycle", deciding)
    intercept_bind(sched, pod_name, lambda: cluster.bind(pod_name, choose(plan)))
    return plan


def cluster_overcommits(apiserver) -> list[str]:
    return overcommitted(apiserver.request("GET", "/api/v1/pods")["items"],
                         apiserver.request("GET", "/api/v1/nodes")["items"])


def race_onto_our_plan(monkeypatch, sched, cluster, kubelet, names) -> dict[str, str]:
    """One cycle in which another binder puts ``names[0]`` where we planned ``names[1]``, what
    it leaves judged before any kubelet acts on it: no node holds more than its allocatable,
    ``names[0]`` is where the other binder put it. Returns the plan."""
    kubelet.pause()
    plan = race_bind(monkeypatch, sched, cluster, names[0], lambda plan: plan[names[1]])
    wait_for(lambda: all(sched.cache.pods.get(f"{cluster.namespace}/{name}") for name in names),
             what="the scheduler's cache sees the gang")  # else the one cycle plans nothing
    sched.cycle()
    assert cluster_overcommits(cluster.server) == []
    assert node_of(cluster.server, cluster.namespace, names[0]) == plan[names[1]]
    return plan


def test_a_pod_bound_meanwhile_where_we_planned_it_counts_as_bound(
        monkeypatch, sched, cluster, apiserver, namespace) -> None:
    q = make_queue(apiserver, namespace)
    cluster.add_node(n(namespace, 1), gpus=2)
    cluster.add_node(n(namespace, 2), gpus=2)
    names = create_gang(apiserver, namespace, "race", q, pods=2, gpus=2, min_member=2)
    plan = race_bind(monkeypatch, sched, cluster, names[0], lambda plan: plan[names[0]])
    sched.until(lambda: all_bound(apiserver, namespace, names), what="gang bound")
    sched.settle(0.3)
    assert bound(apiserver, namespace, names) == plan  # as planned, one bind by the other
    assert sched.placement.totals["delete"] == 0  # nothing undone
    assert cluster_overcommits(apiserver) == []


def test_a_pod_bound_meanwhile_elsewhere_with_room_keeps_the_gang(
        monkeypatch, sched, cluster, apiserver, namespace) -> None:
    q = make_queue(apiserver, namespace)
    nodes = [n(namespace, i) for i in (1, 2, 3)]
    for node in nodes:
        cluster.add_node(node, gpus=2)
    names = create_gang(apiserver, namespace, "race", q, pods=2, gpus=2, min_member=2)
    plan = race_bind(monkeypatch, sched, cluster, names[0],
                     lambda plan: (set(nodes) - set(plan.values())).pop())
    sched.until(lambda: all_bound(apiserver, namespace, names), what="gang bound")
    sched.settle(0.3)
    placed = bound(apiserver, namespace, names)
    assert placed[names[1]] == plan[names[1]]
    assert placed[names[0]] not in plan.values()  # where the other binder put it: room there
    assert sched.placement.totals["delete"] == 0
    assert cluster_overcommits(apiserver) == []


def test_a_pod_bound_meanwhile_onto_our_plan_never_overcommits_a_node(
        monkeypatch, sched, cluster, apiserver, namespace, kubelet) -> None:
    """2-GPU nodes, a gang of two 2-GPU pods: another binder puts the first pod where we
    planned the second. Binding the second too would make that node hold 4 GPUs."""
    q = make_queue(apiserver, namespace)
    cluster.add_node(n(namespace, 1), gpus=2)
    cluster.add_node(n(namespace, 2), gpus=2)
    names = create_gang(apiserver, namespace, "race", q, pods=2, gpus=2, min_member=2)
    plan = race_onto_our_plan(monkeypatch, sched, cluster, kubelet, names)
    second = cluster.get("pods", names[1])
    assert second is None or second["metadata"].get("deletionTimestamp")  # undone
    reported = str(sched.placement.reported.get(f"{namespace}/race"))
    assert f"{names[0]} was bound to {plan[names[1]]} by another binder" in reported
    kubelet.resume()
    sched.settle(0.5)
    kubelet.step_now()
    assert cluster_overcommits(apiserver) == []
    assert not exists(apiserver, namespace, names[1])
    assert not exists(apiserver, namespace, f"{names[1]}-m1")  # another user's: not replaced
    assert running(apiserver, namespace, names[:1])  # the kubelet admitted what is left


def test_a_workflow_task_whose_pod_is_released_waits_and_then_runs(
        monkeypatch, sched, backend, cluster, alice, team, namespace, apiserver,
        kubelet) -> None:
    """A three-task gang on three 2-GPU nodes; another binder puts t0 where we planned t1. The
    pod we bound there is released (``BindingConflict``), and with it the gang's other pod
    bound this cycle (``GangIncomplete``: the gang fell below its minimum). Neither ever ran:
    their tasks wait again — never FAILED — in new pods, bound and Running once there is room."""
    for i in (1, 2, 3):
        cluster.add_node(n(namespace, i), gpus=2)
    name = submit(alice, "team", spec("race", gpus=2, tasks=3))
    backend.dispatch()
    backend.listen()  # the listener watches from here on: it sees every step of the pods
    pods = [f"{name}-g-t{i}" for i in range(3)]
    plan = race_onto_our_plan(monkeypatch, sched, cluster, kubelet, pods)
    released = {p: [e["reason"] for e in events_for(apiserver, namespace, p)
                    if e["reason"] != "FailedScheduling"] for p in pods[1:]}
    assert released == {pods[1]: ["BindingConflict"], pods[2]: ["GangIncomplete"]}
    kubelet.resume()
    wait_for(lambda: running(apiserver, namespace, pods[:1])
             and not exists(apiserver, namespace, pods[1])
             and not exists(apiserver, namespace, pods[2]), what="released pods gone")
    for _ in range(3):  # the listener sees the released pods go
        backend.listen()
    assert statuses(alice, name) == ("RUNNING", ["RUNNING", "SCHEDULING", "SCHEDULING"])
    again = [pods[0], f"{pods[1]}-m1", f"{pods[2]}-m1"]
    sched.until(lambda: running(apiserver, namespace, again), what="the gang running")
    wait_for(lambda: (backend.listen() or True) and statuses(alice, name) == (
        "RUNNING", ["RUNNING"] * 3), what="tasks running")
    tasks = workflow(alice, name)["groups"][0]["tasks"]
    assert [(t["node"], t["reason"]) for t in tasks] == [
        (node_of(apiserver, namespace, p), None) for p in again]  # bound again, not "moved"
    lines = b"".join(alice.get(f"/api/workflow/{name}/events").streaming_content).decode()
    for task, (first, last) in {"t1": (plan[pods[1]], tasks[1]["node"]),
                                "t2": (plan[pods[2]], tasks[2]["node"])}.items():
        assert [line.split("] ", 1)[1] for line in lines.splitlines()
                if f"[{task}]" in line] == [
            f"Bound: bound to node {first}",
            f"Released: taken back from node {first} before it ran; waits for a node again",
            f"Bound: bound to node {last}", f"Running: on node {last}"]
    assert cluster_overcommits(apiserver) == []


def test_a_pod_deleted_before_its_bind_undoes_the_gang(sched, cluster, apiserver,
                                                       namespace) -> None:
    q = make_queue(apiserver, namespace)
    cluster.add_node(n(namespace, 1), gpus=4)
    names = create_gang(apiserver, namespace, "torn", q, pods=2, gpus=2, min_member=2)
    intercept_bind(sched, names[1], lambda: cluster.delete_pod(names[1], final=True))
    sched.until(lambda: sched.placement.totals["bind"] >= 2, what="binds attempted")
    wait_for(lambda: not exists(apiserver, namespace, names[0]), what="the bound pod released")
    reported = str(sched.placement.reported.get(f"{namespace}/torn"))
    assert "deleted before binding" in reported
    assert any(e["reason"] == "GangIncomplete" for e in events_for(apiserver, namespace,
                                                                   names[0]))


def test_a_restarted_scheduler_counts_what_is_bound(sched, cluster, apiserver,
                                                   namespace) -> None:
    """A scheduler that started without knowing what runs would bind the second gang onto
    the 2 GPUs left of an 8-GPU node (and the first gang's pods again)."""
    q = make_queue(apiserver, namespace)
    cluster.add_node(n(namespace, 1), gpus=8)
    first = create_gang(apiserver, namespace, "before", q, pods=2, gpus=3, min_member=2)
    sched.until(lambda: all_bound(apiserver, namespace, first), what="first gang")
    sched.stop()  # mid-run: whatever it assumed is lost with it
    second = create_gang(apiserver, namespace, "after", q, pods=2, gpus=2, min_member=2)
    again = Scheduler(apiserver, namespace)
    try:
        again.until(lambda: again.placement.reported.get(f"{namespace}/after"),
                    what="explained")
        again.settle(0.5)
        assert bound(apiserver, namespace, second) == dict.fromkeys(second)  # 4 > 2 free
        assert "GPU" in str(again.placement.reported[f"{namespace}/after"]).upper()
        assert again.placement.totals["bind"] == 0
        cluster.add_node(n(namespace, 2), gpus=4)
        again.until(lambda: all_bound(apiserver, namespace, second), what="second gang")
        again.settle(0.3)
        assert again.placement.totals["bind"] == 2  # only the new gang's pods
        assert bound(apiserver, namespace, first) == dict.fromkeys(first, n(namespace, 1))
        assert cluster_overcommits(apiserver) == []
    finally:
        again.stop()


def test_the_placement_rbac_adds_exactly_what_a_scheduler_needs(sched, apiserver,
                                                               namespace) -> None:
    from .test_deploy import can

    assert can(apiserver, "create", "pods", namespace, subresource="binding")
    assert can(apiserver, "patch", "pods", namespace, subresource="status")
    assert can(apiserver, "create", "events", namespace)
    assert can(apiserver, "patch", "podgroups", namespace, "scheduling.run.ai", "status")
    assert can(apiserver, "watch", "pods", "kube-system")  # usage of every pod
    assert can(apiserver, "watch", "nodes")
    assert not can(apiserver, "update", "pods", namespace)
    assert not can(apiserver, "create", "pods", "kube-system", subresource="binding")
    assert not can(apiserver, "get", "secrets", "kube-system")
    assert not can(apiserver, "delete", "nodes")
    assert not can(apiserver, "patch", "nodes")


def test_a_gang_stuck_below_its_minimum_is_evicted_when_stale(apiserver, namespace,
                                                              osmo_settings, kubelet,
                                                              cluster) -> None:
    from scheduler.core import SchedulerConfig

    install_rbac(apiserver, namespace)
    delete_all_nodes(apiserver)
    sched = Scheduler(apiserver, namespace, config=SchedulerConfig(stale_grace_seconds=0.5))
    try:
        q = make_queue(apiserver, namespace)
        cluster.add_node(n(namespace, 1), gpus=4)
        names = create_gang(apiserver, namespace, "stuck", q, pods=2, gpus=4, min_member=2)
        cluster.bind(names[0], n(namespace, 1))  # another binder placed half of it
        wait_for(lambda: running(apiserver, namespace, names[:1]), what="half running")
        sched.until(lambda: not exists(apiserver, namespace, names[0]), what="stale eviction")
        assert any(e["reason"] == "EvictionByScheduler"
                   for e in events_for(apiserver, namespace, names[0]))
    finally:
        sched.stop()
        delete_all_nodes(apiserver)
        uninstall_cluster_rbac(apiserver)


def test_a_preempted_workflow_task_ends_failed_preempted(sched, backend, cluster, alice, team,
                                                         namespace, apiserver) -> None:
    cluster.add_node(n(namespace, 1), gpus=4)
    low = submit(alice, "team", spec("low", gpus=4), priority="LOW")
    backend.dispatch()
    sched.until(lambda: running(apiserver, namespace, [f"{low}-g-t0"]), what="low running")
    wait_for(lambda: (backend.listen() or True) and statuses(alice, low) == (
        "RUNNING", ["RUNNING"]), what="low RUNNING")  # the listener watches from here on
    high = submit(alice, "team", spec("high", gpus=4), priority="HIGH")
    backend.dispatch()
    sched.until(lambda: all_bound(apiserver, namespace, [f"{high}-g-t0"]), what="preemptor")
    wait_for(lambda: (backend.listen() or True) and statuses(alice, low)[1] == [
        "FAILED_PREEMPTED"], what="low preempted")
    wait_for(lambda: (backend.listen() or True) and statuses(alice, high) == (
        "RUNNING", ["RUNNING"]), what="high running")
