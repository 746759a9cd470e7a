"""What this machine (or container) has, and the process counts derived from it.

Every server process count has its default here, read from the CPUs this process may use
(its affinity, and a cgroup CPU quota when one is set, as in a container with a CPU limit) and
the memory it may use (the cgroup's limit, else the machine's):

- gunicorn workers (``osmo/gunicorn_config.py``, so standalone, the Dockerfile and the
  Kubernetes manifests all take it): one per CPU — a request is CPU work between short database
  waits, and more processes than CPUs only trade places on them — at least 2 (a request that
  blocks does not stall the others) and at most one per 512 MiB of memory;
- gunicorn threads: 40 per worker whatever the machine, since a followed log holds one
  (``OSMO_LOG_STREAMS_PER_PROCESS``, 32) and 8 are left for everything else; at most
  ``active_requests()`` of them compute at once (``osmo.middleware.ActiveRequestsMiddleware``);
- Celery worker processes (``CELERY_WORKER_CONCURRENCY``): one per CPU, at most 4 — its tasks
  (queue syncs, drain checks, samples) are short and rare.

Each has its environment variable to override it: ``OSMO_WEB_WORKERS``,
``OSMO_WEB_ACTIVE_REQUESTS``, ``OSMO_WORKER_CONCURRENCY``.
"""

from __future__ import annotations

import os
from pathlib import Path

WEB_THREADS = 40
MEMORY_PER_WEB_WORKER = 512 * 2**20
CGROUP = Path("/sys/fs/cgroup")


def _cgroup_value(name: str) -> str | None:
    try:
        return (CGROUP / name).read_text().strip()
    except OSError:
        return None


def cpus() -> int:
    """CPUs this process may use: its affinity, lowered by a cgroup (v2) CPU quota."""
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    quota = (_cgroup_value("cpu.max") or "max").split()
    if quota and quota[0] != "max" and len(quota) == 2 and int(quota[1]) > 0:
        count = min(count, max(1, int(quota[0]) // int(quota[1])))
    return max(1, count)


def memory_bytes() -> int:
    """Memory this process may use: the cgroup (v2) limit when set, else the machine's."""
    limit = _cgroup_value("memory.max")
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if limit and limit.isdigit():
        return min(total, int(limit))
    return total


def _env(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    return int(value) if value else None


def web_workers() -> int:
    return _env("OSMO_WEB_WORKERS") or max(2, min(cpus(), memory_bytes() // MEMORY_PER_WEB_WORKER))


def active_requests() -> int:
    """Requests one web process computes at once: enough to cover the database waits of a
    request (about half of its time), few enough that its threads do not queue for the one
    interpreter lock of the process."""
    return _env("OSMO_WEB_ACTIVE_REQUESTS") or 2


def worker_concurrency() -> int:
    return _env("OSMO_WORKER_CONCURRENCY") or min(4, cpus())
