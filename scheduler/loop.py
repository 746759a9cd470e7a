"""The scheduling loop: one active instance at a time, elected with a PostgreSQL advisory lock.

The leader holds a session-level advisory lock on its own connection for as long as it lives;
a second instance polls for the lock and takes over as soon as the first one's session ends
(exit, crash, lost connection). Each cycle is a transaction of its own (see services).
"""

from __future__ import annotations

import logging
import signal
import time

import psycopg
from django.conf import settings
from django.db import connection

from . import services

logger = logging.getLogger(__name__)

LEADER_LOCK = 0x05_1EAD


def _leader_connection() -> psycopg.Connection:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params.pop("prepare_threshold", None)
    return psycopg.connect(**params, autocommit=True)


class SchedulerLoop:
    def __init__(self, *, interval: float | None = None, poll: float = 1.0):
        self.interval = settings.OSMO_SCHEDULER_INTERVAL if interval is None else interval
        self.poll = poll
        self.stopping = False
        self.leader: psycopg.Connection | None = None

    def stop(self, *_args) -> None:
        self.stopping = True

    def acquire(self) -> bool:
        """Become the leader, waiting for the current one to go. False if asked to stop."""
        while not self.stopping:
            try:
                if self.leader is None or self.leader.closed:
                    self.leader = _leader_connection()
                row = self.leader.execute("SELECT pg_try_advisory_lock(%s)",
                                          [LEADER_LOCK]).fetchone()
                if row[0]:
                    logger.info("scheduler: this instance is the leader")
                    return True
            except psycopg.Error as error:
                logger.warning("scheduler: leader election failed: %s", error)
                self.leader = None
            time.sleep(self.poll)
        return False

    def still_leader(self) -> bool:
        try:
            self.leader.execute("SELECT 1")
            return True
        except psycopg.Error:
            self.leader = None
            return False

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        while not self.stopping:
            if not self.acquire():
                break
            while not self.stopping and self.still_leader():
                started = time.monotonic()
                if self.interval > 0:
                    try:
                        summary = services.cycle_run()
                        if summary.bound or summary.evicted or summary.completed:
                            logger.info("cycle: %s", summary.as_dict())
                    except Exception:  # noqa: BLE001 - a failed cycle rolls back; try again
                        logger.exception("scheduler: cycle failed")
                        connection.close()
                pause = (self.interval if self.interval > 0 else self.poll)
                time.sleep(max(0.0, pause - (time.monotonic() - started)))
        if self.leader is not None and not self.leader.closed:
            self.leader.close()
