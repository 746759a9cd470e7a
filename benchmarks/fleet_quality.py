"""Fleet placement quality: three clusters of different shapes against one cluster of the same
total size, fed the same stream of gangs (docs/SCHEDULING.md, "Many clusters").

Run from the repository root: `.venv/bin/python benchmarks/fleet_quality.py [--quick]`.

A discrete-time simulation on the pure core, as the product runs it: each cluster runs
`scheduler.core.run_cycle` every tick over its own nodes; in the fleet, each arriving gang goes
to the backend `scheduler.core.fleet.choose` picks from every cluster's nodes and the release
times of their work, and a waiting gang moves when `move_target` finds a cluster that starts it
now (once per interval). The stream: gangs of 1 to 64 GPUs (whole 8-GPU pods from 16 up),
random run times known as their `exec_timeout`, arriving at about the fleet's capacity.

Printed: GPU utilization over the horizon (GPU-seconds used / GPU-seconds there), the gangs'
median and p90 wait (a gang not started by the end counts as waiting until the end), and the
fleet / one-cluster ratio. Checked before a figure is printed:
every cycle's plan is feasible (`benchmarks.checks.plan_problems`), no node ever holds more than
it has, every gang is placed once and whole, and every gang went only to a cluster that could
hold it. Targets: utilization ratio >= 0.95; no gang waits for a cluster it could not use.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.checks import fail_on, plan_problems  # noqa: E402
from scheduler.core import Gang, Node, Pod, Queue, Snapshot, Topology, run_cycle  # noqa: E402
from scheduler.core.fleet import BackendOption, choose, judge, move_target  # noqa: E402
from scheduler.core.model import ResourceQuota  # noqa: E402

TICK = 10.0  # seconds between cycles
MOVE_INTERVAL = 300.0
QUEUES = (Queue("root"), Queue("team", parent="root", gpu=ResourceQuota()))
SIZES = (1, 1, 2, 4, 8, 8, 16, 32, 64)  # GPUs a gang asks
RUN_MINUTES = (5, 10, 20, 30, 60, 90)


@dataclass
class Job:
    name: str
    gpus: int
    arrival: float
    seconds: float
    cluster: str | None = None
    started: float | None = None
    nodes: dict[str, str] = field(default_factory=dict)  # pod -> node
    last_moved: float | None = None

    def pods(self) -> tuple[Pod, ...]:
        count, each = (self.gpus // 8, 8) if self.gpus > 8 else (1, self.gpus)
        return tuple(Pod(f"{self.name}-{i}", gpus=each, cpu=each * 4_000,
                         node=self.nodes.get(f"{self.name}-{i}")) for i in range(count))

    def gang(self) -> Gang:
        pods = self.pods()
        return Gang(self.name, "team", created_at=self.arrival, min_member=len(pods),
                    pods=pods, exec_timeout=self.seconds, running_since=self.started,
                    workload=self.name)


def stream(rng: random.Random, gpus_total: int, horizon: float, load: float) -> list[Job]:
    """Arrivals whose GPU-seconds are about `load` × the capacity over the first 3/4 of the
    horizon."""
    mean_gpu_seconds = statistics.mean(SIZES) * statistics.mean(RUN_MINUTES) * 60
    rate = load * gpus_total / mean_gpu_seconds  # gangs per second
    jobs, now = [], 0.0
    while now < horizon * 0.75:
        now += rng.expovariate(rate)
        jobs.append(Job(f"j{len(jobs):05d}", rng.choice(SIZES), round(now / TICK) * TICK,
                        rng.choice(RUN_MINUTES) * 60.0))
    return jobs


class Cluster:
    def __init__(self, name: str, nodes: tuple[Node, ...]) -> None:
        self.name, self.nodes = name, nodes
        self.capacity = {node.name: node.gpus for node in nodes}
        self.jobs: dict[str, Job] = {}

    def option(self) -> BackendOption:
        """The cluster as the fleet choice sees it: what runs on each node and until when."""
        bound: dict[str, list] = {n.name: [0, 0, 0] for n in self.nodes}
        releases: dict[str, list] = {n.name: [] for n in self.nodes}
        for job in self.jobs.values():
            if job.started is None:
                continue
            for pod in job.pods():
                held = bound[pod.node]
                held[0] += pod.gpus
                held[1] += pod.cpu
                releases[pod.node].append((job.started + job.seconds, pod.gpus, pod.cpu, 0,
                                           job.name))
        nodes = tuple(replace(n, bound=tuple(bound[n.name]),
                              releases=tuple(sorted(releases[n.name]))) for n in self.nodes)
        return BackendOption(self.name, nodes, Topology())

    def cycle(self, now: float, problems: list[str]) -> int:
        """One cycle; returns the GPUs in use after it."""
        for job in [j for j in self.jobs.values()
                    if j.started is not None and j.started + j.seconds <= now]:
            del self.jobs[job.name]
        gangs = tuple(job.gang() for job in self.jobs.values())
        result = run_cycle(Snapshot(nodes=self.nodes, queues=QUEUES, gangs=gangs, now=now))
        if result.evictions:
            problems.append(f"{self.name}: evictions in a stream of equals: "
                            f"{result.evictions[:3]}")
        free = {n.name: n.gpus for n in self.nodes}
        for job in self.jobs.values():
            for pod in job.pods():
                if pod.node is not None:
                    free[pod.node] -= pod.gpus
        pending = [g for g in gangs if all(p.node is None for p in g.pods)]
        free_nodes = tuple(replace(n, gpus=free[n.name]) for n in self.nodes)
        problems.extend(f"{self.name} at {now:g}: {p}" for p in plan_problems(
            free_nodes, pending, result.bindings))
        for binding in result.bindings:
            job = self.jobs[binding.gang]
            job.nodes[binding.pod] = binding.node
        for move in result.moves:
            self.jobs[move.gang].nodes[move.pod] = move.target
        for job in self.jobs.values():
            if job.started is None and len(job.nodes) == len(job.pods()):
                job.started = now
        used = {name: 0 for name in self.capacity}
        for job in self.jobs.values():
            for pod in job.pods():
                if pod.node is not None:
                    used[pod.node] += pod.gpus
        problems.extend(f"{self.name}: node {n} holds {used[n]} of {self.capacity[n]} GPUs"
                        for n in used if used[n] > self.capacity[n])
        return sum(used.values())


def shapes(scale: int) -> dict[str, tuple[Node, ...]]:
    """Three clusters of different shapes: 8-GPU nodes, 4-GPU nodes, a small 8-GPU one."""
    def nodes(prefix: str, count: int, gpus: int) -> tuple[Node, ...]:
        return tuple(Node(f"{prefix}{i:03d}", gpus=gpus, cpu=gpus * 8_000)
                     for i in range(count))
    return {"a": nodes("a", 16 * scale, 8), "b": nodes("b", 32 * scale, 4),
            "c": nodes("c", 8 * scale, 8)}


def run(clusters: dict[str, tuple[Node, ...]], jobs: list[Job], horizon: float,
        fleet: bool) -> dict:
    """Feeds the jobs to the clusters (the fleet choice), or to their union as one cluster."""
    if fleet:
        sims = {name: Cluster(name, nodes) for name, nodes in clusters.items()}
    else:
        sims = {"one": Cluster("one", tuple(n for nodes in clusters.values() for n in nodes))}
    problems: list[str] = []
    arrivals = sorted(jobs, key=lambda j: j.arrival)
    index, used_seconds, now = 0, 0.0, 0.0
    capacity = sum(n.gpus for nodes in clusters.values() for n in nodes)
    last_move_pass = -MOVE_INTERVAL
    while now < horizon:
        options = {name: sim.option() for name, sim in sims.items()}
        while index < len(arrivals) and arrivals[index].arrival <= now:
            job = arrivals[index]
            index += 1
            choice = choose(job.gang(), list(options.values()), now)
            if choice.backend is None:
                problems.append(f"{job.name} ({job.gpus} GPUs): no cluster could hold it")
                continue
            job.cluster = choice.backend
            sims[job.cluster].jobs[job.name] = job
        if fleet and now - last_move_pass >= 60.0:
            last_move_pass = now
            for sim in list(sims.values()):
                for job in [j for j in sim.jobs.values() if j.started is None and not j.nodes]:
                    target = move_target(job.gang(), sim.name, list(options.values()), now,
                                         ran=False, last_moved=job.last_moved,
                                         interval=MOVE_INTERVAL)
                    if target is not None:
                        del sim.jobs[job.name]
                        job.cluster, job.last_moved = target, now
                        sims[target].jobs[job.name] = job
                        options[target] = sims[target].option()
        used = sum(sim.cycle(now, problems) for sim in sims.values())
        used_seconds += used * TICK
        now += TICK
    for job in jobs:
        if job.cluster is not None and not judge(
                replace(job.gang(), pods=tuple(replace(p, node=None) for p in job.pods())),
                BackendOption(job.cluster, clusters.get(job.cluster) or sims["one"].nodes,
                              Topology()), 0.0).eligible:
            problems.append(f"{job.name} went to {job.cluster}, which could never hold it")
    # A gang not started by the end has waited until the end, at least: counted so, never left
    # out (leaving the longest waits out would flatter the one that starts fewer).
    waits = [(job.started if job.started is not None else horizon) - job.arrival
             for job in jobs]
    return {"utilization": used_seconds / (capacity * horizon), "waits": waits,
            "started": sum(1 for job in jobs if job.started is not None),
            "problems": problems}


def p90(values: list[float]) -> float:
    return sorted(values)[int(0.9 * (len(values) - 1))] if values else 0.0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a small fleet, a short stream")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--load", type=float, default=1.0)
    args = parser.parse_args()
    scale, hours = (1, 3) if args.quick else (4, 8)
    clusters = shapes(scale)
    horizon = hours * 3600.0
    capacity = sum(n.gpus for nodes in clusters.values() for n in nodes)
    jobs = stream(random.Random(args.seed), capacity, horizon, args.load)
    figures = {}
    for label, fleet in (("fleet", True), ("one cluster", False)):
        copies = [replace(job, nodes={}) for job in jobs]
        figures[label] = run(clusters, copies, horizon, fleet)
        fail_on(label, figures[label]["problems"])
    sizes = ", ".join(f"{name}: {len(nodes)} × {nodes[0].gpus} GPUs"
                      for name, nodes in clusters.items())
    print(f"fleet quality: {len(jobs)} gangs of 1-64 GPUs over {hours} h at load {args.load:g}; "
          f"clusters {sizes} ({capacity} GPUs) against one cluster of them all")
    for label, result in figures.items():
        waits = result["waits"]
        print(f"  {label:12s} utilization {result['utilization']:.3f}, started "
              f"{result['started']}/{len(jobs)}, wait (to the end for those not started) "
              f"median {statistics.median(waits):.0f} s, p90 {p90(waits):.0f} s")
    ratio = figures["fleet"]["utilization"] / figures["one cluster"]["utilization"]
    print(f"  utilization fleet / one cluster: {ratio:.3f} (target >= 0.95)")
    return 0 if ratio >= 0.95 else 1


if __name__ == "__main__":
    sys.exit(main())
