"""The placement's cache → Snapshot translation, without an API server: other schedulers' pods
hold capacity, condition taints do not cordon, queues must exist and be leaves, KAI's
preemptibility rule, unchanged gangs are reused, and which events wake a cycle."""

from __future__ import annotations

from types import SimpleNamespace

from scheduler.backends.kubernetes.cache import wakes_scheduler
from scheduler.backends.kubernetes.moves import (
    is_replacement,
    is_task_pod,
    moved_by_kai,
    replacement_of,
)
from scheduler.backends.kubernetes.placement import Placement
from scheduler.backends.kubernetes.snapshot import SnapshotMemo, build_snapshot, gang_ready
from scheduler.backends.kubernetes.status import observe

NS = "osmo"
ME = "osmo-scheduler"


class FakeInformer:
    def __init__(self, items):
        self._items = {f"{i['metadata'].get('namespace')}/{i['metadata']['name']}"
                       if i["metadata"].get("namespace") else i["metadata"]["name"]: i
                       for i in items}

    def items(self):
        return list(self._items.values())

    def get(self, key):
        return self._items.get(key)


class FakeCache:
    namespace = NS

    def __init__(self, nodes=(), pods=(), podgroups=(), queues=(), topologies=()):
        self.nodes, self.pods = FakeInformer(nodes), FakeInformer(pods)
        self.podgroups, self.queues = FakeInformer(podgroups), FakeInformer(queues)
        self.topologies = FakeInformer(topologies)


def node(name, gpus=8, *, taints=(), ready="True", unschedulable=False):
    capacity = {"nvidia.com/gpu": str(gpus), "cpu": "64", "memory": "256Gi"}
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"taints": list(taints), "unschedulable": unschedulable},
            "status": {"allocatable": capacity,
                       "conditions": [{"type": "Ready", "status": ready}]}}


def pod(name, group, *, gpus=1, node_name=None, scheduler=ME, priority=100, rv="1",
        phase="Pending", deleting=False, namespace=NS):
    metadata = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                "resourceVersion": rv, "annotations": {"pod-group-name": group}}
    if deleting:
        metadata["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    spec = {"schedulerName": scheduler, "priority": priority, "containers": [{
        "name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus), "cpu": "500m",
                                                "memory": "1Gi"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": metadata, "spec": spec, "status": {"phase": phase}}


def podgroup(name, queue="leaf", rv="1", **spec):
    return {"metadata": {"name": name, "namespace": NS, "resourceVersion": rv,
                         "creationTimestamp": "2025-01-01T00:00:00Z"},
            "spec": {"queue": queue, **spec}}


def queue(name, parent=None):
    return {"metadata": {"name": name}, "spec": {"parentQueue": parent} if parent else {}}


QUEUES = [queue("root"), queue("leaf", "root")]


def snapshot(cache, **kw):
    return build_snapshot(cache, scheduler_name=ME, now=1.0, **kw)


def test_other_schedulers_pods_hold_capacity_and_condition_taints_do_not_cordon() -> None:
    cache = FakeCache(
        nodes=[node("a", taints=[{"key": "node.kubernetes.io/not-ready",
                                  "effect": "NoSchedule"}]),
               node("b", taints=[{"key": "dedicated", "effect": "NoSchedule"}]),
               node("c", ready="False"), node("d", unschedulable=True)],
        pods=[pod("other", "x", gpus=3, node_name="a", scheduler="default-scheduler",
                  namespace="elsewhere"),
              pod("done", "x", gpus=4, node_name="a", scheduler="default-scheduler",
                  phase="Succeeded")],
        queues=QUEUES)
    snap, _ = snapshot(cache)
    nodes = {n.name: n for n in snap.nodes}
    assert nodes["a"].gpus == 5 and nodes["a"].schedulable
    assert [n.name for n in snap.nodes if n.schedulable] == ["a"]


def test_gangs_from_podgroups_and_their_pods() -> None:
    cache = FakeCache(
        nodes=[node("a")], queues=QUEUES,
        podgroups=[podgroup("g", minMember=2), podgroup("low"),
                   podgroup("lost", queue="nope"), podgroup("mid", queue="root")],
        pods=[pod("g-0", "g", node_name="a"), pod("g-1", "g"),
              pod("g-2", "g", deleting=True),
              pod("low-0", "low", priority=50),
              pod("lost-0", "lost"), pod("mid-0", "mid"),
              pod("kai-0", "g", scheduler="kai-scheduler"),
              pod("nogroup-0", "unknown")])
    snap, index = snapshot(cache)
    gangs = {g.name: g for g in snap.gangs}
    assert set(gangs) == {"osmo/g", "osmo/low"}
    assert [(p.name, p.node) for p in gangs["osmo/g"].pods] == [("osmo/g-0", "a"),
                                                                ("osmo/g-1", None)]
    assert gangs["osmo/g"].min_member == 2 and not gangs["osmo/g"].preemptible
    assert gangs["osmo/low"].preemptible  # KAI: below 100 without preemptibility
    assert set(index.skipped) == {"osmo/lost", "osmo/mid"}
    assert index.terminating["a"] == [0, 0, 0]  # g-2 is not bound
    assert not gang_ready(gangs["osmo/g"], {"osmo/g-0"})
    assert gang_ready(gangs["osmo/g"], {"osmo/g-0", "osmo/g-1"})


def test_unchanged_gangs_are_reused_and_changed_ones_rebuilt() -> None:
    memo = SnapshotMemo()
    cache = FakeCache(nodes=[node("a")], queues=QUEUES,
                      podgroups=[podgroup("g"), podgroup("h")],
                      pods=[pod("g-0", "g"), pod("h-0", "h")])
    first, _ = snapshot(cache, memo=memo)
    cache.pods = FakeInformer([pod("g-0", "g"), pod("h-0", "h", node_name="a", rv="2")])
    second, _ = snapshot(cache, memo=memo)
    by_name = lambda snap: {g.name: g for g in snap.gangs}  # noqa: E731
    assert by_name(second)["osmo/g"] is by_name(first)["osmo/g"]
    assert by_name(second)["osmo/h"].pods[0].node == "a"
    cache.podgroups = FakeInformer([podgroup("h")])
    snapshot(cache, memo=memo)
    assert set(memo.gangs) == {"h"}


def test_a_pod_s_facts_are_read_once_per_object_and_again_when_it_is_replaced() -> None:
    memo = SnapshotMemo()
    kept, bound = pod("k-0", "k", node_name="a", phase="Running"), pod("b-0", "b", gpus=2)
    cache = FakeCache(nodes=[node("a")], queues=QUEUES,
                      podgroups=[podgroup("k"), podgroup("b")], pods=[kept, bound])
    snapshot(cache, memo=memo)
    facts = dict(memo.pods)
    assert set(facts) == {"osmo/k-0", "osmo/b-0"}
    # The informer replaces a changed pod's dict: the new one (bound, then deleting) is read.
    bound = pod("b-0", "b", gpus=2, node_name="a", rv="2", phase="Running")
    cache.pods = FakeInformer([kept, bound])
    snap, _ = snapshot(cache, memo=memo)
    assert memo.pods["osmo/k-0"][1] is facts["osmo/k-0"][1]
    assert memo.pods["osmo/b-0"][0] is bound and len(memo.pods) == 2
    assert {g.name: [p.node for p in g.pods] for g in snap.gangs} == {
        "osmo/k": ["a"], "osmo/b": ["a"]}
    cache.pods = FakeInformer([kept, pod("b-0", "b", gpus=2, node_name="a", rv="3",
                                         phase="Running", deleting=True)])
    snap, index = snapshot(cache, memo=memo)
    assert [g.name for g in snap.gangs] == ["osmo/k"]
    assert index.terminating["a"] == [2, 500, 2**30]  # held until it is gone


def test_which_changes_wake_a_cycle() -> None:
    assert wakes_scheduler("nodes", "MODIFIED", node("a"), ME)
    assert wakes_scheduler("pods", "ADDED", pod("p", "g"), ME)
    assert not wakes_scheduler("pods", "ADDED", pod("p", "g", scheduler="kai-scheduler"), ME)
    assert not wakes_scheduler("pods", "MODIFIED", pod("p", "g", node_name="a",
                                                       phase="Running"), ME)
    assert wakes_scheduler("pods", "MODIFIED", pod("p", "g", node_name="a",
                                                   phase="Succeeded"), ME)
    assert wakes_scheduler("pods", "MODIFIED", pod("p", "g", node_name="a", deleting=True),
                           ME)
    assert wakes_scheduler("pods", "DELETED", pod("p", "g", node_name="a"), ME)


def test_the_kubernetes_scheduler_consolidates_reclaims_and_preempts(settings):
    placement = Placement(None, SimpleNamespace(namespace="osmo"), scheduler_name="osmo")
    assert (placement.config.consolidate, placement.config.reclaim,
            placement.config.preempt) == (True, True, True)


def moving(p):
    p["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                  "reason": "ConsolidationByScheduler"}]
    return p


def test_a_replacement_is_the_pod_unbound_under_a_new_name() -> None:
    original = pod("train-0", "g", gpus=2, node_name="a", phase="Running")
    original["metadata"].update(labels={"osmo.workflow": "w"}, creationTimestamp="x",
                                ownerReferences=[{"kind": "PodGroup", "name": "g"}])
    first = replacement_of(original)
    assert first["metadata"] == {
        "name": "train-0-m1", "namespace": NS, "labels": {"osmo.workflow": "w"},
        "annotations": {"pod-group-name": "g", "osmo/moved-from": "train-0"},
        "ownerReferences": [{"kind": "PodGroup", "name": "g"}]}
    assert "nodeName" not in first["spec"] and "status" not in first
    assert first["spec"]["hostname"] == "train-0"
    assert first["spec"]["containers"] == original["spec"]["containers"]
    assert original["spec"]["nodeName"] == "a"  # the cached pod is not changed
    second = replacement_of({**first, "spec": {**first["spec"], "nodeName": "b"}})
    assert (second["metadata"]["name"], second["spec"]["hostname"]) == ("train-0-m2",
                                                                        "train-0")
    assert second["metadata"]["annotations"]["osmo/moved-from"] == "train-0-m1"
    long_name = replacement_of(pod("x" * 253, "g"))["metadata"]["name"]
    assert len(long_name) == 253 and long_name.endswith("-m1")
    assert "hostname" not in replacement_of(pod("x" * 64, "g"))["spec"]


def test_moved_pods_leave_and_orphaned_replacements_are_not_members() -> None:
    replacement = replacement_of(pod("mv-0", "mv", gpus=2, node_name="a"))
    replacement.update(status={"phase": "Pending"})
    orphan = replacement_of(pod("or-0", "or", gpus=2, node_name="a"))
    orphan.update(status={"phase": "Pending"})
    cache = FakeCache(
        nodes=[node("a")], queues=QUEUES, podgroups=[podgroup("mv"), podgroup("or")],
        pods=[moving(pod("mv-0", "mv", gpus=2, node_name="a", phase="Running")), replacement,
              pod("or-0", "or", gpus=2, node_name="a", phase="Running"), orphan])
    snap, index = snapshot(cache)
    gangs = {g.name: g for g in snap.gangs}
    assert [(p.name, p.node) for p in gangs["osmo/mv"].pods] == [("osmo/mv-0-m1", None)]
    assert [(p.name, p.node) for p in gangs["osmo/or"].pods] == [("osmo/or-0", "a")]
    assert index.terminating["a"][0] == 2  # the moved pod holds its GPUs until it is gone
    assert [p["metadata"]["name"] for p in index.leaving] == ["mv-0"]  # delete it again
    assert [p["metadata"]["name"] for p in index.orphans] == ["or-0-m1"]


def test_a_moved_pod_says_nothing_of_its_task() -> None:
    running = moving(pod("g-0", "g", node_name="a", phase="Running"))
    assert observe(running) is None and observe(running, deleted=True) is None
    failed = moving(pod("g-0", "g", node_name="a", phase="Failed"))
    assert observe(failed) is None  # killed by the move, not a failure of the task
    assert observe(pod("g-0", "g", node_name="a", phase="Running")).status == "RUNNING"
    assert is_replacement(replacement_of(running)) and not is_replacement(running)


def test_kai_s_consolidation_is_told_from_its_preemption_by_the_message() -> None:
    def evicted(message):
        p = pod("k-0", "k", node_name="a", phase="Running")
        p["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                      "reason": "PreemptionByScheduler", "message": message}]
        return p

    consolidated = evicted("Pod osmo/k-0 was preempted and rescheduled due to bin packing "
                           "(resource consolidation) procedure")
    preempted = evicted("Pod osmo/k-0 was preempted by higher priority workload osmo/big")
    assert moved_by_kai(consolidated) and observe(consolidated) is None
    assert not moved_by_kai(preempted) and observe(preempted).status == "FAILED_PREEMPTED"


def released(p, reason="BindingConflict"):
    p["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                  "reason": reason}]
    return p


def test_a_released_pod_leaves_and_its_task_waits_in_the_replacement() -> None:
    """A pod the scheduler took back before it ran says nothing of its task (no FAILED on its
    delete); marked but not deleted, it is deleted again; its replacement is a member."""
    for reason in ("BindingConflict", "GangIncomplete"):
        gone = released(pod("g-0", "g", node_name="a"), reason)
        assert observe(gone) is None and observe(gone, deleted=True) is None
    replacement = replacement_of(pod("rl-0", "rl", gpus=2, node_name="a"))
    replacement.update(status={"phase": "Pending"})
    cache = FakeCache(nodes=[node("a")], queues=QUEUES, podgroups=[podgroup("rl")],
                      pods=[released(pod("rl-0", "rl", gpus=2, node_name="a")), replacement])
    snap, index = snapshot(cache)
    assert [(p.name, p.node) for p in snap.gangs[0].pods] == [("osmo/rl-0-m1", None)]
    assert [p["metadata"]["name"] for p in index.leaving] == ["rl-0"]
    assert index.orphans == []


def test_only_a_workflow_task_s_pod_is_ours_to_replace() -> None:
    task = pod("w-g-t0", "g")
    task["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "osmo"}
    task["metadata"]["annotations"].update({"osmo/workflow-name": "w", "osmo/task-name": "t0"})
    assert is_task_pod(task)
    assert not is_task_pod(pod("theirs-0", "g"))  # another user's: only deleted
    task["metadata"]["labels"] = {}
    assert not is_task_pod(task)
