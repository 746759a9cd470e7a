"""Reads for the KAI objects: the live pool tree as plain data for :mod:`scheduler.kai.queues`.

One query, whatever the number of pools: rows come back as tuples (no model instances), which
keeps 5,000-row trees cheap. Archived top-level pools (and their subpools) and ARCHIVED
subpools are not read at all: they have no queue.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from django.db.models import Q

from osmo.accounts.roles import Roles
from pools.models import Pool, SubpoolState
from scheduler.core.kai_names import DEFAULT_TOPOLOGY_NAME, HOSTNAME_LABEL
from scheduler.models import DEFAULT_TOPOLOGY_LEVELS, ClusterTopology, Node

from .queues import KaiQueue, PoolData, SubpoolData, build_topology, queue_manifest, queue_tree

_FIELDS = ("name", "parent_id", "subpool_state", "quota_gpus", "limit_gpus", "weight",
           "priority")


def queue_pool_data(*, roles: Roles | None = None) -> list[PoolData]:
    """Live top-level pools with their ACTIVE/DELETING subpools, as plain data.

    ``roles``: only the pools the caller can view (and their subpools); ``None`` = all.
    """
    queryset = (
        Pool.objects.filter(archived_at__isnull=True)
        .exclude(parent__archived_at__isnull=False)
        .exclude(subpool_state=SubpoolState.ARCHIVED)
    )
    if roles is not None:
        visible = roles.visible_q("name")
        parent_visible = roles.visible_q("parent__name")
        if visible is not None:
            queryset = queryset.filter(Q(parent__isnull=True) & visible
                                       | Q(parent__isnull=False) & parent_visible)
    rows = list(queryset.order_by("parent_id", "name").values_list(*_FIELDS))
    subpools: dict[str, list[SubpoolData]] = defaultdict(list)
    parents = []
    for name, parent, state, quota, limit, weight, priority in rows:
        if parent is None:
            parents.append((name, quota, limit, weight, priority))
        else:
            subpools[parent].append(SubpoolData(name=name, state=state, quota_gpus=quota))
    return [
        PoolData(name=name, quota_gpus=quota, limit_gpus=limit, weight=weight,
                 priority=priority, subpools=tuple(subpools.get(name, ())))
        for name, quota, limit, weight, priority in parents
    ]


def queues(*, namespace: str, roles: Roles | None = None) -> list[KaiQueue]:
    """The Queue hierarchy of ``namespace`` (the pools ``roles`` may view; None = all)."""
    return queue_tree(queue_pool_data(roles=roles), namespace)


def queue_manifests(*, namespace: str, roles: Roles | None = None) -> list[dict[str, Any]]:
    """The Queue manifests of :func:`queues`."""
    return [queue_manifest(queue, namespace)
            for queue in queues(namespace=namespace, roles=roles)]


def cluster_topology() -> list[dict]:
    """The cluster's topology levels (coarsest first): the ones stored by
    ``PUT /api/cluster/topology``, else the default ones."""
    row = ClusterTopology.objects.first()
    return row.levels if row else DEFAULT_TOPOLOGY_LEVELS


class StoredTopologies(Mapping):
    """The Topologies a PodGroup may name, for validation: the stored cluster Topology. Read
    from the database on first use only, so the common spec that names no topology costs no
    query."""

    def __init__(self) -> None:
        self._loaded: dict[str, list[dict]] | None = None

    def _topologies(self) -> dict[str, list[dict]]:
        if self._loaded is None:
            self._loaded = {DEFAULT_TOPOLOGY_NAME: cluster_topology()}
        return self._loaded

    def __bool__(self) -> bool:  # there is always one; knowing that needs no query
        return True

    def __getitem__(self, name: str) -> list[dict]:
        return self._topologies()[name]

    def __iter__(self):
        return iter(self._topologies())

    def __len__(self) -> int:
        return len(self._topologies())


def carried_levels(levels: list[dict]) -> list[dict]:
    """The levels some known node carries the label of (all of them while no node is known).
    KAI leaves a node that lacks one level's label out of every domain of a constrained gang,
    so a level no node carries (the default's ``block`` on a cluster without blocks) would
    leave every node out; the hostname level is kept (every node has it)."""
    carried: set[str] = set()
    for labels in Node.objects.values_list("labels", flat=True):
        carried.update(labels or {})
    if not carried:
        return levels
    return [level for level in levels
            if level["nodeLabel"] in carried or level["nodeLabel"] == HOSTNAME_LABEL]


def topology_manifest(*, namespace: str) -> dict[str, Any]:
    """The cluster Topology for KAI: the levels the embedded loop schedules with that the
    nodes carry (:func:`carried_levels`)."""
    return build_topology(namespace, levels=carried_levels(cluster_topology()))


def desired_cluster_objects(*, namespace: str) -> list[dict[str, Any]]:
    """Everything the sync keeps in step: the whole Queue hierarchy and the Topology."""
    return [*queue_manifests(namespace=namespace), topology_manifest(namespace=namespace)]
