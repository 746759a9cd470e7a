"""Invariants of whole cycles on random clusters and workloads (hypothesis).

Two cycles per example: the first on pending work only, the second on the first's outcome plus
new pending gangs, so running, preemptible and elastic work meets reclaim and preempt.
"""

import random
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core.cycle import run_cycle
from scheduler.core.model import (
    Gang,
    Node,
    Pod,
    Queue,
    ResourceQuota,
    SchedulerConfig,
    Snapshot,
    SubGroup,
    Topology,
    TopologyConstraint,
    TopologyLevel,
)
from scheduler.core.readiness import build_tree, is_ready, ready_counts
from scheduler.core.results import PREEMPTED, RECLAIMED
from tests.unit.scheduler_core.builders import bound_nodes

TOPOLOGY = Topology(levels=(TopologyLevel("zone"), TopologyLevel("rack")))


@st.composite
def cluster_nodes(draw):
    count = draw(st.integers(1, 6))
    return tuple(Node(f"n{i}", gpus=draw(st.sampled_from([0, 2, 4, 8])),
                      cpu=draw(st.sampled_from([4000, 16000])), memory=64,
                      labels={"zone": f"z{i % 2}", "rack": f"r{draw(st.integers(0, 2))}"},
                      schedulable=draw(st.sampled_from([True, True, True, False])))
                 for i in range(count))


@st.composite
def queue_trees(draw):
    def settings_for():
        return ResourceQuota(quota=draw(st.sampled_from([-1, -1, 0, 4, 8, 16])),
                             limit=draw(st.sampled_from([-1, -1, 8, 16, 24])),
                             over_quota_weight=draw(st.integers(0, 3)))
    queues = [Queue("root"), Queue("pool", parent="root", gpu=settings_for())]
    for i in range(draw(st.integers(1, 3))):
        parent = draw(st.sampled_from(["root", "pool"]))
        queues.append(Queue(f"leaf{i}", parent=parent, gpu=settings_for(),
                            priority=draw(st.sampled_from([100, 100, 150]))))
    return tuple(queues)


@st.composite
def gangs(draw, prefix, leaves, priorities=(50, 100, 125)):
    result = []
    for g in range(draw(st.integers(1, 6))):
        name = f"{prefix}{g}"
        priority = draw(st.sampled_from(priorities))
        mode = draw(st.sampled_from(["pre", "non", "semi"])) if priority == 50 else "non"
        gpus = draw(st.integers(0, 4))
        cpu = draw(st.sampled_from([0, 1000, 3000]))
        constraint = draw(st.sampled_from([None, None, TopologyConstraint("rack"),
                                           TopologyConstraint("zone", "rack"),
                                           TopologyConstraint(None, "rack")]))
        fields = dict(queue=draw(st.sampled_from(leaves)), priority=priority,
                      preemptible=mode == "pre", semi_preemptible=mode == "semi",
                      created_at=float(draw(st.integers(0, 5))), topology=constraint)
        if draw(st.booleans()):
            count = draw(st.integers(1, 4))
            pods = tuple(Pod(f"{name}-p{i}", gpus=gpus, cpu=cpu) for i in range(count))
            result.append(Gang(name, min_member=draw(st.integers(1, count)), pods=pods, **fields))
            continue
        replicas = draw(st.integers(1, 3))
        size = draw(st.integers(1, 3))
        subgroups = tuple(SubGroup(f"r{r}", min_member=draw(st.integers(1, size)),
                                   topology=draw(st.sampled_from(
                                       [None, TopologyConstraint("rack")])))
                          for r in range(replicas))
        pods = tuple(Pod(f"{name}-r{r}-{i}", subgroup=f"r{r}", gpus=gpus, cpu=cpu)
                     for r in range(replicas) for i in range(size))
        result.append(Gang(name, subgroups=subgroups, pods=pods,
                           min_subgroup=draw(st.one_of(st.none(), st.integers(1, replicas))),
                           **fields))
    return result


def apply(snapshot, result, now):
    """The snapshot after the Django layer applied the result."""
    bound = bound_nodes(result) | {move.pod: move.target for move in result.moves}
    evicted = {eviction.pod for eviction in result.evictions}
    gone = {e.gang for e in result.evictions}
    new_gangs = []
    for gang in snapshot.gangs:
        pods = []
        for pod in gang.pods:
            if pod.name in evicted:
                continue
            pods.append(replace(pod, node=bound.get(pod.name, pod.node)))
        if gang.name in gone and not any(pod.node for pod in pods):
            continue
        new_gangs.append(replace(gang, pods=tuple(pods), running_since=now))
    return replace(snapshot, gangs=tuple(new_gangs), now=now)


def check_invariants(snapshot, result):
    nodes = {node.name: node for node in snapshot.nodes}
    pods = {pod.name: (gang, pod) for gang in snapshot.gangs for pod in gang.pods}
    evicted = {eviction.pod for eviction in result.evictions}
    bound = bound_nodes(result)
    moved = {move.pod: move.target for move in result.moves}
    for move in result.moves:
        gang, pod = pods[move.pod]
        assert gang.preemptible and pod.node == move.source != move.target, move
        assert nodes[move.target].schedulable and move.pod not in evicted | set(bound)
        assert move.by_gang in {pods[name][0].name for name in bound}
    usage = {name: [0, 0, 0] for name in nodes}
    for gang in snapshot.gangs:
        for pod in gang.pods:
            node = bound.get(pod.name) or moved.get(pod.name) or (
                pod.node if pod.name not in evicted else None)
            if node is not None:
                usage[node][0] += pod.gpus
                usage[node][1] += pod.cpu
                usage[node][2] += pod.memory
    for name, (gpus, cpu, memory) in usage.items():
        node = nodes[name]
        assert gpus <= node.gpus and cpu <= node.cpu and memory <= node.memory, name
    for pod_name, node_name in bound.items():
        assert pods[pod_name][1].node is None
        assert nodes[node_name].schedulable
    for eviction in result.evictions:
        gang, pod = pods[eviction.pod]
        assert pod.node is not None
        if eviction.reason in (PREEMPTED, RECLAIMED):
            assert gang.preemptible or gang.semi_preemptible, eviction
    evicted_gangs = {e.gang for e in result.evictions}
    for gang in snapshot.gangs:
        tree = build_tree(gang)
        before = ready_counts(tree)
        after = ready_counts(tree, lambda pod, g=gang: (
            pod.name in bound or (pod.node is not None and pod.name not in evicted)))
        had_pods = any(before[leaf] for leaf in tree.leaves)
        has_pods = any(after[leaf] for leaf in tree.leaves)
        if has_pods and not had_pods:
            assert is_ready(tree, after), f"{gang.name} partially bound"
        if had_pods and is_ready(tree, before) and gang.name in evicted_gangs and has_pods:
            assert is_ready(tree, after), f"{gang.name} lost a required part"
            assert gang.semi_preemptible or gang.preemptible
    queues = {queue.name: queue for queue in snapshot.queues}
    gpu_use = {name: 0 for name in queues}
    non_preemptible = {name: 0 for name in queues}
    for gang in snapshot.gangs:
        if gang.queue not in queues:
            continue
        total = sum(pod.gpus for pod in gang.pods
                    if pod.name in bound or (pod.node and pod.name not in evicted))
        name = gang.queue
        while name is not None:
            gpu_use[name] += total
            if not gang.preemptible and not gang.semi_preemptible:
                non_preemptible[name] += total
            name = queues[name].parent
    for name, queue in queues.items():
        figures = result.queue(name).figures("gpu")
        assert figures.allocated == gpu_use[name]
        assert figures.allocated_non_preemptible >= non_preemptible[name]
        if queue.gpu.limit >= 0:
            assert gpu_use[name] <= queue.gpu.limit, name
        if queue.gpu.quota >= 0:
            assert figures.allocated_non_preemptible <= queue.gpu.quota, name


def shuffled(snapshot, seed):
    rng = random.Random(seed)
    def mixed(items):
        items = list(items)
        rng.shuffle(items)
        return tuple(items)
    return replace(snapshot, nodes=mixed(snapshot.nodes), queues=mixed(snapshot.queues),
                   gangs=mixed(replace(gang, pods=mixed(gang.pods)) for gang in snapshot.gangs))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_cycle_invariants(data):
    nodes = data.draw(cluster_nodes())
    queues = data.draw(queue_trees())
    leaves = [q.name for q in queues if q.name.startswith("leaf")]
    placement = data.draw(st.sampled_from(["binpack", "spread"]))
    first_gangs = tuple(data.draw(gangs("a", leaves, (50, 50, 100))))
    first = Snapshot(nodes=nodes, queues=queues, gangs=first_gangs,
                     topology=TOPOLOGY, now=100.0, config=SchedulerConfig(placement=placement))
    result = run_cycle(first)
    check_invariants(first, result)
    assert run_cycle(first) == result
    assert run_cycle(shuffled(first, 1)) == result

    second = apply(first, result, now=200.0)
    second = replace(second, gangs=second.gangs + tuple(data.draw(gangs("b", leaves, (100, 125)))))
    result = run_cycle(second)
    check_invariants(second, result)
    assert run_cycle(shuffled(second, 2)) == result


@st.composite
def fragmented(draw):
    """Nodes partly filled by running LOW gangs (no topology), plus a few pending gangs."""
    nodes = tuple(Node(f"n{i}", gpus=draw(st.sampled_from([2, 4, 8])), cpu=16000, memory=64)
                  for i in range(draw(st.integers(2, 6))))
    queues = (Queue("root"), Queue("leaf0", parent="root"),
              Queue("leaf1", parent="root", gpu=ResourceQuota(quota=draw(st.integers(0, 8)))))
    running = []
    for index, node in enumerate(nodes):
        free = node.gpus
        for j in range(draw(st.integers(0, 3))):
            gpus = draw(st.integers(1, 3))
            if gpus > free:
                break
            free -= gpus
            name = f"r{index}-{j}"
            leaf = draw(st.sampled_from(["leaf0", "leaf1"]))
            running.append(Gang(name, leaf, priority=50,  # non-preemptible only within quota
                                preemptible=leaf == "leaf1" or draw(st.booleans()),
                                running_since=0.0,
                                pods=(Pod(f"{name}-0", gpus=gpus, cpu=1000, node=node.name),)))
    pending = []
    for g in range(draw(st.integers(1, 3))):
        count = draw(st.integers(1, 3))
        pending.append(Gang(f"p{g}", draw(st.sampled_from(["leaf0", "leaf1"])),
                            priority=draw(st.sampled_from([50, 100])),
                            preemptible=False, created_at=float(g), min_member=count,
                            pods=tuple(Pod(f"p{g}-{i}", gpus=draw(st.sampled_from([2, 4, 8])),
                                           cpu=1000) for i in range(count))))
    return Snapshot(nodes=nodes, queues=queues, gangs=tuple(running + pending),
                    topology=TOPOLOGY, now=100.0)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fragmented())
def test_consolidation_invariants(snapshot):
    result = run_cycle(snapshot)
    check_invariants(snapshot, result)
    assert run_cycle(shuffled(snapshot, 3)) == result
    if result.moves:
        winners = {move.by_gang for move in result.moves}
        assert winners <= {binding.gang for binding in result.bindings}
