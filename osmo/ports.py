"""Ports: what a lower app reads from a higher one, without importing it.

A lower app declares a port — a typed provider interface (a `Protocol`) and a `Port` slot for it —
and the higher app that owns the data fills the slot in its `AppConfig.ready()`. The ports there
are (events, the other way of speaking upward, are in `osmo.events`):

- `osmo.ports.cluster` (here): is the cluster backend in contact with its API server
  (`/api/health`)? Provided by `scheduler` (`backends/kubernetes/health.py`).
- `osmo.ports.backends` (here): each backend's status, reachability and heartbeat age
  (`/api/health`). Provided by `scheduler` (`backends/health.py`).
- `pools.ports.workflows` (`pools/ports.py`): GPU usage per pool, alive workflows, and the cancel
  of a deleted subpool's not-started workflows. Provided by `workflows` (`workflows/wiring.py`).
- `pools.ports.cluster` (`pools/ports.py`): the schedulable nodes and the GPUs held on them (the
  OSMO client's node sets). Provided by `scheduler` (`scheduler/selectors.py`).
- `pools.ports.backends` (`pools/ports.py`): which backend names a pool may list (the backends
  are the scheduler's rows). Provided by `scheduler` (`scheduler/wiring.py`).
- `workflows.ports.scheduling` (`workflows/ports.py`): the cluster Topology a spec may name, a
  workflow's KAI manifests (dry runs), the pod grouper (workloads). Provided by `scheduler`
  (`scheduler/wiring.py`).
- `workflows.ports.apps` (`workflows/ports.py`): the app version a submission names
  (`app_uuid`, `app_version`). Provided by `workflow_apps` (`workflow_apps/wiring.py`).
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from django.core.exceptions import ImproperlyConfigured

T = TypeVar("T")


class Port(Generic[T]):
    """One slot: declared empty by a lower app, filled once by a higher app's AppConfig."""

    def __init__(self, name: str):
        self.name = name
        self._provider: T | None = None

    def provide(self, provider: T) -> None:
        self._provider = provider

    def __call__(self) -> T:
        if self._provider is None:
            raise ImproperlyConfigured(f"nothing provides {self.name}: the app that does is "
                                       f"not in INSTALLED_APPS")
        return self._provider


class ClusterHealth(Protocol):
    def cluster_reported(self) -> bool:
        """`/api/health` has a `cluster` part: the default backend is a Kubernetes cluster."""

    def cluster_ok(self) -> bool:
        """The backend's last contact with its cluster was good and recent."""

    def placement_missing(self) -> list[dict[str, str]]:
        """What KAI placement lacks on the cluster, as the leader last found: [{requirement,
        detail}]."""


cluster: Port[ClusterHealth] = Port("osmo.ports.cluster")


class BackendsHealth(Protocol):
    def backends_health(self) -> dict[str, dict]:
        """Backend name → {status, online, heartbeat_age (seconds, None without a heartbeat),
        placement {ok, missing}}."""


backends: Port[BackendsHealth] = Port("osmo.ports.backends")
