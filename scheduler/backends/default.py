"""The `default` backend every installation has: what pools and nodes name unless told
otherwise. Its row is written by a data migration from the settings that chose today's cluster,
and made again after every `migrate` or `flush` (post_migrate); when it is missing all the same,
the first write that names it makes it from the same settings."""

from __future__ import annotations

from typing import Any

from osmo.errors import OsmoError
from scheduler.core.kai_names import DEFAULT_BACKEND

from ..models import Backend, BackendKind
from .revisions import backend_created
from .selectors import missing_backends
from .spec import default_spec


def default_backend_fields() -> dict[str, Any]:
    """The `default` backend as the settings describe today's cluster (the data migration
    writes the same row)."""
    spec = default_spec()
    return {"kind": spec.kind, "placement": spec.placement, "k8s_namespace": spec.namespace,
            "scheduler_name": spec.scheduler_name}


def default_backend_ensure(using: str = "default") -> None:
    """The `default` backend exists: made from the settings when its row is missing (a
    database flushed since the migration)."""
    backend, created = Backend.objects.using(using).get_or_create(
        name=DEFAULT_BACKEND, defaults=default_backend_fields())
    if created:
        backend_created(backend=backend, using=using)


def backend_names_missing(names: list[str]) -> list[str]:
    """`pools.ports.backends`: the names no backend has (`default` is always there)."""
    missing = missing_backends(names)
    if DEFAULT_BACKEND in missing:
        default_backend_ensure()
        missing.remove(DEFAULT_BACKEND)
    return missing


def embedded_backend_check(name: str) -> str:
    """A node is registered only on an embedded backend: 400 `backend_not_found` for an
    unknown name, `invalid_backend` for a kubernetes one (its nodes come from its cluster)."""
    if backend_names_missing([name]):
        raise OsmoError("backend_not_found", f"No backend named '{name}'.",
                        errors={"backend": [f"Unknown backend: {name}."]})
    if not Backend.objects.filter(name=name, kind=BackendKind.EMBEDDED).exists():
        raise OsmoError("invalid_backend",
                        f"Backend '{name}' is not embedded: its nodes come from its cluster.",
                        errors={"backend": ["Must be an embedded backend."]})
    return name


def backend_kind(name: str) -> str:
    """The kind of the backend named ``name`` (`default`: as the settings say, even before
    its row exists); an unknown name is neither kind ("")."""
    kind = Backend.objects.filter(name=name).values_list("kind", flat=True).first()
    if kind is None and name == DEFAULT_BACKEND:
        return default_backend_fields()["kind"]
    return kind or ""
