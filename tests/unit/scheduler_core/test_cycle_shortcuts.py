"""The cycle's shortcuts decide exactly what a fresh computation decides (hypothesis):

- settled gangs (every pod bound, no subgroups) are surveyed in one pass and build their
  tree and placement state only when read;
- a queue's order key is remembered until its allocated or reserved amounts change;
- a reservation's what-if placements run in a `Cluster.trial`, which leaves the free-GPU
  buckets and the domains' totals alone until it undoes everything;
- a node's release timeline keeps its entries in deadline order only;
- nodes that carry their bound pods' totals and releases (`Node.bound`, `Node.releases`, what
  the Kubernetes snapshot keeps from cycle to cycle) are not charged pod by pod, and the
  reservations' timeline starts from them.

Each is compared with the computation it replaces: the same cycles with the shortcut turned
off, and the timeline's look-ups with sums over the raw releases.
"""

from __future__ import annotations

import copy
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core import cycle as cycle_module
from scheduler.core.cluster import Cluster
from scheduler.core.cycle import run_cycle
from scheduler.core.gang_run import GangRun
from scheduler.core.model import Gang, Node, Pod, Queue, SchedulerConfig, Snapshot
from scheduler.core.node_totals import with_node_totals
from scheduler.core.queue_book import QueueBook
from scheduler.core.timelines import INF, Timeline, label
from tests.unit.scheduler_core.test_cycle_properties import (
    TOPOLOGY,
    apply,
    cluster_nodes,
    gangs,
    queue_trees,
)


@contextmanager
def _indexed_trial(self):
    mark = self.mark()
    try:
        yield
    finally:
        self.rollback(mark)


@contextmanager
def shortcuts_off():
    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(cycle_module._Cycle, "_survey_settled",
                                              lambda *_args: None))
        stack.enter_context(mock.patch.object(QueueBook, "order_key", QueueBook._order_key))
        stack.enter_context(mock.patch.object(Cluster, "trial", _indexed_trial))
        yield


def timed(draw, found: list[Gang]) -> tuple[Gang, ...]:
    """Exec timeouts and waiting times, so that reservations and backfill come into play."""
    return tuple(replace(gang, exec_timeout=draw(st.sampled_from([None, 30.0, 120.0, 600.0])),
                         queued_since=draw(st.sampled_from([None, 0.0])))
                 for gang in found)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_shortcuts_decide_as_the_computations_they_replace(data):
    nodes = data.draw(cluster_nodes())
    queues = data.draw(queue_trees())
    leaves = [q.name for q in queues if q.name.startswith("leaf")]
    config = SchedulerConfig(placement=data.draw(st.sampled_from(["binpack", "spread"])),
                             reserve_after_seconds=data.draw(st.sampled_from([10.0, -1.0])))
    first = Snapshot(nodes=nodes, queues=queues, topology=TOPOLOGY, now=100.0, config=config,
                     gangs=timed(data.draw, data.draw(gangs("a", leaves, (50, 50, 100)))))
    result = run_cycle(first)
    with shortcuts_off():
        assert run_cycle(first) == result
    assert run_cycle(with_node_totals(first)) == result
    # running gangs now: settled ones among them, meeting new pending work
    second = apply(first, result, now=200.0)
    second = replace(second, gangs=second.gangs + timed(
        data.draw, data.draw(gangs("b", leaves, (100, 125)))))
    result = run_cycle(second)
    with shortcuts_off():
        assert run_cycle(second) == result
    assert run_cycle(with_node_totals(second)) == result


def test_an_evicted_stale_gang_gives_back_what_the_bound_totals_count():
    # `stale` runs 2 of its 3 required pods past its grace: evicted, its node freed for `next`
    stale = Gang("stale", "leaf", min_member=3, running_since=0.0, below_min_since=0.0,
                 pods=(Pod("stale-0", gpus=4, node="n0"), Pod("stale-1", gpus=4, node="n0")))
    waiting = Gang("next", "leaf", min_member=1, created_at=1.0, pods=(Pod("next-0", gpus=8),))
    snapshot = Snapshot(nodes=(Node("n0", gpus=8, cpu=1000, memory=8),),
                        queues=(Queue("leaf"),), gangs=(stale, waiting), now=1000.0)
    result = run_cycle(snapshot)
    assert [(e.pod, e.node) for e in result.evictions] == [("stale-0", "n0"), ("stale-1", "n0")]
    assert [(b.pod, b.node) for b in result.bindings] == [("next-0", "n0")]
    assert run_cycle(with_node_totals(snapshot)) == result
    # a node whose bound total is not taken back stays full: the total is what the core reads
    totals = with_node_totals(snapshot)
    assert run_cycle(replace(totals, nodes=(replace(totals.nodes[0], bound=(16, 0, 0)),))
                     ).bindings == ()


@st.composite
def labelled_nodes(draw):
    return [Node(f"n{i}", gpus=draw(st.integers(0, 8)), cpu=draw(st.integers(0, 4000)),
                 memory=draw(st.integers(0, 64)),
                 labels={"zone": f"z{draw(st.integers(0, 1))}",
                         "rack": f"r{draw(st.integers(0, 2))}"},
                 schedulable=draw(st.booleans()))
            for i in range(draw(st.integers(1, 6)))]


def index_state(cluster: Cluster):
    return copy.deepcopy((cluster.free_gpu, cluster.free_cpu, cluster.free_mem,
                          cluster.total_free, cluster.buckets, cluster.domain_free))


@settings(max_examples=150, deadline=None)
@given(labelled_nodes(), st.lists(st.tuples(st.integers(0, 5), st.integers(-4, 4),
                                            st.integers(-500, 500), st.integers(-8, 8)),
                                  max_size=12))
def test_a_trial_leaves_the_cluster_as_it_found_it(nodes, takes):
    cluster = Cluster(nodes, TOPOLOGY)
    before = index_state(cluster)
    with cluster.trial():
        for node, gpus, cpu, memory in takes:
            cluster.take(node % len(nodes), gpus, cpu, memory)
    assert index_state(cluster) == before
    # and the indexes follow changes again afterwards, as in a cluster that never had a trial
    fresh = Cluster(nodes, TOPOLOGY)
    for node, gpus, cpu, memory in takes:
        cluster.take(node % len(nodes), gpus, cpu, memory)
        fresh.take(node % len(nodes), gpus, cpu, memory)
    assert index_state(cluster) == index_state(fresh)


NOW = 10.0
ENDS = [None, 20.0, 50.0, 80.0]  # exec timeouts of gangs running since 0: deadlines 20, 50, 80


@st.composite
def releasing_runs(draw, node_count: int):
    runs = []
    for g in range(draw(st.integers(0, 8))):
        name = f"g{g}"
        pods = tuple(Pod(f"{name}-{p}", gpus=draw(st.integers(0, 3)),
                         cpu=draw(st.sampled_from([0, 100, 250])), memory=draw(st.integers(0, 2)),
                         node=f"n{draw(st.integers(0, node_count))}")  # n{count}: unknown node
                     for p in range(draw(st.integers(1, 3))))
        gang = Gang(name, "q", pods=pods, running_since=0.0,
                    exec_timeout=draw(st.sampled_from(ENDS)),
                    workload=draw(st.sampled_from([None, f"workflow 'w{g}'"])))
        runs.append(GangRun(gang, None, None, True))
    return runs


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_timeline_lookups_are_the_sums_of_the_releases(data):
    nodes = [Node(f"n{i}", gpus=data.draw(st.integers(0, 8)), cpu=1000, memory=4)
             for i in range(data.draw(st.integers(1, 4)))]
    cluster = Cluster(nodes, TOPOLOGY)
    runs = data.draw(releasing_runs(len(nodes)))
    for run in runs:  # what they hold is not free
        for pod in run.gang.pods:
            if pod.node in cluster.index:
                cluster.take(cluster.index[pod.node], pod.gpus, pod.cpu, pod.memory)
    timeline = Timeline(cluster, NOW)
    timeline.refresh(runs)
    releases = {i: [] for i in range(len(nodes))}
    for run in runs:
        end = INF if run.gang.deadline is None else run.gang.deadline
        for pod in run.gang.pods:
            if pod.node in cluster.index:
                releases[cluster.index[pod.node]].append(
                    (end, pod.gpus, pod.cpu, pod.memory, label(run.gang)))
    times = [NOW, 20.0, 50.0, 80.0, INF]
    for node, entries in releases.items():
        for when in times:
            by_then = [entry for entry in entries if entry[0] <= when]
            assert timeline.released(node, when) == tuple(
                sum(entry[i] for entry in by_then) for i in (1, 2, 3))
            assert timeline.last_release(node, when) == max(
                (entry[0] for entry in by_then), default=NOW)
            assert sorted(timeline.whose(node, when)) == sorted(
                entry[4] for entry in entries if entry[0] == when)
    shape = (data.draw(st.integers(0, 4)), data.draw(st.sampled_from([0, 200])), 0)
    count = data.draw(st.integers(1, 4))
    assert timeline.crossings(list(releases), shape, count) == naive_crossings(
        cluster, releases, shape, count)


def naive_crossings(cluster: Cluster, releases, shape, count) -> list[float]:
    """Per node, the first time (among now and the deadlines) at which it could hold k pods
    of `shape`, k = 1.. while it ever could; then the times from the count-th first on."""
    if not any(shape):
        return [NOW]
    found = []
    for node, entries in releases.items():
        free = (cluster.free_gpu[node], cluster.free_cpu[node], cluster.free_mem[node])
        moments = sorted({NOW} | {entry[0] for entry in entries})
        for k in range(1, count + 1):
            when = next((t for t in moments if all(
                shape[i] == 0 or k * shape[i] <= free[i] + sum(
                    entry[1 + i] for entry in entries if entry[0] <= t)
                for i in range(3))), None)
            if when is None:
                break
            found.append(when)
    if len(found) < count:
        return []
    found.sort()
    return sorted({t for t in found if t >= found[count - 1]})


def test_an_evicted_stale_gangs_releases_are_left_out_of_the_timeline():
    # `stale` (due at 1200) is evicted now, `busy` ends at 1500: `wide`, needing both nodes,
    # is expected at 1500 and holds n0, freed now, from `filler` (no exec_timeout); counting
    # `stale` as releasing n0 at 1200 would leave nothing to hold there
    stale = Gang("stale", "leaf", min_member=3, running_since=0.0, below_min_since=0.0,
                 exec_timeout=1200.0, pods=tuple(Pod(f"stale-{i}", gpus=4, node="n0")
                                                 for i in range(2)))
    busy = Gang("busy", "leaf", min_member=1, running_since=0.0, exec_timeout=1500.0,
                pods=(Pod("busy-0", gpus=8, node="n1"),))
    wide = Gang("wide", "leaf", min_member=2, created_at=0.0, exec_timeout=100.0,
                pods=tuple(Pod(f"wide-{i}", gpus=8) for i in range(2)))
    filler = Gang("filler", "leaf", min_member=1, created_at=1.0, pods=(Pod("filler-0", gpus=8),))
    snapshot = Snapshot(nodes=(Node("n0", gpus=8), Node("n1", gpus=8)), queues=(Queue("leaf"),),
                        gangs=(stale, busy, wide, filler), now=1000.0)
    result = run_cycle(snapshot)
    assert [e.gang for e in result.evictions] == ["stale", "stale"]
    assert [(e.gang, e.at, e.waits_for) for e in result.estimates] == [
        ("wide", 1500.0, ("gang 'busy'",))]
    assert result.bindings == ()
    assert run_cycle(with_node_totals(snapshot)) == result
