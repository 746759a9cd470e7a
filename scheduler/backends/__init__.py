"""Cluster backends: where the pods of admitted workflows run.

- ``embedded`` (default): the simulated cluster in the database; our own loop places pods
  (:mod:`.embedded`: a cycle per embedded backend, each on its own nodes).
- ``kubernetes``: PodGroups and pods go to a real cluster running KAI Scheduler, which places
  them; pod status comes back through a watch (:mod:`scheduler.backends.kubernetes`, run by
  ``manage.py run_k8s_backend``). The embedded loop then places nothing.

The hooks below run when the lower apps' events are delivered, after commit
(:mod:`scheduler.wiring`: a workflow admitted or canceled, a pool archived); they are no-ops on
the embedded backend. They only WAKE the backend: the database is the queue, so a lost wake-up
costs at most one poll interval (``OSMO_K8S_INTERVAL``), never work.
"""

from __future__ import annotations

from django.conf import settings
from django.db import connection

EMBEDDED = "embedded"
KUBERNETES = "kubernetes"
# PostgreSQL NOTIFY channel the backend leader LISTENs on.
WAKE_CHANNEL = "osmo_cluster_backend"


def backend_name() -> str:
    """The kind of the `default` backend (the settings' cluster)."""
    return getattr(settings, "OSMO_CLUSTER_BACKEND", EMBEDDED)


def is_kubernetes() -> bool:
    """Some process serves a Kubernetes cluster: wake-ups are worth sending."""
    return backend_name() == KUBERNETES


def _notify(payload: str) -> None:
    # Called after the change committed; were it inside a transaction, NOTIFY would still be
    # delivered only at its commit.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [WAKE_CHANNEL, payload])


def cluster_changed() -> None:
    """Workflows were admitted or canceled: dispatch / clean up now."""
    if is_kubernetes():
        _notify("groups")


def pool_archived(pool_name: str) -> None:
    """A (sub)pool was archived: sweep any object still labelled with it."""
    if is_kubernetes():
        _notify(f"pool:{pool_name}")
