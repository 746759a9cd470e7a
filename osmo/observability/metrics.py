"""The metrics plumbing every process shares: the on/off switch, multiprocess mode and the
scrape-time collectors apps register.

Multiprocess mode (prometheus-client's): with ``PROMETHEUS_MULTIPROC_DIR`` set, every process
(gunicorn workers, the Celery worker and its children, beat, the scheduler or Kubernetes
backend and its scheduler child) writes its samples to memory-mapped files there, and a scrape
of any web worker merges them all. ``osmo standalone`` points it at ``<data dir>/metrics`` and
empties that folder at each start. A process that is gone keeps its counters and histograms
(they must not go backwards) while its live gauges are dropped: each scrape marks the processes
that no longer exist as dead. Without the variable a process exports its own samples only.

Scrape-time collectors read state the database already holds (pools, pending work, the last
cycle's queue figures, the backend's API-server contact) when Prometheus asks, so they never
go stale and need no process of their own.
"""

from __future__ import annotations

import logging
import os
import re

from django.conf import settings
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, multiprocess

logger = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# The text format generate_latest() writes, as every Prometheus 2.x and 3.x reads it.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LIVE_GAUGE_FILE = re.compile(r"^gauge_live\w*?_(\d+)\.db$")
_scrape_collectors: list = []


def enabled() -> bool:
    """``OSMO_METRICS`` (on by default): off records nothing and ``/metrics`` is 404."""
    return settings.OSMO_METRICS


def register_scrape_collector(collector) -> None:
    """A prometheus-client collector (an object with ``collect()``) run at each scrape of the
    web tier; apps register theirs in ``AppConfig.ready``. Registered once per process."""
    if collector not in _scrape_collectors:
        _scrape_collectors.append(collector)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def mark_dead_processes(path: str) -> list[int]:
    """Drop the live gauges of processes that are gone (a gunicorn worker recycled, a Celery
    child replaced, a scheduler restarted): whoever started them, one check at scrape time."""
    dead = set()
    for name in os.listdir(path):
        match = _LIVE_GAUGE_FILE.match(name)
        if match and not _alive(int(match.group(1))):
            dead.add(int(match.group(1)))
    for pid in dead:
        multiprocess.mark_process_dead(pid, path)
    return sorted(dead)


class _Guarded:
    """A scrape collector whose failure (say, the database is down) costs its own series only."""

    def __init__(self, collector):
        self.collector = collector

    def collect(self):
        try:
            yield from list(self.collector.collect())
        except Exception:  # noqa: BLE001 - the rest of the scrape is still worth having
            logger.warning("metrics: collector %s failed", type(self.collector).__name__,
                           exc_info=True)


class _Own:
    """This process's default registry, for a process not in multiprocess mode."""

    def collect(self):
        yield from REGISTRY.collect()


def exposition(*, scrape_collectors: bool = True) -> bytes:
    """Every process's samples (or this process's) in Prometheus' text format, with the
    scrape-time collectors unless a non-web process serves its own (``OSMO_METRICS_PORT``: the
    web tier exports those once)."""
    registry = CollectorRegistry()
    directory = os.environ.get(MULTIPROC_ENV)
    if directory:
        mark_dead_processes(directory)
        multiprocess.MultiProcessCollector(registry, path=directory)
    else:
        registry.register(_Own())
    for collector in _scrape_collectors if scrape_collectors else ():
        registry.register(_Guarded(collector))
    return generate_latest(registry)
