"""What a benchmark checks before it prints a figure: a missing or wrong result is a failure
(a non-zero exit with the problems, no figure), never a figure. Pure functions, unit-tested in
``tests/unit/test_benchmark_checks.py``."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence


def fail_on(label: str, problems: Sequence[str]) -> None:
    """End the run with the problems when there are any: no figure is printed after one."""
    if problems:
        raise SystemExit(f"[{label}] FAILED, no figure printed: " + "; ".join(problems[:10]))


def fill_problems(*, workflows: int, failures: Sequence[int], running: int,
                  submitted: float | None, limit: float, timed_out: bool) -> list[str]:
    """A fill through the REST API: every submission accepted (HTTP 201), and every workflow
    RUNNING within the time limit."""
    problems = []
    if failures:
        codes = sorted({code: failures.count(code) for code in failures}.items())
        problems.append(f"{len(failures)} of {workflows} submissions failed (HTTP {codes})")
    if submitted is None:
        problems.append(f"the submissions did not end within {limit:g} s")
    if timed_out or running < workflows:
        problems.append(f"{running} of {workflows} workflows RUNNING after {limit:g} s")
    return problems


def plan_problems(nodes: Iterable, gangs: Iterable, bindings: Iterable) -> list[str]:
    """A plan of ``bindings`` (pod → node) over free ``nodes`` is feasible: every pod and node
    exists, a pod is bound once, no node gets more GPUs or CPU than it has, and every gang is
    all or nothing (at least ``min_member`` of its pods, or none)."""
    nodes = {node.name: node for node in nodes}
    gangs = list(gangs)
    pods = {pod.name: (gang, pod) for gang in gangs for pod in gang.pods}
    problems, seen = [], set()
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    placed: dict[str, int] = defaultdict(int)
    for binding in bindings:
        if binding.pod not in pods:
            problems.append(f"binding of an unknown pod {binding.pod}")
            continue
        if binding.node not in nodes:
            problems.append(f"{binding.pod} bound to an unknown node {binding.node}")
            continue
        if binding.pod in seen:
            problems.append(f"{binding.pod} bound twice")
            continue
        seen.add(binding.pod)
        gang, pod = pods[binding.pod]
        used[binding.node][0] += pod.gpus
        used[binding.node][1] += pod.cpu
        placed[gang.name] += 1
    for name, (gpus, cpu) in sorted(used.items()):
        node = nodes[name]
        if gpus > node.gpus or cpu > node.cpu:
            problems.append(f"{name} over its capacity: {gpus}/{node.gpus} GPUs, "
                            f"{cpu}/{node.cpu} CPU")
    for gang in gangs:
        if 0 < placed[gang.name] < gang.min_member:
            problems.append(f"gang {gang.name} partly placed: {placed[gang.name]} of "
                            f"{gang.min_member}")
    return problems


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """(median, min, max) of a benchmark's runs."""
    if not values:
        raise ValueError("no runs")
    return statistics.median(values), min(values), max(values)


def describe_spread(values: Sequence[float], unit: str = "", digits: int = 1) -> str:
    """``median M (min–max A–B, N runs)``."""
    median, low, high = spread(values)
    return (f"median {median:.{digits}f}{unit} (min–max {low:.{digits}f}–{high:.{digits}f}"
            f"{unit}, {len(values)} run{'s' if len(values) != 1 else ''})")


def best_floor(times_by_clients: dict[int, float]) -> tuple[int, float]:
    """The floor's best time over its client counts, and the count that gave it."""
    if not times_by_clients:
        raise ValueError("no floor runs")
    clients = min(times_by_clients, key=lambda count: (times_by_clients[count], count))
    return clients, times_by_clients[clients]


def waits_since(jobs: Iterable[tuple[float, float | None, object, object]], since: float,
                until: float) -> tuple[list[float], int]:
    """The waits of the jobs (submitted, started, ...) submitted at or after ``since``; a job
    never started waits until ``until`` (a lower bound: it is still waiting). Returns the waits
    and how many never started."""
    waits, unstarted = [], 0
    for submitted, started, *_ in jobs:
        if submitted < since:
            continue
        if started is None:
            unstarted += 1
            waits.append(until - submitted)
        else:
            waits.append(started - submitted)
    return waits, unstarted
