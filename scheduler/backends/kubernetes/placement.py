"""``OSMO_PLACEMENT=osmo``: the backend leader places pods itself, as KAI Scheduler would.

One cycle, in rooms of one job each: the cache (:mod:`.cache`: informers of Nodes, Pods of every
namespace, PodGroups of our namespace, Queues and Topologies — never the API server) becomes a
:class:`scheduler.core.Snapshot` (:mod:`.snapshot`, the objects read by
:mod:`scheduler.core.decode`); the same :func:`scheduler.core.run_cycle` as the embedded loop
decides; :mod:`.applier` writes the decisions through the API server (evictions, consolidation
moves, bindings) and :mod:`.reporter` the reasons of the gangs left pending, every request
counted by :mod:`.calls`. Each cycle's figures (duration, bound, evicted, API calls by kind)
are kept in :attr:`Placement.last` for the status endpoint.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from django.conf import settings

from scheduler.core import SchedulerConfig, run_cycle
from scheduler.core.results import CycleResult
from scheduler.cycle_config import scheduler_config

from .applier import Applier
from .cache import ClusterCache
from .calls import ApiCalls, CycleFigures
from .client import POOL_SIZE, Kube
from .reporter import Reporter
from .snapshot import ClusterIndex, SnapshotMemo, build_snapshot

USAGE_REFRESH_SECONDS = 30.0
# Bindings in flight at once. A binding thread mostly waits for the API server's answer (a
# few ms of its CPU a binding), so the count follows the server's concurrency, not this
# machine's cores: 4,000 bindings took 8.8 s on 8 threads, 5.8 s on 32 (a 2-core machine).
BIND_THREADS = POOL_SIZE  # a keep-alive connection each


class Placement:
    """One scheduler: the cache, the core, the applier and the reporter. ``cycle()`` runs one
    cycle."""

    def __init__(self, kube: Kube, cache: ClusterCache, *, scheduler_name: str | None = None,
                 config: SchedulerConfig | None = None, workers: int = BIND_THREADS,
                 usage_source: Callable[[], dict[str, float]] | None = None):
        self.cache = cache
        self.scheduler_name = scheduler_name or settings.OSMO_SCHEDULER_NAME
        self.config = config or scheduler_config()
        self.calls = ApiCalls(kube, scheduler_name=self.scheduler_name,
                              namespace=cache.namespace)
        self.applier = Applier(self.calls, cache, workers=workers)
        self.reporter = Reporter(self.calls)
        self.usage_source = usage_source or dict  # none: no queue weighs its history
        self._usage: tuple[float, dict[str, float]] = (-USAGE_REFRESH_SECONDS, {})
        self.below_min: dict[str, float] = {}
        self.memo = SnapshotMemo()
        self.last: CycleFigures | None = None
        self.last_result: CycleResult | None = None
        self.last_index: ClusterIndex | None = None
        self.time_totals: Counter = Counter()  # ms since start: snapshot, decide, apply
        self.bound_total = 0
        self.cycles = 0

    @property
    def totals(self) -> Counter:
        """API calls since start, by kind."""
        return self.calls.totals

    @property
    def assumed(self) -> dict[str, tuple[str, float]]:
        """Pods bound but not yet seen bound in the cache: pod key → (node, when)."""
        return self.applier.assumed

    @property
    def reported(self) -> dict[str, tuple]:
        """Gang → the reasons last written on its PodGroup."""
        return self.reporter.reported

    def close(self) -> None:
        self.applier.close()

    def usage(self, now: float) -> dict[str, float]:
        """Historical usage per queue, read again at most every ``USAGE_REFRESH_SECONDS``
        (the series gains a sample a minute)."""
        read_at, usage = self._usage
        if now - read_at >= USAGE_REFRESH_SECONDS:
            usage = self.usage_source()
            self._usage = (now, usage)
        return usage

    def cycle(self) -> CycleFigures:
        started = time.monotonic()
        figures = CycleFigures(at=time.time())
        snapshot, index = build_snapshot(
            self.cache, scheduler_name=self.scheduler_name, now=figures.at,
            assumed=self.applier.assumed_nodes(started), below_min=self.below_min,
            config=self.config, memo=self.memo, usage=self.usage(started))
        figures.snapshot_ms = (time.monotonic() - started) * 1000
        decide = time.monotonic()
        result = run_cycle(snapshot)
        figures.decide_ms = (time.monotonic() - decide) * 1000
        apply = time.monotonic()
        self.below_min = {stale.gang: stale.since for stale in result.stale
                          if not stale.evicted}
        deferred = self.applier.apply(figures, result, index)
        self.reporter.report(figures, result, index, deferred)
        self.applier.await_cache()
        figures.apply_ms = (time.monotonic() - apply) * 1000
        figures.duration_ms = (time.monotonic() - started) * 1000
        self.last, self.last_result, self.last_index = figures, result, index
        self.cycles += 1
        self.bound_total += figures.bound
        self.time_totals.update({"snapshot": figures.snapshot_ms, "decide": figures.decide_ms,
                                 "apply": figures.apply_ms})
        return figures
