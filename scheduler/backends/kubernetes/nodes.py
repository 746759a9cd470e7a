"""Node inventory: the cluster's nodes → :class:`scheduler.models.Node` (`GET /api/cluster/nodes`).

Through the node services, so the rules are those of the admin API: a node is registered or
replaced with its allocatable ``nvidia.com/gpu``, ``cpu`` and ``memory`` and all its labels
(topology labels included); a node that left the cluster is removed with ``force`` — its pods
are gone with it, so tasks still bound there end FAILED_EVICTED (``node_deleted``).
Decisions: a Node's allocatable and whether it is ``schedulable`` are read as the scheduler reads
them (``scheduler.core.decode``: cordoned, not Ready — or stating no Ready condition — or
tainted ``NoSchedule`` / ``NoExecute`` is not schedulable), so ``/api/resources`` and the pools'
node sets offer only what takes pods; rows are written only when something changed, so an
unchanged cluster costs one read.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from scheduler import services
from scheduler.core.decode import node_allocatable, node_schedulable
from scheduler.models import Node

from .client import REQUEST_TIMEOUT, Kube, raw

logger = logging.getLogger(__name__)


@dataclass
class NodeSummary:
    registered: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def node_fields(node: dict) -> dict:
    gpus, cpu_millis, memory_bytes = node_allocatable(node)
    return {"name": node["metadata"]["name"], "gpus": gpus, "cpu_millis": cpu_millis,
            "memory_bytes": memory_bytes, "labels": dict(node["metadata"].get("labels") or {}),
            "schedulable": node_schedulable(node)}


def inventory(kube: Kube) -> NodeSummary:
    """Make the Node rows match the cluster's nodes."""
    body = raw(kube.core.list_node(_preload_content=False, _request_timeout=REQUEST_TIMEOUT))
    summary = NodeSummary()
    existing = {node.name: node for node in Node.objects.all()}
    seen = set()
    for item in body.get("items") or []:
        fields = node_fields(item)
        schedulable = fields.pop("schedulable")
        seen.add(fields["name"])
        row = existing.get(fields["name"])
        if row is None or (row.gpus, row.cpu_millis, row.memory_bytes, row.labels) != (
                fields["gpus"], fields["cpu_millis"], fields["memory_bytes"], fields["labels"]):
            row, created = services.node_register(**fields)
            (summary.registered if created else summary.updated).append(row.name)
        if row.schedulable != schedulable:
            services.node_set_schedulable(node=row, schedulable=schedulable)
            if row.name not in summary.registered + summary.updated:
                summary.updated.append(row.name)
    for name, row in existing.items():
        if name not in seen:
            services.node_delete(node=row, force=True)
            summary.removed.append(name)
    if summary.registered or summary.updated or summary.removed:
        logger.info("k8s backend: nodes %s", summary)
    return summary
