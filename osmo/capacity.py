"""What this machine (or container) has, and the process counts derived from it.

The CPUs this process may use (its affinity, lowered by a cgroup CPU quota, as in a container
with a CPU limit) and the memory it may use (the cgroup's limit, else the machine's) decide:

- gunicorn workers (``osmo/gunicorn_config.py``, so standalone, the Dockerfile and the
  Kubernetes manifests all take it): one per CPU — a request is CPU work between short
  database waits, so more processes than CPUs only take turns on them — at least 2 (one
  request that blocks leaves another process serving) and at most one per 512 MiB;
- gunicorn threads: ``WEB_THREADS`` per worker whatever the machine, since a followed log
  holds one while it lasts (``OSMO_LOG_STREAMS_PER_PROCESS``, 32) and 8 are left for
  everything else;
- Celery worker processes (``CELERY_WORKER_CONCURRENCY``): one per CPU, at most 4 — its tasks
  (queue syncs, drain checks, usage samples) are short and rare;
- the embedded PostgreSQL's ``max_connections`` (``database_connections``): what those hold at
  once — a connection per gunicorn thread and each worker's numbering connection, one per Celery
  worker process — and ``DB_CONNECTIONS_SPARE`` for the scheduler, the Kubernetes backend and its
  scheduler process, beat and the commands run beside them; never below PostgreSQL's 100.

Each is overridden as the server's own option is: ``--workers`` / ``--threads`` for gunicorn,
``--concurrency`` for the Celery worker.
"""

from __future__ import annotations

import os
from pathlib import Path

from osmo import bootstrap

WEB_THREADS = 40
MEMORY_PER_WEB_WORKER = 512 * 2**20
DB_CONNECTIONS_SPARE = 30
CGROUP = Path("/sys/fs/cgroup")


def _cgroup(name: str) -> str:
    try:
        return (CGROUP / name).read_text().strip()
    except OSError:
        return ""


def cpus() -> int:
    """CPUs this process may use: its affinity, lowered by a cgroup (v2) CPU quota."""
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    quota = _cgroup("cpu.max").split()
    if len(quota) == 2 and quota[0].isdigit() and quota[1].isdigit() and int(quota[1]):
        count = min(count, max(1, int(quota[0]) // int(quota[1])))
    return max(1, count)


def memory_bytes() -> int:
    """Memory this process may use: the cgroup (v2) limit when set, else the machine's."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = _cgroup("memory.max")
    return min(total, int(limit)) if limit.isdigit() else total


def web_workers() -> int:
    """`OSMO_WEB_WORKERS` when set (`osmo standalone --web-workers` sets it), else from the
    machine."""
    configured = bootstrap.web_workers()
    if configured is not None:
        return configured
    return max(2, min(cpus(), memory_bytes() // MEMORY_PER_WEB_WORKER))


def worker_concurrency() -> int:
    return min(4, cpus())


def database_connections() -> int:
    return max(100, web_workers() * (WEB_THREADS + 1) + worker_concurrency()
               + DB_CONNECTIONS_SPARE)
