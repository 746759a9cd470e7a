"""The scheduling loop: one active instance at a time (see scheduler.leader); each cycle is a
transaction of its own (see scheduler.services)."""

from __future__ import annotations

import logging
import signal
import time

from django.conf import settings
from django.db import connection

from scheduler.backends.spec import default_spec
from scheduler.leader import LeaderLock

from . import cycle
from .sim_logs import SimulatedOutput

logger = logging.getLogger(__name__)

LEADER_LOCK = 0x05_1EAD


class SchedulerLoop:
    def __init__(self, *, interval: float | None = None, poll: float = 1.0):
        self.interval = settings.OSMO_SCHEDULER_INTERVAL if interval is None else interval
        self.poll = poll
        self.stopping = False
        self.leader = LeaderLock(LEADER_LOCK, name="scheduler", poll=poll)
        self.output = SimulatedOutput()

    def stop(self, *_args) -> None:
        self.stopping = True

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        while not self.stopping:
            if not self.leader.acquire(lambda: self.stopping):
                break
            while not self.stopping and self.leader.alive():
                started = time.monotonic()
                if self.interval > 0:
                    try:
                        self.cycles()
                    except Exception:  # noqa: BLE001 - a failed cycle rolls back; try again
                        logger.exception("scheduler: cycle failed")
                        connection.close()
                    self._print()
                time.sleep(self.pause(time.monotonic() - started))
        self.leader.release()

    def cycles(self) -> None:
        """A cycle per embedded backend, each on its own nodes (a pool listing several gets
        them in its order, see :mod:`.snapshot`)."""
        summary = cycle.cycles_run()
        if summary.bound or summary.evicted or summary.completed:
            logger.info("cycle", extra={"event": summary.as_dict()})

    def pause(self, took: float) -> float:
        """Seconds to sleep after a cycle that took `took`: a cycle every interval, and
        cycles computing at most half of the time: a backlog of thousands of pending gangs
        makes each cycle longer, and back-to-back cycles would take the CPU its submissions
        need (as the Kubernetes placement loop)."""
        if self.interval <= 0:
            return max(0.0, self.poll - took)
        return max(self.interval - took, took)

    def _print(self) -> None:
        """The embedded cluster's tasks print their lines (not on Kubernetes: pods do)."""
        if not default_spec().is_embedded:
            return
        try:
            self.output.step()
        except Exception:  # noqa: BLE001 - output is best effort; the next step goes on
            logger.exception("scheduler: simulated task output failed")
            connection.close()
