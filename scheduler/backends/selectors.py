"""Reads of the backends: one backend or all, with their nodes' figures and the pools that
name them, in a fixed number of queries."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Sum

from osmo.errors import NotFound
from pools.selectors import pools_naming_backends
from scheduler.core.kai_names import DEFAULT_BACKEND
from workflows.selectors import gpu_holding_tasks

from ..models import Backend, BackendKind, ClusterBackendStatus, Node


@dataclass
class BackendFigures:
    nodes: int = 0
    gpus: int = 0
    gpus_free: int = 0
    pools: list[str] = field(default_factory=list)


def gpus_used_by_node() -> dict[str, int]:
    """GPUs the bound tasks hold, per node name."""
    rows = (gpu_holding_tasks().exclude(node_name="").values_list("node_name")
            .annotate(used=Sum("gpus")).order_by())
    return dict(rows)


def backend_get(name: str) -> Backend:
    backend = Backend.objects.filter(name=name).first()
    if backend is None:
        raise NotFound("backend_not_found", f"Backend '{name}' does not exist.")
    return backend


def backend_figures(names: list[str] | None = None) -> dict[str, BackendFigures]:
    """Nodes, GPUs and free GPUs per backend (the Node table), and the pools naming each."""
    figures: dict[str, BackendFigures] = defaultdict(BackendFigures)
    used = gpus_used_by_node()
    nodes = Node.objects.order_by()
    if names is not None:
        nodes = nodes.filter(backend__in=names)
    for name, backend, gpus in nodes.values_list("name", "backend", "gpus"):
        entry = figures[backend]
        entry.nodes += 1
        entry.gpus += gpus
        entry.gpus_free += gpus - used.get(name, 0)
    for backend, pools in pools_naming_backends(names).items():
        figures[backend].pools = pools
    return figures


def served_by_agent(backend: Backend) -> bool:
    """An agent serves it: a kubernetes backend an agent has registered for (its cluster's
    identity recorded). Until then only `manage.py run_k8s_backend --backend NAME` can."""
    return backend.kind == BackendKind.KUBERNETES and bool(backend.k8s_uid)


def default_served_by_agent() -> bool:
    """The `default` backend is a kubernetes one an agent serves: the service then leaves
    its cluster to the agent (no Queue sync of its own)."""
    return Backend.objects.filter(name=DEFAULT_BACKEND, kind=BackendKind.KUBERNETES).exclude(
        k8s_uid=None).exclude(k8s_uid="").exists()


def _served_in_process(rows: list[Backend]) -> None:
    """A kubernetes backend no agent serves is served by `run_k8s_backend`, which sends no
    heartbeats: its last good contact with the API server counts as one (in memory only)."""
    served = {b.name: b for b in rows
              if b.kind == BackendKind.KUBERNETES and not served_by_agent(b)}
    if not served:
        return
    for name, checked_at in ClusterBackendStatus.objects.filter(
            backend__in=list(served), ok=True).values_list("backend", "checked_at"):
        backend = served[name]
        if backend.last_heartbeat is None or checked_at > backend.last_heartbeat:
            backend.last_heartbeat = checked_at


def backends_live() -> list[Backend]:
    """Every backend, by name, with the heartbeat its status is derived from: one or two
    queries, no figures (what `/api/health` and `/metrics` read)."""
    rows = list(Backend.objects.all())
    _served_in_process(rows)
    return rows


def backends_with_figures(names: list[str] | None = None
                          ) -> list[tuple[Backend, BackendFigures]]:
    backends = Backend.objects.all() if names is None else Backend.objects.filter(name__in=names)
    rows = list(backends)
    _served_in_process(rows)
    figures = backend_figures([b.name for b in rows])
    return [(b, figures.get(b.name, BackendFigures())) for b in rows]


def missing_backends(names: list[str]) -> list[str]:
    """Those of `names` no backend row has, in their order."""
    known = set(Backend.objects.filter(name__in=names).values_list("name", flat=True))
    return [name for name in names if name not in known]
