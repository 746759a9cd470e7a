"""What the scheduler app lends the apps below it: the ports it provides and the events it
subscribes to (`osmo.ports` and `osmo.events` list them all). Connected by
`SchedulerConfig.ready()`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.apps import apps
from django.db.models.signals import post_migrate

from osmo import events
from osmo import ports as osmo_ports
from osmo.errors import OsmoError
from pools import ports as pool_ports
from workflows import ports as workflow_ports

from . import backends, podgrouper, selectors, tasks
from .backends import health as backend_health
from .backends.default import backend_names_missing, default_backend_ensure
from .backends.kubernetes import health
from .backends.spec import default_spec
from .kai.podgroups import resolve_constraints
from .kai.selectors import StoredTopologies, cluster_topology
from .kai.workflow_manifests import manifests_for
from .models import Backend, BackendKind


class Scheduling:
    """`workflows.ports.Scheduling`: the Topology, the manifests and the pod grouper."""

    def cluster_namespace(self) -> str:
        return default_spec().namespace

    def logs_copied_live(self, backends: set[str | None]) -> bool:
        if default_spec().is_kubernetes:
            return True
        kubernetes = Backend.objects.filter(kind=BackendKind.KUBERNETES)
        if None in backends:  # a group still waiting may go to any of them
            return kubernetes.exists()
        return kubernetes.filter(name__in=backends).exists()

    def topologies(self) -> Mapping[str, list[dict]]:
        return StoredTopologies()

    def workflow_manifests(self, *, spec, workflow_name: str, pool, priority: str
                           ) -> list[dict[str, Any]]:
        return manifests_for(spec=spec, workflow_name=workflow_name, pool=pool,
                             priority=priority)

    def group_workload(self, manifest: Any, **options) -> podgrouper.WorkloadGrouping:
        try:
            grouping = podgrouper.group_workload(manifest, **options)
        except podgrouper.WorkloadError as error:
            raise OsmoError(error.code, error.detail, errors=error.errors) from error
        levels = cluster_topology()
        for group in grouping.groups:  # kept and dispatched with constraints KAI reads
            spec = group.manifests.podgroup.get("spec")
            if isinstance(spec, dict):
                resolve_constraints(spec, levels)
        return grouping

    def largest_node_gpus(self, node_selector: Mapping[str, str]) -> int | None:
        return selectors.largest_node_gpus(node_selector)

    def pending_reasons(self, workflow_names: list[str]) -> dict[str, dict]:
        return selectors.pending_reasons(workflow_names)


class BackendNames:
    """`pools.ports.backends`: which backend names exist."""

    def missing(self, names: list[str]) -> list[str]:
        return backend_names_missing(names)


def _queues_follow(event: events.PoolChanged) -> None:
    tasks.queue_sync_on_commit()  # delivered after commit: it queues the sync at once


def _sweep(event: events.PoolArchived) -> None:
    backends.pool_archived(event.pool)


def _wake(event: events.WorkflowAdmitted | events.WorkflowsCanceled) -> None:
    backends.cluster_changed()


def _default_backend(sender, using: str = "default", **kwargs) -> None:
    # After `migrate` and after a `flush` (which empties every table): `default` always exists.
    default_backend_ensure(using=using)


def connect() -> None:
    post_migrate.connect(_default_backend, sender=apps.get_app_config("scheduler"))
    osmo_ports.cluster.provide(health)
    osmo_ports.backends.provide(backend_health)
    pool_ports.cluster.provide(selectors)
    pool_ports.backends.provide(BackendNames())
    workflow_ports.scheduling.provide(Scheduling())
    events.subscribe(events.PoolChanged, _queues_follow)
    events.subscribe(events.PoolArchived, _sweep)
    events.subscribe(events.WorkflowAdmitted, _wake)
    events.subscribe(events.WorkflowsCanceled, _wake)
