"""A cycle pauses Python's cyclic garbage collector while it runs and leaves it as it found it:
after a normal cycle, and after one that raises."""

from __future__ import annotations

import gc

import pytest

from scheduler.core import cycle
from scheduler.core.model import Gang, Snapshot

from .builders import flat_queues, nodes, pods


def snapshot() -> Snapshot:
    return Snapshot(nodes(1), flat_queues("a"), (Gang("g", "a", pods=pods("g", 1)),))


@pytest.fixture
def collector():
    """The collector's state is this process's: put back whatever a test leaves."""
    was_enabled = gc.isenabled()
    yield
    if was_enabled:
        gc.enable()
    else:
        gc.disable()


@pytest.fixture
def failing(monkeypatch):
    """The cycle's work raises; records whether the collector was paused meanwhile."""
    seen = []

    def schedule(_snapshot):
        seen.append(gc.isenabled())
        raise RuntimeError("the cycle failed")

    monkeypatch.setattr(cycle, "_schedule", schedule)
    return seen


def test_a_cycle_runs_with_the_collector_paused_and_resumes_it(collector, monkeypatch) -> None:
    gc.enable()
    seen = []
    work = cycle._schedule
    monkeypatch.setattr(cycle, "_schedule", lambda s: seen.append(gc.isenabled()) or work(s))
    result = cycle.run_cycle(snapshot())
    assert [b.pod for b in result.bindings] == ["g-0"]
    assert seen == [False]
    assert gc.isenabled()


def test_a_cycle_that_raises_resumes_the_collector(collector, failing) -> None:
    gc.enable()
    with pytest.raises(RuntimeError, match="the cycle failed"):
        cycle.run_cycle(snapshot())
    assert failing == [False]
    assert gc.isenabled()


def test_a_cycle_that_raises_leaves_a_paused_collector_paused(collector, failing) -> None:
    gc.disable()
    with pytest.raises(RuntimeError, match="the cycle failed"):
        cycle.run_cycle(snapshot())
    assert failing == [False]
    assert not gc.isenabled()


def test_a_cycles_gangs_are_freed_without_the_collector(collector) -> None:
    """Once a cycle returns, reference counting frees its per-gang state: were it part of a
    reference cycle, the collector that resumes would walk the whole heap to free it (a third
    of a 350,000-pod cycle)."""
    running = tuple(Gang(f"r{i}", "a", running_since=0.0, exec_timeout=600.0,
                         pods=pods(f"r{i}", 2, gpus=4, node=f"node-00{i}")) for i in range(2))
    waiting = Gang("w", "a", queued_since=0.0, exec_timeout=60.0, pods=pods("w", 9))
    snap = Snapshot(nodes(2), flat_queues("a"), running + (waiting,), now=100.0)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        result = cycle.run_cycle(snap)
        gc.collect()
        left = {type(item).__name__ for item in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert [b.gang for b in result.bindings] == []
    assert [e.gang for e in result.estimates] == ["w"]
    assert left.isdisjoint({"GangRun", "GangWork", "GangTree", "Cluster", "_Cycle"})
