"""The placement's kept snapshot (``SnapshotMemo`` fed by the informers' journals) against one
built afresh from the same cache: after any sequence of changes — pods of every kind coming,
changing and going, PodGroups, nodes and queues coming and going, re-lists, bindings not yet
seen, stale gangs — both are the same; and a cycle after one change reads that change only."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scheduler.backends.kubernetes.snapshot_memo as snapshot_memo
from scheduler.backends.kubernetes.informer import Informer
from scheduler.backends.kubernetes.snapshot import SnapshotMemo, build_snapshot
from scheduler.core.kai_names import EXEC_TIMEOUT_ANNOTATION, MOVED_FROM_ANNOTATION
from scheduler.core.node_totals import with_node_totals
from tests.unit.test_k8s_placement_snapshot import ME, NS, moving, node, queue
from tests.unit.test_k8s_placement_snapshot import pod as base_pod
from tests.unit.test_k8s_placement_snapshot import podgroup as base_podgroup

GROUPS, NODES, PODS = ("g0", "g1"), ("n0", "n1"), ("p0", "p1", "p2", "p3")


class Listed:
    def __init__(self, items):
        self.data = json.dumps({"items": items, "metadata": {"resourceVersion": "1"}}).encode()

    def release_conn(self):
        pass


def informer(name):
    made = Informer(name, lambda **_kwargs: Listed(made.items()))
    return made


def cache():
    made = SimpleNamespace(namespace=NS, nodes=informer("nodes"), pods=informer("pods"),
                           podgroups=informer("podgroups"), queues=informer("queues"),
                           topologies=informer("topologies"))
    made.queues.apply("ADDED", queue("root"))
    made.queues.apply("ADDED", queue("leaf", "root"))
    return made


def podgroup(name, queue_name="leaf", min_member=1, exec_timeout=None):
    made = base_podgroup(name, queue_name, minMember=min_member)
    if exec_timeout is not None:
        made["metadata"]["annotations"] = {EXEC_TIMEOUT_ANNOTATION: str(exec_timeout)}
    return made


def pod(name, group, *, leaving=False, moved_from=None, **fields):
    made = base_pod(name, group, **fields)
    del made["metadata"]["uid"]  # each a new pod: its requests are read, not remembered
    if moved_from:
        made["metadata"]["annotations"][MOVED_FROM_ANNOTATION] = moved_from
    return moving(made) if leaving else made


rarely = st.sampled_from((False, False, False, True))
pods = st.builds(
    pod, st.sampled_from(PODS), st.sampled_from((*GROUPS, "none")),
    namespace=st.sampled_from((NS, NS, NS, "elsewhere")),
    node_name=st.sampled_from((None, *NODES, "gone")),
    scheduler=st.sampled_from((ME, ME, ME, "default-scheduler")),
    phase=st.sampled_from(("Pending", "Pending", "Running", "Succeeded")), deleting=rarely,
    leaving=rarely, moved_from=st.sampled_from((None, None, None, *PODS)),
    gpus=st.integers(0, 2), priority=st.sampled_from((50, 100)))
pod_events = st.tuples(st.just("pods"), st.just("ADDED"), pods)
podgroup_events = st.tuples(st.just("podgroups"), st.sampled_from(("ADDED", "DELETED")),
                            st.builds(podgroup, st.sampled_from(GROUPS),
                                      st.sampled_from(("leaf", "leaf", "root", "missing")),
                                      st.integers(1, 2), st.sampled_from((None, 60, 600))))
events = st.one_of(  # repeated: drawn more often
    pod_events, pod_events, pod_events, podgroup_events, podgroup_events,
    st.tuples(st.just("pods"), st.just("DELETED"), st.builds(
        pod, st.sampled_from(PODS), st.just("g0"), namespace=st.sampled_from((NS, "elsewhere")))),
    st.tuples(st.just("nodes"), st.sampled_from(("ADDED", "DELETED")),
              st.builds(node, st.sampled_from(NODES), st.integers(0, 8))),
    st.tuples(st.just("queues"), st.sampled_from(("ADDED", "DELETED")),
              st.just(queue("leaf", "root"))),
    st.tuples(st.just("relist"), st.sampled_from(("pods", "podgroups")), st.none()))
cycles = st.lists(st.tuples(
    st.lists(events, max_size=4),
    st.dictionaries(st.sampled_from(PODS), st.sampled_from((*NODES, "gone")), max_size=2),
    st.dictionaries(st.sampled_from(GROUPS), st.sampled_from((1.0, 2.0)), max_size=2)),
    min_size=1, max_size=8)


def seen(snapshot, index) -> dict:
    """Everything a cycle reads from a snapshot and its index (pods of a gang in any order)."""
    return {
        "nodes": [(n.name, n.gpus, n.cpu, n.memory, n.labels, n.schedulable, n.bound,
                   n.releases) for n in snapshot.nodes],
        "queues": sorted(q.name for q in snapshot.queues),
        "gangs": sorted((g.name, g.queue, g.min_member, g.priority, g.preemptible,
                         g.running_since, g.below_min_since,
                         sorted((p.name, p.gpus, p.cpu, p.memory, p.node) for p in g.pods))
                        for g in snapshot.gangs),
        "pods": sorted((key, json.dumps(pod, sort_keys=True)) for key, pod in index.pods.items()),
        "podgroups": sorted(index.podgroups), "skipped": index.skipped,
        "gang_pods": {gang: sorted(names) for gang, names in index.gang_pods.items()},
        "terminating": index.terminating, "node_free": index.node_free,
        "leaving": sorted(p["metadata"]["name"] for p in index.leaving),
        "orphans": sorted(p["metadata"]["name"] for p in index.orphans)}


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cycles)
def test_a_kept_snapshot_is_the_one_built_afresh(cycles) -> None:
    kube, memo = cache(), SnapshotMemo()
    for changes, assumed, stale in cycles:
        for kind, event, obj in changes:
            informer = getattr(kube, kind if kind != "relist" else event)
            if kind == "relist":
                informer.relist()
            else:
                informer.apply(event, obj)
        options = {"scheduler_name": ME, "now": 1.0,
                   "assumed": {f"{NS}/{name}": n for name, n in assumed.items()},
                   "below_min": {f"{NS}/{group}": since for group, since in stale.items()}}
        kept = build_snapshot(kube, memo=memo, **options)
        afresh = build_snapshot(kube, **options)
        assert seen(*kept) == seen(*afresh)
        reference = with_node_totals(afresh[0])  # the gangs' pods, counted afresh
        assert [(n.bound, n.releases) for n in afresh[0].nodes] == [
            (n.bound, n.releases) for n in reference.nodes]


def test_a_cycle_after_one_change_reads_that_pod_and_builds_that_gang_only(monkeypatch) -> None:
    kube, memo = cache(), SnapshotMemo()
    kube.nodes.apply("ADDED", node("n0"))
    for i in range(20):
        kube.podgroups.apply("ADDED", podgroup(f"g{i}"))
        kube.pods.apply("ADDED", pod(f"p{i}", f"g{i}", node_name="n0" if i < 4 else None,
                                     phase="Running" if i < 4 else "Pending"))
    kube.pods.apply("ADDED", pod("other", "x", node_name="n0", scheduler="default-scheduler",
                                 gpus=2, namespace="elsewhere"))
    first, _ = build_snapshot(kube, scheduler_name=ME, now=1.0, memo=memo)
    read = []
    facts_of = snapshot_memo.facts_of
    monkeypatch.setattr(snapshot_memo, "facts_of", lambda pod, *args: (
        read.append(pod["metadata"]["name"]), facts_of(pod, *args))[1])
    kube.pods.apply("MODIFIED", pod("p7", "g7", node_name="n0", phase="Running"))
    second, index = build_snapshot(kube, scheduler_name=ME, now=2.0, memo=memo)
    assert read == ["p7"]
    before = {gang.name: gang for gang in first.gangs}
    rebuilt = [gang.name for gang in second.gangs if gang is not before[gang.name]]
    assert rebuilt == ["osmo/g7"]
    assert [p.node for p in index.gangs["osmo/g7"].pods] == ["n0"]
    assert [n.gpus for n in second.nodes] == [6]  # the other scheduler's pod holds 2
    kube.pods.apply("DELETED", pod("other", "x", namespace="elsewhere"))
    third, _ = build_snapshot(kube, scheduler_name=ME, now=3.0, memo=memo)
    assert read == ["p7"] and [n.gpus for n in third.nodes] == [8]
    assert all(gang is before[gang.name] for gang in third.gangs if gang.name != "osmo/g7")
    assert [n.bound for n in third.nodes] == [(5, 2500, 5 * 2**30)]  # p0-p3 and p7


def test_a_gang_left_out_for_its_queue_still_holds_its_nodes() -> None:
    kube, memo = cache(), SnapshotMemo()
    kube.nodes.apply("ADDED", node("n0"))
    kube.podgroups.apply("ADDED", podgroup("orphaned", "missing"))
    kube.pods.apply("ADDED", pod("p0", "orphaned", node_name="n0", phase="Running", gpus=2))
    snap, index = build_snapshot(kube, scheduler_name=ME, now=1.0, memo=memo)
    assert index.skipped == {"osmo/orphaned": "Queue 'missing' does not exist"}
    assert [(n.gpus, n.bound) for n in snap.nodes] == [(6, (0, 0, 0))]
    assert index.node_free["n0"][0] == 6
    kube.queues.apply("ADDED", queue("missing", "root"))  # its queue comes: a gang again
    snap, index = build_snapshot(kube, scheduler_name=ME, now=2.0, memo=memo)
    assert [g.name for g in snap.gangs] == ["osmo/orphaned"] and index.skipped == {}
    assert [(n.gpus, n.bound) for n in snap.nodes] == [(8, (2, 500, 2**30))]


def test_a_binding_no_longer_assumed_is_read_from_the_cache_again() -> None:
    kube, memo = cache(), SnapshotMemo()
    kube.nodes.apply("ADDED", node("n0"))
    kube.podgroups.apply("ADDED", podgroup("g0"))
    kube.pods.apply("ADDED", pod("p0", "g0"))
    snap, _ = build_snapshot(kube, scheduler_name=ME, now=1.0, memo=memo,
                             assumed={"osmo/p0": "n0"})
    assert [p.node for p in snap.gangs[0].pods] == ["n0"]
    snap, _ = build_snapshot(kube, scheduler_name=ME, now=2.0, memo=memo)  # the bind failed
    assert [p.node for p in snap.gangs[0].pods] == [None]


def test_a_replacement_is_an_orphan_until_its_pod_leaves() -> None:
    """Whether a replacement is an orphan is its original pod's state: a change of that pod
    places the replacement again."""
    kube, memo = cache(), SnapshotMemo()
    kube.nodes.apply("ADDED", node("n0"))
    kube.podgroups.apply("ADDED", podgroup("g0"))
    kube.pods.apply("ADDED", pod("p0", "g0", node_name="n0", phase="Running", gpus=2))
    kube.pods.apply("ADDED", pod("p0-m1", "g0", moved_from="p0", gpus=2))
    snap, index = build_snapshot(kube, scheduler_name=ME, now=1.0, memo=memo)
    assert [p["metadata"]["name"] for p in index.orphans] == ["p0-m1"]
    assert [p.name for p in snap.gangs[0].pods] == ["osmo/p0"]
    kube.pods.apply("MODIFIED", pod("p0", "g0", node_name="n0", phase="Running", gpus=2,
                                    leaving=True))
    snap, index = build_snapshot(kube, scheduler_name=ME, now=2.0, memo=memo)
    assert index.orphans == [] and [p["metadata"]["name"] for p in index.leaving] == ["p0"]
    assert [p.name for p in snap.gangs[0].pods] == ["osmo/p0-m1"]
    assert index.terminating["n0"][0] == 2 and [n.gpus for n in snap.nodes] == [8]


def test_a_snapshot_that_failed_half_way_reads_everything_next(monkeypatch) -> None:
    """The journals were read and their changes half placed: the memo starts again."""
    kube, memo = cache(), SnapshotMemo()
    kube.nodes.apply("ADDED", node("n0"))
    for name in ("g0", "g1"):
        kube.podgroups.apply("ADDED", podgroup(name))
    kube.pods.apply("ADDED", pod("p0", "g0"))
    build_snapshot(kube, scheduler_name=ME, now=1.0, memo=memo)
    kube.pods.apply("ADDED", pod("p1", "g1"))
    kube.pods.apply("MODIFIED", pod("p0", "g0", node_name="n0", phase="Running"))
    facts_of = snapshot_memo.facts_of

    def failing(pod, *args):
        if pod["metadata"]["name"] == "p0":
            raise RuntimeError("a bug")
        return facts_of(pod, *args)

    monkeypatch.setattr(snapshot_memo, "facts_of", failing)
    with pytest.raises(RuntimeError):
        build_snapshot(kube, scheduler_name=ME, now=2.0, memo=memo)
    monkeypatch.setattr(snapshot_memo, "facts_of", facts_of)
    kept = build_snapshot(kube, scheduler_name=ME, now=3.0, memo=memo)
    assert sorted((g.name, [p.node for p in g.pods]) for g in kept[0].gangs) == [
        ("osmo/g0", ["n0"]), ("osmo/g1", [None])]
    assert seen(*kept) == seen(*build_snapshot(kube, scheduler_name=ME, now=3.0))
