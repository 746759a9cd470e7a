"""Our scheduler's loop on a Kubernetes cluster (``placement: osmo``): informers into a cache,
then a cycle whenever it changed. It imports no model, so the same loop runs in the product's
backend process (:mod:`.runner`, which records each cycle in the database) and in the backend
agent beside its API server (which sends each cycle's figures to the service)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from scheduler import metrics as scheduler_metrics
from scheduler.backends.spec import BackendSpec
from scheduler.core import SchedulerConfig

from .cache import ClusterCache, placement_cache
from .client import Kube
from .placement import Placement

logger = logging.getLogger(__name__)

BACKOFF_START, BACKOFF_MAX = 1.0, 60.0
CYCLE_GAP = 0.05  # seconds at least between two scheduling cycles (events arrive in bursts)


def cycle_gap(figures) -> float:
    """Seconds to wait after a cycle: as long as it computed (its bindings are the API
    server's time, not this process's)."""
    return (figures.snapshot_ms + figures.decide_ms) / 1000


def cycle_metrics(placement: Placement, figures) -> dict[str, Any]:
    """A cycle record's ``metrics``: the cycle's figures and the scheduler's totals."""
    return {**figures.to_dict(), "cycles": placement.cycles,
            "bound_total": placement.bound_total,
            "api_calls_total": dict(sorted(placement.totals.items())),
            "time_total_ms": {k: round(v, 1) for k, v in placement.time_totals.items()}}


def placement_loop(running: Callable[[], bool], wake: threading.Event, *, spec: BackendSpec,
                   interval: float,
                   client_factory: Callable[[], Any],
                   publish: Callable[[Placement, Any], None],
                   backoff: tuple[float, float] = (BACKOFF_START, BACKOFF_MAX),
                   report: Callable[[bool, str], None] | None = None, holder=None,
                   cache: ClusterCache | None = None,
                   may_place: Callable[[], bool] = lambda: True,
                   release: Callable[[], None] = lambda: None,
                   config: SchedulerConfig | None = None,
                   usage: Callable[[], dict[str, float]] | None = None) -> None:
    """Informers into a cache, then a cycle whenever the cache changed in a way that matters
    (at most every ``CYCLE_GAP`` seconds, and computing — snapshot and decision — never more
    than half of the time: a stream of new pods then meets cycles that each take more of them,
    rather than back-to-back cycles taking the CPU the pods' submissions need; at least every
    ``interval``), each cycle's figures handed to ``publish``. ``cache``: one already
    started (:func:`.scheduler_process.main` starts it before Django loads), waking ``wake``.
    No cycle runs while ``may_place()`` is false (an agent whose lease may have ended);
    ``release`` is called after a failed cycle and at the end (the backend process closes its
    database connection there). ``config`` and ``usage``: the cycle's knobs and the queues'
    historical usage, where they do not come from this process's settings and database."""
    if cache is None:
        cache = placement_cache(client_factory, wake, watch_timeout=spec.watch_timeout,
                                spec=spec)
        cache.start(running, report=report)
    kube = Kube(client_factory())
    placement = Placement(kube, cache, scheduler_name=spec.scheduler_name, config=config,
                          usage_source=usage)
    if holder is not None:
        holder.placement = placement
    delay = backoff[0]

    def sleep(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while running() and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    try:
        while running() and not cache.wait_synced(1.0):
            pass
        while running():
            wake.wait(interval)
            wake.clear()
            if not running() or not may_place():
                continue
            started = time.monotonic()
            try:
                figures = placement.cycle()
                publish(placement, figures)
                delay = backoff[0]
            except Exception:  # noqa: BLE001 - the next cycle reads everything again
                logger.exception("osmo scheduler: cycle failed")
                scheduler_metrics.record_cycle_failed()
                release()
                sleep(delay)
                delay = min(backoff[1], delay * 2)
                continue
            gap = max(CYCLE_GAP - (time.monotonic() - started), cycle_gap(figures))
            if gap > 0:
                sleep(gap)
    finally:
        if holder is not None:
            holder.placement = None
        cache.stop()
        placement.close()
        kube.close()
        release()
