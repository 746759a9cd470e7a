"""Leader election for the singleton processes (the scheduling loop, the Kubernetes backend).

The leader holds a session-level PostgreSQL advisory lock on a connection of its own for as long
as it lives; another instance polls for the lock and takes over as soon as the first one's
session ends (exit, crash, lost connection). No home-made consensus: the database decides.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import psycopg
from django.db import connection

from . import metrics

logger = logging.getLogger(__name__)


def leader_connection() -> psycopg.Connection:
    """A connection outside Django's, with Django's connection parameters."""
    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(key, None)
    return psycopg.connect(**params, autocommit=True)


class LeaderLock:
    def __init__(self, key: int, *, name: str, poll: float = 1.0, listen: str | None = None):
        self.key, self.name, self.poll, self.listen = key, name, poll, listen
        self.connection: psycopg.Connection | None = None

    def acquire(self, stopping: Callable[[], bool]) -> bool:
        """Wait until this instance leads; False if `stopping()` turns true first."""
        while not stopping():
            try:
                if self.connection is None or self.connection.closed:
                    self.connection = leader_connection()
                row = self.connection.execute("SELECT pg_try_advisory_lock(%s)",
                                              [self.key]).fetchone()
                if row[0]:
                    if self.listen:
                        self.connection.execute(f"LISTEN {self.listen}")
                    logger.info("%s: this instance is the leader", self.name)
                    metrics.record_leader(self.name, True)
                    return True
            except psycopg.Error as error:
                logger.warning("%s: leader election failed: %s", self.name, error)
                self.connection = None
            time.sleep(self.poll)
        return False

    def alive(self) -> bool:
        """Still leading: the lock's session is up."""
        try:
            self.connection.execute("SELECT 1")
            return True
        except (psycopg.Error, AttributeError):
            self.lost()
            return False

    def lost(self) -> None:
        self.connection = None
        metrics.record_leader(self.name, False)

    def release(self) -> None:
        if self.connection is not None and not self.connection.closed:
            self.connection.close()
        self.connection = None
        metrics.record_leader(self.name, False)
