"""Placement quality: GPUs placed by one cycle divided by the optimum of an exact solver.

Run from the repository root: `.venv/bin/python benchmarks/placement_quality.py [--quick]`.
200 random small instances (<= 8 nodes, <= 20 gangs, one queue without quota, no running
work): the optimum is a MILP (`scipy.optimize.milp`, used here only) maximising placed GPUs
with every gang all-or-nothing over its required pods and each node's GPU/CPU capacity. The
scheduler is not maximising GPUs (it honours queue order and FIFO), so 1.0 is not expected
on every instance; the target is a mean >= 0.95. Every plan is checked feasible (each pod once,
no node over its GPUs or CPU, every gang whole or not at all) and every solver run must succeed:
a failed check or solver run ends the run with a non-zero exit and no figure.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.checks import fail_on, plan_problems  # noqa: E402
from scheduler.core.cycle import run_cycle  # noqa: E402
from scheduler.core.model import Gang, Node, Pod, Queue, Snapshot  # noqa: E402


def instance(rng: random.Random) -> Snapshot:
    nodes = tuple(Node(f"n{i}", gpus=rng.choice([4, 8, 8]), cpu=rng.choice([32_000, 64_000]))
                  for i in range(rng.randint(2, 8)))
    gangs = []
    for g in range(rng.randint(3, 20)):
        size = rng.choice([1, 1, 2, 3, 4])
        gpus = rng.choice([1, 1, 2, 4, 8])
        pods = tuple(Pod(f"g{g}-{p}", gpus=gpus, cpu=rng.choice([1000, 4000, 8000]))
                     for p in range(size))
        gangs.append(Gang(f"g{g:02d}", "team", created_at=float(g), min_member=size, pods=pods))
    queues = (Queue("root"), Queue("team", parent="root"))
    return Snapshot(nodes, queues, tuple(gangs))


class SolverFailed(RuntimeError):
    """The exact solver found no optimum: the instance has no reference to score against."""


def optimum(snapshot: Snapshot, solve=milp) -> int:
    """Max GPUs placeable with whole gangs (x[pod, node] binary, y[gang] binary); raises
    :class:`SolverFailed` when the solver does not report an optimum."""
    nodes = snapshot.nodes
    pods = [(g, pod) for g, gang in enumerate(snapshot.gangs) for pod in gang.pods]
    n_x = len(pods) * len(nodes)
    n_vars = n_x + len(snapshot.gangs)
    objective = np.zeros(n_vars)
    rows, lower, upper = [], [], []
    for p, (g, pod) in enumerate(pods):
        row = np.zeros(n_vars)
        for n in range(len(nodes)):
            objective[p * len(nodes) + n] = -pod.gpus
            row[p * len(nodes) + n] = 1
        row[n_x + g] = -1
        rows.append(row)
        lower.append(0)
        upper.append(0)
    for n, node in enumerate(nodes):
        for attribute, capacity in (("gpus", node.gpus), ("cpu", node.cpu)):
            row = np.zeros(n_vars)
            for p, (_g, pod) in enumerate(pods):
                row[p * len(nodes) + n] = getattr(pod, attribute)
            rows.append(row)
            lower.append(-np.inf)
            upper.append(capacity)
    solution = solve(objective, constraints=LinearConstraint(np.array(rows), lower, upper),
                    integrality=np.ones(n_vars), bounds=Bounds(0, 1))
    if not solution.success or solution.fun is None:
        raise SolverFailed(f"the solver found no optimum: {solution.message}")
    return int(round(-solution.fun))


def ratio(snapshot: Snapshot, result, best: int) -> float:
    """GPUs the plan places over the optimum; raises ValueError for an infeasible plan."""
    problems = plan_problems(snapshot.nodes, snapshot.gangs, result.bindings)
    if problems:
        raise ValueError("infeasible plan: " + "; ".join(problems[:5]))
    gpus = {pod.name: pod.gpus for gang in snapshot.gangs for pod in gang.pods}
    placed = sum(gpus[binding.pod] for binding in result.bindings)
    if placed > best:
        raise ValueError(f"the plan places {placed} GPUs, more than the optimum {best}")
    return 1.0 if best == 0 else placed / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="20 instances instead of 200")
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    ratios = []
    for number in range(20 if args.quick else 200):
        snapshot = instance(rng)
        try:
            ratios.append(ratio(snapshot, run_cycle(snapshot), optimum(snapshot)))
        except (SolverFailed, ValueError) as error:
            fail_on("placement quality", [f"instance {number}: {error}"])
    print(f"instances={len(ratios)} mean={statistics.mean(ratios):.4f} "
          f"worst={min(ratios):.4f} optimal={sum(r >= 0.9999 for r in ratios)}")


if __name__ == "__main__":
    main()
