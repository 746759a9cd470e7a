"""The embedded loop's pacing: a cycle every interval, and cycles computing at most half of
the time, so a backlog that makes each cycle long does not run them back to back."""

from __future__ import annotations

import pytest

from scheduler.backends.embedded.loop import SchedulerLoop


def test_a_cycle_every_interval_and_never_more_than_half_of_the_time_computing() -> None:
    loop = SchedulerLoop(interval=1.0)
    assert loop.pause(0.1) == pytest.approx(0.9)
    assert loop.pause(0.5) == pytest.approx(0.5)
    assert loop.pause(0.7) == pytest.approx(0.7)  # not 0.3: the backlog's submissions need CPU
    assert loop.pause(2.5) == pytest.approx(2.5)


def test_with_cycles_off_the_loop_only_polls() -> None:
    loop = SchedulerLoop(interval=0, poll=1.0)
    assert loop.pause(0.2) == pytest.approx(0.8)
    assert loop.pause(1.5) == 0.0
