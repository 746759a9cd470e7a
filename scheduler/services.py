"""Writes of the scheduling domain: the embedded cluster's nodes and topology, and the groups'
timeouts (the Kubernetes backend's pass). The embedded cycle is in
`scheduler/backends/embedded/cycle.py`."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from osmo.errors import Conflict, OsmoError
from scheduler.core.kai_names import (
    DEFAULT_BACKEND,
    DEFAULT_TOPOLOGY_NAME,
    HOSTNAME_LABEL,
)
from workflows import lifecycle
from workflows.selectors import bound_tasks_on_node

from .backends.embedded.cycle import CYCLE_LOCK
from .models import ClusterTopology, Node

logger = logging.getLogger(__name__)


# --- timeouts ----------------------------------------------------------------------------------

@transaction.atomic
def timeouts_enforce(*, now: datetime | None = None) -> int:
    """Groups past their exec_timeout or queue_timeout end (the Kubernetes backend's pass; the
    embedded loop does it in every cycle). Returns how many ended."""
    return lifecycle.groups_time_out(now=now or timezone.now())


# --- nodes and topology ----------------------------------------------------------------------

@transaction.atomic
def node_register(*, name: str, gpus: int, cpu_millis: int, memory_bytes: int,
                  labels: dict[str, str], backend: str = DEFAULT_BACKEND) -> tuple[Node, bool]:
    """Register or replace a node (its bound work stays): the API's, on an embedded backend
    (`backends.default.embedded_backend_check`), or the Kubernetes node mirror's."""
    node, created = Node.objects.select_for_update().get_or_create(
        name=name, defaults={"gpus": gpus, "cpu_millis": cpu_millis,
                             "memory_bytes": memory_bytes, "labels": labels,
                             "backend": backend})
    if not created:
        node.gpus, node.cpu_millis, node.memory_bytes, node.labels, node.backend = (
            gpus, cpu_millis, memory_bytes, labels, backend)
        node.save()
    return node, created


NODE_FIELDS = ("gpus", "cpu_millis", "memory_bytes", "labels", "schedulable")


@transaction.atomic
def nodes_upsert(*, backend: str, nodes: list[dict]) -> list[str]:
    """Register or update many nodes of ``backend`` in one statement (an agent's inventory:
    thousands of nodes a second, where a row at a time made 100). ``nodes``: the fields of
    :func:`node_register` plus ``schedulable``. A node of another backend is not taken, and
    an unchanged row is not written. Returns the names written."""
    by_name = {fields["name"]: fields for fields in nodes}
    existing = {row["name"]: row for row in Node.objects.filter(name__in=list(by_name))
                .values("name", "backend", *NODE_FIELDS)}
    rows = []
    for name, fields in by_name.items():
        row = existing.get(name)
        if row is not None and row["backend"] != backend:
            logger.warning("backend %s: node %s is backend %s's: not taken", backend, name,
                           row["backend"])
            continue
        if row is None or any(row[key] != fields[key] for key in NODE_FIELDS):
            rows.append(Node(backend=backend, **{key: fields[key] for key in
                                                 ("name", *NODE_FIELDS)}))
    Node.objects.bulk_create(rows, update_conflicts=True, unique_fields=["name"],
                             update_fields=[*NODE_FIELDS, "updated_at"])
    return [row.name for row in rows]


@transaction.atomic
def node_set_schedulable(*, node: Node, schedulable: bool) -> Node:
    Node.objects.filter(pk=node.pk).update(schedulable=schedulable, updated_at=timezone.now())
    node.refresh_from_db()
    return node


@transaction.atomic
def node_delete(*, node: Node, force: bool = False) -> int:
    """Remove a node. While pods are bound: 409 `node_in_use`, unless `force`, which evicts
    them (tasks end FAILED_EVICTED, their gangs fail as a gang does)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CYCLE_LOCK])  # not mid-cycle
    count = bound_tasks_on_node(node.name).count()
    if count and not force:
        raise Conflict("node_in_use", f"Node '{node.name}' has {count} bound pod(s); cordon "
                                      f"it and let them finish, or delete with ?force=true.")
    if count:
        lifecycle.tasks_evict_from_node(node_name=node.name, reason="node_deleted",
                                        now=timezone.now())
    Node.objects.filter(pk=node.pk).delete()
    return count


def validate_topology(levels: list[dict]) -> list[dict]:
    """The level rules (the request serializer has checked the shape): unique labels and
    aliases, and `kubernetes.io/hostname` only as the finest level."""
    errors = []
    labels = [level["nodeLabel"] for level in levels]
    aliases = [level["alias"] for level in levels if level.get("alias")]
    if len(set(labels)) != len(labels):
        errors.append("node labels must be unique.")
    if len(set(aliases)) != len(aliases):
        errors.append("aliases must be unique.")
    if HOSTNAME_LABEL in labels[:-1]:
        errors.append(f"{HOSTNAME_LABEL} may only be the last (finest) level.")
    if errors:
        raise OsmoError("invalid_topology", " ".join(errors), errors={"levels": errors})
    return [{"alias": level["alias"], "nodeLabel": level["nodeLabel"]} if level.get("alias")
            else {"nodeLabel": level["nodeLabel"]} for level in levels]


@transaction.atomic
def topology_replace(*, levels: list[dict]) -> ClusterTopology:
    """Replace the levels; placed work is not moved."""
    clean = validate_topology(levels)
    topology, _ = ClusterTopology.objects.update_or_create(
        name=DEFAULT_TOPOLOGY_NAME, defaults={"levels": clean})
    return topology
