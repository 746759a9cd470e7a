"""Cycle time of `scheduler.core.run_cycle` on synthetic clusters (a command, not a test).

Run from the repository root: `.venv/bin/python benchmarks/scheduler.py [--quick]`.
Each cycle figure is the median of several cycles on the same snapshot (the core is pure, so
every run does the same work). Every run's plan is checked before its time is printed
(`check`: bindings, evictions and moves sound, no node over its capacity, the counts the
scenario implies); a wrong plan ends the run without a time.

Building the 10,000-node scenarios' snapshots is timed too (`measure_snapshots`): from the
Kubernetes backend's informer cache (the first cycle of a scheduler, a cycle that finds nothing
changed, then one after 1,000 pods changed; the scheduler decides after each, as it does), each
built snapshot checked against the scenario before its time is printed, and the last one then
scheduled (snapshot + cycle, checked, and binding and reserving as the scenario's own cycle
does: the whole cycle); for the one with reservations also from the embedded cluster's
database rows (`scheduler/backends/embedded/snapshot.py`, on a throwaway embedded PostgreSQL).
`--no-snapshots` leaves them out.

No peer runs here: the scenarios labelled "KAI-shaped" have the shape of KAI's own scale
benchmark, but KAI is not run by this command, so no KAI time is printed beside ours (the
constant KAI times once printed here, from commit f6ee951 of 2026-11-21, had no recorded
source). `benchmarks/k8s_fill.py` runs a real peer, kube-scheduler, on the same cluster.
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.core.cycle import run_cycle  # noqa: E402
from scheduler.core.model import (  # noqa: E402
    Gang,
    Node,
    Pod,
    Queue,
    ResourceQuota,
    Snapshot,
    Topology,
    TopologyConstraint,
    TopologyLevel,
)
from scheduler.core.node_totals import with_node_totals  # noqa: E402

TOPOLOGY = Topology(levels=(TopologyLevel("zone"), TopologyLevel("rack")))


def make_nodes(count: int, gpus: int = 8, cpu: int = 128_000, rack_size: int = 16,
               zone_size: int = 256) -> tuple[Node, ...]:
    return tuple(Node(f"node-{i:05d}", gpus=gpus, cpu=cpu, memory=2**40,
                      labels={"zone": f"z{i // zone_size}", "rack": f"r{i // rack_size}"})
                 for i in range(count))


def make_queues(leaves: int, quota: int = -1) -> tuple[Queue, ...]:
    queues = [Queue("osmo-default")]
    for i in range(leaves):
        queues.append(Queue(f"team-{i}", parent="osmo-default",
                            gpu=ResourceQuota(quota=quota, over_quota_weight=1 + i % 3)))
    return tuple(queues)


def kai_sizes(nodes: int, jobs: int, seed: int = 7) -> Snapshot:
    """KAI's benchmark shape: mixed small gangs on 8-GPU nodes, several queues."""
    rng = random.Random(seed)
    gangs = []
    for j in range(jobs):
        size = rng.choice([1, 1, 2, 4])
        gpus = rng.choice([1, 1, 2, 4, 8])
        gangs.append(Gang(f"job-{j:05d}", f"team-{j % 4}", created_at=float(j), min_member=size,
                          pods=tuple(Pod(f"job-{j:05d}-{p}", gpus=gpus, cpu=1000)
                                     for p in range(size))))
    return Snapshot(make_nodes(nodes), make_queues(4), tuple(gangs), TOPOLOGY)


def single_gpu_jobs(nodes: int = 500, jobs: int = 4000) -> Snapshot:
    gangs = tuple(Gang(f"job-{j:05d}", f"team-{j % 8}", created_at=float(j),
                       pods=(Pod(f"job-{j:05d}-0", gpus=1, cpu=1000),))
                  for j in range(jobs))
    return Snapshot(make_nodes(nodes), make_queues(8), gangs, TOPOLOGY)


def big_topology_gang(nodes: int = 512) -> Snapshot:
    pods = tuple(Pod(f"trainer-{p:04d}", gpus=8, cpu=64_000) for p in range(nodes))
    gang = Gang("trainer", "team-0", min_member=nodes, pods=pods,
                topology=TopologyConstraint(preferred_level="rack"))
    return Snapshot(make_nodes(nodes), make_queues(1), (gang,), TOPOLOGY)


def reclaim(nodes: int = 500, reclaimers: int = 100) -> Snapshot:
    """Queue b borrows the whole cluster with LOW work; queue a reclaims its quota."""
    cluster = make_nodes(nodes)
    queues = (Queue("osmo-default"),
              Queue("a", parent="osmo-default", gpu=ResourceQuota(quota=nodes * 4)),
              Queue("b", parent="osmo-default", gpu=ResourceQuota(quota=0)))
    gangs = []
    for i in range(nodes * 2):
        node = cluster[i // 2].name
        gangs.append(Gang(f"borrow-{i:05d}", "b", priority=50, preemptible=True,
                          created_at=float(i), running_since=float(i),
                          pods=(Pod(f"borrow-{i:05d}-0", gpus=4, cpu=1000, node=node),)))
    for j in range(reclaimers):
        gangs.append(Gang(f"claim-{j:04d}", "a", created_at=10_000.0 + j,
                          pods=(Pod(f"claim-{j:04d}-0", gpus=8, cpu=1000),)))
    return Snapshot(cluster, queues, tuple(gangs), TOPOLOGY)


def consolidation(nodes: int = 500, per_node: int = 7, gang_pods: int = 8) -> Snapshot:
    """Fragmented: every node runs `per_node` single-GPU LOW pods (one free GPU each); one
    pending gang of `gang_pods` x 8 GPUs fits the free GPUs in total but no node."""
    cluster = make_nodes(nodes)
    gangs = []
    for i in range(nodes * per_node):
        name = f"small-{i:05d}"
        gangs.append(Gang(name, f"team-{1 + i % 3}", priority=50, preemptible=True,
                          created_at=float(i), running_since=float(i),
                          pods=(Pod(f"{name}-0", gpus=1, cpu=1000,
                                    node=cluster[i // per_node].name),)))
    gangs.append(Gang("wide", "team-0", priority=50, preemptible=True, created_at=1e6,
                      min_member=gang_pods,
                      pods=tuple(Pod(f"wide-{p}", gpus=8, cpu=1000) for p in range(gang_pods))))
    return Snapshot(cluster, make_queues(4), tuple(gangs), TOPOLOGY)


def large_cluster(nodes: int, pods_total: int, pending_pods: int = 10_000,
                  reserving: int = 0) -> Snapshot:
    """Mostly running pods (GPU gangs and CPU-only gangs of 10) plus a pending batch, the nodes
    carrying their bound totals and releases as the Kubernetes backend's snapshot does.
    `reserving`: that many gangs of 64 x 8 GPUs that have waited long (one per queue) and
    do not fit, and every running gang with an exec_timeout: each cycle reserves nodes for
    them from the running work's deadlines and backfills the batch around them."""
    rng = random.Random(nodes)
    cluster = make_nodes(nodes)
    queues = make_queues(10)
    gangs = []
    running = pods_total - pending_pods
    gpu_pods = min(running // 4, nodes * 7)
    index = 0
    node_cursor = 0
    while index < running:
        name = f"run-{index:07d}"
        gpu = index < gpu_pods
        members = []
        for p in range(10):
            node = cluster[node_cursor % nodes].name
            node_cursor += 1 if gpu else 3
            members.append(Pod(f"{name}-{p}", gpus=1 if gpu else 0, cpu=500, node=node))
        gangs.append(Gang(name, f"team-{rng.randrange(10)}", min_member=10,
                          created_at=float(index), running_since=float(index),
                          exec_timeout=float(rng.randrange(600, 7200)) if reserving else None,
                          pods=tuple(members)))
        index += 10
    for j in range(reserving):
        name = f"wide-{j}"
        gangs.append(Gang(name, f"team-{j}", min_member=64, created_at=float(-j),
                          exec_timeout=3600.0,
                          pods=tuple(Pod(f"{name}-{p}", gpus=8, cpu=500) for p in range(64))))
    for j in range(pending_pods // 10):
        name = f"new-{j:06d}"
        gangs.append(Gang(name, f"team-{j % 10}", min_member=10, created_at=1e6 + j,
                          pods=tuple(Pod(f"{name}-{p}", gpus=rng.choice([0, 1]), cpu=500)
                                     for p in range(10))))
    return with_node_totals(Snapshot(cluster, queues, tuple(gangs), TOPOLOGY, now=float(index)))


def backlog(nodes: int = 500, waiting: int = 5_000) -> Snapshot:
    """A full cluster (work with exec_timeouts), a gang of every node that waited and reserves
    them all (its queue goes first: a higher priority), and a backlog of waiting 2 x 8-GPU
    gangs in nine other queues, each with a quota, that finds no node left to reserve: one
    attempt per queue answers the others of its shape (each attempt walked every gang for
    the quota's releases, and each gang made one: quadratic in the backlog)."""
    cluster = make_nodes(nodes)
    gangs = [Gang(f"run-{i:05d}", f"team-{1 + i % 9}", min_member=8, created_at=0.0,
                  running_since=0.0, exec_timeout=600.0 + i,
                  pods=tuple(Pod(f"run-{i:05d}-{p}", gpus=1, cpu=1000, node=node.name)
                             for p in range(8)))
             for i, node in enumerate(cluster)]
    gangs.append(Gang("wide", "team-0", min_member=nodes, created_at=0.0, exec_timeout=3600.0,
                      pods=tuple(Pod(f"wide-{p:05d}", gpus=8, cpu=1000) for p in range(nodes))))
    for j in range(waiting):
        name = f"wait-{j:05d}"
        gangs.append(Gang(name, f"team-{1 + j % 9}", min_member=2, created_at=1.0 + j / 1000,
                          pods=tuple(Pod(f"{name}-{p}", gpus=8, cpu=1000) for p in range(2))))
    queues = tuple(replace(queue, priority=200) if queue.name == "team-0" else queue
                   for queue in make_queues(10, quota=nodes * 8))
    return Snapshot(cluster, queues, tuple(gangs), TOPOLOGY, now=500.0)


def _fits_somewhere(pods: list[Pod], free: dict[str, list[int]]) -> bool:
    """First fit, largest first, of ``pods`` into ``free`` (node → [gpus, cpu, memory])."""
    left = {node: list(values) for node, values in free.items()}
    for pod in sorted(pods, key=lambda p: (p.gpus, p.cpu, p.memory), reverse=True):
        asks = (pod.gpus, pod.cpu, pod.memory)
        node = next((n for n, values in left.items()
                     if all(a <= v for a, v in zip(asks, values, strict=True))), None)
        if node is None:
            return False
        left[node] = [v - a for v, a in zip(left[node], asks, strict=True)]
    return True


def check(snapshot: Snapshot, result, *, bound: int | None = None, evicted: int = 0,
          moved: int = 0) -> list[str]:
    """What is wrong with ``result`` as a plan for ``snapshot``; empty when it is sound: every
    binding a pending pod of its gang on a schedulable node, once; every eviction and move a
    bound pod, once; no node holding more GPUs, CPU or memory than it has once the decisions
    are carried out; the bound, evicted and moved counts this scenario implies (``bound``
    None: the scenario fixes no count — then no gang left out, without a topology constraint
    or a node selector, may fit what stays free outside the nodes reserved for waiting gangs,
    whose free GPUs a reservation may hold)."""
    pods = {pod.name: (gang, pod) for gang in snapshot.gangs for pod in gang.pods}
    nodes = {node.name: node for node in snapshot.nodes}
    problems = []
    for kind, names in (("bound", [b.pod for b in result.bindings]),
                        ("evicted", [e.pod for e in result.evictions]),
                        ("moved", [m.pod for m in result.moves])):
        repeated = len(names) - len(set(names))
        if repeated:
            problems.append(f"{repeated} pods {kind} more than once")
    for binding in result.bindings:
        gang, pod = pods.get(binding.pod, (None, None))
        node = nodes.get(binding.node)
        if pod is None or pod.node is not None or gang.name != binding.gang:
            problems.append(f"binding of {binding.pod}: not a pending pod of {binding.gang}")
        elif node is None or not node.schedulable:
            problems.append(f"binding of {binding.pod}: no schedulable node {binding.node}")
    leaving = {e.pod for e in result.evictions} | {m.pod for m in result.moves}
    for name in leaving:
        if name not in pods or pods[name][1].node is None:
            problems.append(f"eviction or move of {name}: not a bound pod")
    used = {name: [0, 0, 0] for name in nodes}

    def charge(node: str, pod: Pod) -> None:
        if node in used:
            for i, amount in enumerate((pod.gpus, pod.cpu, pod.memory)):
                used[node][i] += amount

    for _gang, pod in pods.values():
        if pod.node is not None and pod.name not in leaving:
            charge(pod.node, pod)
    for move in result.moves:
        charge(move.target, pods[move.pod][1])
    for binding in result.bindings:
        if binding.pod in pods:
            charge(binding.node, pods[binding.pod][1])
    for name, node in nodes.items():
        if any(u > c for u, c in zip(used[name], (node.gpus, node.cpu, node.memory),
                                     strict=True)):
            problems.append(f"node {name} holds {used[name]} of {node.gpus} GPUs, "
                            f"{node.cpu} millicores, {node.memory} bytes")
    counts = (len(result.bindings), len(result.evictions), len(result.moves))
    if bound is not None and counts != (bound, evicted, moved):
        problems.append(f"bound/evicted/moved {counts}, expected {(bound, evicted, moved)}")
    if bound is None:
        if counts[1:] != (evicted, moved):
            problems.append(f"evicted/moved {counts[1:]}, expected {(evicted, moved)}")
        reserved = {name for estimate in result.estimates for name in estimate.nodes}
        free = {name: [c - u for c, u in zip((node.gpus, node.cpu, node.memory), used[name],
                                              strict=True)]
                for name, node in nodes.items() if node.schedulable and name not in reserved}
        placed = {b.gang for b in result.bindings}
        for gang in snapshot.gangs:
            if gang.name in placed or gang.topology or any(p.node for p in gang.pods) or any(
                    p.node_selector for p in gang.pods):
                continue
            needed = list(gang.pods[:gang.min_member or 1])
            if _fits_somewhere(needed, free):
                problems.append(f"gang {gang.name} was left out but fits what stays free")
                break
    return problems


def measure(label: str, snapshot: Snapshot, repeats: int, target: str = "",
            **expected) -> float:
    """The median cycle over ``repeats`` runs; every run's plan is checked (:func:`check`)
    before a time is printed, and a plan that is not sound ends the benchmark."""
    times = []
    result = None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run_cycle(snapshot)
        times.append(time.perf_counter() - start)
        problems = check(snapshot, result, **expected)
        if problems:
            raise SystemExit(f"{label}: the cycle's plan is wrong, no time printed: "
                             + "; ".join(problems[:10]))
    median = statistics.median(times)
    pods = sum(len(gang.pods) for gang in snapshot.gangs)
    moved = f" moved={len(result.moves):>4}" if result.moves else ""
    if result.estimates:
        moved += f" reserved={len(result.estimates)}"
    print(f"{label:<44} nodes={len(snapshot.nodes):>5} pods={pods:>7} "
          f"cycle={median * 1000:>8.1f} ms  bound={len(result.bindings):>6} "
          f"evicted={len(result.evictions):>5}{moved}  checked  {target}", flush=True)
    return median


def measure_snapshots(label: str, snapshot: Snapshot, repeats: int, rows: bool = True) -> None:
    """Median times to build `snapshot` from the informer cache (a scheduler's first cycle,
    one that finds nothing changed, one after 1,000 pods changed) and (`rows`) from the
    database rows; each built snapshot is checked against the scenario, and the cache's last
    is scheduled and its plan checked."""
    from datetime import timedelta

    from benchmarks import django_env
    from benchmarks import snapshot_sources as sources

    django_env.bootstrap()
    from django.conf import settings

    from scheduler.backends.embedded.snapshot import build_snapshot as from_rows
    from scheduler.backends.kubernetes.snapshot import SnapshotMemo
    from scheduler.backends.kubernetes.snapshot import build_snapshot as from_cache
    from scheduler.core import decode

    def built_right(kind: str, built: Snapshot, expected: tuple, bound: bool = False) -> None:
        if sources.shape(built, bound=bound) != expected:
            raise SystemExit(f"{label}: the snapshot from the {kind} is not the scenario's, "
                             "no time printed")

    scheduler_name = settings.OSMO_SCHEDULER_NAME
    cache = sources.kube_cache(snapshot, scheduler_name)
    expected = sources.kube_shape(snapshot)
    now = sources.START.timestamp() + snapshot.now  # the cache's times are wall-clock times
    decided = run_cycle(snapshot)  # what the cycle on a built snapshot must come to
    first, again, changed, whole = [], [], [], []
    for _ in range(repeats):
        # a scheduler that just started: nothing parsed yet
        decode._requests_cache.clear()
        decode.timestamp.cache_clear()
        decode._parsed.cache_clear()
        memo = SnapshotMemo()
        for times in (first, again, changed):
            if times is changed:
                # a cycle's news: 1,000 pods of as many gangs replaced by equal copies (as a
                # status write or a re-list would), made before the clock starts
                news = [copy.deepcopy(pod) for pod in cache.pods.items()[::350][:1000]]
                for pod in news:
                    cache.pods.apply("MODIFIED", pod)
            start = time.perf_counter()
            built, _index = from_cache(cache, scheduler_name=scheduler_name, now=now,
                                       memo=memo, config=snapshot.config)
            times.append(time.perf_counter() - start)
            built_right("informer cache", built, expected, bound=True)
            if times is not changed:  # the scheduler decides after every build
                run_cycle(built)
        start = time.perf_counter()
        result = run_cycle(built)
        whole.append(changed[-1] + time.perf_counter() - start)
        problems = check(built, result)
        made, scenario = ((len(r.bindings), len(r.estimates)) for r in (result, decided))
        if made != scenario:
            problems.append(f"(bound, reserved) {made}, the scenario's cycle makes {scenario}")
        if problems:
            raise SystemExit(f"{label}: the plan from the informer cache's snapshot is wrong, "
                             "no time printed: " + "; ".join(problems[:10]))
    print(f"{label:<44} snapshot from the informer cache: first cycle "
          f"{statistics.median(first) * 1000:.0f} ms, nothing changed "
          f"{statistics.median(again) * 1000:.0f} ms, {len(news):,} pods changed "
          f"{statistics.median(changed) * 1000:.0f} ms; with the cycle "
          f"{statistics.median(whole) * 1000:.0f} ms  checked", flush=True)
    if not rows:
        return
    sources.write_rows(snapshot)
    expected = sources.rows_shape(snapshot)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        built, _index = from_rows(now=sources.START + timedelta(seconds=snapshot.now),
                                  config=snapshot.config)
        times.append(time.perf_counter() - start)
        built_right("database rows", built, expected)
    print(f"{label:<44} snapshot from the database rows: "
          f"{statistics.median(times) * 1000:.0f} ms  checked", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, one run each")
    parser.add_argument("--no-snapshots", action="store_true",
                        help="time the cycles only (no database, no snapshot building)")
    args = parser.parse_args()
    repeats = 1 if args.quick else 5
    heavy_repeats = 1 if args.quick else 3
    # What each scenario must come to: every job or gang placed where the cluster has room
    # for all of them; reclaim evicts both borrowed pods of a node per 8-GPU claim; each
    # emptied node's small pods move onto the others' free GPU.
    if args.quick:
        measure("KAI-shaped 10 nodes / 50 jobs", kai_sizes(10, 50), repeats)
        measure("single-GPU jobs", single_gpu_jobs(50, 400), repeats, bound=400)
        measure("one gang, preferred rack", big_topology_gang(64), repeats, bound=64)
        measure("reclaim", reclaim(50, 10), repeats, bound=10, evicted=20)
        measure("consolidation", consolidation(50, 7, 4), repeats, bound=4, moved=28)
        measure("large cluster", large_cluster(200, 7_000, 500), repeats)
        measure("large cluster, reservations", large_cluster(200, 7_000, 500, 2), repeats)
        measure("backlog that finds no reservation", backlog(50, 500), repeats, bound=0)
        if not args.no_snapshots:
            measure_snapshots("large cluster, reservations",
                              large_cluster(200, 7_000, 500, 2), repeats)
        return
    measure("KAI-shaped 10 nodes / 50 jobs", kai_sizes(10, 50), repeats)
    measure("KAI-shaped 50 nodes / 200 jobs", kai_sizes(50, 200), repeats)
    measure("KAI-shaped 100 nodes / 500 jobs", kai_sizes(100, 500), repeats)
    measure("500x8 GPUs, 4,000 single-GPU jobs", single_gpu_jobs(), repeats, "(target < 1 s)",
            bound=4000)
    measure("512-pod gang, preferred rack, 512 nodes", big_topology_gang(), repeats,
            "(target < 1 s)", bound=512)
    measure("reclaim, 500 nodes, 100 gangs x 8 GPUs", reclaim(), repeats,
            bound=100, evicted=200)
    measure("consolidation, 500 fragmented nodes, 64-GPU gang", consolidation(), repeats,
            bound=8, moved=56)
    measure("4,000 nodes / 140,000 pods", large_cluster(4000, 140_000), heavy_repeats,
            "(target <= 1.0 s)")
    measure("4,000 nodes / 140,000 pods, 4 reservations", large_cluster(4000, 140_000,
                                                                        reserving=4),
            heavy_repeats, "(target <= 1.0 s)")
    tenk = large_cluster(10_000, 350_000, 25_000)
    measure("10,000 nodes / 350,000 pods", tenk, heavy_repeats, "(target <= 1.0 s)")
    largest = large_cluster(10_000, 350_000, 25_000, reserving=4)
    measure("10,000 nodes / 350,000 pods, 4 reservations", largest, heavy_repeats,
            "(target <= 1.0 s)")
    measure("500 nodes reserved, 5,000 gangs waiting", backlog(), repeats,
            "(target < 1 s)", bound=0)
    print("growth with cluster size (35 pods per node, 10,000 pending pods):")
    for nodes in (1000, 2000, 3000, 4000):
        measure(f"  {nodes} nodes", large_cluster(nodes, nodes * 35), heavy_repeats)
    if not args.no_snapshots:
        measure_snapshots("10,000 nodes / 350,000 pods", tenk, heavy_repeats, rows=False)
        del tenk
        measure_snapshots("10,000 nodes / 350,000 pods, 4 reservations", largest,
                          heavy_repeats)


if __name__ == "__main__":
    main()
