"""CPU seconds used by process trees, by part: where a benchmark's time goes.

A part is named from each process's command line (``part_of``); a process that ended before a
reading is not in it, so a phase is measured from two readings of the processes alive at its
end (a process started during the phase counts from its start).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

import psutil

from osmo.embedded import postgres_pid

Tree = tuple[int, Callable[[str], str]]  # a root process and how its processes are named


def cpu_seconds(trees: Iterable[Tree], *, own: str | None = None) -> Counter:
    """CPU seconds (user + system) used so far by each tree's processes, by part; ``own``:
    this process's too, under that name (a benchmark's clients)."""
    parts: Counter = Counter()
    seen: set[int] = set()
    for root, part_of in trees:
        try:
            processes = [psutil.Process(root)]
            processes += processes[0].children(recursive=True)
        except psutil.Error:  # ended meanwhile
            continue
        for process in processes:
            try:
                command, times = " ".join(process.cmdline()), process.cpu_times()
            except psutil.Error:
                continue
            if process.pid not in seen:
                seen.add(process.pid)
                parts[part_of(command)] += times.user + times.system
    if own is not None:
        times = psutil.Process().cpu_times()
        parts[own] += times.user + times.system
    return parts


def product_part(command: str) -> str:
    """``osmo standalone``'s processes by role."""
    if "postgres" in command:
        return "PostgreSQL"
    if "gunicorn" in command:
        return "web"
    if "run_k8s_backend" in command:
        return "backend"
    if "scheduler.backends.agent.process" in command:  # with a cluster: its agent
        return "agent"
    if "multiprocessing.spawn" in command:  # the backend's placement process
        return "scheduler"
    if "celery" in command:
        return "Celery"
    return "supervisor and broker"


def standalone_trees(process_id: int, data_dir: Path) -> list[Tree]:
    """``osmo standalone`` (started as ``process_id`` on ``data_dir``): its children, and the
    embedded PostgreSQL, which runs in a process group of its own."""
    trees: list[Tree] = [(process_id, product_part)]
    postmaster = postgres_pid(data_dir)
    if postmaster is not None:
        trees.append((postmaster, lambda _command: "PostgreSQL"))
    return trees


def spent(before: Counter, after: Counter) -> Counter:
    """What each part used between two readings (a part that appeared counts from zero)."""
    return Counter({part: round(after[part] - before.get(part, 0.0), 2) for part in after})


def describe(parts: Counter, seconds: float) -> str:
    """``"API server 20.5, web 16.0, … — 78.6 in all, 1.9 of 2 CPUs over 41.0 s"``."""
    total = sum(parts.values())
    shares = ", ".join(f"{part} {value:.1f}" for part, value in parts.most_common() if value)
    return (f"{shares} — {total:.1f} in all, {total / seconds:.1f} of {psutil.cpu_count()} "
            f"CPUs over {seconds:.1f} s")
