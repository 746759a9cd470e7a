"""Reconcile the KAI Queues and the Topology of a namespace to a real cluster: the desired
set read from the pool tree (:mod:`.selectors`), applied by :mod:`.reconcile`."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from kubernetes import client

from scheduler.backends.kubernetes.client import api_client
from scheduler.backends.selectors import default_served_by_agent

from .reconcile import (  # noqa: F401 - the sync's names, where their callers import them
    MAX_CONFLICT_RETRIES,
    QUEUES,
    RESOURCES,
    TOPOLOGIES,
    KaiSyncError,
    Resource,
    SyncSummary,
    needs_update,
    sync_objects,
)
from .selectors import desired_cluster_objects

# --- configuration --------------------------------------------------------------------------

def sync_enabled() -> bool:
    """Whether this installation syncs the `default` cluster's Queues itself: a cluster is
    configured (setting ``OSMO_KAI_SYNC``) and no agent serves it (an agent syncs its
    cluster's Queues from the work it polls)."""
    return bool(settings.OSMO_KAI_SYNC) and not default_served_by_agent()


def custom_objects_api(*, kubeconfig: str | None = None, context: str | None = None) -> Any:
    """A ``CustomObjectsApi`` for the configured cluster (the backend's one loader)."""
    return client.CustomObjectsApi(api_client(kubeconfig=kubeconfig, context=context))


def sync_namespace(*, namespace: str, api: Any | None = None,
                   dry_run: bool = False) -> SyncSummary:
    """Read the pool tree and reconcile it (the task's and the command's one call)."""
    desired = desired_cluster_objects(namespace=namespace)
    return sync_objects(api if api is not None else custom_objects_api(), desired,
                        namespace=namespace, dry_run=dry_run)
