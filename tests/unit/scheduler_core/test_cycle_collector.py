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
