"""The backend process: one active instance, elected with a PostgreSQL advisory lock (the
pattern of :mod:`..embedded.loop`, with a lock of its own so it never waits for a scheduler
loop). The leader runs, until it stops or loses its session:

- a listener thread: LIST + WATCH of our pods → task statuses (:mod:`.listener`);
One process serves one backend (:class:`~scheduler.backends.spec.BackendSpec`, ``--backend
NAME``, default ``default`` as the settings describe it), with a leader lock of that backend's
own, so the processes of two backends never exclude each other.

- the main loop, every ``spec.interval`` seconds or as soon as a NOTIFY arrives on
  :data:`scheduler.backends.WAKE_CHANNEL` (LISTENed on the leader's own connection): end the
  groups past their exec_timeout / queue_timeout, dispatch runnable groups, clean up ended
  ones (timed-out groups' pods included), sweep archived pools, publish KAI's pending reasons;
  every ``spec.resync_interval`` seconds also the node inventory, a sweep of leftovers and
  a full re-list of the pods (not when the listener listed them in the last half interval, as
  it does at a start);
- with ``placement: osmo``, the scheduler (a child process under ``run_k8s_backend``, a
  thread when asked): informers of Nodes, Pods, PodGroups, Queues and Topologies, and a
  scheduling cycle (:mod:`.placement`) whenever they change, its figures on the
  ``SchedulerCycle`` row (``GET /api/scheduler/status``, ``explain``). Only the leader runs
  it, so one scheduler binds at a time; a new leader starts from a fresh LIST.

Failures: an unreachable or failing API server (no answer, 429, 5xx) backs off exponentially
(1 s doubling to 60 s, per thread) and repeats the failed step; nothing is dropped because
everything to do is read again from the database. The health row says ``down`` meanwhile.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection

from scheduler import metrics as scheduler_metrics
from scheduler import services
from scheduler.backends import WAKE_CHANNEL
from scheduler.backends.spec import DEFAULT_K8S_LOCK, BackendSpec, default_spec
from scheduler.core.kai_names import DEFAULT_BACKEND
from scheduler.cycle_figures import CycleRecord, queue_figures
from scheduler.cycle_record import cycle_record_write
from scheduler.leader import LeaderLock
from scheduler.usage import queue_usage
from workflows.selectors import workflows_not_started

from . import kai_readiness, nodes, reasons, scheduler_process
from .cache import ClusterCache
from .cleanup import Cleaner
from .client import Kube, api_client, api_errors, describe
from .dispatch import ClusterUnavailable, Dispatcher
from .first_bound import first_bound, remember
from .health import Health
from .listener import PodListener
from .placement import Placement
from .placement_loop import BACKOFF_MAX, BACKOFF_START, cycle_metrics, placement_loop
from .pod_logs import PodLogs
from .reporter import pending_gangs

logger = logging.getLogger(__name__)

K8S_LEADER_LOCK = DEFAULT_K8S_LOCK  # the `default` backend's; others: BackendSpec.leader_lock
MAX_BATCHES = 20  # dispatch batches in one pass while groups keep becoming runnable


_FIRST_BOUND: dict[str, None] = {}  # the workflows this process saw bound a first time


def first_binds(placement: Placement, seen: dict[str, None]) -> list[tuple[str, float]]:
    """(priority, seconds since submission) of each workflow whose first pod the last cycle
    bound (:func:`.first_bound.first_bound`) and none of whose tasks has started (``seen``:
    those already counted by this process, whose start the database may not show yet)."""
    names = first_bound(placement, seen)
    if not names:
        return []
    now = datetime.now(UTC)
    found = workflows_not_started(names)
    remember(seen, list(found))
    return [(priority, (now - submitted_at).total_seconds())
            for priority, submitted_at in found.values()]


def publish_cycle(placement: Placement, figures, backend: str | None = None) -> None:
    """The cycle's figures where ``GET /api/scheduler/status`` and ``explain`` read them
    (the row of ``backend``, default the `default` one)."""
    cycle_record_write(CycleRecord(
        at=datetime.fromtimestamp(figures.at, tz=UTC), duration_ms=figures.duration_ms,
        bound=figures.bound, evicted=figures.evicted,
        queues=queue_figures(placement.last_result), pending_gangs=pending_gangs(placement),
        metrics=cycle_metrics(placement, figures)), backend=backend or DEFAULT_BACKEND)
    scheduler_metrics.record_cycle(
        snapshot=figures.snapshot_ms / 1000, decide=figures.decide_ms / 1000,
        apply=figures.apply_ms / 1000, bound=figures.bound,
        evicted=figures.eviction_reasons + ["incomplete"] * figures.undone,
        moved=["consolidated"] * figures.moved,
        first_binds=first_binds(placement, _FIRST_BOUND) if scheduler_metrics.enabled() else ())


def database_usage(spec: BackendSpec) -> Callable[[], dict[str, float]]:
    """The queues' historical usage from this installation's samples (``placement_loop``'s
    ``usage`` in the product's process)."""
    return lambda: queue_usage(now=datetime.now(UTC), namespace=spec.namespace)


def recording(spec: BackendSpec) -> Callable[[Placement, Any], None]:
    """``placement_loop``'s publish in the product's process: each cycle on ``spec``'s row."""
    return lambda placement, figures: publish_cycle(placement, figures, spec.name)


# Settings the scheduler's own process takes from its parent (a test's overrides included).
CHILD_SETTINGS = ("OSMO_NAMESPACE", "OSMO_SCHEDULER_NAME", "OSMO_PLACEMENT",
                  "OSMO_KAI_KUBECONFIG")


def placement_process(stop, parent: int, config: dict, cache: ClusterCache,
                      wake: threading.Event) -> None:
    """The scheduler's own process (spawned through :mod:`.scheduler_process`, which applies
    the parent's settings that matter here, starts the ``cache`` and sets up Django): the loop
    run until the parent says stop or is gone."""
    settings.DATABASES["default"]["NAME"] = config["database"]  # a test's own database
    running = scheduler_process.running(stop, parent)

    def watch_stop() -> None:
        while running():
            time.sleep(0.2)
        wake.set()

    threading.Thread(target=watch_stop, daemon=True).start()
    spec = BackendSpec(**config["spec"])
    placement_loop(running, wake, spec=spec, interval=spec.interval,
                   client_factory=lambda: api_client(kubeconfig=spec.kubeconfig),
                   publish=recording(spec), usage=database_usage(spec),
                   backoff=config["backoff"], cache=cache, release=connection.close)


class BackendRunner:
    def __init__(self, *, interval: float | None = None, resync: float | None = None,
                 watch_timeout: int | None = None, poll: float = 1.0,
                 client_factory: Callable[[], Any] | None = None,
                 backoff_start: float = BACKOFF_START, backoff_max: float = BACKOFF_MAX,
                 placement_process: bool = False, kubeconfig: str | None = None,
                 spec: BackendSpec | None = None):
        spec = spec or default_spec()
        if kubeconfig:
            spec = spec.with_(kubeconfig=kubeconfig)
        if watch_timeout is not None:
            spec = spec.with_(watch_timeout=watch_timeout)
        self.spec = spec
        self.interval = spec.interval if interval is None else interval
        self.resync = spec.resync_interval if resync is None else resync
        self.watch_timeout = watch_timeout
        self.poll = poll
        self.client_factory = client_factory or (lambda: api_client(kubeconfig=spec.kubeconfig))
        self.backoff_start, self.backoff_max = backoff_start, backoff_max
        self.stopping = False
        self.leader = LeaderLock(spec.leader_lock, name=f"k8s backend {spec.name}", poll=poll,
                                 listen=WAKE_CHANNEL)
        self.health = Health(spec.name)
        self.listener: PodListener | None = None
        self._leading = threading.Event()
        self.placing = spec.places_pods
        self.placement_process = placement_process
        self.kubeconfig = spec.kubeconfig
        self.placement: Placement | None = None
        self._wake = threading.Event()

    # --- leadership (as the embedded loop) ------------------------------------------------
    def stop(self, *_args) -> None:
        self.stopping = True
        self._leading.clear()
        self._wake.set()
        listener = self.listener
        if listener is not None:
            listener.stop()

    def _wait(self, seconds: float) -> list[str]:
        """Sleep up to ``seconds``, woken early by a NOTIFY; returns the payloads. A lost
        leader connection ends leadership."""
        deadline = time.monotonic() + seconds
        payloads: list[str] = []
        while not self.stopping and self._leading.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                for notify in self.leader.connection.notifies(timeout=min(remaining, 1.0),
                                                              stop_after=1):
                    payloads.append(notify.payload)
            except psycopg.Error:
                logger.warning("k8s backend: lost the leader connection")
                self.leader.lost()
                self._leading.clear()
                break
            if payloads:
                break
        return payloads

    def run(self, *, install_signals: bool = True) -> None:
        if install_signals:
            signal.signal(signal.SIGTERM, self.stop)
            signal.signal(signal.SIGINT, self.stop)
        while not self.stopping:
            if not self.leader.acquire(lambda: self.stopping):
                break
            self._leading.set()
            try:
                self.lead()
            finally:
                self._leading.clear()
        self.leader.release()
        connection.close()

    # --- the leader's work ---------------------------------------------------------------
    def lead(self) -> None:
        thread = threading.Thread(target=self._listen, name="k8s-listener", daemon=True)
        thread.start()
        placer = None
        if self.placing:
            placer = threading.Thread(target=self._place, name="osmo-scheduler", daemon=True)
            placer.start()
        kube = Kube(self.client_factory())
        namespace = self.spec.namespace
        dispatcher = Dispatcher(kube, namespace=namespace, spec=self.spec)
        cleaner, logs = Cleaner(kube, namespace=namespace), PodLogs(kube, namespace=namespace)
        next_resync, delay, published = 0.0, self.backoff_start, None
        pools: set[str] = set()
        try:
            while not self.stopping and self._leading.is_set():
                wait = self.interval
                try:
                    if time.monotonic() >= next_resync:
                        nodes.inventory(kube)
                        self.health.placement(kai_readiness.requirements_missing(kube))
                        cleaner.sweep()
                        dispatcher.known_queues.clear()  # re-check queues now and then
                        if self.listener is not None:
                            self.listener.request_relist(unless_listed_within=self.resync / 2)
                        next_resync = time.monotonic() + self.resync
                    services.timeouts_enforce()  # ended groups' pods go with the cleanup below
                    dispatcher.run(batches=MAX_BATCHES)  # a backlog: batch after batch
                    while cleaner.run_once() == cleaner.batch:
                        pass
                    for pool in sorted(pools):
                        cleaner.sweep_pool(pool)
                        pools.discard(pool)
                    logs.copy_wanted()  # live lines of the running tasks someone reads
                    if self.listener is not None:
                        self.listener.reasons_changed = False
                    if not self.placing:  # with placement osmo the cycle publishes
                        published = reasons.pending_publish(previous=published,
                                                            backend=self.spec.name)
                    self.health.report("api", True)
                    delay = self.backoff_start
                except (ClusterUnavailable, *api_errors()) as exc:
                    detail = str(exc) if isinstance(exc, ClusterUnavailable) else describe(exc)
                    logger.warning("k8s backend: API server unavailable (%s); retrying in "
                                   "%.0fs", detail, delay)
                    self.health.report("api", False, detail)
                    wait, delay = delay, min(self.backoff_max, delay * 2)
                except Exception:  # noqa: BLE001 - a database hiccup: log, reconnect, retry
                    logger.exception("k8s backend: pass failed")
                    connection.close()
                    wait, delay = delay, min(self.backoff_max, delay * 2)
                try:
                    self.health.write(time.monotonic())
                except Exception:  # noqa: BLE001
                    connection.close()
                for payload in self._wait(wait):
                    if payload.startswith("pool:"):
                        pools.add(payload[5:])
        finally:
            self._leading.clear()
            self.stop_listener(thread)
            if placer is not None:
                self._wake.set()
                placer.join(timeout=15)
            kube.close()

    def stop_listener(self, thread: threading.Thread) -> None:
        listener = self.listener
        if listener is not None:
            listener.stop()
        thread.join(timeout=10)

    def _listen(self) -> None:
        kube = Kube(self.client_factory())
        self.listener = listener = PodListener(kube, watch_timeout=self.spec.watch_timeout,
                                               spec=self.spec)
        delay = self.backoff_start
        try:
            while not self.stopping and self._leading.is_set():
                try:
                    listener.step()
                    self.health.report("listener", True)
                    delay = self.backoff_start
                except api_errors() as exc:
                    if self.stopping or not self._leading.is_set():
                        break
                    logger.warning("k8s backend: pod watch failed (%s); retrying in %.0fs",
                                   describe(exc), delay)
                    self.health.report("listener", False, describe(exc))
                    self._sleep(delay)
                    delay = min(self.backoff_max, delay * 2)
                except Exception:  # noqa: BLE001 - a database hiccup: the event comes again
                    logger.exception("k8s backend: applying pod events failed")
                    connection.close()
                    self._sleep(delay)
                    delay = min(self.backoff_max, delay * 2)
        finally:
            self.listener = None
            kube.close()
            connection.close()

    # --- placement osmo: the scheduler ------------------------------------------------
    def _place(self) -> None:
        """The scheduler while leading: in this process (a thread), or in a child process of
        its own (``placement_process``: the cycles then do not share this process's
        interpreter lock with dispatch and the listener). One active scheduler either way:
        the child lives only while this process leads."""
        running = lambda: not self.stopping and self._leading.is_set()  # noqa: E731
        if not self.placement_process:
            placement_loop(running, self._wake, spec=self.spec, interval=self.interval,
                           client_factory=self.client_factory, publish=recording(self.spec),
                           usage=database_usage(self.spec),
                           backoff=(self.backoff_start, self.backoff_max),
                           report=lambda ok, detail: self.health.report("scheduler", ok,
                                                                        detail),
                           holder=self, release=connection.close)
            return
        context = multiprocessing.get_context("spawn")
        delay = self.backoff_start
        while running():
            stop = context.Event()
            started = time.monotonic()
            self._run_child(context, stop, running)
            if running():  # the child died: start another, backing off if it keeps dying
                logger.warning("osmo scheduler: its process ended; starting it again")
                if time.monotonic() - started < 60:
                    self._sleep(delay)
                    delay = min(self.backoff_max, delay * 2)
                else:
                    delay = self.backoff_start

    def _run_child(self, context, stop, running) -> None:
        child = context.Process(target=scheduler_process.main, name="osmo-scheduler",
                                daemon=True,
                                args=(stop, os.getpid(), {
                                    "spec": {**asdict(self.spec),
                                             "interval": self.interval},
                                    "backoff": (self.backoff_start, self.backoff_max),
                                    "settings": {name: getattr(settings, name)
                                                 for name in CHILD_SETTINGS},
                                    "database": settings.DATABASES["default"]["NAME"]}))
        child.start()
        try:
            while running() and child.is_alive():
                self._wake.wait(1.0)
        finally:
            stop.set()
            child.join(timeout=15)
            if child.is_alive():
                child.terminate()
                child.join(timeout=5)

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stopping and self._leading.is_set() and time.monotonic() < deadline:
            time.sleep(min(0.1, deadline - time.monotonic()))
