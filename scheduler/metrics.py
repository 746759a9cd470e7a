"""The scheduler's metrics (names after KAI's and kube-scheduler's; docs/OBSERVABILITY.md).

Recorded from the figures a cycle returns, after its transaction commits (a rolled-back cycle
counts only as a failure): the pure core imports no Prometheus. The gauges of the last cycle
are read at scrape time (:mod:`scheduler.collectors`).
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Mapping, Sequence

from prometheus_client import Counter, Gauge, Histogram

from osmo.observability.metrics import enabled

PHASES = ("snapshot", "decide", "apply")
_CYCLE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

CYCLE_PHASE_DURATION = Histogram(
    "osmo_scheduler_cycle_duration_seconds",
    "Time a scheduling cycle spends in each phase: snapshot, decide (the core), apply.",
    ["phase"], buckets=_CYCLE_BUCKETS)
E2E_DURATION = Histogram(
    "osmo_scheduler_e2e_scheduling_duration_seconds",
    "Time of a whole scheduling cycle, snapshot to committed decisions.",
    buckets=_CYCLE_BUCKETS)
CYCLES = Counter("osmo_scheduler_cycles_total", "Scheduling cycles run, by result.",
                 ["result"])
PODS_BOUND = Counter("osmo_scheduler_pods_bound_total", "Pods bound to a node.")
PODS_EVICTED = Counter("osmo_scheduler_pods_evicted_total",
                       "Pods evicted, by reason (preempted, reclaimed, stale, incomplete).",
                       ["reason"])
PODS_MOVED = Counter("osmo_scheduler_pods_moved_total",
                     "Running pods moved to another node, by reason (consolidated).", ["reason"])
TIME_TO_FIRST_BIND = Histogram(
    "osmo_scheduler_time_to_first_bind_seconds",
    "Time from a workflow's submission to the first bind of one of its pods, by priority.",
    ["priority"],
    buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600))
LEADER = Gauge("osmo_leader_election_master_status",
               "1 while this process leads (scheduler loop, Kubernetes backend), else 0.",
               ["name"], multiprocess_mode="livesum")


def record_cycle(*, snapshot: float, decide: float, apply: float, bound: int,
                 evicted: Iterable[str] = (), moved: Iterable[str] = (),
                 first_binds: Iterable[tuple[str, float]] = ()) -> None:
    """A committed cycle: phase times in seconds, pods bound, eviction and move reasons (one
    per pod), and (priority, seconds since submission) of each workflow bound a first time."""
    record_cycles(cycles=1, phases=[(snapshot, decide, apply)], bound=bound,
                  evicted=Tally(evicted), moved=Tally(moved), first_binds=first_binds)


def record_cycles(*, cycles: int, phases: Iterable[Sequence[float]], bound: int,
                  evicted: Mapping[str, int], moved: Mapping[str, int],
                  first_binds: Iterable[tuple[str, float]] = ()) -> None:
    """``cycles`` committed cycles at once (a backend agent's, between two of its sends):
    the (snapshot, decide, apply) seconds of those whose times were kept, pods bound, pods
    evicted and moved by reason, and the workflows bound a first time."""
    if not enabled():
        return
    for times in phases:
        for phase, seconds in zip(PHASES, times, strict=True):
            CYCLE_PHASE_DURATION.labels(phase).observe(seconds)
        E2E_DURATION.observe(sum(times))
    CYCLES.labels("success").inc(cycles)
    if bound:
        PODS_BOUND.inc(bound)
    for reason, count in evicted.items():
        if count:
            PODS_EVICTED.labels(reason).inc(count)
    for reason, count in moved.items():
        if count:
            PODS_MOVED.labels(reason).inc(count)
    for priority, seconds in first_binds:
        TIME_TO_FIRST_BIND.labels(priority).observe(max(0.0, seconds))


def record_cycle_failed() -> None:
    if enabled():
        CYCLES.labels("error").inc()


def record_leader(name: str, leading: bool) -> None:
    if enabled():
        LEADER.labels(name).set(1 if leading else 0)
