"""A backend as a value: everything a process serving one cluster needs to know about it.

The runner, dispatcher, listener, cache, cleaner, health row, queue sync, cycle record and the
embedded loop take a :class:`BackendSpec` instead of reading settings where they need them.
This package is the only place that reads the cluster settings (``OSMO_CLUSTER_BACKEND``,
``OSMO_NAMESPACE``, ``OSMO_PLACEMENT``, ``OSMO_SCHEDULER_NAME``, ``OSMO_KAI_KUBECONFIG``,
``OSMO_K8S_*``; ``tests/unit/test_cluster_settings_seam.py`` fails otherwise): they describe the
``default`` backend, so an installation that configures nothing else sees no change. Any other
backend is its :class:`~scheduler.models.Backend` row (intervals as the default's).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

from django.conf import settings

from scheduler.core.kai_names import DEFAULT_BACKEND

EMBEDDED, KUBERNETES = "embedded", "kubernetes"
# The `default` kubernetes backend's leader lock (as before backends were values): an existing
# installation's processes keep excluding each other while one of them is upgraded.
DEFAULT_K8S_LOCK = 0x05_1EAE


def leader_lock_key(name: str) -> int:
    """The advisory lock of the process serving backend ``name``: two backends' processes
    never wait for each other (a 63-bit key from the name; `default` keeps its old one)."""
    if name == DEFAULT_BACKEND:
        return DEFAULT_K8S_LOCK
    digest = hashlib.sha256(f"osmo-backend:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


@dataclass(frozen=True)
class BackendSpec:
    name: str
    kind: str
    placement: str = "kai"
    namespace: str = "osmo"
    scheduler_name: str = "kai-scheduler"
    kubeconfig: str | None = None  # None: KUBECONFIG / ~/.kube/config / in-cluster
    interval: float = 1.0  # seconds between dispatch/cleanup passes
    resync_interval: float = 60.0  # seconds between full re-lists and node inventories
    watch_timeout: int = 300  # server-side timeout of one watch request

    @property
    def is_kubernetes(self) -> bool:
        return self.kind == KUBERNETES

    @property
    def is_embedded(self) -> bool:
        return self.kind == EMBEDDED

    @property
    def places_pods(self) -> bool:
        """Our scheduler places this cluster's pods (`placement: osmo`), not KAI."""
        return self.placement == "osmo"

    @property
    def leader_lock(self) -> int:
        return leader_lock_key(self.name)

    def with_(self, **changes) -> BackendSpec:
        return replace(self, **changes)


def default_spec() -> BackendSpec:
    """The `default` backend as the settings describe it (read on every call: a process that
    changes its settings, as the tests do, sees the change)."""
    return BackendSpec(
        name=DEFAULT_BACKEND, kind=settings.OSMO_CLUSTER_BACKEND,
        placement=settings.OSMO_PLACEMENT, namespace=settings.OSMO_NAMESPACE,
        scheduler_name=settings.OSMO_SCHEDULER_NAME, kubeconfig=settings.OSMO_KAI_KUBECONFIG,
        interval=settings.OSMO_K8S_INTERVAL, resync_interval=settings.OSMO_K8S_RESYNC_INTERVAL,
        watch_timeout=settings.OSMO_K8S_WATCH_TIMEOUT)


def spec_of(backend) -> BackendSpec:
    """The spec of a :class:`~scheduler.models.Backend` row; `default` follows the settings
    (its row mirrors them)."""
    if backend.name == DEFAULT_BACKEND:
        return default_spec()
    base = default_spec()
    placement = backend.placement or base.placement
    scheduler_name = backend.scheduler_name or (
        "osmo-scheduler" if placement == "osmo" else "kai-scheduler")
    return base.with_(name=backend.name, kind=backend.kind, placement=placement,
                      namespace=backend.k8s_namespace or base.namespace,
                      scheduler_name=scheduler_name, kubeconfig=None)


def spec_for(name: str = DEFAULT_BACKEND) -> BackendSpec:
    """The spec of backend ``name`` (`default` needs no row); LookupError when none exists."""
    if name == DEFAULT_BACKEND:
        return default_spec()
    from scheduler.models import Backend  # lazily: the scheduler's own process imports this first

    backend = Backend.objects.filter(name=name).first()
    if backend is None:
        raise LookupError(f"no backend named '{name}'")
    return spec_of(backend)


def embedded_specs() -> list[BackendSpec]:
    """Every embedded backend, by name (`default` when the settings make it embedded, row or
    not): the embedded loop runs a cycle for each."""
    from scheduler.models import Backend, BackendKind

    specs = {spec.name: spec for spec in map(spec_of, Backend.objects.filter(
        kind=BackendKind.EMBEDDED).exclude(name=DEFAULT_BACKEND).order_by("name"))}
    default = default_spec()
    if default.is_embedded:
        specs[default.name] = default
    return [specs[name] for name in sorted(specs)]
