"""Cluster health as the backend leader sees it, for ``GET /api/health``.

The web tier does not talk to the API server (it needs no cluster credentials): the leader
records its last contact in :class:`scheduler.models.ClusterBackendStatus` — ``ok`` when its
last dispatch/cleanup pass and its pod listener both reached the API server, refreshed at least
every ``HEARTBEAT_SECONDS``. The cluster is reported ``down`` when the last contact failed, or
when no leader has written for ``stale_after()`` seconds (no backend process running means no
pod is dispatched or observed, which is the cluster being down as far as users can tell).
"""

from __future__ import annotations

import socket
import threading
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from scheduler.backends.liveness import is_online
from scheduler.backends.selectors import served_by_agent
from scheduler.backends.spec import default_spec
from scheduler.core.kai_names import DEFAULT_BACKEND
from scheduler.models import Backend, ClusterBackendStatus

HEARTBEAT_SECONDS = 5.0


def stale_after() -> float:
    return max(30.0, 5 * default_spec().interval)


class Health:
    """What the leader's threads last saw; written to ``backend``'s row by the main loop."""

    def __init__(self, backend: str = DEFAULT_BACKEND) -> None:
        self.backend = backend
        self._lock = threading.Lock()
        self._parts: dict[str, tuple[bool, str]] = {}
        self._placement_missing: list[dict[str, str]] = []
        self._written: tuple | None = None
        self._written_at = 0.0

    def report(self, part: str, ok: bool, detail: str = "") -> None:
        with self._lock:
            self._parts[part] = (ok, "" if ok else f"{part}: {detail}")

    def placement(self, missing: list[dict[str, str]]) -> None:
        """What KAI placement lacks (``kai_readiness``): kept apart from ``ok``, since the
        API server is reachable and work still queues."""
        with self._lock:
            self._placement_missing = list(missing)

    def state(self) -> tuple[bool, str]:
        with self._lock:
            parts = list(self._parts.values())
        ok = all(part_ok for part_ok, _ in parts)
        return ok, "; ".join(detail for part_ok, detail in parts if not part_ok)

    def write(self, monotonic_now: float) -> None:
        """Write the row when the state changed or the heartbeat is due."""
        with self._lock:
            missing = list(self._placement_missing)
        state = (*self.state(), missing)
        if state == self._written and monotonic_now - self._written_at < HEARTBEAT_SECONDS:
            return
        ClusterBackendStatus.objects.update_or_create(backend=self.backend, defaults={
            "ok": state[0], "detail": state[1][:2000], "checked_at": timezone.now(),
            "leader": socket.gethostname(), "placement_missing": missing})
        self._written, self._written_at = state, monotonic_now


def placement_missing(backend: str = DEFAULT_BACKEND) -> list[dict[str, str]]:
    """What ``backend``'s leader last found KAI placement lacks (empty without a row)."""
    row = ClusterBackendStatus.objects.filter(backend=backend).only("placement_missing").first()
    return list(row.placement_missing) if row else []


def cluster_reported() -> bool:
    """`GET /api/health` reports a `cluster` part: the `default` backend is a Kubernetes one."""
    return default_spec().is_kubernetes


def cluster_ok(backend: str = DEFAULT_BACKEND) -> bool:
    """True when ``backend``'s leader reached the API server recently, or, served by an
    agent, while the agent's heartbeats arrive within the lease (the agent reaches its API
    server; its placement report on the status row comes only every minute)."""
    now = timezone.now()
    row = ClusterBackendStatus.objects.filter(backend=backend).first()
    if row and row.ok and row.checked_at >= now - timedelta(seconds=stale_after()):
        return True
    served = Backend.objects.filter(name=backend).first()
    return bool(served and served_by_agent(served) and is_online(
        kind=served.kind, last_heartbeat=served.last_heartbeat, now=now,
        lease_seconds=settings.OSMO_BACKEND_LEASE))
