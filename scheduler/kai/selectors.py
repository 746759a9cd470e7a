"""Reads for the KAI objects: the live pool tree as plain data for :mod:`scheduler.kai.queues`.

One query, whatever the number of pools: rows come back as tuples (no model instances), which
keeps 5,000-row trees cheap. Archived top-level pools (and their subpools) and ARCHIVED
subpools are not read at all: they have no queue.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from django.db.models import Q

from osmo.accounts.roles import Roles
from pools.models import Pool, SubpoolState
from scheduler.core.fleet import split_quota
from scheduler.core.kai_names import DEFAULT_TOPOLOGY_NAME, HOSTNAME_LABEL
from scheduler.models import DEFAULT_TOPOLOGY_LEVELS, ClusterTopology, Node
from workflows.selectors import guaranteed_gpus_by_backend

from .queues import (
    ACTIVE,
    KaiQueue,
    PoolData,
    SubpoolData,
    build_topology,
    queue_manifest,
    queue_tree,
)

_FIELDS = ("name", "parent_id", "subpool_state", "quota_gpus", "limit_gpus", "weight",
           "priority")


def queue_pool_data(*, roles: Roles | None = None, backend: str | None = None
                    ) -> list[PoolData]:
    """Live top-level pools with their ACTIVE/DELETING subpools, as plain data.

    ``roles``: only the pools the caller can view (and their subpools); ``None`` = all.
    ``backend``: only the pools that name this backend, each quota as its share on that cluster
    (:func:`on_backend`); ``None``: every pool with its whole quotas, as one cluster.
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
    if backend is not None:
        queryset = queryset.filter(Q(parent__isnull=True, backends__contains=[backend])
                                   | Q(parent__backends__contains=[backend]))
    rows = list(queryset.order_by("parent_id", "name").values_list(*_FIELDS, "backends"))
    subpools: dict[str, list[SubpoolData]] = defaultdict(list)
    parents = []
    for name, parent, state, quota, limit, weight, priority, backends in rows:
        if parent is None:
            parents.append((name, quota, limit, weight, priority, backends))
        else:
            subpools[parent].append(SubpoolData(name=name, state=state, quota_gpus=quota))
    pools = [(PoolData(name=name, quota_gpus=quota, limit_gpus=limit, weight=weight,
                       priority=priority, subpools=tuple(subpools.get(name, ()))), backends)
             for name, quota, limit, weight, priority, backends in parents]
    if backend is None:
        return [pool for pool, _ in pools]
    held = guaranteed_gpus_by_backend()
    return [on_backend(pool, backend, list(backends), held) for pool, backends in pools]


def on_backend(pool: PoolData, backend: str, order: list[str],
               held: Mapping[tuple[str, str], tuple[int, int]]) -> PoolData:
    """The pool as one of its clusters' queues see it: each leaf queue's quota (the `.shared`
    queue's, each ACTIVE subpool's) is split among the pool's backends by
    `scheduler.core.fleet.split_quota`, and the pool's own quota is the sum of its leaves'
    shares there. Summed over the clusters, every quota is the pool's: KAI, the backstop,
    never guarantees a pool more GPUs across clusters than its quota."""
    def share(leaf: str, quota: int) -> int:
        tiers = {b: held.get((leaf, b), (0, 0)) for b in order}
        return split_quota(quota, {b: t[0] for b, t in tiers.items()}, order,
                           {b: t[1] for b, t in tiers.items()})[backend]

    subpools = tuple(SubpoolData(name=s.name, state=s.state,
                                 quota_gpus=share(s.name, s.quota_gpus) if s.state == ACTIVE
                                 else 0) for s in pool.subpools)
    shared = share(pool.name, pool.unallocated_gpus)
    quota = shared + sum(s.quota_gpus for s in subpools if s.state == ACTIVE)
    return replace(pool, quota_gpus=quota, subpools=subpools)


def queues(*, namespace: str, roles: Roles | None = None, backend: str | None = None
           ) -> list[KaiQueue]:
    """The Queue hierarchy of ``namespace`` (the pools ``roles`` may view; None = all), on
    ``backend``'s cluster when given (:func:`queue_pool_data`)."""
    return queue_tree(queue_pool_data(roles=roles, backend=backend), namespace)


def queue_manifests(*, namespace: str, roles: Roles | None = None, backend: str | None = None
                    ) -> list[dict[str, Any]]:
    """The Queue manifests of :func:`queues`."""
    return [queue_manifest(queue, namespace)
            for queue in queues(namespace=namespace, roles=roles, backend=backend)]


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


def desired_cluster_objects(*, namespace: str, backend: str | None = None
                            ) -> list[dict[str, Any]]:
    """Everything the sync keeps in step: the whole Queue hierarchy (of the pools `backend`
    serves, with their shares there, when given) and the Topology."""
    return [*queue_manifests(namespace=namespace, backend=backend),
            topology_manifest(namespace=namespace)]
